//! `ferry-bench sqs`: one work queue driven through two front ends of the same `ferry serve`
//! — its Amazon SQS endpoint with the official AWS SDK for Rust (`aws-sdk-sqs`), and Ferry's
//! own HTTP API — side by side in one run, reported as SQS / HTTP ratios.
//!
//! The workload is the same on both, as each API spells it:
//!
//! | step | SQS (AWS JSON 1.0 through the SDK) | Ferry HTTP API |
//! |---|---|---|
//! | produce | `SendMessageBatch` of 10 | `POST /v1/queues/{q}/messages` with 10 |
//! | consume | `ReceiveMessage` of up to 10, long poll | `POST /v1/queues/{q}/receive`, `max` 10, `wait_ms` |
//! | settle | `DeleteMessageBatch` of what came | one `POST …/messages/{seq}/ack` per message, all at once |
//!
//! `producers` tasks send batches until `messages` are stored while `consumers` tasks
//! receive and settle until every message is settled; the figure is messages settled per
//! second from the first send to the last settle. Every message carries its number, and a
//! run fails if one is missing at the end (a duplicate, a redelivery, is counted). Both
//! APIs get a fresh queue with a 30 s lease, the broker's durability is the same (the
//! server's defaults), and the runs alternate order round by round so drift in the
//! machine's load falls on both.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, SendMessageBatchRequestEntry};
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::process::{Usage, Watch};
use crate::stats::{Percentiles, histogram};

/// Messages per send, receive and settle call: SQS's batch limit.
pub const BATCH: usize = 10;

/// What one invocation runs.
#[derive(Debug, Clone)]
pub struct SqsPlan {
    /// The SQS endpoint, e.g. `http://127.0.0.1:4566`.
    pub sqs_url: String,
    /// Ferry's HTTP API, e.g. `http://127.0.0.1:7071`.
    pub http_url: String,
    /// The server process, sampled for CPU seconds.
    pub pid: Option<u32>,
    /// Messages per run.
    pub messages: u64,
    /// Payload bytes.
    pub size: usize,
    pub producers: usize,
    pub consumers: usize,
    /// The long poll of each receive, in seconds.
    pub wait_secs: u32,
    /// Runs per API, alternating which goes first.
    pub rounds: u32,
}

/// The API a run goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    Sqs,
    Http,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::Sqs => "sqs (aws-sdk-sqs)",
            Api::Http => "ferry http",
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub api: Api,
    pub round: u32,
    pub messages: u64,
    /// Settled messages per second, first send to last settle.
    pub msgs_per_sec: f64,
    /// Stored messages per second, first send to the last send's answer.
    pub send_msgs_per_sec: f64,
    pub seconds: f64,
    /// Deliveries beyond one per message (redeliveries).
    pub duplicates: u64,
    /// Receives that came back empty.
    pub empty_receives: u64,
    pub send_call: Option<Percentiles>,
    pub receive_call: Option<Percentiles>,
    pub settle_call: Option<Percentiles>,
    /// The server process's CPU over the run.
    pub server: Option<Usage>,
}

/// Every run and the ratios.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub messages: u64,
    pub size: usize,
    pub producers: usize,
    pub consumers: usize,
    pub wait_secs: u32,
    pub runs: Vec<Run>,
    /// Mean settled msgs/s of the SQS runs over that of the HTTP runs.
    pub ratio: f64,
    pub send_ratio: f64,
}

