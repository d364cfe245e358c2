//! Subscriptions: fan-out with filters, full queue semantics over references, start at now
//! or earliest, restarts, the topic's retention held for them, dead letters and redrive,
//! deletion and bad input.

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_storage::ManualClock;

use super::tests::T0;
use super::topic_tests::{open, spec};
use super::*;
use crate::SkippedRange;
use crate::filter::Filter;
use crate::queue::state::Acked;
use crate::subscription::{SubscriptionSpec, SubscriptionStart};
use crate::topic::{TopicRetention, TopicSpec};

fn sub(filter: &str) -> SubscriptionSpec {
    let mut spec = SubscriptionSpec::new(Name::new("t").unwrap());
    spec.filter = Filter::parse(filter).unwrap();
    spec.delivery.durability = crate::spec::Durability::None;
    spec.delivery.lease = Duration::from_secs(10);
    spec
}

fn event(i: usize, subject: &str) -> OutgoingMessage {
    OutgoingMessage::new(format!("payload-{i}"))
        .with_key(format!("k{}", i % 5))
        .with_header("subject", subject)
        .with_header("n", i.to_string())
}

async fn drain(broker: &Broker, queue: &str) -> Vec<ReceivedMessage> {
    let mut all = Vec::new();
    loop {
        let got = broker.receive(queue, "c", 100, None, None).await.unwrap();
        if got.is_empty() {
            return all;
        }
        for m in &got {
            broker.ack(queue, m.seq, m.token).await.unwrap();
        }
        all.extend(got);
    }
}

fn numbers(got: &[ReceivedMessage]) -> BTreeSet<usize> {
    got.iter()
        .map(|m| m.headers["n"].parse().unwrap())
        .collect()
}

#[tokio::test]
async fn each_subscription_receives_exactly_what_its_filter_takes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(3)).await.unwrap();
    broker.create_subscription("all", sub("")).await.unwrap();
    broker
        .create_subscription("orders", sub("subject ~ orders.*"))
        .await
        .unwrap();
    broker
        .create_subscription(
            "not-eu",
            sub("subject ~ orders.# and not subject ~ orders.eu.#"),
        )
        .await
        .unwrap();
    let subjects = [
        "orders.created",
        "orders.eu.created",
        "payments.done",
        "orders.shipped",
    ];
    let batch: Vec<OutgoingMessage> = (0..40).map(|i| event(i, subjects[i % 4])).collect();
    broker.publish_to_topic("t", batch).await.unwrap();
    let all = drain(&broker, "all").await;
    assert_eq!(numbers(&all), (0..40).collect());
    let orders = drain(&broker, "orders").await;
    let expected: BTreeSet<usize> = (0..40).filter(|i| i % 4 == 0 || i % 4 == 3).collect();
    assert_eq!(numbers(&orders), expected);
    let not_eu = drain(&broker, "not-eu").await;
    assert_eq!(numbers(&not_eu), expected);
    // Deliveries carry the whole message, read from the topic.
    let m = &all[0];
    assert!(m.payload.starts_with(b"payload-"));
    assert!(m.headers.contains_key("subject") && m.key.is_some());
    let info = broker.describe_subscription("orders").unwrap();
    assert_eq!((info.queue.stats.acked, info.not_yet_considered), (20, 0));
}

#[tokio::test]
async fn a_key_shared_subscription_keeps_each_keys_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(4)).await.unwrap();
    let mut keyed = sub("");
    keyed.delivery.ordering = crate::spec::OrderingMode::KeyShared;
    broker.create_subscription("s", keyed).await.unwrap();
    for chunk in 0..4 {
        let batch: Vec<OutgoingMessage> = (chunk * 10..chunk * 10 + 10)
            .map(|i| event(i, "x"))
            .collect();
        broker.publish_to_topic("t", batch).await.unwrap();
    }
    let got = drain(&broker, "s").await;
    assert_eq!(got.len(), 40);
    for key in 0..5 {
        let order: Vec<usize> = got
            .iter()
            .filter(|m| m.key.as_deref() == Some(format!("k{key}").as_bytes()))
            .map(|m| m.headers["n"].parse().unwrap())
            .collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted, "key k{key}");
    }
}

