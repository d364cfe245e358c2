//! Queues attached to topics by links: several links per queue beside direct publishes,
//! filters of a registered evaluator (also in catch-up after a reopen), detach and what it
//! pins, retention, dead letters and redrive of referenced messages, deletion, no copies.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ferry_storage::ManualClock;

use super::tests::T0;
use super::topic_tests::{small_limits, spec};
use super::*;
use crate::link::{FilterEvaluator, FilterEvaluators, LinkFilter, LinkSpec, MessageFilter};
use crate::message::Message;
use crate::record::{LINK, LINK_LABEL, LINK_TOPIC};
use crate::spec::QueueSpec;
use crate::subscription::SubscriptionStart;
use crate::topic::{TopicRetention, TopicSpec};

/// A filter kind the broker does not know: the payload contains the policy's text.
struct PayloadContains;
struct Contains(String);

impl MessageFilter for Contains {
    fn matches(&self, message: &Message) -> bool {
        std::str::from_utf8(&message.payload).is_ok_and(|p| p.contains(&self.0))
    }
}

impl FilterEvaluator for PayloadContains {
    fn compile(&self, policy: &str) -> std::result::Result<Arc<dyn MessageFilter>, String> {
        if policy.is_empty() {
            return Err("an empty policy".into());
        }
        Ok(Arc::new(Contains(policy.to_owned())))
    }
}

fn config(clock: &ManualClock, with_contains: bool) -> BrokerConfig {
    let mut filter_evaluators = FilterEvaluators::default();
    if with_contains {
        filter_evaluators.register("contains", Arc::new(PayloadContains));
    }
    BrokerConfig {
        clock: Arc::new(clock.clone()),
        background_timers: false,
        seed: Some(7),
        message_segment_bytes: 1,
        limits: small_limits(),
        filter_evaluators,
        ..BrokerConfig::default()
    }
}

async fn open(dir: &std::path::Path, clock: &ManualClock) -> Broker {
    Broker::open(dir, config(clock, true)).await.unwrap()
}

fn queue_spec() -> QueueSpec {
    QueueSpec {
        durability: crate::spec::Durability::None,
        lease: Duration::from_secs(10),
        ..QueueSpec::default()
    }
}

fn link(topic: &str, kind: &str, policy: &str, label: &str) -> LinkSpec {
    LinkSpec {
        topic: Name::new(topic).unwrap(),
        filter: LinkFilter {
            kind: kind.into(),
            policy: policy.into(),
        },
        start: SubscriptionStart::Now,
        label: label.into(),
        delay: Duration::ZERO,
    }
}