/// Runs the plan: `rounds` runs through each API, alternating which goes first.
pub async fn run(plan: &SqsPlan) -> anyhow::Result<Report> {
    if plan.messages == 0 || plan.producers == 0 || plan.consumers == 0 || plan.rounds == 0 {
        bail!("messages, producers, consumers and rounds must be at least 1");
    }
    if plan.size < 16 {
        bail!("--size must be at least 16 bytes (each payload carries its number)");
    }
    let sqs = Sqs::new(&plan.sqs_url);
    let http = Http::new(&plan.http_url);
    let mut runs = Vec::new();
    for round in 1..=plan.rounds {
        let order = if round % 2 == 1 {
            [Api::Http, Api::Sqs]
        } else {
            [Api::Sqs, Api::Http]
        };
        for api in order {
            let queue = format!("bench-{}-{}-{round}", api_tag(api), std::process::id());
            let client: Arc<dyn Endpoint> = match api {
                Api::Sqs => Arc::new(sqs.queue(&queue).await?),
                Api::Http => Arc::new(http.queue(&queue).await?),
            };
            eprintln!("round {round}: {} ...", api.name());
            let r = one_run(plan, api, round, client).await?;
            eprintln!(
                "round {round}: {}: {:.0} msgs/s settled, {:.0} msgs/s sent",
                api.name(),
                r.msgs_per_sec,
                r.send_msgs_per_sec
            );
            runs.push(r);
        }
    }
    let mean = |api: Api, f: fn(&Run) -> f64| {
        let v: Vec<f64> = runs.iter().filter(|r| r.api == api).map(f).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    let ratio = mean(Api::Sqs, |r| r.msgs_per_sec) / mean(Api::Http, |r| r.msgs_per_sec);
    let send_ratio =
        mean(Api::Sqs, |r| r.send_msgs_per_sec) / mean(Api::Http, |r| r.send_msgs_per_sec);
    Ok(Report {
        messages: plan.messages,
        size: plan.size,
        producers: plan.producers,
        consumers: plan.consumers,
        wait_secs: plan.wait_secs,
        runs,
        ratio,
        send_ratio,
    })
}

fn api_tag(api: Api) -> &'static str {
    match api {
        Api::Sqs => "sqs",
        Api::Http => "http",
    }
}

/// One delivery: the message's number (from its payload) and what settles it.
struct Delivery {
    number: u64,
    settle: Settle,
}

enum Settle {
    Sqs { receipt_handle: String },
    Http { seq: u64, token: u64 },
}

/// A queue behind one API, as the workload uses it.
#[async_trait::async_trait]
trait Endpoint: Send + Sync {
    async fn send(&self, payloads: Vec<String>) -> anyhow::Result<()>;
    async fn receive(&self, wait_secs: u32) -> anyhow::Result<Vec<Delivery>>;
    async fn settle(&self, deliveries: Vec<Delivery>) -> anyhow::Result<()>;
}

/// The payload of message `number`: its number, then filler to `size` bytes.
fn payload(number: u64, size: usize) -> String {
    let mut p = format!("{number:015}:");
    p.extend(std::iter::repeat_n('x', size.saturating_sub(p.len())));
    p
}

fn number_of(payload: &[u8]) -> anyhow::Result<u64> {
    std::str::from_utf8(payload.get(..15).context("a short payload")?)?
        .parse()
        .context("a payload without its number")
}

#[derive(Default)]
struct Tally {
    send: Option<Histogram<u64>>,
    receive: Option<Histogram<u64>>,
    settle: Option<Histogram<u64>>,
}

fn record(h: &mut Option<Histogram<u64>>, started: Instant) {
    h.get_or_insert_with(histogram)
        .saturating_record(started.elapsed().as_micros() as u64);
}

fn merge(into: &mut Option<Histogram<u64>>, from: Option<Histogram<u64>>) {
    if let Some(from) = from {
        let h = into.get_or_insert_with(histogram);
        h.add(from).expect("histograms of the same bounds");
    }
}