#[tokio::test]
async fn a_subscription_starts_now_or_at_the_earliest_record() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    let before: Vec<OutgoingMessage> = (0..6).map(|i| event(i, "x")).collect();
    broker.publish_to_topic("t", before).await.unwrap();
    broker.create_subscription("now", sub("")).await.unwrap();
    let mut earliest = sub("");
    earliest.start = SubscriptionStart::Earliest;
    broker
        .create_subscription("earliest", earliest)
        .await
        .unwrap();
    let after: Vec<OutgoingMessage> = (6..10).map(|i| event(i, "x")).collect();
    broker.publish_to_topic("t", after).await.unwrap();
    assert_eq!(numbers(&drain(&broker, "now").await), (6..10).collect());
    assert_eq!(
        numbers(&drain(&broker, "earliest").await),
        (0..10).collect()
    );
}

#[tokio::test]
async fn subscriptions_survive_a_reopen_with_their_deliveries_and_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    broker
        .create_subscription("s", sub("subject ~ a.*"))
        .await
        .unwrap();
    let batch: Vec<OutgoingMessage> = (0..10)
        .map(|i| event(i, if i % 2 == 0 { "a.x" } else { "b.x" }))
        .collect();
    broker.publish_to_topic("t", batch).await.unwrap();
    let got = broker.receive("s", "c", 3, None, None).await.unwrap();
    broker.ack("s", got[0].seq, got[0].token).await.unwrap();
    broker.maintain_now(Checkpoint::Always).await.unwrap();
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    let later: Vec<OutgoingMessage> = (10..14).map(|i| event(i, "a.y")).collect();
    broker.publish_to_topic("t", later).await.unwrap();
    // The two unacked deliveries come back once their lease ends; nothing acked does.
    clock.advance(10_000);
    let rest = drain(&broker, "s").await;
    let acked: usize = got[0].headers["n"].parse().unwrap();
    let expected: BTreeSet<usize> = (0..10)
        .filter(|i| i % 2 == 0 && *i != acked)
        .chain(10..14)
        .collect();
    assert_eq!(numbers(&rest), expected);
    assert_eq!(rest.len(), expected.len(), "no duplicates");
}

#[tokio::test]
async fn topic_retention_keeps_what_a_subscription_has_not_settled() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let tiny = TopicSpec {
        retention: TopicRetention {
            max_age: None,
            max_bytes: Some(1),
            ..TopicRetention::default()
        },
        ..spec(1)
    };
    broker.create_topic("t", tiny).await.unwrap();
    broker.create_subscription("s", sub("")).await.unwrap();
    for i in 0..60 {
        let big = OutgoingMessage::new(vec![b'x'; 900]).with_header("n", i.to_string());
        broker.publish_to_topic("t", vec![big]).await.unwrap();
    }
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    let start = |b: &Broker| b.describe_topic("t").unwrap().partitions[0].start_offset;
    assert_eq!(start(&broker), 0, "the subscription holds every record");
    let head = broker.receive("s", "c", 1, None, None).await.unwrap();
    let rest = drain(&broker, "s").await;
    assert_eq!(rest.len(), 59);
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(
        start(&broker),
        0,
        "the unacked head still holds its segment"
    );
    broker.ack("s", head[0].seq, head[0].token).await.unwrap();
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(start(&broker) > 0, "settled: retention deletes");
}

