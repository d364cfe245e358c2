//! `ferry publish` and `ferry consume`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use ferry_client::{Message, ProducerConfig, proto as v1};
use serde_json::json;

use super::Remote;
use super::output::{age, hex, parse_duration, parse_pair, payload_text, print_json};

#[derive(Args, Debug)]
pub struct PublishArgs {
    /// The queue, or with `--topic` the topic.
    pub queue: String,
    /// Publish to the topic named, not to a queue: every subscription gets the messages.
    #[arg(long)]
    pub topic: bool,
    /// Message payloads; `-` reads one message per line from stdin.
    pub messages: Vec<String>,
    /// Read one message per line from this file.
    #[arg(long, conflicts_with = "messages")]
    pub file: Option<PathBuf>,
    /// The ordering key.
    #[arg(long)]
    pub key: Option<String>,
    /// A header, `name=value`; repeatable.
    #[arg(long = "header", value_parser = parse_pair)]
    pub headers: Vec<(String, String)>,
    #[arg(long)]
    pub priority: Option<u8>,
    /// Deliver no sooner than this from now (e.g. 10s).
    #[arg(long, value_parser = parse_duration)]
    pub delay: Option<Duration>,
    /// Expire this long after publishing.
    #[arg(long, value_parser = parse_duration)]
    pub ttl: Option<Duration>,
    /// Publishes with the same dedup id within the queue's window are stored once.
    #[arg(long)]
    pub dedup_id: Option<String>,
}

impl PublishArgs {
    fn message(&self, payload: String) -> Message {
        let mut m = Message::new(payload);
        if let Some(key) = &self.key {
            m = m.with_key(key.clone());
        }
        for (name, value) in &self.headers {
            m = m.with_header(name.clone(), value.clone());
        }
        if let Some(p) = self.priority {
            m = m.with_priority(p);
        }
        if let Some(d) = self.delay {
            m = m.with_delay(d);
        }
        if let Some(t) = self.ttl {
            m = m.with_ttl(t);
        }
        if let Some(id) = &self.dedup_id {
            m = m.with_dedup_id(id.clone());
        }
        m
    }
}

/// Most publishes awaited at once in bulk: enough to fill the producer's batches.
const IN_FLIGHT: usize = 2048;

pub async fn publish(remote: &Remote, args: PublishArgs) -> anyhow::Result<()> {
    let lines: Box<dyn BufRead> = match (&args.file, args.messages.as_slice()) {
        (Some(path), _) => Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        )),
        (None, [dash]) if dash == "-" => Box::new(std::io::stdin().lock()),
        (None, []) => {
            bail!("nothing to publish: give messages as arguments, `-` for stdin, or --file FILE")
        }
        (None, payloads) if args.topic => {
            let messages = payloads.iter().map(|p| args.message(p.clone())).collect();
            let positions = remote
                .call(remote.client.publish_to_topic(&args.queue, messages))
                .await?;
            if remote.json {
                let placed: Vec<_> = positions
                    .iter()
                    .map(|p| json!({ "partition": p.partition, "offset": p.offset }))
                    .collect();
                print_json(
                    &json!({ "topic": args.queue, "published": placed.len(), "positions": placed }),
                );
            } else {
                for p in &positions {
                    out!(
                        "published to {} partition {} offset {}",
                        args.queue,
                        p.partition,
                        p.offset
                    );
                }
            }
            return Ok(());
        }
        (None, payloads) => {
            // A handful given as arguments: one publish call, one answer.
            let messages = payloads.iter().map(|p| args.message(p.clone())).collect();
            let ids = remote
                .call(remote.client.publish(&args.queue, messages))
                .await?;
            if remote.json {
                print_json(&json!({ "queue": args.queue, "published": ids.len(), "ids": ids }));
            } else {
                for id in &ids {
                    out!("published {id} to {}", args.queue);
                }
            }
            return Ok(());
        }
    };
    if args.topic {
        return bulk_to_topic(remote, &args, lines).await;
    }
    bulk(remote, &args, lines).await
}

