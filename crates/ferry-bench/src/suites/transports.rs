//! `ferry bench transports`: the same SDK code — publish N messages with acks, then consume
//! and ack them all — on every transport this build has and this machine runs, side by
//! side in one run, reported as ratios to the embedded broker.
//!
//! Each transport gets a fresh queue (five deliveries, a dead-letter queue, nothing else),
//! `--publishers` tasks publishing batches of `--batch` until N are stored (each publish
//! returns once the engine has the batch durably, as that engine defines it), then
//! `--consumers` consumers acking each message until all N are acked.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use comfy_table::{CellAlignment, Table};
use ferry::{ConsumerOptions, DeliveryPolicy, Destination, Ferry, Message, QueueDecl, Source};

use super::machine::Machine;
use super::report::num;
use super::scratch_dir;

#[derive(clap::Args, Debug)]
pub struct TransportsArgs {
    /// Messages per transport.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub messages: usize,
    /// Payload bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 128)]
    pub size: usize,
    /// Concurrent publishing tasks.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub publishers: usize,
    /// Messages per publish call.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub batch: usize,
    /// Concurrent consumers.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub consumers: usize,
    /// A transport to measure, as `name=url` (e.g. `nats=nats://10.0.0.5:4222`); repeatable.
    /// Default: the embedded broker, and every other transport of this build at its usual
    /// local address when something answers there.
    #[arg(long = "url", value_name = "NAME=URL")]
    pub urls: Vec<String>,
    /// Where the embedded broker keeps its data (a scratch directory inside it is removed
    /// afterwards). Default: ./target if it exists, else the current directory.
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
}

/// Kafka where `ferry serve`'s Kafka listener and Kafka itself listen by default. Measured
/// only by builds with the `kafka` feature: the transport links the system's librdkafka.
pub const KAFKA_TARGET: (&str, &str, &str) = ("kafka", "kafka://127.0.0.1:9092", "127.0.0.1:9092");

/// The engines outside this process and where they usually listen on this machine:
/// (name, url, address probed before trying).
pub fn local_targets() -> Vec<(&'static str, &'static str, &'static str)> {
    let mut targets = vec![
        ("nats", "nats://127.0.0.1:4222", "127.0.0.1:4222"),
        ("redis", "redis://127.0.0.1:6379/0", "127.0.0.1:6379"),
        (
            "postgres",
            "postgres://postgres@127.0.0.1:5432/test",
            "127.0.0.1:5432",
        ),
        (
            "rabbitmq",
            "amqp://guest:guest@127.0.0.1:5672/%2f",
            "127.0.0.1:5672",
        ),
        // An SQS endpoint where `ferry serve` and LocalStack listen by default, with keys
        // an open endpoint (one without access keys configured) takes.
        (
            "sqs",
            "sqs://bench:bench@127.0.0.1:4566?region=us-east-1",
            "127.0.0.1:4566",
        ),
    ];
    if cfg!(feature = "kafka") {
        targets.push(KAFKA_TARGET);
    }
    targets
}

/// Why this build cannot measure `url`, if it cannot: said before any transport is
/// measured, rather than after the others have run. Every transport but Kafka is always
/// compiled into this crate; Kafka needs the `kafka` cargo feature.
pub fn not_in_this_build(url: &str) -> Option<String> {
    let kafka = url
        .split_once(':')
        .is_some_and(|(scheme, _)| scheme == "kafka");
    (kafka && !cfg!(feature = "kafka")).then(|| {
        "this build has no kafka:// transport; build `ferry` with the `kafka` cargo feature \
         (`cargo build -p ferry-cli --features kafka`, which links the system's librdkafka, \
         e.g. Debian's librdkafka-dev)"
            .to_owned()
    })
}

/// A Ferry server on a fresh broker in `dir`, in this process on a real TCP socket.
async fn start_server(dir: &std::path::Path) -> anyhow::Result<(String, ServerStop)> {
    let broker = ferry_broker::Broker::open(dir, ferry_broker::BrokerConfig::default()).await?;
    let listener = ferry_server::bind("127.0.0.1:0".parse().expect("an address")).await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(ferry_server::serve(broker, listener, async {
        let _ = stopped.await;
    }));
    Ok((format!("ferry://{addr}"), ServerStop { stop, served }))
}

struct ServerStop {
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<Result<(), ferry_server::ServeError>>,
}

struct Figures {
    publish_per_s: f64,
    consume_per_s: f64,
}

pub fn run(args: &TransportsArgs) -> anyhow::Result<()> {
    if args.messages == 0 || args.publishers == 0 || args.consumers == 0 || args.batch == 0 {
        bail!("--messages, --publishers, --consumers and --batch must be at least 1");
    }
    // The named targets first, so that one this build cannot measure is refused before
    // anything is created or measured.
    let mut targets: Vec<(String, String)> = Vec::new();
    for spec in &args.urls {
        let (name, url) = spec
            .split_once('=')
            .with_context(|| format!("--url {spec}: expected NAME=URL"))?;
        if let Some(why) = not_in_this_build(url) {
            bail!("--url {spec}: {why}");
        }
        targets.push((name.into(), url.into()));
    }
    let scratch = scratch_dir(args.dir.as_deref(), "ferry-bench-transports-")?;
    println!("{}", Machine::probe(scratch.path()).line());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut server = None;
    if args.urls.is_empty() {
        targets.push((
            "embedded".into(),
            format!("embedded:{}", scratch.path().join("embedded").display()),
        ));
        let (url, stop) = runtime.block_on(start_server(&scratch.path().join("server")))?;
        targets.push(("ferry server".into(), url));
        server = Some(stop);
        if !cfg!(feature = "kafka") {
            println!(
                "kafka: skipped, this build lacks the `kafka` cargo feature \
                 (cargo build -p ferry-cli --features kafka)"
            );
        }
        for (name, url, addr) in local_targets() {
            if answers(addr) {
                targets.push((name.into(), url.into()));
            } else {
                println!("{name}: skipped, nothing answers at {addr}");
            }
        }
    }
    let mut results = Vec::new();
    for (name, url) in &targets {
        println!("{name}: {} messages of {} B ...", args.messages, args.size);
        let figures = runtime
            .block_on(measure(args, url))
            .with_context(|| format!("{name} ({url})"))?;
        println!(
            "{name}: publish {} msgs/s, consume + ack {} msgs/s",
            num(figures.publish_per_s),
            num(figures.consume_per_s)
        );
        results.push((name.clone(), figures));
    }
    if let Some(server) = server {
        let _ = server.stop.send(());
        runtime.block_on(server.served)??;
    }
    print_table(&results);
    Ok(())
}

