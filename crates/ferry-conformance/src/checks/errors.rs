//! The same failure is the same [`ferry::Error`] on every transport: an application written
//! against one URL handles a missing queue, a conflicting declaration, a stale ack, a bad
//! name, an oversized payload and a full queue the same way on every other. Each check
//! drives one failing operation; the embedded and server transports derive their answers
//! from the broker's one error classification, the others from their engine's errors.

use ferry::{Destination, Error, Ferry, Message, QueueDecl, Source, SubscriptionDecl, TopicDecl};

use super::{QUIET, WAIT};
use crate::Target;
use crate::support::{
    CheckResult, Context, OneLeased, consumer, ensure, fresh_name, next, nothing_more, one_leased,
    queue, quick_policy,
};

/// An error's variant name, for messages that say what came instead.
fn variant(result: &Result<impl std::fmt::Debug, Error>) -> String {
    match result {
        Ok(value) => format!("success ({value:?})"),
        Err(e) => format!("{e:?}"),
    }
}

/// The name of `e`'s variant.
fn kind_of(e: &Error) -> &'static str {
    match e {
        Error::NotFound { .. } => "NotFound",
        Error::Conflict { .. } => "Conflict",
        Error::Invalid { .. } => "Invalid",
        _ => "another error",
    }
}

/// `result` failed as `kind`, in exactly the words `expected`: one failure reads the same on
/// every transport. `doing` names the call for the failure's message.
fn refused_as<T>(
    result: &Result<T, Error>,
    kind: &str,
    expected: &str,
    doing: &str,
) -> CheckResult {
    match result {
        Err(e) if kind_of(e) == kind => {
            let said = e.to_string();
            ensure!(said == expected, "{doing} said {said:?}, not {expected:?}");
            Ok(())
        }
        Err(e) => Err(format!("{doing} answered {e:?}, not {kind}")),
        Ok(_) => Err(format!("{doing} succeeded, not {kind}")),
    }
}

pub(super) async fn a_missing_queue_is_not_found(ferry: &Ferry, _: &Target) -> CheckResult {
    let name = fresh_name("never-declared");
    // One message for one failure: an application that logs or shows it reads the same
    // words whatever the URL says.
    let expected = format!("queue `{name}` does not exist");
    let consumed = ferry
        .consumer(Source::queue(&name), Default::default())
        .await;
    refused_as(
        &consumed,
        "NotFound",
        &expected,
        "consuming a queue never declared",
    )?;
    let sent = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("to nowhere"))
        .await;
    refused_as(
        &sent,
        "NotFound",
        &expected,
        "publishing to a queue never declared",
    )?;
    Ok(())
}

pub(super) async fn declaring_again_with_other_settings_is_a_conflict(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let name = queue(ferry, "redeclare", |q| q.delivery.max_deliveries = 3).await?;
    let same = QueueDecl::new(&name).delivery(ferry::DeliveryPolicy {
        max_deliveries: 3,
        ..quick_policy()
    });
    ferry
        .declare_queue(&same)
        .await
        .during("declaring again with the same settings")?;
    let other = QueueDecl::new(&name).delivery(ferry::DeliveryPolicy {
        max_deliveries: 4,
        ..quick_policy()
    });
    let redeclared = ferry.declare_queue(&other).await;
    // The field that differs, with both values, in the same words on every transport.
    let expected = format!(
        "queue `{name}` conflicts with what exists: max_deliveries: declared 4, existing 3"
    );
    refused_as(
        &redeclared,
        "Conflict",
        &expected,
        "declaring a queue again with other settings",
    )?;
    Ok(())
}

pub(super) async fn a_dedup_id_on_a_queue_without_a_window_is_invalid_and_stores_nothing(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let name = queue(ferry, "windowless", |q| q.dedup_window = None).await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    let refused = publisher
        .send_batch(vec![
            Message::new("plain"),
            Message::new("deduplicated")
                .with_id("01JC000000000000000000DEDP")
                .with_dedup_id("order-7"),
        ])
        .await;
    // A dedup id nothing would act on is refused rather than silently kept, in the same
    // words on every transport.
    let expected = format!(
        "invalid dedup id of message 01JC000000000000000000DEDP: queue `{name}` was declared \
         without a dedup window, so a dedup id would do nothing there; publish without one, or \
         declare the queue with a dedup window"
    );
    refused_as(
        &refused,
        "Invalid",
        &expected,
        "a dedup id on a queue without a window",
    )?;
    // The whole batch was refused: the message without a dedup id was not stored either.
    let id = publisher
        .send(Message::new("after the refusal"))
        .await
        .during("publish without a dedup id")?;
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    let d = next(&mut c, WAIT).await?;
    ensure!(
        d.id == id,
        "the first delivery was {:?}, not the message published after the refusal",
        d.payload
    );
    d.ack().await.during("ack")?;
    nothing_more(&mut c, QUIET).await?;
    c.close().await.during("close")
}