#[tokio::test]
async fn dead_letters_carry_the_whole_message_and_redrive_back_into_the_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    broker.create_subscription("s", sub("")).await.unwrap();
    broker
        .publish_to_topic("t", vec![event(7, "x")])
        .await
        .unwrap();
    let m = broker
        .receive("s", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    broker.reject("s", m.seq, m.token, "bad").await.unwrap();
    let letter = broker
        .receive("s.dlq", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(letter.payload, "payload-7");
    assert_eq!(letter.dead_letter.as_ref().unwrap().origin_queue, "s");
    broker
        .nack(
            "s.dlq",
            letter.seq,
            letter.token,
            Some(Duration::ZERO),
            None,
        )
        .await
        .unwrap();
    let report = broker
        .redrive("s.dlq", RedriveRequest::default())
        .await
        .unwrap();
    assert_eq!(report.moved, 1);
    let again = broker
        .receive("s", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        (again.payload.as_ref(), again.delivery),
        (&b"payload-7"[..], 1)
    );
    assert_eq!(again.headers["n"], "7");
}

#[tokio::test]
async fn fan_out_writes_references_not_copies() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    for i in 0..10 {
        broker
            .create_subscription(&format!("s{i}"), sub(""))
            .await
            .unwrap();
    }
    for _ in 0..20 {
        let batch: Vec<OutgoingMessage> = (0..10)
            .map(|_| OutgoingMessage::new(vec![b'p'; 900]))
            .collect();
        broker.publish_to_topic("t", batch).await.unwrap();
    }
    let topic_bytes = broker.describe_topic("t").unwrap().partitions[0].bytes;
    for i in 0..10 {
        let q = broker.queue(&format!("s{i}")).unwrap();
        let bytes = q.messages.size_bytes();
        assert!(
            bytes * 10 < topic_bytes,
            "subscription s{i} wrote {bytes} bytes for a topic of {topic_bytes}"
        );
        assert_eq!(q.lock().state.size().0, 200);
    }
}

#[tokio::test]
async fn deleting_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    assert!(matches!(
        broker
            .create_subscription("s", SubscriptionSpec::new(Name::new("nope").unwrap()))
            .await,
        Err(BrokerError::TopicNotFound { .. })
    ));
    let mut deduping = sub("");
    deduping.delivery.dedup_window = Duration::from_secs(60);
    assert!(matches!(
        broker.create_subscription("s", deduping).await,
        Err(BrokerError::InvalidSetting { .. })
    ));
    assert!(broker.list_queues().is_empty(), "nothing was created");
    broker.create_subscription("s", sub("")).await.unwrap();
    assert!(matches!(
        broker.delete_topic("t").await,
        Err(BrokerError::TopicHasSubscriptions { .. })
    ));
    broker
        .create_queue("plain", super::tests::spec(3))
        .await
        .unwrap();
    assert!(matches!(
        broker.describe_subscription("plain"),
        Err(BrokerError::NotASubscription { .. })
    ));
    broker.delete_queue("s").await.unwrap();
    broker.delete_queue("s.dlq").await.unwrap();
    broker.delete_topic("t").await.unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.list_queues().len(), 2, "plain and plain.dlq");
}

