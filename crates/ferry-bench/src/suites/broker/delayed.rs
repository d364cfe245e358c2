//! Scenario 3, delayed: publish throughput with no consumer, into an empty queue and into a
//! queue holding many messages delayed by an hour, each in a broker of its own. Measured twice:
//! publishing messages due now, and publishing more delayed messages (each of which adds a
//! timer next to the held ones).

use std::path::Path;

use super::super::settle;
use super::fill::{self, Fill};
use super::traffic::{self, Load, Shape, Window};
use super::{DELAY, Fresh, Plan, QUEUE};

#[derive(Debug, Clone)]
pub struct Case {
    /// The messages published in the windows are delayed too.
    pub delayed_publishes: bool,
    pub empty: Window,
    pub fill: Fill,
    pub holding: Window,
}

impl Case {
    pub fn name(&self) -> &'static str {
        if self.delayed_publishes {
            "delayed publishes"
        } else {
            "publishes due now"
        }
    }

    /// Publish rate next to the held delayed messages / into the empty queue.
    pub fn ratio(&self) -> f64 {
        self.holding.published_per_sec() / self.empty.published_per_sec()
    }
}

#[derive(Debug, Clone)]
pub struct Delayed {
    pub held: u64,
    pub cases: Vec<Case>,
}

pub async fn run(base: &Path, shape: &Shape, plan: &Plan) -> anyhow::Result<Delayed> {
    let mut cases = Vec::new();
    for delayed_publishes in [false, true] {
        let load = Load {
            consume: false,
            publish_delay: delayed_publishes.then_some(DELAY),
            credit: None,
        };
        let kind = if delayed_publishes {
            "delayed"
        } else {
            "due now"
        };
        eprintln!(
            "delayed: publishing ({kind}) into an empty queue, {:.1} s warm-up + {:.1} s",
            plan.warmup.as_secs_f64(),
            plan.window.as_secs_f64()
        );
        let fresh = Fresh::open(base, "delayed-empty").await?;
        let empty =
            traffic::run(&fresh.broker, QUEUE, shape, load, plan.warmup, plan.window).await?;
        fresh.close().await?;

        eprintln!(
            "delayed: holding {} messages delayed {} s, then publishing ({kind})",
            plan.delayed,
            DELAY.as_secs()
        );
        let fresh = Fresh::open(base, "delayed-holding").await?;
        let fill = fill::fill(
            &fresh.broker,
            QUEUE,
            shape,
            plan.delayed,
            Some(DELAY),
            fill::DedupIds::None,
        )
        .await?;
        // As in the backlog scenario: the fill's writeback is not the held messages' cost.
        settle(base)?;
        let holding =
            traffic::run(&fresh.broker, QUEUE, shape, load, plan.warmup, plan.window).await?;
        fresh.close().await?;
        cases.push(Case {
            delayed_publishes,
            empty,
            fill,
            holding,
        });
    }
    Ok(Delayed {
        held: plan.delayed,
        cases,
    })
}