pub(super) async fn a_subscription_declared_on_another_topic_is_a_conflict(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let first = fresh_name("first-topic");
    let second = fresh_name("second-topic");
    for topic in [&first, &second] {
        ferry
            .declare_topic(&TopicDecl::new(topic))
            .await
            .during("declare topic")?;
    }
    let name = format!("{first}-s");
    let decl = SubscriptionDecl::new(&first, &name).delivery(quick_policy());
    ferry
        .declare_subscription(&decl)
        .await
        .during("declare subscription")?;
    let elsewhere = SubscriptionDecl::new(&second, &name).delivery(quick_policy());
    let redeclared = ferry.declare_subscription(&elsewhere).await;
    let expected = format!(
        "subscription `{name}` conflicts with what exists: topic: declared `{second}`, existing `{first}`"
    );
    let outcome = refused_as(
        &redeclared,
        "Conflict",
        &expected,
        "declaring a subscription again on another topic",
    );
    ferry
        .delete(&Source::subscription(&first, &name))
        .await
        .during("delete subscription")?;
    for topic in [&first, &second] {
        ferry.delete_topic(topic).await.during("delete topic")?;
    }
    outcome
}

pub(super) async fn deleting_a_topic_with_subscriptions_is_a_conflict(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let topic = fresh_name("busy-topic");
    ferry
        .declare_topic(&TopicDecl::new(&topic))
        .await
        .during("declare topic")?;
    let decl = SubscriptionDecl::new(&topic, format!("{topic}-s")).delivery(quick_policy());
    ferry
        .declare_subscription(&decl)
        .await
        .during("declare subscription")?;
    let deleted = ferry.delete_topic(&topic).await;
    ensure!(
        matches!(deleted, Err(Error::Conflict { .. })),
        "deleting a topic that has a subscription answered {}, not Conflict",
        variant(&deleted)
    );
    // The refusal changed nothing: the subscription still gets what the topic takes.
    let id = ferry
        .publisher(Destination::topic(&topic))
        .send(Message::new("after the refusal"))
        .await
        .during("publish after the refused delete")?;
    let source = Source::subscription(&topic, &decl.name);
    let mut c = consumer(ferry, source.clone()).await?;
    let d = next(&mut c, WAIT).await?;
    ensure!(d.id == id, "the subscription got another message");
    d.ack().await.during("ack")?;
    c.close().await.during("close")?;
    ferry.delete(&source).await.during("delete subscription")?;
    ferry
        .delete_topic(&topic)
        .await
        .during("delete the topic once it has no subscription")
}

pub(super) async fn settling_a_lease_taken_over_is_not_held(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let OneLeased {
        first: _first,
        mut second,
        held,
        ..
    } = one_leased(ferry, "stale-ack", "slow").await?;
    // The first consumer's lease runs out; the second takes the message over and settles it.
    let taken_over = next(&mut second, WAIT).await?;
    taken_over
        .ack()
        .await
        .during("ack by the second consumer")?;
    let late = held.reject("too late").await;
    ensure!(
        matches!(late, Err(Error::NotHeld { .. })),
        "rejecting a delivery whose lease ran out and whose message another consumer acked \
         answered {}, not NotHeld",
        variant(&late)
    );
    nothing_more(&mut second, QUIET).await
}

pub(super) async fn an_invalid_name_is_invalid(ferry: &Ferry, _: &Target) -> CheckResult {
    for bad in ["", "has space", "semi;colon", "dot..dot"] {
        let declared = ferry
            .declare_queue(&QueueDecl::new(bad).delivery(quick_policy()))
            .await;
        ensure!(
            matches!(declared, Err(Error::Invalid { .. })),
            "declaring a queue named {bad:?} answered {}, not Invalid",
            variant(&declared)
        );
    }
    Ok(())
}

/// Larger than every engine's default limit that has one (the broker's and NATS's are 1 MiB).
const OVERSIZED: usize = 2 * 1024 * 1024;

pub(super) async fn an_oversized_payload_is_invalid_where_refused(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let name = queue(ferry, "oversized", |_| {}).await?;
    let sent = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new(vec![b'x'; OVERSIZED]))
        .await;
    match sent {
        // Engines without a limit this low store it; that is their right.
        Ok(_) => Ok(()),
        Err(Error::Invalid { .. }) => {
            // Nothing was stored.
            let mut c = consumer(ferry, Source::queue(&name)).await?;
            nothing_more(&mut c, QUIET).await
        }
        Err(e) => Err(format!(
            "a {OVERSIZED}-byte payload was refused as {e:?}, not Invalid"
        )),
    }
}

pub(super) async fn a_full_queue_refuses_with_full(ferry: &Ferry, _: &Target) -> CheckResult {
    let name = fresh_name("full");
    let decl = QueueDecl {
        max_length: Some(2),
        ..QueueDecl::new(&name).delivery(quick_policy())
    };
    ferry.declare_queue(&decl).await.during("declare")?;
    let publisher = ferry.publisher(Destination::queue(&name));
    for i in 0..2 {
        publisher
            .send(Message::new(format!("{i}")))
            .await
            .during("publish within the limit")?;
    }
    let over = publisher.send(Message::new("one too many")).await;
    ensure!(
        matches!(over, Err(Error::Full { .. })),
        "publishing past max_length answered {}, not Full",
        variant(&over)
    );
    ferry.delete(&Source::queue(&name)).await.during("delete")
}
