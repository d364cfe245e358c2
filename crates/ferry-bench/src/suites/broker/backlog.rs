//! Scenario 2, backlog: fill the queue with a large backlog, read the process's memory, then
//! run the steady traffic on top of it. Consumers take the oldest messages first (FIFO) and
//! producers stay within `credit` of the acks, so the backlog keeps its size through the window.

use std::path::Path;

use super::super::settle;
use super::fill::{self, DedupIds, Fill};
use super::process::{self, Memory};
use super::traffic::{self, Load, Shape, Window};
use super::{Fresh, Plan, QUEUE};

#[derive(Debug, Clone)]
pub struct Backlog {
    pub fill: Fill,
    /// Before the broker was opened.
    pub before: Option<Memory>,
    /// Right after the fill.
    pub after_fill: Option<Memory>,
    /// After the window; its peak covers the whole scenario when `peak_reset`.
    pub end: Option<Memory>,
    /// Whether VmHWM was reset at the start of the scenario; if not, peaks are since the
    /// process started.
    pub peak_reset: bool,
    pub window: Window,
    /// How long reopening the broker took with the backlog in it, and the memory after.
    pub reopen: std::time::Duration,
    pub after_reopen: Option<Memory>,
    /// A smaller backlog whose messages each carry a dedup id, in a broker of its own.
    pub with_dedup_ids: DedupCost,
}

/// What a message published with a dedup id costs in memory at the default spec: its
/// delivery state and its entry in the dedup window, which it holds for the window's length.
#[derive(Debug, Clone)]
pub struct DedupCost {
    pub fill: Fill,
    pub before: Option<Memory>,
    pub after_fill: Option<Memory>,
    pub window: std::time::Duration,
}

impl DedupCost {
    pub fn bytes_per_message(&self) -> Option<f64> {
        per_message(self.before, self.after_fill, self.fill.messages)
    }
}

impl Backlog {
    /// Resident bytes the backlog added, per message: what the broker keeps in memory for
    /// each message it holds.
    pub fn bytes_per_message(&self) -> Option<f64> {
        per_message(self.before, self.after_fill, self.fill.messages)
    }
}

/// Resident bytes added between two readings, per message filled.
fn per_message(before: Option<Memory>, after: Option<Memory>, messages: u64) -> Option<f64> {
    let (before, after) = (before?, after?);
    if messages == 0 {
        return None;
    }
    Some(after.rss_bytes.saturating_sub(before.rss_bytes) as f64 / messages as f64)
}

/// A tenth of the backlog (at least 100,000), each message with its own dedup id, in a
/// broker of its own that is closed before the backlog's: the readings of one never hold
/// the other's memory.
async fn dedup_cost(base: &Path, shape: &Shape, plan: &Plan) -> anyhow::Result<DedupCost> {
    let messages = (plan.backlog / 10).max(100_000);
    let before = process::memory();
    let fresh = Fresh::open(base, "backlog-dedup").await?;
    let window = fresh.broker.describe_queue(QUEUE)?.spec.dedup_window;
    eprintln!("backlog: filling {messages} messages with a dedup id each");
    let fill = fill::fill(
        &fresh.broker,
        QUEUE,
        shape,
        messages,
        None,
        DedupIds::Unique,
    )
    .await?;
    let after_fill = process::memory();
    fresh.close().await?;
    Ok(DedupCost {
        fill,
        before,
        after_fill,
        window,
    })
}

pub async fn run(base: &Path, shape: &Shape, plan: &Plan) -> anyhow::Result<Backlog> {
    let with_dedup_ids = dedup_cost(base, shape, plan).await?;
    let before = process::memory();
    let peak_reset = process::reset_peak();
    let fresh = Fresh::open(base, "backlog").await?;
    eprintln!(
        "backlog: filling {} messages with {} producers",
        plan.backlog, shape.producers
    );
    let fill = fill::fill(
        &fresh.broker,
        QUEUE,
        shape,
        plan.backlog,
        None,
        DedupIds::None,
    )
    .await?;
    let after_fill = process::memory();
    // The fill leaves gigabytes of dirty pages; their writeback would compete with the
    // window's fdatasyncs and count against the backlog, though it is a cost of the fill.
    settle(base)?;
    eprintln!(
        "backlog: filled in {:.1} s; steady traffic on top, {:.1} s warm-up + {:.1} s",
        fill.elapsed.as_secs_f64(),
        plan.warmup.as_secs_f64(),
        plan.window.as_secs_f64()
    );
    let load = Load {
        consume: true,
        publish_delay: None,
        credit: Some(plan.credit),
    };
    let window = traffic::run(&fresh.broker, QUEUE, shape, load, plan.warmup, plan.window).await?;
    let end = process::memory();
    eprintln!("backlog: reopening the broker with the backlog in it");
    let (fresh, reopen) = fresh.reopen().await?;
    let after_reopen = process::memory();
    fresh.close().await?;
    Ok(Backlog {
        fill,
        before,
        after_fill,
        end,
        peak_reset,
        window,
        reopen,
        after_reopen,
        with_dedup_ids,
    })
}
