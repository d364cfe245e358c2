//! Max length: a full queue refuses the publish (`Full`, as `errors.rs` checks) and
//! changes nothing else — what it holds stays, the refused message is neither stored nor
//! dead-lettered — and it takes publishes again once a message is acked.

use std::collections::BTreeSet;

use ferry::{Destination, Error, Feature, Ferry, Message, Source};

use super::{QUIET, WAIT};
use crate::Target;
use crate::support::{CheckResult, Context, consumer, ensure, next, nothing_more, queue};

pub(super) async fn a_full_queue_keeps_what_it_holds_and_takes_more_once_drained(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let name = queue(ferry, "overflow", |q| q.max_length = Some(2)).await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    for payload in ["0", "1"] {
        publisher
            .send(Message::new(payload))
            .await
            .during("publish within the limit")?;
    }
    match publisher.send(Message::new("refused")).await {
        Err(Error::Full { .. }) => {}
        other => return Err(format!("publishing past max_length answered {other:?}")),
    }
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    let mut got = BTreeSet::new();
    let first = next(&mut c, WAIT).await?;
    got.insert(String::from_utf8_lossy(&first.payload).into_owned());
    // Acked, it leaves the queue, and its room takes the next publish.
    first.ack().await.during("ack")?;
    publisher
        .send(Message::new("2"))
        .await
        .during("publish after an ack made room")?;
    while got.len() < 3 {
        let d = next(&mut c, WAIT).await?;
        let payload = String::from_utf8_lossy(&d.payload).into_owned();
        ensure!(payload != "refused", "the refused message was stored");
        ensure!(got.insert(payload.clone()), "{payload} came twice");
        d.ack().await.during("ack")?;
    }
    ensure!(
        got == BTreeSet::from(["0".to_owned(), "1".to_owned(), "2".to_owned()]),
        "got {got:?}"
    );
    nothing_more(&mut c, QUIET).await?;
    if ferry.capabilities().supports(Feature::DeadLetters) {
        // Refused, not dead-lettered: the publisher holds it and was told so.
        let mut dlq = consumer(ferry, Source::queue(&name).dead_letters()).await?;
        nothing_more(&mut dlq, QUIET).await?;
    }
    Ok(())
}
