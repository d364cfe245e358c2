//! The soak's traffic: a producer at a steady rate, competing workers that ack, retry,
//! poison or reject each message as its fate says, and a reader of the dead-letter queue.
//! Every message is counted where it ends, so the run can prove none was lost.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use bytes::Bytes;
use ferry::{ConsumerOptions, Ferry, Message, Source};
use hdrhistogram::Histogram;
use tokio::sync::Notify;

use super::fate::{FATE_HEADER, Fate, Mix};
use crate::pacing::Pacer;
use crate::stats;

/// The header carrying a message's send time, in microseconds since the Unix epoch.
pub const SENT_HEADER: &str = "soak-sent-us";

/// Messages per publish call.
pub const BATCH: u32 = 10;

/// Where every message of the run stands, updated by every task.
#[derive(Debug, Default)]
pub struct Tally {
    pub published: AtomicU64,
    /// Published, by fate: what the dead-letter queue must end up holding.
    pub published_dying: AtomicU64,
    pub published_retry_once: AtomicU64,
    /// Acked by a worker (the message's end for the ones that live).
    pub acked: AtomicU64,
    /// Nacks made (first deliveries of retry-once messages, every delivery of a poison one).
    pub nacked: AtomicU64,
    pub rejected: AtomicU64,
    /// Deliveries with an attempt above 1.
    pub redelivered: AtomicU64,
    /// Read and acked from the dead-letter queue (the end of the ones that die).
    pub dead_lettered: AtomicU64,
    /// Dead letters whose fate or reason was not what their fate called for, or live
    /// messages acked twice-over; any is a failed run.
    pub misplaced: AtomicU64,
    pub stop_producing: AtomicBool,
    pub stop_consuming: AtomicBool,
    /// Woken whenever a message reaches its end, for [`drain`].
    pub progress: Notify,
}

impl Tally {
    /// Messages that reached their end: acked by a worker, or read from the dead letters.
    pub fn ended(&self) -> u64 {
        self.acked.load(Ordering::SeqCst) + self.dead_lettered.load(Ordering::SeqCst)
    }

    pub fn outstanding(&self) -> u64 {
        self.published
            .load(Ordering::SeqCst)
            .saturating_sub(self.ended())
    }
}

/// End-to-end latencies of first deliveries: one histogram per sampling interval (taken and
/// reset by the sampler) and one for the whole run.
pub struct Latencies {
    pub interval: Mutex<Histogram<u64>>,
    pub whole: Mutex<Histogram<u64>>,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies::new()
    }
}

impl Latencies {
    pub fn new() -> Latencies {
        Latencies {
            interval: Mutex::new(stats::histogram()),
            whole: Mutex::new(stats::histogram()),
        }
    }

    fn record(&self, us: u64) {
        self.interval.lock().unwrap().saturating_record(us);
        self.whole.lock().unwrap().saturating_record(us);
    }

