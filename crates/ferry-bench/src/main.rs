//! `ferry-bench run`: workload files against engines, reported into a directory.
//! `ferry-bench soak`: a long steady run against one engine, watched for growth.

/// glibc's malloc contends on its arena locks across the runtime's threads; mimalloc's
/// per-thread heaps do not (a fifth of a drain's CPU was in the allocator).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferry_bench::{Plan, Target};

#[derive(Parser, Debug)]
#[command(
    name = "ferry-bench",
    about = "Workload benchmarks of Ferry's SDK over every engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run every workload (or those named by --only) against every target.
    Run(RunArgs),
    /// A long run at a steady rate with retries and dead letters, sampling memory, open
    /// files, disk and latency over time; fails when a message is lost or misplaced or
    /// something grows without bound.
    Soak(SoakArgs),
    /// A work queue (send batches of 10, receive 10 with a long poll, settle) through the
    /// SQS endpoint with the official AWS SDK and through Ferry's HTTP API, side by side
    /// against one `ferry serve`, reported as SQS / HTTP ratios.
    #[cfg(feature = "sqs")]
    Sqs(SqsArgs),
    /// Produce and fetch through the Kafka endpoint with librdkafka's rdkafka_performance
    /// and through Ferry's gRPC API, side by side against one `ferry serve`, reported as
    /// Kafka / Ferry ratios.
    Kafka(KafkaArgs),
}

#[derive(clap::Args, Debug)]
struct KafkaArgs {
    /// Start this `ferry` binary (`ferry serve` with gRPC and the Kafka endpoint on free
    /// ports, on a fresh directory under --out, removed afterwards).
    #[arg(long, value_name = "FERRY_BINARY", conflicts_with_all = ["bootstrap", "grpc_url"])]
    serve: Option<PathBuf>,
    /// A running server's Kafka endpoint (with --grpc-url), e.g. `127.0.0.1:9092`.
    #[arg(long, value_name = "HOST:PORT", requires = "grpc_url")]
    bootstrap: Option<String>,
    /// The same server's gRPC API, e.g. `ferry://127.0.0.1:7070`.
    #[arg(long, value_name = "URL", requires = "bootstrap")]
    grpc_url: Option<String>,
    /// The running server's process, sampled for CPU seconds.
    #[arg(long, value_name = "PID", requires = "bootstrap")]
    pid: Option<u32>,
    /// librdkafka's rdkafka_performance (scripts/bench/kafka.sh builds it).
    #[arg(long, value_name = "PATH")]
    rdkafka_performance: PathBuf,
    /// Messages per run.
    #[arg(long, default_value_t = 100_000)]
    messages: u64,
    /// Payload bytes; repeatable, each size its own runs.
    #[arg(long = "size", default_values_t = [128usize, 1024])]
    sizes: Vec<usize>,
    /// Partitions of each topic.
    #[arg(long, default_value_t = 1)]
    partitions: u32,
    /// Records per produce request (librdkafka's batch.num.messages) and per gRPC publish.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    /// Produce requests (librdkafka's max.in.flight) and gRPC publishes awaiting answers.
    #[arg(long, default_value_t = 5)]
    in_flight: usize,
    /// Runs per side, step and size, alternating which side goes first.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// How long one run may take, e.g. `5m`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5m")]
    timeout: Duration,
    /// Where kafka.json and kafka.md are written.
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    out: PathBuf,
}

#[cfg(feature = "sqs")]
#[derive(clap::Args, Debug)]
struct SqsArgs {
    /// Start this `ferry` binary (`ferry serve` with its HTTP API and SQS endpoint on free
    /// ports, on a fresh directory under --out, removed afterwards).
    #[arg(long, value_name = "FERRY_BINARY", conflicts_with_all = ["sqs_url", "http_url"])]
    serve: Option<PathBuf>,
    /// A running server's SQS endpoint (with --http-url), e.g. `http://127.0.0.1:4566`.
    #[arg(long, value_name = "URL", requires = "http_url")]
    sqs_url: Option<String>,
    /// The same server's HTTP API, e.g. `http://127.0.0.1:7071`.
    #[arg(long, value_name = "URL", requires = "sqs_url")]
    http_url: Option<String>,
    /// The running server's process, sampled for CPU seconds.
    #[arg(long, value_name = "PID", requires = "sqs_url")]
    pid: Option<u32>,
    /// Messages per run.
    #[arg(long, default_value_t = 20_000)]
    messages: u64,
    /// Payload bytes.
    #[arg(long, default_value_t = 128)]
    size: usize,
    /// Sending tasks.
    #[arg(long, default_value_t = 4)]
    producers: usize,
    /// Receiving tasks.
    #[arg(long, default_value_t = 4)]
    consumers: usize,
    /// The long poll of each receive, in seconds.
    #[arg(long, default_value_t = 1)]
    wait_secs: u32,
    /// Runs per API, alternating which goes first.
    #[arg(long, default_value_t = 2)]
    rounds: u32,
    /// Where sqs.json and sqs.md are written.
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    out: PathBuf,
}