fn answers(addr: &str) -> bool {
    use std::net::ToSocketAddrs;
    addr.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| {
            std::net::TcpStream::connect_timeout(&a, Duration::from_millis(500)).is_ok()
        })
}

async fn measure(args: &TransportsArgs, url: &str) -> anyhow::Result<Figures> {
    let ferry = Ferry::connect(url).await?;
    let queue = format!("bench-{}", ferry::message::new_id().to_lowercase());
    let policy = DeliveryPolicy {
        max_delay: Duration::ZERO,
        ..DeliveryPolicy::default()
    };
    ferry
        .declare_queue(&QueueDecl::new(&queue).delivery(policy))
        .await?;

    let payload = bytes::Bytes::from(vec![b'x'; args.size]);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.publishers {
        let publisher = ferry.publisher(Destination::queue(&queue));
        let (next, payload, total, batch) =
            (next.clone(), payload.clone(), args.messages, args.batch);
        tasks.push(tokio::spawn(async move {
            loop {
                let from = next.fetch_add(batch, Ordering::Relaxed);
                if from >= total {
                    return anyhow::Ok(());
                }
                let n = batch.min(total - from);
                let messages = (0..n).map(|_| Message::new(payload.clone())).collect();
                publisher.send_batch(messages).await?;
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    let publish_per_s = args.messages as f64 / started.elapsed().as_secs_f64();

    let acked = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.consumers {
        let options = ConsumerOptions {
            prefetch: 256,
            poll: Duration::from_millis(100),
            ..ConsumerOptions::default()
        };
        let mut consumer = ferry.consumer(Source::queue(&queue), options).await?;
        let (acked, total) = (acked.clone(), args.messages);
        tasks.push(tokio::spawn(async move {
            let mut idle_since = Instant::now();
            while acked.load(Ordering::Relaxed) < total {
                match consumer.next_within(Duration::from_millis(100)).await? {
                    Some(delivery) => {
                        delivery.ack().await?;
                        acked.fetch_add(1, Ordering::Relaxed);
                        idle_since = Instant::now();
                    }
                    None if idle_since.elapsed() > Duration::from_secs(30) => {
                        bail!(
                            "no message for 30 s with {} of {total} acked",
                            acked.load(Ordering::Relaxed)
                        );
                    }
                    None => {}
                }
            }
            consumer.close().await?;
            anyhow::Ok(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let consume_per_s = args.messages as f64 / started.elapsed().as_secs_f64();
    ferry.delete(&Source::queue(&queue)).await?;
    ferry
        .delete(&Source::queue(&queue).dead_letters())
        .await
        .ok();
    ferry.close().await?;
    Ok(Figures {
        publish_per_s,
        consume_per_s,
    })
}

fn print_table(results: &[(String, Figures)]) {
    let embedded = results
        .iter()
        .find(|(n, _)| n == "embedded")
        .map(|(_, f)| f);
    let mut table = Table::new();
    table.load_preset(comfy_table::presets::ASCII_MARKDOWN);
    table.set_header([
        "transport",
        "publish msgs/s",
        "consume + ack msgs/s",
        "publish / embedded",
        "consume / embedded",
    ]);
    for (name, f) in results {
        let ratio =
            |x: f64, base: Option<f64>| base.map(|b| format!("{:.3}", x / b)).unwrap_or("-".into());
        table.add_row([
            name.clone(),
            num(f.publish_per_s),
            num(f.consume_per_s),
            ratio(f.publish_per_s, embedded.map(|e| e.publish_per_s)),
            ratio(f.consume_per_s, embedded.map(|e| e.consume_per_s)),
        ]);
    }
    for column in 1..5 {
        if let Some(c) = table.column_mut(column) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    println!("{table}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_is_a_local_target_exactly_when_the_feature_is_on() {
        let listed = local_targets().contains(&KAFKA_TARGET);
        assert_eq!(listed, cfg!(feature = "kafka"));
    }

    #[test]
    fn kafka_urls_are_refused_up_front_exactly_when_the_feature_is_off() {
        let why = not_in_this_build("kafka://127.0.0.1:9092");
        if cfg!(feature = "kafka") {
            assert_eq!(why, None);
        } else {
            let why = why.expect("refused");
            assert!(why.contains("`kafka` cargo feature"), "{why}");
            assert!(why.contains("--features kafka"), "{why}");
        }
        for url in [
            "nats://127.0.0.1:4222",
            "sqs://a:b@127.0.0.1:4566?region=us-east-1",
            "embedded:./kafka",
        ] {
            assert_eq!(not_in_this_build(url), None, "{url}");
        }
    }
}
