//! The Kafka side: librdkafka's own benchmark, `rdkafka_performance`, run as a process
//! against the endpoint, its figures read from its summary line.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};

use super::perf_output::{self, Consumed, Produced};

/// What one produce or fetch invocation is given.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    pub tool: &'a Path,
    pub bootstrap: &'a str,
    pub topic: &'a str,
    pub partitions: u32,
    pub messages: u64,
    pub timeout: Duration,
}

/// The producer settings the comparison fixes (and Ferry's side mirrors).
#[derive(Debug, Clone, Copy)]
pub struct ProducerSettings {
    pub size: usize,
    /// `batch.num.messages`: records per partition in one Produce request, at most.
    pub batch: usize,
    /// `max.in.flight`: Produce requests sent before the first is answered, at most.
    pub in_flight: usize,
}

/// The fetch limit both sides get: the server's cap on one gRPC read (2 MiB), as
/// `max.partition.fetch.bytes`.
pub const PARTITION_FETCH_BYTES: usize = 2 * 1024 * 1024;

/// `-P`: `messages` of `size` bytes with acks=all; the figures of its last summary.
pub async fn produce(
    run: &Invocation<'_>,
    settings: ProducerSettings,
) -> anyhow::Result<(Produced, String)> {
    let mut args: Vec<String> = vec![
        "-P".into(),
        "-a".into(),
        "-1".into(),
        "-s".into(),
        settings.size.to_string(),
        "-X".into(),
        format!("batch.num.messages={}", settings.batch),
        "-X".into(),
        format!("max.in.flight={}", settings.in_flight),
        // rdkafka_performance sets linger.ms to 1000, which would hold the last, partial
        // batch of each partition for a second; librdkafka's own default is 5 ms.
        "-X".into(),
        "linger.ms=5".into(),
        // Batches as large as the request allows: the default caps a batch at 1 MB.
        "-X".into(),
        format!(
            "batch.size={}",
            (settings.batch * (settings.size + 64)).max(1_000_000)
        ),
        "-X".into(),
        format!(
            "message.max.bytes={}",
            (settings.batch * (settings.size + 64) + 4096).max(1_000_000)
        ),
    ];
    if run.partitions == 1 {
        args.extend(["-p".into(), "0".into()]);
    }
    let output = invoke(run, args).await?;
    let produced = perf_output::produced(&output)
        .with_context(|| format!("rdkafka_performance -P printed:\n{}", tail(&output)))?;
    if produced.delivered != run.messages || produced.failed > 0 {
        bail!(
            "rdkafka_performance -P delivered {} of {} messages ({} failed):\n{}",
            produced.delivered,
            run.messages,
            produced.failed,
            tail(&output)
        );
    }
    Ok((produced, output))
}

/// `-C` from the beginning of every partition until `messages` have come.
pub async fn fetch(run: &Invocation<'_>) -> anyhow::Result<(Consumed, String)> {
    let mut args: Vec<String> = vec![
        "-C".into(),
        "-o".into(),
        "beginning".into(),
        "-X".into(),
        format!("max.partition.fetch.bytes={PARTITION_FETCH_BYTES}"),
    ];
    for p in 0..run.partitions {
        args.extend(["-p".into(), p.to_string()]);
    }
    let output = invoke(run, args).await?;
    let consumed = perf_output::consumed(&output)
        .with_context(|| format!("rdkafka_performance -C printed:\n{}", tail(&output)))?;
    if consumed.messages != run.messages {
        bail!(
            "rdkafka_performance -C consumed {} of {} messages:\n{}",
            consumed.messages,
            run.messages,
            tail(&output)
        );
    }
    Ok((consumed, output))
}

async fn invoke(run: &Invocation<'_>, mode_args: Vec<String>) -> anyhow::Result<String> {
    let mut command = tokio::process::Command::new(run.tool);
    command
        .args(&mode_args)
        .args(["-t", run.topic, "-b", run.bootstrap])
        .args(["-c", &run.messages.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command
        .spawn()
        .with_context(|| format!("start {}", run.tool.display()))?;
    let out = match tokio::time::timeout(run.timeout, child.wait_with_output()).await {
        Ok(out) => out?,
        Err(_) => bail!(
            "{} {} did not finish within {:?}",
            run.tool.display(),
            mode_args.join(" "),
            run.timeout
        ),
    };
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!(
            "{} {} exited with {}:\n{}",
            run.tool.display(),
            mode_args.join(" "),
            out.status,
            tail(&text)
        );
    }
    Ok(text)
}

/// The last lines of an output, for an error.
fn tail(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}