#[derive(clap::Args, Debug)]
struct SoakArgs {
    /// The engine, as an SDK URL (e.g. `ferry://127.0.0.1:7070`, `embedded:/var/tmp/soak`).
    #[arg(
        long,
        value_name = "URL",
        conflicts_with = "serve",
        required_unless_present = "serve"
    )]
    target: Option<String>,
    /// Start this `ferry` binary as the engine (`ferry serve` on a fresh directory under
    /// --out, removed afterwards), instead of --target.
    #[arg(long, value_name = "FERRY_BINARY")]
    serve: Option<PathBuf>,
    /// The engine's process, sampled for memory and open files (with --target; `embedded:`
    /// targets sample this process).
    #[arg(long, value_name = "PID", requires = "target")]
    pid: Option<u32>,
    /// The engine's data directory, sampled for disk use (with --target; taken from the URL
    /// for `embedded:`).
    #[arg(long, value_name = "DIR", requires = "target")]
    data_dir: Option<PathBuf>,
    /// How long the traffic runs, e.g. `30m`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30m")]
    duration: Duration,
    /// Messages published per second.
    #[arg(long, default_value_t = 2_000)]
    rate: u64,
    /// Payload bytes per message.
    #[arg(long, default_value_t = 256)]
    size: usize,
    /// Competing workers on the queue.
    #[arg(long, default_value_t = 4)]
    workers: u32,
    /// Deliveries each worker holds ahead.
    #[arg(long, default_value_t = 64)]
    prefetch: usize,
    /// Messages per thousand nacked once, then acked.
    #[arg(long, default_value_t = 50)]
    retry_per_mille: u32,
    /// Messages per thousand nacked until they are dead-lettered.
    #[arg(long, default_value_t = 5)]
    poison_per_mille: u32,
    /// Messages per thousand rejected into the dead-letter queue.
    #[arg(long, default_value_t = 5)]
    reject_per_mille: u32,
    /// How often memory, files, disk and latency are sampled.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    sample_every: Duration,
    /// Where soak.json, soak.md and the charts are written.
    #[arg(long, value_name = "DIR", default_value = "soak-results")]
    out: PathBuf,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// An engine to measure, as NAME=URL (e.g. `embedded=embedded:/var/tmp/x`,
    /// `redis-default=redis://127.0.0.1:6379/0`); repeatable, run in the order given.
    #[arg(long = "target", value_name = "NAME=URL", required = true)]
    targets: Vec<String>,
    /// The server process of target NAME, sampled for CPU seconds and peak RSS; repeatable.
    /// `embedded:` targets sample this process.
    #[arg(long = "pid", value_name = "NAME=PID")]
    pids: Vec<String>,
    /// The directory of workload files.
    #[arg(long, value_name = "DIR", default_value = "bench/workloads")]
    workloads: PathBuf,
    /// Multiplies message counts and durations (e.g. 0.01 for a smoke run).
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    scale: f64,
    /// Run only this workload; repeatable.
    #[arg(long, value_name = "WORKLOAD")]
    only: Vec<String>,
    /// Where results.json, results.md and the SVG charts are written.
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    out: PathBuf,
    /// The target the others are compared with in results.md.
    #[arg(long, value_name = "NAME")]
    baseline: Option<String>,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Run(args) => run(args),
        Command::Soak(args) => soak(args),
        #[cfg(feature = "sqs")]
        Command::Sqs(args) => sqs(args),
        Command::Kafka(args) => kafka(args),
    }
}

fn kafka(args: KafkaArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        let mut plan = ferry_bench::kafka::KafkaPlan {
            bootstrap: args.bootstrap.clone().unwrap_or_default(),
            grpc_url: args.grpc_url.clone().unwrap_or_default(),
            pid: args.pid,
            tool: args.rdkafka_performance.clone(),
            messages: args.messages,
            sizes: args.sizes.clone(),
            partitions: args.partitions,
            batch: args.batch,
            in_flight: args.in_flight,
            rounds: args.rounds,
            timeout: args.timeout,
        };
        let Some(binary) = &args.serve else {
            anyhow::ensure!(
                !plan.bootstrap.is_empty(),
                "give --serve FERRY_BINARY, or --bootstrap and --grpc-url of a running server"
            );
            return ferry_bench::kafka::run(&plan).await;
        };
        let data = args.out.join("kafka-server-data");
        std::fs::create_dir_all(&data)?;
        let server = ferry_bench::soak::server::Server::start_with_kafka(binary, &data).await?;
        plan.bootstrap = server.kafka_addr.clone().unwrap_or_default();
        plan.grpc_url = server.url.clone();
        plan.pid = Some(server.pid());
        let report = ferry_bench::kafka::run(&plan).await;
        drop(server);
        std::fs::remove_dir_all(&data)?;
        report
    })?;
    let md = ferry_bench::kafka::write(&report, &args.out)?;
    println!("{}", ferry_bench::kafka::markdown(&report));
    eprintln!("wrote {}", md.display());
    if !report.all_met() {
        eprintln!(
            "a ratio is under the target of {}; see {}",
            ferry_bench::kafka::TARGET,
            md.display()
        );
    }
    Ok(())
}