#[tokio::test]
async fn a_deleted_subscription_still_held_elsewhere_no_longer_counts_for_its_topic() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    broker.create_subscription("s", sub("")).await.unwrap();
    // What a receive waiting on the subscription, or a housekeeping pass, holds while the
    // subscription is deleted.
    let held = broker.queue("s").unwrap();
    broker.delete_queue("s").await.unwrap();
    broker.delete_queue("s.dlq").await.unwrap();
    broker
        .publish_to_topic("t", vec![event(0, "a")])
        .await
        .expect("a publish after the deletion feeds nothing deleted");
    broker
        .delete_topic("t")
        .await
        .expect("no subscription is left on the topic");
    drop(held);
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// (subject, key) of each message; subjects from a small set so filters split them.
    fn messages() -> impl Strategy<Value = Vec<(u8, u8)>> {
        prop::collection::vec((0u8..4, 0u8..6), 1..60)
    }

    const SUBJECTS: [&str; 4] = [
        "orders.created",
        "orders.eu.created",
        "payments.done",
        "audit",
    ];
    const FILTERS: [&str; 3] = [
        "",
        "subject ~ orders.#",
        "not subject ~ orders.* and exists(subject)",
    ];

    fn takes(filter: usize, subject: &str) -> bool {
        match filter {
            0 => true,
            1 => subject.starts_with("orders."),
            _ => subject.split('.').count() != 2 || !subject.starts_with("orders."),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Every subscription receives exactly the messages its filter takes, each once,
        /// per key in publish order, whatever the batches and partitions; and a reopen in
        /// the middle changes none of that.
        #[test]
        fn subscriptions_receive_exactly_their_filtered_set_in_key_order(
            batches in prop::collection::vec(messages(), 1..4),
            partitions in 1u32..5,
            reopen_after in 0usize..4,
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            runtime.block_on(async {
                let dir = tempfile::tempdir().unwrap();
                let clock = ManualClock::new(T0);
                let mut broker = open(dir.path(), &clock).await;
                broker.create_topic("t", spec(partitions)).await.unwrap();
                for (i, filter) in FILTERS.iter().enumerate() {
                    let mut s = sub(filter);
                    s.delivery.ordering = crate::spec::OrderingMode::KeyShared;
                    broker.create_subscription(&format!("s{i}"), s).await.unwrap();
                }
                let mut published: Vec<(usize, &str, u8)> = Vec::new();
                for (b, batch) in batches.iter().enumerate() {
                    if b == reopen_after {
                        drop(broker);
                        broker = open(dir.path(), &clock).await;
                    }
                    let outgoing: Vec<OutgoingMessage> = batch
                        .iter()
                        .map(|&(subject, key)| {
                            let n = published.len();
                            let subject = SUBJECTS[subject as usize];
                            published.push((n, subject, key));
                            OutgoingMessage::new(format!("m{n}"))
                                .with_key(format!("k{key}"))
                                .with_header("subject", subject)
                                .with_header("n", n.to_string())
                        })
                        .collect();
                    broker.publish_to_topic("t", outgoing).await.unwrap();
                }
                for f in 0..FILTERS.len() {
                    let got = drain(&broker, &format!("s{f}")).await;
                    let expected: BTreeSet<usize> = published
                        .iter()
                        .filter(|(_, subject, _)| takes(f, subject))
                        .map(|(n, _, _)| *n)
                        .collect();
                    prop_assert_eq!(got.len(), expected.len(), "s{} got duplicates", f);
                    prop_assert_eq!(numbers(&got), expected);
                    for key in 0..6u8 {
                        let order: Vec<usize> = got
                            .iter()
                            .filter(|m| m.key.as_deref() == Some(format!("k{key}").as_bytes()))
                            .map(|m| m.headers["n"].parse().unwrap())
                            .collect();
                        prop_assert!(order.windows(2).all(|w| w[0] < w[1]), "s{} k{}: {:?}", f, key, order);
                    }
                }
                Ok(())
            })?;
        }
    }
}

#[tokio::test]
async fn an_exclusive_subscription_serves_one_consumer_in_order_and_fails_over() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    let mut exclusive = sub("");
    exclusive.delivery.ordering = crate::spec::OrderingMode::Exclusive;
    broker.create_subscription("s", exclusive).await.unwrap();
    let batch: Vec<OutgoingMessage> = (0..3).map(|i| event(i, "x")).collect();
    broker.publish_to_topic("t", batch).await.unwrap();
    let first = broker.receive("s", "a", 10, None, None).await.unwrap();
    assert_eq!(numbers(&first), BTreeSet::from([0]));
    assert!(
        broker
            .receive("s", "b", 10, None, None)
            .await
            .unwrap()
            .is_empty()
    );
    broker.ack("s", first[0].seq, first[0].token).await.unwrap();
    // a goes quiet; after the lease duration (10 s here) b takes over, in order.
    clock.advance(10_000);
    let taken = broker.receive("s", "b", 10, None, None).await.unwrap();
    assert_eq!(numbers(&taken), BTreeSet::from([1]));
}

