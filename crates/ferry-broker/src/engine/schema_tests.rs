//! Schema requirements at publish: every publish entry point of queues and topics asks the
//! broker's payload validator before anything is stored, a batch with one refused message
//! stores nothing, the requirement survives a reopen, and a broker opened without a
//! validator refuses rather than store unchecked data.

use std::path::Path;

use ferry_storage::ManualClock;

use super::tests::{T0, spec};
use super::*;
use crate::error::ErrorKind;
use crate::schema_requirement::{PayloadValidator, SchemaRejection};
use crate::spec::QueueSpec;
use crate::topic::{Position, TopicSpec};

/// Accepts payloads that start with `ok` for subject `orders-value`; refuses the rest,
/// naming the field `order.id`.
#[derive(Debug)]
struct StartsWithOk;

impl PayloadValidator for StartsWithOk {
    fn validate(
        &self,
        subject: &str,
        message: &OutgoingMessage,
    ) -> std::result::Result<(), SchemaRejection> {
        if subject == "orders-value" && message.payload.starts_with(b"ok") {
            return Ok(());
        }
        Err(SchemaRejection {
            field: "order.id".to_owned(),
            reason: format!("expected a long for subject {subject}"),
        })
    }
}

async fn open_with(dir: &Path, clock: &ManualClock, validated: bool) -> Broker {
    let config = BrokerConfig {
        clock: Arc::new(clock.clone()),
        background_timers: false,
        seed: Some(7),
        payload_validator: validated.then(|| Arc::new(StartsWithOk) as Arc<dyn PayloadValidator>),
        ..BrokerConfig::default()
    };
    Broker::open(dir, config).await.unwrap()
}

fn requiring(subject: &str) -> QueueSpec {
    QueueSpec {
        schema_subject: Some(subject.to_owned()),
        ..spec(3)
    }
}

fn topic_requiring(subject: &str, partitions: u32) -> TopicSpec {
    TopicSpec {
        schema_subject: Some(subject.to_owned()),
        ..TopicSpec::with_partitions(partitions)
    }
}

fn assert_violation(error: &BrokerError) {
    assert!(
        matches!(error, BrokerError::SchemaViolation { subject, field, .. }
            if subject == "orders-value" && field == "order.id"),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::SchemaViolation);
    assert!(error.to_string().contains("field `order.id`"), "{error}");
}

fn topic_end(broker: &Broker, topic: &str) -> u64 {
    let info = broker.describe_topic(topic).unwrap();
    info.partitions.iter().map(|p| p.end_offset).sum()
}

#[tokio::test]
async fn a_valid_message_is_stored_and_an_invalid_one_refused_with_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open_with(dir.path(), &clock, true).await;
    broker
        .create_queue("orders", requiring("orders-value"))
        .await
        .unwrap();
    broker.create_queue("free-form", spec(3)).await.unwrap();
    // The schema id header a producer names its schema with is stored and delivered.
    broker
        .publish(
            "orders",
            OutgoingMessage::new("ok 1").with_header(crate::header::SCHEMA_ID, "3"),
        )
        .await
        .unwrap();
    let refused = broker
        .publish("orders", OutgoingMessage::new("garbage"))
        .await
        .unwrap_err();
    assert_violation(&refused);
    assert_eq!(broker.describe_queue("orders").unwrap().stats.next_seq, 1);
    let got = broker.receive("orders", "c", 10, None, None).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].payload[..], b"ok 1");
    assert_eq!(got[0].headers[crate::header::SCHEMA_ID], "3");
    let odd = OutgoingMessage::new("ok 2").with_header(crate::header::SCHEMA_ID, "three");
    let refused = broker.publish("free-form", odd).await.unwrap_err();
    assert!(refused.to_string().contains("not a schema id"), "{refused}");
}