async fn one_run(
    plan: &SqsPlan,
    api: Api,
    round: u32,
    endpoint: Arc<dyn Endpoint>,
) -> anyhow::Result<Run> {
    let n = plan.messages;
    let seen: Arc<Vec<AtomicBool>> = Arc::new((0..n).map(|_| AtomicBool::new(false)).collect());
    let next = Arc::new(AtomicU64::new(0));
    let settled = Arc::new(AtomicU64::new(0));
    let duplicates = Arc::new(AtomicU64::new(0));
    let empty = Arc::new(AtomicU64::new(0));
    let finished: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let watch = plan.pid.and_then(|pid| Watch::start(pid).ok());
    let started = Instant::now();

    let mut producers = Vec::new();
    for _ in 0..plan.producers {
        let endpoint = Arc::clone(&endpoint);
        let next = Arc::clone(&next);
        let size = plan.size;
        producers.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            loop {
                let first = next.fetch_add(BATCH as u64, Ordering::Relaxed);
                if first >= n {
                    return anyhow::Ok(tally);
                }
                let payloads = (first..(first + BATCH as u64).min(n))
                    .map(|i| payload(i, size))
                    .collect();
                let t = Instant::now();
                endpoint.send(payloads).await?;
                record(&mut tally.send, t);
            }
        }));
    }
    let mut consumers = Vec::new();
    for _ in 0..plan.consumers {
        let endpoint = Arc::clone(&endpoint);
        let seen = Arc::clone(&seen);
        let settled = Arc::clone(&settled);
        let duplicates = Arc::clone(&duplicates);
        let empty = Arc::clone(&empty);
        let finished = Arc::clone(&finished);
        let wait = plan.wait_secs;
        consumers.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            while settled.load(Ordering::Relaxed) < n {
                let t = Instant::now();
                let got = endpoint.receive(wait).await?;
                if got.is_empty() {
                    empty.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                record(&mut tally.receive, t);
                let mut fresh = 0;
                for d in &got {
                    let slot = seen
                        .get(d.number as usize)
                        .with_context(|| format!("message {} was never sent", d.number))?;
                    if slot.swap(true, Ordering::Relaxed) {
                        duplicates.fetch_add(1, Ordering::Relaxed);
                    } else {
                        fresh += 1;
                    }
                }
                let t = Instant::now();
                endpoint.settle(got).await?;
                record(&mut tally.settle, t);
                if settled.fetch_add(fresh, Ordering::Relaxed) + fresh >= n {
                    finished.lock().await.get_or_insert_with(Instant::now);
                }
            }
            anyhow::Ok(tally)
        }));
    }
    let mut tally = Tally::default();
    for p in producers {
        let t = p.await??;
        merge(&mut tally.send, t.send);
    }
    let sent_at = started.elapsed();
    // A bound on the run: consumers that stop getting messages would otherwise poll on.
    let deadline = tokio::time::sleep(Duration::from_secs(600));
    tokio::pin!(deadline);
    for c in consumers {
        tokio::select! {
            t = c => {
                let t = t??;
                merge(&mut tally.receive, t.receive);
                merge(&mut tally.settle, t.settle);
            }
            _ = &mut deadline => bail!("{}: not every message was settled within 600 s", api.name()),
        }
    }
    let seconds = finished
        .lock()
        .await
        .map(|at| at.duration_since(started))
        .unwrap_or_else(|| started.elapsed())
        .as_secs_f64();
    let server = watch.map(|w| w.finish());
    let missing = seen.iter().filter(|s| !s.load(Ordering::Relaxed)).count();
    if missing > 0 {
        bail!("{}: {missing} messages never arrived", api.name());
    }
    Ok(Run {
        api,
        round,
        messages: n,
        msgs_per_sec: n as f64 / seconds,
        send_msgs_per_sec: n as f64 / sent_at.as_secs_f64(),
        seconds,
        duplicates: duplicates.load(Ordering::Relaxed),
        empty_receives: empty.load(Ordering::Relaxed),
        send_call: tally.send.as_ref().and_then(Percentiles::of),
        receive_call: tally.receive.as_ref().and_then(Percentiles::of),
        settle_call: tally.settle.as_ref().and_then(Percentiles::of),
        server,
    })
}

/// The SQS endpoint through the official SDK: plain HTTP, static credentials (the endpoint
/// does not verify signatures, but the SDK signs every request as it would for AWS).
struct Sqs {
    client: aws_sdk_sqs::Client,
}