    /// The interval's histogram, leaving an empty one in its place.
    pub fn take_interval(&self) -> Histogram<u64> {
        std::mem::replace(&mut *self.interval.lock().unwrap(), stats::histogram())
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Publishes `rate` messages/s of `size` bytes in batches of [`BATCH`] until told to stop.
pub async fn produce(
    ferry: Ferry,
    queue: String,
    rate: u64,
    size: usize,
    mix: Mix,
    tally: Arc<Tally>,
) -> anyhow::Result<()> {
    let publisher = ferry.publisher(ferry::Destination::queue(&queue));
    let pacer = Pacer::new(rate, 1, BATCH);
    let payload = Bytes::from(vec![b's'; size]);
    let started = tokio::time::Instant::now();
    let mut next = 0u64;
    for call in 0.. {
        tokio::time::sleep_until(started + pacer.due(call)).await;
        if tally.stop_producing.load(Ordering::SeqCst) {
            break;
        }
        let sent = now_us().to_string();
        let fates: Vec<Fate> = (next..next + u64::from(BATCH))
            .map(|n| mix.fate(n))
            .collect();
        let messages = fates
            .iter()
            .map(|fate| {
                Message::new(payload.clone())
                    .with_header(SENT_HEADER, sent.clone())
                    .with_header(FATE_HEADER, fate.as_str())
            })
            .collect();
        publisher
            .send_batch(messages)
            .await
            .with_context(|| format!("publish to {queue}"))?;
        next += u64::from(BATCH);
        let dying = fates.iter().filter(|f| f.dies()).count() as u64;
        let retrying = fates.iter().filter(|f| **f == Fate::RetryOnce).count() as u64;
        tally.published_dying.fetch_add(dying, Ordering::SeqCst);
        tally
            .published_retry_once
            .fetch_add(retrying, Ordering::SeqCst);
        tally
            .published
            .fetch_add(u64::from(BATCH), Ordering::SeqCst);
    }
    Ok(())
}

/// A worker: settles each delivery as its fate says until told to stop.
pub async fn work(
    ferry: Ferry,
    queue: String,
    prefetch: usize,
    tally: Arc<Tally>,
    latencies: Arc<Latencies>,
) -> anyhow::Result<()> {
    let options = ConsumerOptions {
        prefetch,
        poll: Duration::from_millis(100),
        ..ConsumerOptions::default()
    };
    let mut consumer = ferry
        .consumer(Source::queue(&queue), options)
        .await
        .with_context(|| format!("open a worker on {queue}"))?;
    while !tally.stop_consuming.load(Ordering::SeqCst) {
        let Some(delivery) = consumer.next_within(Duration::from_millis(200)).await? else {
            continue;
        };
        let Some(fate) = delivery.header(FATE_HEADER).and_then(Fate::parse) else {
            tally.misplaced.fetch_add(1, Ordering::SeqCst);
            delivery.reject("no soak fate").await?;
            continue;
        };
        if delivery.attempt <= 1 {
            if let Some(sent) = delivery
                .header(SENT_HEADER)
                .and_then(|s| s.parse::<u64>().ok())
            {
                latencies.record(now_us().saturating_sub(sent));
            }
        } else {
            tally.redelivered.fetch_add(1, Ordering::SeqCst);
        }
        match fate {
            Fate::Ok => {
                delivery.ack().await?;
                tally.acked.fetch_add(1, Ordering::SeqCst);
                tally.progress.notify_waiters();
            }
            Fate::RetryOnce if delivery.attempt <= 1 => {
                // No delay of our own: the queue's backoff decides when it comes back.
                delivery.nack(None).await?;
                tally.nacked.fetch_add(1, Ordering::SeqCst);
            }
            Fate::RetryOnce => {
                delivery.ack().await?;
                tally.acked.fetch_add(1, Ordering::SeqCst);
                tally.progress.notify_waiters();
            }
            Fate::Poison => {
                delivery.nack_with_error(None, "soak: poison").await?;
                tally.nacked.fetch_add(1, Ordering::SeqCst);
            }
            Fate::Reject => {
                delivery.reject("soak: rejected").await?;
                tally.rejected.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    consumer.close().await?;
    Ok(())
}

/// Reads the dead-letter queue, checking each dead letter was meant to die and died for
/// the reason its fate gives.
pub async fn read_dead_letters(
    ferry: Ferry,
    queue: String,
    tally: Arc<Tally>,
) -> anyhow::Result<()> {
    let source = Source::queue(&queue).dead_letters();
    let mut consumer = ferry
        .consumer(source.clone(), ConsumerOptions::default())
        .await
        .with_context(|| format!("open a reader on {source}"))?;
    while !tally.stop_consuming.load(Ordering::SeqCst) {
        let Some(letter) = consumer.next_within(Duration::from_millis(200)).await? else {
            continue;
        };
        let fate = letter.header(FATE_HEADER).and_then(Fate::parse);
        let reason = letter.dead_letter.as_ref().map(|d| d.reason.as_str());
        let expected = match fate {
            Some(Fate::Poison) => reason == Some("max_deliveries"),
            Some(Fate::Reject) => reason == Some("rejected"),
            _ => false,
        };
        if !expected {
            eprintln!(
                "soak: dead letter {} with fate {fate:?} and reason {reason:?}",
                letter.id
            );
            tally.misplaced.fetch_add(1, Ordering::SeqCst);
        }
        letter.ack().await?;
        tally.dead_lettered.fetch_add(1, Ordering::SeqCst);
        tally.progress.notify_waiters();
    }
    consumer.close().await?;
    Ok(())
}

/// Waits until every published message has ended, or fails after `limit` without progress.
pub async fn drain(tally: &Tally, limit: Duration) -> anyhow::Result<()> {
    loop {
        // Registered before the check, so an end between the two still wakes the wait.
        let progressed = tally.progress.notified();
        if tally.outstanding() == 0 {
            return Ok(());
        }
        if tokio::time::timeout(limit, progressed).await.is_err() {
            bail!(
                "{} messages still outstanding after {limit:?} without progress",
                tally.outstanding()
            );
        }
    }
}