fn all(topic: &str) -> LinkSpec {
    link(topic, crate::link::FERRY_FILTER, "", "")
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

/// (link or "direct", payload), sorted.
fn origins(got: &[ReceivedMessage]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = got
        .iter()
        .map(|m| {
            let via = m.headers.get(LINK).cloned().unwrap_or("direct".into());
            (via, String::from_utf8(m.payload.to_vec()).unwrap())
        })
        .collect();
    out.sort();
    out
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = items
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn a_queue_linked_to_two_topics_and_twice_to_one_receives_each_beside_direct_messages() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("orders", spec(2)).await.unwrap();
    broker.create_topic("refunds", spec(1)).await.unwrap();
    broker.create_queue("q", queue_spec()).await.unwrap();
    broker
        .attach_queue("q", "every-order", all("orders"))
        .await
        .unwrap();
    broker
        .attach_queue("q", "eu-orders", link("orders", "contains", "eu", "L2"))
        .await
        .unwrap();
    broker
        .attach_queue("q", "refunds", all("refunds"))
        .await
        .unwrap();
    broker
        .publish("q", OutgoingMessage::new("direct-1"))
        .await
        .unwrap();
    let orders = ["order-eu-1", "order-us-2", "order-eu-3"].map(OutgoingMessage::new);
    broker
        .publish_to_topic("orders", orders.to_vec())
        .await
        .unwrap();
    broker
        .publish_to_topic("refunds", vec![OutgoingMessage::new("refund-1")])
        .await
        .unwrap();
    let got = drain(&broker, "q").await;
    assert_eq!(
        origins(&got),
        pairs(&[
            ("direct", "direct-1"),
            ("every-order", "order-eu-1"),
            ("every-order", "order-us-2"),
            ("every-order", "order-eu-3"),
            ("eu-orders", "order-eu-1"),
            ("eu-orders", "order-eu-3"),
            ("refunds", "refund-1"),
        ])
    );
    let eu = got
        .iter()
        .find(|m| m.headers.get(LINK).map(String::as_str) == Some("eu-orders"))
        .unwrap();
    assert_eq!(eu.headers[LINK_TOPIC], "orders");
    assert_eq!(eu.headers[LINK_LABEL], "L2");
    let links = broker.queue_links("q").unwrap();
    let names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["eu-orders", "every-order", "refunds"]);
    assert!(links.iter().all(|l| l.pending == 0 && !l.detached));
    // A second link of the same name is refused, and so is an unknown filter kind or a
    // policy its evaluator refuses; none of them is stored.
    assert!(matches!(
        broker.attach_queue("q", "refunds", all("orders")).await,
        Err(BrokerError::LinkExists { .. })
    ));
    assert!(matches!(
        broker
            .attach_queue("q", "x", link("orders", "sns", "{}", ""))
            .await,
        Err(BrokerError::UnknownFilterEvaluator { .. })
    ));
    assert!(matches!(
        broker
            .attach_queue("q", "x", link("orders", "contains", "", ""))
            .await,
        Err(BrokerError::InvalidFilterPolicy { .. })
    ));
    assert_eq!(broker.queue_links("q").unwrap().len(), 3);
}

#[tokio::test]
async fn after_a_crash_before_the_references_catch_up_filters_with_the_registered_evaluator() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    broker.create_queue("q", queue_spec()).await.unwrap();
    broker
        .attach_queue("q", "eu", link("t", "contains", "eu", ""))
        .await
        .unwrap();
    broker
        .publish_to_topic("t", vec![OutgoingMessage::new("eu-before")])
        .await
        .unwrap();
    // The crash window: records durable in the topic, their references never written —
    // the link is taken off the topic's feed, so the publishes below reach only the topic.
    let queue = broker.queue("q").unwrap();
    let taken = queue.attached_link(&Name::new("eu").unwrap()).unwrap();
    taken.topic.fanout.remove(&taken);
    let batch = ["eu-1", "us-2", "eu-3", "us-4"].map(OutgoingMessage::new);
    broker.publish_to_topic("t", batch.to_vec()).await.unwrap();
    assert_eq!(broker.queue_links("q").unwrap()[0].not_yet_considered, 4);
    drop((queue, taken, broker));

    // Without the evaluator the open fails, naming the missing kind: never a pass-all.
    match Broker::open(dir.path(), config(&clock, false)).await {
        Err(BrokerError::UnknownFilterEvaluator { kind }) => assert_eq!(kind, "contains"),
        other => panic!("expected UnknownFilterEvaluator, got {other:?}"),
    }
    let broker = open(dir.path(), &clock).await;
    // The open issues the catch-up's references; they are tracked once durable.
    for _ in 0..200 {
        if broker.queue_links("q").unwrap()[0].pending == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = drain(&broker, "q").await;
    assert_eq!(
        origins(&got),
        pairs(&[("eu", "eu-before"), ("eu", "eu-1"), ("eu", "eu-3")])
    );
    assert_eq!(broker.queue_links("q").unwrap()[0].not_yet_considered, 0);
}