struct SqsQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl Sqs {
    fn new(endpoint: &str) -> Sqs {
        use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("bench", "bench", None, None, "bench"))
            .endpoint_url(endpoint)
            .http_client(aws_smithy_http_client::Builder::new().build_http())
            .build();
        Sqs {
            client: aws_sdk_sqs::Client::from_conf(config),
        }
    }

    async fn queue(&self, name: &str) -> anyhow::Result<SqsQueue> {
        let created = self
            .client
            .create_queue()
            .queue_name(name)
            .attributes(
                aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
                "30",
            )
            .send()
            .await
            .with_context(|| format!("SQS CreateQueue {name}"))?;
        Ok(SqsQueue {
            client: self.client.clone(),
            url: created.queue_url.context("CreateQueue answered no URL")?,
        })
    }
}

#[async_trait::async_trait]
impl Endpoint for SqsQueue {
    async fn send(&self, payloads: Vec<String>) -> anyhow::Result<()> {
        let entries = payloads
            .into_iter()
            .enumerate()
            .map(|(i, body)| {
                SendMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .message_body(body)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sent = self
            .client
            .send_message_batch()
            .queue_url(&self.url)
            .set_entries(Some(entries))
            .send()
            .await
            .context("SendMessageBatch")?;
        if !sent.failed().is_empty() {
            bail!("SendMessageBatch failed entries: {:?}", sent.failed());
        }
        Ok(())
    }

    async fn receive(&self, wait_secs: u32) -> anyhow::Result<Vec<Delivery>> {
        let got = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(BATCH as i32)
            .wait_time_seconds(wait_secs as i32)
            .send()
            .await
            .context("ReceiveMessage")?;
        got.messages()
            .iter()
            .map(|m| {
                Ok(Delivery {
                    number: number_of(m.body().unwrap_or_default().as_bytes())?,
                    settle: Settle::Sqs {
                        receipt_handle: m.receipt_handle().unwrap_or_default().to_owned(),
                    },
                })
            })
            .collect()
    }

    async fn settle(&self, deliveries: Vec<Delivery>) -> anyhow::Result<()> {
        let entries = deliveries
            .into_iter()
            .enumerate()
            .filter_map(|(i, d)| match d.settle {
                Settle::Sqs { receipt_handle } => Some(
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(receipt_handle)
                        .build(),
                ),
                Settle::Http { .. } => None,
            })
            .collect::<Result<Vec<_>, _>>()?;
        let deleted = self
            .client
            .delete_message_batch()
            .queue_url(&self.url)
            .set_entries(Some(entries))
            .send()
            .await
            .context("DeleteMessageBatch")?;
        if !deleted.failed().is_empty() {
            bail!("DeleteMessageBatch failed entries: {:?}", deleted.failed());
        }
        Ok(())
    }
}

/// Ferry's HTTP API through hyper's pooled HTTP/1.1 client (the same hyper the SDK's
/// client is built on).
struct Http {
    client: HyperClient<HttpConnector, Full<Bytes>>,
    base: String,
}

struct HttpQueue {
    client: HyperClient<HttpConnector, Full<Bytes>>,
    base: String,
    queue: String,
}

async fn post(
    client: &HyperClient<HttpConnector, Full<Bytes>>,
    url: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let request = hyper::Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))?;
    let response = client
        .request(request)
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = response.status();
    let bytes = response.into_body().collect().await?.to_bytes();
    if !status.is_success() {
        bail!(
            "POST {url}: {status}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(500)])
        );
    }
    Ok(serde_json::from_slice(&bytes)?)
}

impl Http {
    fn new(base: &str) -> Http {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Http {
            client: HyperClient::builder(TokioExecutor::new()).build(connector),
            base: base.trim_end_matches('/').to_owned(),
        }
    }

    async fn queue(&self, name: &str) -> anyhow::Result<HttpQueue> {
        post(
            &self.client,
            &format!("{}/v1/queues", self.base),
            json!({"name": name}),
        )
        .await?;
        Ok(HttpQueue {
            client: self.client.clone(),
            base: self.base.clone(),
            queue: name.to_owned(),
        })
    }
}

#[async_trait::async_trait]
impl Endpoint for HttpQueue {
    async fn send(&self, payloads: Vec<String>) -> anyhow::Result<()> {
        let messages: Vec<Value> = payloads
            .into_iter()
            .map(|p| json!({"payload": p}))
            .collect();
        let url = format!("{}/v1/queues/{}/messages", self.base, self.queue);
        post(&self.client, &url, json!({"messages": messages})).await?;
        Ok(())
    }