#[cfg(feature = "sqs")]
fn sqs(args: SqsArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        let mut plan = ferry_bench::sqs::SqsPlan {
            sqs_url: args.sqs_url.clone().unwrap_or_default(),
            http_url: args.http_url.clone().unwrap_or_default(),
            pid: args.pid,
            messages: args.messages,
            size: args.size,
            producers: args.producers,
            consumers: args.consumers,
            wait_secs: args.wait_secs,
            rounds: args.rounds,
        };
        let Some(binary) = &args.serve else {
            anyhow::ensure!(
                !plan.sqs_url.is_empty(),
                "give --serve FERRY_BINARY, or --sqs-url and --http-url of a running server"
            );
            return ferry_bench::sqs::run(&plan).await;
        };
        let data = args.out.join("sqs-server-data");
        std::fs::create_dir_all(&data)?;
        let server = ferry_bench::soak::server::Server::start_with_apis(binary, &data).await?;
        plan.sqs_url = server.sqs_url.clone().unwrap_or_default();
        plan.http_url = server.http_url.clone().unwrap_or_default();
        plan.pid = Some(server.pid());
        let report = ferry_bench::sqs::run(&plan).await;
        drop(server);
        std::fs::remove_dir_all(&data)?;
        report
    })?;
    let md = ferry_bench::sqs::write(&report, &args.out)?;
    println!("{}", ferry_bench::sqs::markdown(&report));
    eprintln!("wrote {}", md.display());
    Ok(())
}

fn soak(args: SoakArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(async {
        let mut plan = ferry_bench::soak::SoakPlan {
            url: args.target.clone().unwrap_or_default(),
            pid: args.pid,
            data_dir: args.data_dir.clone(),
            duration: args.duration,
            rate: args.rate,
            message_size: args.size,
            workers: args.workers,
            prefetch: args.prefetch,
            mix: ferry_bench::soak::fate::Mix {
                retry_per_mille: args.retry_per_mille,
                poison_per_mille: args.poison_per_mille,
                reject_per_mille: args.reject_per_mille,
            },
            sample_every: args.sample_every,
            drain_limit: Duration::from_secs(60),
            out: args.out.clone(),
        };
        if let Some(path) = plan.url.strip_prefix("embedded:") {
            plan.pid = Some(std::process::id());
            plan.data_dir.get_or_insert_with(|| PathBuf::from(path));
        }
        let Some(binary) = &args.serve else {
            return ferry_bench::soak::run(&plan).await;
        };
        let data = args.out.join("server-data");
        std::fs::create_dir_all(&data)?;
        let server = ferry_bench::soak::server::Server::start(binary, &data).await?;
        plan.url = server.url.clone();
        plan.pid = Some(server.pid());
        plan.data_dir = Some(data.clone());
        let report = ferry_bench::soak::run(&plan).await;
        drop(server);
        std::fs::remove_dir_all(&data)?;
        report
    })?;
    eprintln!("wrote {}", args.out.display());
    println!("{}", report.verdict());
    if !report.clean {
        anyhow::bail!(
            "the soak was not clean; see {}",
            args.out.join("soak.md").display()
        );
    }
    Ok(())
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let mut targets = args
        .targets
        .iter()
        .map(|t| Target::parse(t))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for spec in &args.pids {
        let (name, pid) = spec
            .split_once('=')
            .with_context(|| format!("--pid {spec}: expected NAME=PID"))?;
        let pid: u32 = pid
            .parse()
            .with_context(|| format!("--pid {spec}: {pid} is not a process id"))?;
        let target = targets
            .iter_mut()
            .find(|t| t.name == name)
            .with_context(|| format!("--pid {spec}: no --target is named {name}"))?;
        target.pid = Some(pid);
    }
    let plan = Plan {
        workloads_dir: args.workloads,
        targets,
        scale: args.scale,
        only: args.only,
        out: args.out,
        baseline: args.baseline,
        fsync_probe: Duration::from_secs(1),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let results = runtime.block_on(ferry_bench::run(&plan))?;
    println!("{}", ferry_bench::report::markdown(&results));
    eprintln!("wrote {}", plan.out.display());
    // The reports hold every figure that was measured, but a script running the bench must
    // still learn that some run failed.
    let failed = results
        .workloads
        .iter()
        .flat_map(|w| &w.targets)
        .filter(|t| matches!(t.outcome, ferry_bench::driver::Outcome::Failed(_)))
        .count();
    if failed > 0 {
        anyhow::bail!("{failed} workload runs failed; see results.md");
    }
    Ok(())
}
