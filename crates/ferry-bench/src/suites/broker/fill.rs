//! Filling a queue before a window: a backlog, or delayed messages, published as fast as the
//! producers go with no consumer, and checked against the queue's depth afterwards.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ferry_broker::Broker;
use tokio::task::JoinSet;

use super::super::fsync_count;
use super::traffic::{Shape, batch, depth};

/// What a fill measured.
#[derive(Debug, Clone)]
pub struct Fill {
    pub messages: u64,
    pub elapsed: Duration,
    pub fsyncs: u64,
}

impl Fill {
    pub fn per_sec(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64()
    }
}

/// Whether each message of a fill carries a dedup id of its own, so that it also holds an
/// entry in the queue's dedup window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DedupIds {
    None,
    Unique,
}

/// Publishes `messages` (rounded up to whole batches) with `shape.producers` producers as
/// fast as they go, no consumer. Their payloads carry no stamp: a later window never counts
/// them in a latency.
pub async fn fill(
    broker: &Broker,
    queue: &str,
    shape: &Shape,
    messages: u64,
    delay: Option<Duration>,
    dedup: DedupIds,
) -> anyhow::Result<Fill> {
    let depth_before = depth(broker, queue)?;
    let claimed = Arc::new(AtomicU64::new(0));
    let fsyncs_before = fsync_count::count();
    let start = Instant::now();
    let mut producers = JoinSet::new();
    for _ in 0..shape.producers {
        let (broker, queue, claimed, shape) = (
            broker.clone(),
            Arc::<str>::from(queue),
            claimed.clone(),
            *shape,
        );
        producers.spawn(async move {
            let n = shape.batch as u64;
            loop {
                let first = claimed.fetch_add(n, Ordering::Relaxed);
                if first >= messages {
                    break;
                }
                let mut messages = batch(0, &shape, delay);
                if dedup == DedupIds::Unique {
                    for (i, m) in (first..).zip(&mut messages) {
                        m.dedup_id = Some(format!("fill-{i}"));
                    }
                }
                broker
                    .publish_batch(&queue, messages)
                    .await
                    .context("publish_batch (fill)")?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(result) = producers.join_next().await {
        result.context("fill producer panicked")??;
    }
    let elapsed = start.elapsed();
    let fsyncs = fsync_count::count() - fsyncs_before;
    let messages = messages.div_ceil(shape.batch as u64) * shape.batch as u64;
    let depth_after = depth(broker, queue)?;
    if depth_after as u64 != depth_before as u64 + messages {
        bail!(
            "published {messages} messages, but the queue went from {depth_before} to {depth_after}"
        );
    }
    Ok(Fill {
        messages,
        elapsed,
        fsyncs,
    })
}