    async fn receive(&self, wait_secs: u32) -> anyhow::Result<Vec<Delivery>> {
        let url = format!("{}/v1/queues/{}/receive", self.base, self.queue);
        let got = post(
            &self.client,
            &url,
            json!({
                "consumer": "bench",
                "max": BATCH,
                "lease_ms": 30_000,
                "wait_ms": u64::from(wait_secs) * 1000,
            }),
        )
        .await?;
        let deliveries = got["deliveries"]
            .as_array()
            .context("a receive without deliveries")?;
        deliveries
            .iter()
            .map(|d| {
                let payload = d["payload"]
                    .as_str()
                    .context("a delivery without payload")?;
                Ok(Delivery {
                    number: number_of(payload.as_bytes())?,
                    settle: Settle::Http {
                        seq: d["seq"].as_u64().context("a delivery without seq")?,
                        token: d["token"].as_u64().context("a delivery without token")?,
                    },
                })
            })
            .collect()
    }

    async fn settle(&self, deliveries: Vec<Delivery>) -> anyhow::Result<()> {
        // The API settles one message a call: the acks of one receive go out together.
        let mut acks = tokio::task::JoinSet::new();
        for d in deliveries {
            if let Settle::Http { seq, token } = d.settle {
                let client = self.client.clone();
                let url = format!("{}/v1/queues/{}/messages/{seq}/ack", self.base, self.queue);
                acks.spawn(async move { post(&client, &url, json!({"token": token})).await });
            }
        }
        while let Some(acked) = acks.join_next().await {
            acked??;
        }
        Ok(())
    }
}

/// The report as markdown: each run, then the ratios.
pub fn markdown(report: &Report) -> String {
    let mut md = String::new();
    md.push_str(&format!(
        "{} messages of {} B per run, {} producers (batches of {BATCH}), {} consumers \
         (receive up to {BATCH}, long poll {} s, settle what came)\n\n",
        report.messages, report.size, report.producers, report.consumers, report.wait_secs
    ));
    md.push_str(
        "| round | api | settled msgs/s | sent msgs/s | send call p50 / p99 ms | receive call p50 / p99 ms | settle call p50 / p99 ms | server CPU µs/msg | redeliveries | empty receives |\n\
         |---|---|---:|---:|---|---|---|---:|---:|---:|\n",
    );
    let pair = |p: &Option<Percentiles>| {
        p.map(|p| format!("{:.2} / {:.2}", p.p50_ms, p.p99_ms))
            .unwrap_or_else(|| "–".into())
    };
    for r in &report.runs {
        let cpu = r
            .server
            .map(|u| format!("{:.0}", u.cpu_secs * 1e6 / r.messages as f64))
            .unwrap_or_else(|| "–".into());
        md.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} |\n",
            r.round,
            r.api.name(),
            r.msgs_per_sec,
            r.send_msgs_per_sec,
            pair(&r.send_call),
            pair(&r.receive_call),
            pair(&r.settle_call),
            cpu,
            r.duplicates,
            r.empty_receives
        ));
    }
    md.push_str(&format!(
        "\nSQS / HTTP, settled msgs/s (mean of the runs): **{:.3}** (target ≥ 0.5: {}); sent msgs/s: {:.3}\n",
        report.ratio,
        if report.ratio >= 0.5 { "met" } else { "MISSED" },
        report.send_ratio
    ));
    md
}

/// Writes `sqs.json` and `sqs.md` into `out`.
pub fn write(report: &Report, out: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    std::fs::write(out.join("sqs.json"), serde_json::to_vec_pretty(report)?)?;
    let md = out.join("sqs.md");
    std::fs::write(&md, markdown(report))?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_carry_their_number() {
        let p = payload(42, 128);
        assert_eq!(p.len(), 128);
        assert_eq!(number_of(p.as_bytes()).unwrap(), 42);
        assert!(number_of(b"short").is_err());
    }
}
