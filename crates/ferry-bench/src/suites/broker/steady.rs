//! Scenario 1, steady: producers and consumers running together on an empty queue, the
//! producers held to at most `credit` messages ahead of the acks, so the window sees the
//! pipeline publish → receive → ack at its own pace rather than a queue growing without end.

use std::path::Path;

use super::traffic::{self, Load, Shape, Window};
use super::{Fresh, Plan, QUEUE};

pub async fn run(base: &Path, shape: &Shape, plan: &Plan) -> anyhow::Result<Window> {
    eprintln!(
        "steady: {} producers x {} per batch, {} consumers, {:.1} s warm-up + {:.1} s",
        shape.producers,
        shape.batch,
        shape.consumers,
        plan.warmup.as_secs_f64(),
        plan.window.as_secs_f64()
    );
    let fresh = Fresh::open(base, "steady").await?;
    let load = Load {
        consume: true,
        publish_delay: None,
        credit: Some(plan.credit),
    };
    let window = traffic::run(&fresh.broker, QUEUE, shape, load, plan.warmup, plan.window).await?;
    fresh.close().await?;
    Ok(window)
}
