//! Scenario 2, backlog: fill the queue with a large backlog, read the process's memory, then
//! run the steady traffic on top of it. Consumers take the oldest messages first (FIFO) and
//! producers stay within `credit` of the acks, so the backlog keeps its size through the window.

use std::path::Path;

use super::super::settle;
use super::fill::{self, Fill};
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
}

impl Backlog {
    /// Resident bytes the backlog added, per message: what the broker keeps in memory for
    /// each message it holds.
    pub fn bytes_per_message(&self) -> Option<f64> {
        let (before, after) = (self.before?, self.after_fill?);
        if self.fill.messages == 0 {
            return None;
        }
        Some(after.rss_bytes.saturating_sub(before.rss_bytes) as f64 / self.fill.messages as f64)
    }
}

pub async fn run(base: &Path, shape: &Shape, plan: &Plan) -> anyhow::Result<Backlog> {
    let before = process::memory();
    let peak_reset = process::reset_peak();
    let fresh = Fresh::open(base, "backlog").await?;
    eprintln!(
        "backlog: filling {} messages with {} producers",
        plan.backlog, shape.producers
    );
    let fill = fill::fill(&fresh.broker, QUEUE, shape, plan.backlog, None).await?;
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
    })
}