#[tokio::test]
async fn a_batch_with_one_invalid_message_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open_with(dir.path(), &clock, true).await;
    broker
        .create_queue("orders", requiring("orders-value"))
        .await
        .unwrap();
    let batch = vec![
        OutgoingMessage::new("ok 1"),
        OutgoingMessage::new("bad"),
        OutgoingMessage::new("ok 3"),
    ];
    assert_violation(&broker.publish_batch("orders", batch).await.unwrap_err());
    assert_eq!(broker.describe_queue("orders").unwrap().stats.next_seq, 0);

    broker
        .create_topic("events", topic_requiring("orders-value", 3))
        .await
        .unwrap();
    let keyed =
        |key: &'static str, payload: &'static str| OutgoingMessage::new(payload).with_key(key);
    let batch = vec![keyed("a", "ok"), keyed("b", "ok"), keyed("c", "bad")];
    assert_violation(&broker.publish_to_topic("events", batch).await.unwrap_err());
    let batch = vec![keyed("a", "ok"), keyed("b", "bad")];
    assert_violation(
        &broker
            .publish_to_partition("events", 1, batch)
            .await
            .unwrap_err(),
    );
    let batch = vec![keyed("a", "ok"), keyed("b", "bad")];
    assert_violation(
        &broker
            .publish_idempotent("events", 0, "producer-1", 0, batch)
            .await
            .unwrap_err(),
    );
    assert_eq!(topic_end(&broker, "events"), 0, "nothing stored");

    // The idempotent producer's refused batch took no sequence: 0 is still next.
    broker
        .publish_idempotent("events", 0, "producer-1", 0, vec![keyed("a", "ok 0")])
        .await
        .unwrap();
    broker
        .publish_to_topic("events", vec![keyed("b", "ok 1")])
        .await
        .unwrap();
    broker
        .publish_to_partition("events", 2, vec![keyed("c", "ok 2")])
        .await
        .unwrap();
    assert_eq!(topic_end(&broker, "events"), 3);
    let first = broker
        .read_topic("events", 0, Position::Earliest, 10)
        .unwrap();
    assert_eq!(&first[0].message.payload[..], b"ok 0");
}

#[tokio::test]
async fn a_requirement_is_kept_across_a_reopen_and_set_by_update() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    {
        let broker = open_with(dir.path(), &clock, true).await;
        broker.create_queue("orders", spec(3)).await.unwrap();
        broker
            .publish("orders", OutgoingMessage::new("anything goes"))
            .await
            .unwrap();
        let now = broker
            .update_queue("orders", |s| {
                s.schema_subject = Some("orders-value".to_owned())
            })
            .await
            .unwrap();
        assert_eq!(now.schema_subject.as_deref(), Some("orders-value"));
        broker
            .create_topic("events", TopicSpec::default())
            .await
            .unwrap();
        broker
            .update_topic("events", |s| {
                s.schema_subject = Some("orders-value".to_owned())
            })
            .await
            .unwrap();
    }
    let broker = open_with(dir.path(), &clock, true).await;
    let queue = broker.describe_queue("orders").unwrap();
    assert_eq!(queue.spec.schema_subject.as_deref(), Some("orders-value"));
    let topic = broker.describe_topic("events").unwrap();
    assert_eq!(topic.spec.schema_subject.as_deref(), Some("orders-value"));
    assert_violation(
        &broker
            .publish("orders", OutgoingMessage::new("anything goes"))
            .await
            .unwrap_err(),
    );
    assert_violation(
        &broker
            .publish_to_topic("events", vec![OutgoingMessage::new("no")])
            .await
            .unwrap_err(),
    );
    // Removing the requirement lets anything through again.
    broker
        .update_queue("orders", |s| s.schema_subject = None)
        .await
        .unwrap();
    broker
        .publish("orders", OutgoingMessage::new("anything goes"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_broker_without_a_validator_refuses_publishes_that_need_one() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open_with(dir.path(), &clock, false).await;
    broker
        .create_queue("orders", requiring("orders-value"))
        .await
        .unwrap();
    broker
        .create_topic("events", topic_requiring("orders-value", 1))
        .await
        .unwrap();
    broker.create_queue("free", spec(3)).await.unwrap();
    let refused = broker
        .publish("orders", OutgoingMessage::new("ok"))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, BrokerError::NoPayloadValidator { subject } if subject == "orders-value"),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("without a payload validator"));
    let refused = broker
        .publish_to_topic("events", vec![OutgoingMessage::new("ok")])
        .await
        .unwrap_err();
    assert!(matches!(refused, BrokerError::NoPayloadValidator { .. }));
    assert_eq!(broker.describe_queue("orders").unwrap().stats.next_seq, 0);
    assert_eq!(topic_end(&broker, "events"), 0);
    // A channel without a requirement does not need one.
    broker
        .publish("free", OutgoingMessage::new("anything"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_subject_that_could_not_name_a_registry_subject_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open_with(dir.path(), &clock, true).await;
    for subject in [String::new(), "a\nb".to_owned(), "s".repeat(256)] {
        let refused = broker
            .create_queue("orders", requiring(&subject))
            .await
            .unwrap_err();
        assert!(
            matches!(
                &refused,
                BrokerError::InvalidQueueSpec { error, .. }
                    if matches!(**error, BrokerError::InvalidSetting {
                        setting: "schema_subject",
                        ..
                    })
            ),
            "{refused:?}"
        );
        let refused = broker
            .create_topic("events", topic_requiring(&subject, 1))
            .await
            .unwrap_err();
        assert!(matches!(refused, BrokerError::InvalidSetting { .. }));
    }
    assert!(broker.list_topics().is_empty());
    assert!(broker.describe_queue("orders").is_err());
}
