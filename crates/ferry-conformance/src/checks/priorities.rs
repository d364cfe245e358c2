//! Priorities: among ready messages, a higher priority is delivered first.

use ferry::{Destination, Ferry, Message, Source};

use super::{QUIET, WAIT};
use crate::Target;
use crate::support::{CheckResult, Context, consumer, ensure, next, nothing_more, queue};

/// A backlog published low priority first, all of it ready before anyone consumes, comes
/// out highest priority first and in publish order within a priority. Eight messages: fewer
/// than a starvation guard lending one pick in ten to a lower level would serve before it
/// lends one, so the order asked for is the strict one on every transport.
pub(super) async fn higher_priorities_are_delivered_first(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let name = queue(ferry, "priorities", |q| q.delivery.priority_levels = 3).await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    let mut sent = Vec::new();
    for (priority, count) in [(0u8, 3), (1, 3), (2, 2)] {
        for n in 0..count {
            let id = publisher
                .send(Message::new(format!("p{priority}-{n}")).with_priority(priority))
                .await
                .during("publish")?;
            sent.push((priority, id));
        }
    }
    // Highest priority first; within one, the order of publishing (a stable sort keeps it).
    let mut want = sent.clone();
    want.sort_by_key(|(priority, _)| std::cmp::Reverse(*priority));
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    let mut got = Vec::new();
    for _ in 0..want.len() {
        let d = next(&mut c, WAIT).await?;
        let published = sent
            .iter()
            .find(|(_, id)| *id == d.id)
            .ok_or_else(|| format!("{} was never published", d.id))?;
        ensure!(
            d.priority == published.0,
            "{} was published with priority {} and delivered with {}",
            d.id,
            published.0,
            d.priority
        );
        got.push((d.priority, d.id.clone()));
        d.ack().await.during("ack")?;
    }
    ensure!(
        got == want,
        "delivered as (priority, id) {got:?}, where {want:?} was due"
    );
    nothing_more(&mut c, QUIET).await
}

/// A priority the queue does not declare is a mistaken publish: it is refused as invalid
/// and stores nothing, rather than taken as the top level where it would overtake every
/// message published at the levels the queue does have.
pub(super) async fn a_priority_above_the_queues_levels_is_invalid_and_stores_nothing(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let name = queue(ferry, "priority-levels", |q| q.delivery.priority_levels = 3).await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    let refused = publisher
        .send(Message::new("above the levels").with_priority(3))
        .await;
    ensure!(
        matches!(refused, Err(ferry::Error::Invalid { .. })),
        "priority 3 on a queue of 3 levels (0 to 2) answered {refused:?}, not Invalid"
    );
    let kept = publisher
        .send(Message::new("top level").with_priority(2))
        .await
        .during("publish at the top level")?;
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    let d = next(&mut c, WAIT).await?;
    ensure!(
        d.id == kept,
        "received {} ({:?}) where only the top-level message {kept} was stored",
        d.id,
        String::from_utf8_lossy(&d.payload)
    );
    d.ack().await.during("ack")?;
    nothing_more(&mut c, QUIET).await
}