#[tokio::test]
async fn detach_stops_the_feed_keeps_what_was_delivered_pinned_then_forgets_the_link() {
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
    broker.create_queue("q", queue_spec()).await.unwrap();
    broker.attach_queue("q", "a", all("t")).await.unwrap();
    for i in 0..60 {
        let big = OutgoingMessage::new(format!("{i:03}").repeat(300));
        broker.publish_to_topic("t", vec![big]).await.unwrap();
    }
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    let start = |b: &Broker| b.describe_topic("t").unwrap().partitions[0].start_offset;
    assert_eq!(start(&broker), 0, "the link pins every unsettled record");
    let head = broker.receive("q", "c", 1, None, None).await.unwrap();
    broker.detach_queue("q", "a").await.unwrap();
    assert!(matches!(
        broker.detach_queue("q", "a").await,
        Err(BrokerError::LinkNotFound { .. })
    ));
    broker
        .publish_to_topic("t", vec![OutgoingMessage::new("after")])
        .await
        .unwrap();
    let info = broker.queue_links("q").unwrap();
    assert_eq!((info[0].detached, info[0].pending), (true, 60));
    // The head is in flight: the topic cannot be deleted under it.
    assert!(matches!(
        broker.delete_topic("t").await,
        Err(BrokerError::TopicReferencedInFlight { .. })
    ));
    let rest = drain(&broker, "q").await;
    assert_eq!(rest.len(), 59, "delivered before the detach, not after");
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(start(&broker), 0, "the unacked head still holds its record");
    broker.ack("q", head[0].seq, head[0].token).await.unwrap();
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(start(&broker) > 0, "all settled: retention deletes");
    assert!(broker.queue_links("q").unwrap().is_empty(), "forgotten");
    drop(broker);
    // Reopens with settled references of a forgotten link in its log; a new link gets a
    // fresh id and is not credited with them.
    let broker = open(dir.path(), &clock).await;
    broker.attach_queue("q", "a", all("t")).await.unwrap();
    broker
        .publish_to_topic("t", vec![OutgoingMessage::new("new")])
        .await
        .unwrap();
    let got = drain(&broker, "q").await;
    assert_eq!(origins(&got), pairs(&[("a", "new")]));
    broker.detach_queue("q", "a").await.unwrap();
    broker.delete_topic("t").await.unwrap();
}

#[tokio::test]
async fn a_referenced_message_dead_letters_as_a_copy_that_keeps_its_origin_and_redrives() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    broker.create_queue("q", queue_spec()).await.unwrap();
    broker
        .attach_queue("q", "a", link("t", "ferry", "", "label-a"))
        .await
        .unwrap();
    broker
        .publish_to_topic(
            "t",
            vec![OutgoingMessage::new("hello").with_header("n", "7")],
        )
        .await
        .unwrap();
    let m = broker
        .receive("q", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    broker.reject("q", m.seq, m.token, "bad").await.unwrap();
    assert_eq!(broker.queue_links("q").unwrap()[0].pending, 0);
    let letter = broker
        .receive("q.dlq", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(letter.payload, "hello");
    assert_eq!(
        (
            letter.headers[LINK].as_str(),
            letter.headers[LINK_LABEL].as_str()
        ),
        ("a", "label-a")
    );
    broker
        .nack(
            "q.dlq",
            letter.seq,
            letter.token,
            Some(Duration::ZERO),
            None,
        )
        .await
        .unwrap();
    let report = broker
        .redrive("q.dlq", RedriveRequest::default())
        .await
        .unwrap();
    assert_eq!(report.moved, 1);
    let again = broker
        .receive("q", "c", 1, None, None)
        .await
        .unwrap()
        .remove(0);
    assert_eq!((again.payload.as_ref(), again.delivery), (&b"hello"[..], 1));
    assert_eq!(again.headers["n"], "7");
    assert_eq!(again.headers[LINK], "a");
}

#[tokio::test]
async fn four_linked_queues_store_one_payload_and_four_references() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let config = BrokerConfig {
        limits: Limits::default(),
        ..config(&clock, false)
    };
    let broker = Broker::open(dir.path(), config).await.unwrap();
    broker.create_topic("t", spec(1)).await.unwrap();
    for i in 0..4 {
        let q = format!("q{i}");
        broker.create_queue(&q, queue_spec()).await.unwrap();
        broker.attach_queue(&q, "t", all("t")).await.unwrap();
    }
    let payload = vec![b'p'; 200 << 10];
    broker
        .publish_to_topic("t", vec![OutgoingMessage::new(payload)])
        .await
        .unwrap();
    let topic_bytes = broker.describe_topic("t").unwrap().partitions[0].bytes;
    assert!(topic_bytes >= 200 << 10);
    let mut queue_bytes = 0;
    for i in 0..4 {
        let q = broker.queue(&format!("q{i}")).unwrap();
        queue_bytes += q.messages.size_bytes();
        assert_eq!(q.lock().state.size().0, 1);
    }
    assert!(
        queue_bytes < 4 << 10,
        "four queues wrote {queue_bytes} bytes for one payload of {topic_bytes}"
    );
    for i in 0..4 {
        let got = drain(&broker, &format!("q{i}")).await;
        assert_eq!(got[0].payload.len(), 200 << 10);
    }
}