/// Lines to a topic, in batches (a topic has no batching producer: each call is one
/// batch, stored whole or not at all).
async fn bulk_to_topic(
    remote: &Remote,
    args: &PublishArgs,
    lines: Box<dyn BufRead>,
) -> anyhow::Result<()> {
    const BATCH: usize = 500;
    let mut batch = Vec::with_capacity(BATCH);
    let mut stored = 0usize;
    let mut lines = lines.lines();
    loop {
        let line = lines.next().transpose().context("reading the messages")?;
        if let Some(line) = &line
            && !line.is_empty()
        {
            batch.push(args.message(line.clone()));
        }
        if batch.len() == BATCH || (line.is_none() && !batch.is_empty()) {
            let sending = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            stored += remote
                .call(remote.client.publish_to_topic(&args.queue, sending))
                .await?
                .len();
        }
        if line.is_none() {
            break;
        }
    }
    if remote.json {
        print_json(&json!({ "topic": args.queue, "published": stored }));
    } else {
        out!("published {stored} messages to topic {}", args.queue);
    }
    Ok(())
}

/// One message per line through the batching producer, with a counter on stderr when it
/// is a terminal. A counter rather than `indicatif`: the total is unknown on a pipe (no bar
/// to fill), and it keeps a dependency out of the build.
async fn bulk(remote: &Remote, args: &PublishArgs, lines: Box<dyn BufRead>) -> anyhow::Result<()> {
    let producer = Arc::new(
        remote
            .client
            .producer(&args.queue, ProducerConfig::default()),
    );
    let started = Instant::now();
    let show = std::io::stderr().is_terminal();
    let mut last_shown = Instant::now();
    let mut pending = tokio::task::JoinSet::new();
    let (mut sent, mut stored, mut bytes) = (0u64, 0u64, 0u64);
    let mut first_error: Option<anyhow::Error> = None;
    let failed = |result: Result<ferry_client::Result<String>, tokio::task::JoinError>| match result
    {
        Ok(Ok(_)) => None,
        Ok(Err(e)) => Some(super::output::explain(e, &remote.server)),
        Err(e) => Some(anyhow::anyhow!("a publish task failed: {e}")),
    };
    for line in lines.lines() {
        let line = line.context("reading the messages")?;
        if line.is_empty() {
            continue;
        }
        bytes += line.len() as u64;
        let message = args.message(line);
        let producer = Arc::clone(&producer);
        pending.spawn(async move { producer.send(message).await });
        sent += 1;
        while pending.len() >= IN_FLIGHT {
            if let Some(result) = pending.join_next().await {
                match failed(result) {
                    None => stored += 1,
                    Some(e) => first_error = first_error.or(Some(e)),
                }
            }
        }
        // The first failure stops reading: a wrong queue name should not cost a
        // million doomed publishes.
        if first_error.is_some() {
            break;
        }
        if show && last_shown.elapsed() > Duration::from_millis(200) {
            eprint!("\rpublished {sent} …");
            let _ = std::io::stderr().flush();
            last_shown = Instant::now();
        }
    }
    while let Some(result) = pending.join_next().await {
        match failed(result) {
            None => stored += 1,
            Some(e) => first_error = first_error.or(Some(e)),
        }
    }
    if let Ok(producer) = Arc::try_unwrap(producer) {
        producer.close().await;
    }
    if show {
        eprint!("\r\x1b[K");
    }
    let elapsed = started.elapsed();
    let rate = stored as f64 / elapsed.as_secs_f64().max(1e-9);
    if remote.json {
        print_json(&json!({
            "queue": args.queue, "published": stored, "failed": sent - stored, "bytes": bytes,
            "seconds": elapsed.as_secs_f64(), "per_second": rate.round(),
        }));
    } else {
        out!(
            "published {stored} of {sent} messages ({bytes} bytes) to {} in {:.2}s ({rate:.0}/s)",
            args.queue,
            elapsed.as_secs_f64()
        );
    }
    match first_error {
        Some(e) => Err(e.context(format!("{} of {sent} messages failed", sent - stored))),
        None => Ok(()),
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Done: not delivered again.
    Ack,
    /// A failed attempt: redelivered after the queue's backoff, or dead-lettered.
    Nack,
    /// A permanent failure: dead-lettered now.
    Reject,
}

#[derive(Args, Debug)]
pub struct ConsumeArgs {
    pub queue: String,
    /// How each message is settled after it is printed.
    #[arg(long, value_enum, default_value_t = Mode::Ack)]
    pub mode: Mode,
    /// Stop after this many messages.
    #[arg(long)]
    pub count: Option<u64>,
    /// How long to wait for more messages before exiting.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub wait: Duration,
    /// The consumer's name, as the server records it.
    #[arg(long, default_value = "ferry-cli")]
    pub consumer: String,
}

/// Unary receives rather than the streaming consumer: a stream prefetches, and what it
/// holds when the command exits goes back as a failed attempt — counting against
/// max-deliveries for messages this command never showed.
pub async fn consume(remote: &Remote, args: ConsumeArgs) -> anyhow::Result<()> {
    let mut done = 0u64;
    let mut dead_lettered = 0u64;
    loop {
        let want = args.count.map_or(100, |c| (c - done).min(100));
        if want == 0 {
            break;
        }
        let deliveries = remote
            .call(
                remote
                    .client
                    .receive(&args.queue, &args.consumer, want as u32, Some(args.wait)),
            )
            .await?;
        if deliveries.is_empty() {
            break;
        }
        for d in deliveries {
            print_delivery(remote.json, &d);
            let (queue, seq, token) = (&args.queue, d.seq, d.token);
            match args.mode {
                Mode::Ack => remote.call(remote.client.ack(queue, seq, token)).await?,
                Mode::Nack => {
                    let outcome = remote
                        .call(remote.client.nack(
                            queue,
                            seq,
                            token,
                            None,
                            Some("nacked by ferry consume"),
                        ))
                        .await?;
                    if let Some(v1::nack_response::Outcome::DeadLettered(_)) = outcome.outcome {
                        dead_lettered += 1;
                    }
                }
                Mode::Reject => {
                    remote
                        .call(
                            remote
                                .client
                                .reject(queue, seq, token, "rejected by ferry consume"),
                        )
                        .await?
                }
            }
            done += 1;
        }
    }
    let verb = match args.mode {
        Mode::Ack => "acked",
        Mode::Nack => "nacked",
        Mode::Reject => "rejected",
    };
    let mut summary = format!("{verb} {done} message(s) from {}", args.queue);
    if dead_lettered > 0 {
        summary.push_str(&format!(", {dead_lettered} of them dead-lettered"));
    }
    eprintln!("{summary}");
    Ok(())
}

pub fn delivery_json(d: &v1::Delivery) -> serde_json::Value {
    let mut value = json!({
        "id": d.id, "seq": d.seq, "delivery": d.delivery, "priority": d.priority,
        "published_at_ms": d.published_at_ms, "headers": d.headers,
        "key": d.key.as_deref().map(payload_text),
    });
    match std::str::from_utf8(&d.payload) {
        Ok(text) => value["payload"] = json!(text),
        Err(_) => value["payload_hex"] = json!(hex(&d.payload)),
    }
    if let Some(dl) = &d.dead_letter {
        value["dead_letter"] = json!({
            "reason": dl.reason, "deliveries": dl.deliveries, "origin_queue": dl.origin_queue,
            "origin_seq": dl.origin_seq, "last_error": dl.last_error, "consumer": dl.consumer,
            "first_failure_at_ms": dl.first_failure_at_ms,
            "last_failure_at_ms": dl.last_failure_at_ms,
        });
    }
    value
}

/// One line of attributes, then the payload: easy to read, and `grep`-able by seq.
fn print_delivery(json: bool, d: &v1::Delivery) {
    if json {
        print_json(&delivery_json(d));
        return;
    }
    let mut line = format!(
        "seq {} · id {} · attempt {} · published {} ago",
        d.seq,
        d.id,
        d.delivery,
        age(d.published_at_ms)
    );
    if let Some(key) = &d.key {
        line.push_str(&format!(" · key {}", payload_text(key)));
    }
    let mut headers: Vec<_> = d.headers.iter().collect();
    headers.sort();
    for (name, value) in headers {
        line.push_str(&format!(" · {name}={value}"));
    }
    out!("{line}\n{}", payload_text(&d.payload));
}
