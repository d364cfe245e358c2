//! Message TTL: a message past its TTL is not delivered; where the queue keeps dead
//! letters it goes there with reason `expired`.

use std::time::Duration;

use ferry::message::reason;
use ferry::{Destination, Ferry, Message, Source};

use super::{QUIET, WAIT};
use crate::Target;
use crate::support::{CheckResult, Context, consumer, ensure, next, nothing_more, queue};

/// The TTL the checks give a message that must expire.
const SHORT: Duration = Duration::from_secs(1);
/// How long the checks wait after publishing before they consume: well past [`SHORT`], so
/// a slow machine can only make the message older, never young enough to be delivered.
const PAST_SHORT: Duration = Duration::from_millis(2500);

pub(super) async fn an_expired_message_is_dead_lettered_not_delivered(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let name = queue(ferry, "ttl-expired", |_| {}).await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    // The expiring message first, at the head of the queue, where engines look.
    let expiring = publisher
        .send(Message::new("stale").with_ttl(SHORT))
        .await
        .during("publish with a TTL")?;
    let lasting = publisher
        .send(Message::new("fresh"))
        .await
        .during("publish without a TTL")?;
    tokio::time::sleep(PAST_SHORT).await;
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    let d = next(&mut c, WAIT).await?;
    ensure!(
        d.id == lasting,
        "{} was delivered {PAST_SHORT:?} after it was published with a {SHORT:?} TTL",
        d.id
    );
    d.ack().await.during("ack")?;
    nothing_more(&mut c, QUIET).await?;
    let mut dlq = consumer(ferry, Source::queue(&name).dead_letters()).await?;
    let dead = next(&mut dlq, WAIT).await?;
    ensure!(
        dead.id == expiring,
        "the dead letter is {}, not the expired {expiring}",
        dead.id
    );
    ensure!(dead.payload == "stale", "the dead letter's payload changed");
    let info = dead
        .dead_letter
        .clone()
        .ok_or("a dead letter without metadata")?;
    ensure!(info.reason == reason::EXPIRED, "reason {}", info.reason);
    ensure!(info.origin == name, "origin {} not {name}", info.origin);
    dead.ack().await.during("ack the dead letter")?;
    nothing_more(&mut dlq, QUIET).await
}

/// A queue's `default_ttl` is the TTL of messages published without one; a message's own
/// TTL, longer or not, is its TTL.
pub(super) async fn a_default_ttl_applies_only_to_messages_without_one(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let name = queue(ferry, "ttl-default", |q| {
        q.delivery.default_ttl = Some(SHORT)
    })
    .await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    publisher
        .send(Message::new("takes the default"))
        .await
        .during("publish without a TTL")?;
    let own = publisher
        .send(Message::new("has its own").with_ttl(Duration::from_secs(600)))
        .await
        .during("publish with a TTL of its own")?;
    tokio::time::sleep(PAST_SHORT).await;
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    let d = next(&mut c, WAIT).await.map_err(|e| {
        format!(
            "{e}: the message published with its own 600 s TTL on a queue whose default is \
             {SHORT:?} expired with the default"
        )
    })?;
    ensure!(
        d.id == own,
        "{} was delivered {PAST_SHORT:?} after it was published on a queue whose default TTL \
         is {SHORT:?}",
        d.id
    );
    d.ack().await.during("ack")?;
    nothing_more(&mut c, QUIET).await
}