#[tokio::test]
async fn deleting_a_linked_queue_deletes_its_links_and_frees_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    broker.create_queue("q", queue_spec()).await.unwrap();
    broker.attach_queue("q", "a", all("t")).await.unwrap();
    broker.attach_queue("q", "b", all("t")).await.unwrap();
    broker
        .publish_to_topic("t", vec![OutgoingMessage::new("x")])
        .await
        .unwrap();
    assert!(matches!(
        broker.delete_topic("t").await,
        Err(BrokerError::TopicHasSubscriptions { .. })
    ));
    broker.delete_queue("q").await.unwrap();
    broker.delete_topic("t").await.unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    broker.create_queue("q", queue_spec()).await.unwrap();
    assert!(broker.queue_links("q").unwrap().is_empty());
    let ids: BTreeSet<String> = broker
        .inner
        .meta
        .lock()
        .unwrap()
        .scan_prefix("link")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(ids.is_empty(), "left behind: {ids:?}");
}

#[tokio::test]
async fn deleting_a_topic_copies_what_detached_links_still_reference_into_their_queues() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(2)).await.unwrap();
    broker.create_queue("q", queue_spec()).await.unwrap();
    broker
        .attach_queue("q", "a", link("t", "ferry", "", "la"))
        .await
        .unwrap();
    let batch: Vec<OutgoingMessage> = (0..5)
        .map(|i| OutgoingMessage::new(format!("m{i}")).with_key(format!("k{i}")))
        .collect();
    broker.publish_to_topic("t", batch).await.unwrap();
    assert!(matches!(
        broker.delete_topic("t").await,
        Err(BrokerError::TopicHasSubscriptions { .. })
    ));
    broker.detach_queue("q", "a").await.unwrap();
    broker.delete_topic("t").await.unwrap();
    assert!(broker.queue_links("q").unwrap().is_empty());
    drop(broker);
    // The copies outlive the topic and a reopen.
    let broker = open(dir.path(), &clock).await;
    let got = drain(&broker, "q").await;
    let expected: Vec<(&str, &str)> = vec![
        ("a", "m0"),
        ("a", "m1"),
        ("a", "m2"),
        ("a", "m3"),
        ("a", "m4"),
    ];
    assert_eq!(origins(&got), pairs(&expected));
    assert!(got.iter().all(|m| m.headers[LINK_LABEL] == "la"));
}

#[tokio::test]
async fn a_links_delay_holds_its_messages_back_and_direct_ones_not() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", spec(1)).await.unwrap();
    broker.create_queue("q", queue_spec()).await.unwrap();
    let delayed = LinkSpec {
        delay: Duration::from_secs(30),
        ..all("t")
    };
    broker.attach_queue("q", "slow", delayed).await.unwrap();
    broker
        .publish_to_topic("t", vec![OutgoingMessage::new("held")])
        .await
        .unwrap();
    broker
        .publish("q", OutgoingMessage::new("direct"))
        .await
        .unwrap();
    assert_eq!(
        origins(&drain(&broker, "q").await),
        pairs(&[("direct", "direct")])
    );
    clock.advance(30_000);
    broker.tick_now().await.unwrap();
    assert_eq!(
        origins(&drain(&broker, "q").await),
        pairs(&[("slow", "held")])
    );
}
