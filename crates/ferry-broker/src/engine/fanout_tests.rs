//! Fan-out to subscriptions: one reference append per subscription per publish call, the
//! per-partition order of references under concurrent publishers, and data dirs holding
//! references in the text form written before the binary one.

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_storage::{Log, LogConfig, ManualClock};

use super::tests::T0;
use super::topic_tests::{open, spec};
use super::*;
use crate::subscription::{SubscriptionSpec, TopicRef, text_ref_record};

fn sub() -> SubscriptionSpec {
    let mut spec = SubscriptionSpec::new(Name::new("t").unwrap());
    spec.delivery.durability = crate::spec::Durability::None;
    spec.delivery.lease = Duration::from_secs(10);
    spec
}

fn keyed(i: usize) -> OutgoingMessage {
    OutgoingMessage::new(format!("payload-{i}"))
        .with_key(format!("k{i}"))
        .with_header("n", i.to_string())
}

/// Reference appends to every queue log so far (the stats are shared by the queues).
fn queue_appends(broker: &Broker, queue: &str) -> u64 {
    broker
        .queue(queue)
        .unwrap()
        .messages
        .stats()
        .commit_records
        .count()
}

/// The topic positions a queue's log references, in log order.
fn references_in_log(broker: &Broker, queue: &str) -> Vec<TopicRef> {
    let queue = broker.queue(queue).unwrap();
    let mut refs = Vec::new();
    let mut next = queue.messages.start_offset();
    while next < queue.messages.end_offset() {
        let records = queue.messages.read(next, 1 << 20).unwrap();
        next = records.last().unwrap().offset + 1;
        for record in records {
            refs.push(queue.decode(record).unwrap().1.expect("a reference"));
        }
    }
    refs
}

#[tokio::test]
async fn a_publish_over_every_partition_costs_each_subscription_one_reference_append() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(16)).await.unwrap();
    for s in ["a", "b", "c"] {
        broker.create_subscription(s, sub()).await.unwrap();
    }
    for call in 0..5 {
        let before = queue_appends(&broker, "a");
        let batch: Vec<OutgoingMessage> = (0..64).map(|i| keyed(call * 64 + i)).collect();
        let positions = broker.publish_to_topic("t", batch).await.unwrap();
        let partitions: std::collections::BTreeSet<u32> =
            positions.iter().map(|p| p.partition).collect();
        assert!(partitions.len() > 8, "the batch spans the partitions");
        assert_eq!(
            queue_appends(&broker, "a") - before,
            3,
            "one append per subscription"
        );
    }
    for s in ["a", "b", "c"] {
        let info = broker.describe_subscription(s).unwrap();
        assert_eq!(info.not_yet_considered, 0);
        assert_eq!(references_in_log(&broker, s).len(), 5 * 64);
    }
}

#[tokio::test]
async fn concurrent_publish_calls_keep_each_partitions_reference_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(16)).await.unwrap();
    broker.create_subscription("s", sub()).await.unwrap();
    let mut tasks = Vec::new();
    for publisher in 0..4 {
        let broker = broker.clone();
        tasks.push(tokio::spawn(async move {
            for call in 0..25 {
                // Several calls in flight per publisher: their appends and flushes overlap.
                let pending: Vec<_> = (0..3)
                    .map(|k| {
                        let batch = (0..16)
                            .map(|i| keyed(((publisher * 25 + call) * 3 + k) * 16 + i))
                            .collect();
                        broker.begin_publish_to_topic("t", batch).unwrap()
                    })
                    .collect();
                for p in pending {
                    p.durable().await.unwrap();
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let refs = references_in_log(&broker, "s");
    assert_eq!(refs.len(), 4 * 25 * 3 * 16);
    let mut next: BTreeMap<u32, u64> = BTreeMap::new();
    for r in refs {
        let expected = next.entry(r.partition).or_insert(0);
        assert_eq!(
            r.offset, *expected,
            "partition {} out of order",
            r.partition
        );
        *expected += 1;
    }
    for (p, end) in next {
        assert_eq!(
            end,
            broker.describe_topic("t").unwrap().partitions[p as usize].end_offset
        );
    }
}

#[tokio::test]
async fn a_data_dir_with_references_in_the_text_form_still_delivers_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    let old: Vec<OutgoingMessage> = (0..10).map(keyed).collect();
    broker.publish_to_topic("t", old).await.unwrap();
    // The subscription starts after them; the references written below are what a
    // broker writing the text form would have left for it.
    broker.create_subscription("s", sub()).await.unwrap();
    let mut text_refs = Vec::new();
    for p in 0..2 {
        for record in super::topic_tests::read_all(&broker, "t", p) {
            let at = TopicRef {
                link: 0,
                partition: p,
                offset: record.offset,
                size: super::queue::message_size(&record.message),
            };
            text_refs.push(text_ref_record(&record.message, at));
        }
    }
    let log_dir = Queue::dir(dir.path(), &Name::new("s").unwrap()).join("messages");
    drop(broker);
    let log = Log::open(&log_dir, LogConfig::default()).unwrap();
    log.append(text_refs).unwrap();
    log.close().unwrap();

    let broker = open(dir.path(), &clock).await;
    let new: Vec<OutgoingMessage> = (10..14).map(keyed).collect();
    broker.publish_to_topic("t", new).await.unwrap();
    let queue = broker.queue("s").unwrap();
    let forms: Vec<&str> = queue
        .messages
        .read(0, 1 << 20)
        .unwrap()
        .iter()
        .map(|r| std::str::from_utf8(&r.headers[0].0).unwrap().to_owned())
        .map(|name| match name.as_str() {
            "ferry-topic-ref" => "text",
            "ferry-ref" => "binary",
            _ => "other",
        })
        .collect();
    assert_eq!(forms, [["text"; 10].as_slice(), &["binary"; 4]].concat());
    let mut got = BTreeMap::new();
    loop {
        let batch = broker.receive("s", "c", 100, None, None).await.unwrap();
        if batch.is_empty() {
            break;
        }
        for m in batch {
            broker.ack("s", m.seq, m.token).await.unwrap();
            let n: usize = m.headers["n"].parse().unwrap();
            assert_eq!(m.payload, format!("payload-{n}").as_bytes());
            assert_eq!(m.key.as_deref(), Some(format!("k{n}").as_bytes()));
            assert!(got.insert(n, ()).is_none(), "{n} delivered twice");
        }
    }
    assert_eq!(
        got.into_keys().collect::<Vec<_>>(),
        (0..14).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn publishes_in_flight_while_their_subscription_is_deleted_still_return() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(16)).await.unwrap();
    broker.create_subscription("gone", sub()).await.unwrap();
    broker.create_subscription("kept", sub()).await.unwrap();
    // Calls in flight whose references are staged, flushed or not yet offered when the
    // subscription goes: each must still be answered.
    let pending: Vec<_> = (0..8)
        .map(|call| {
            let batch = (0..32).map(|i| keyed(call * 32 + i)).collect();
            broker.begin_publish_to_topic("t", batch).unwrap()
        })
        .collect();
    broker.delete_queue("gone").await.unwrap();
    for p in pending {
        tokio::time::timeout(Duration::from_secs(10), p.durable())
            .await
            .expect("the publish is answered")
            .unwrap();
    }
    assert_eq!(references_in_log(&broker, "kept").len(), 8 * 32);
}