#[tokio::test]
async fn retention_that_overrides_subscriptions_takes_their_unsettled_messages_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let tiny = TopicSpec {
        retention: TopicRetention {
            max_age: None,
            max_bytes: Some(1),
            overrides_subscriptions: true,
        },
        ..spec(1)
    };
    broker.create_topic("t", tiny).await.unwrap();
    broker.create_subscription("s", sub("")).await.unwrap();
    for i in 0..60 {
        let big = OutgoingMessage::new(vec![b'x'; 900]).with_header("n", i.to_string());
        broker.publish_to_topic("t", vec![big]).await.unwrap();
    }
    // One in flight, one waiting for its retry, the rest ready: all unsettled.
    let got = broker.receive("s", "c", 2, None, None).await.unwrap();
    broker
        .nack(
            "s",
            got[1].seq,
            got[1].token,
            Some(Duration::from_secs(60)),
            None,
        )
        .await
        .unwrap();
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    let start = broker.describe_topic("t").unwrap().partitions[0].start_offset;
    assert!(start >= 2, "retention deleted past both held messages");

    let check = |broker: &Broker| {
        let info = broker.describe_subscription("s").unwrap();
        assert_eq!(
            info.skipped,
            [SkippedRange {
                partition: 0,
                from: 0,
                to: start,
                dropped: start,
                unread: 0,
            }]
        );
        assert_eq!(info.queue.stats.skipped, start);
    };
    check(&broker);
    assert_eq!(
        broker.ack("s", got[0].seq, got[0].token).await.unwrap(),
        Acked::AlreadySettled,
        "a late ack of a skipped message settles nothing"
    );
    clock.advance(120_000);
    let rest = drain(&broker, "s").await;
    assert_eq!(numbers(&rest), (start as usize..60).collect());
    assert_eq!(rest.len(), 60 - start as usize, "no duplicates");
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    check(&broker);
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    check(&broker);
    assert!(
        drain(&broker, "s").await.is_empty(),
        "nothing skipped comes back"
    );
    broker.delete_queue("s").await.unwrap();
    broker.create_subscription("s", sub("")).await.unwrap();
    assert_eq!(
        broker.describe_subscription("s").unwrap().skipped,
        [],
        "a new subscription of the same name starts clean"
    );
}

/// A checkpoint and retention of a subscription's references run after housekeeping saved
/// its cursors, and more references can be stored and acked in between: a restart that
/// resumed from the older saved cursor, because the checkpoint settled those references or
/// retention deleted them, would reference (and deliver) the acked messages again.
#[tokio::test]
async fn acked_messages_are_not_delivered_again_after_retention_outran_the_saved_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    broker.create_subscription("s", sub("")).await.unwrap();
    for round in 0..2 {
        let batch: Vec<OutgoingMessage> = (round * 5..round * 5 + 5)
            .map(|i| event(i, "a.x"))
            .collect();
        broker.publish_to_topic("t", batch).await.unwrap();
        assert_eq!(drain(&broker, "s").await.len(), 5);
        if round == 0 {
            // Saves the cursors (covering the first five), then applies retention.
            broker.maintain_now(Checkpoint::Always).await.unwrap();
        }
    }
    // Retention again, with no newer save of the cursors: the second five's references
    // are settled, but no saved cursor covers them.
    let queue = broker.queue("s").unwrap();
    queue.checkpoint(T0).await.unwrap();
    queue.retain_messages(T0).unwrap();
    drop(queue);
    drop(broker);

    let broker = open(dir.path(), &clock).await;
    clock.advance(60_000);
    let again = drain(&broker, "s").await;
    assert!(
        again.is_empty(),
        "acked messages came back: {:?}",
        numbers(&again)
    );
}
