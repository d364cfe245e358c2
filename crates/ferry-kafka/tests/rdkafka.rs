//! The `rdkafka` crate (librdkafka's Rust binding, linked against Debian's librdkafka-dev)
//! against the front end: a `FutureProducer` with acks=all, a `BaseConsumer` and a
//! `StreamConsumer` reading back by hand-assigned partitions (no group membership) with
//! keys, headers and timestamps, and the admin client creating,
//! describing (metadata) and deleting topics.
//!
//! It needs librdkafka-dev at build time, so `scripts/debian-packages.sh` installs it;
//! there is no run-time condition to skip on.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferry_kafka::KafkaConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, Timestamp, TopicPartitionList};

const WAIT: Duration = Duration::from_secs(10);

fn config(addr: std::net::SocketAddr) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", addr.to_string());
    config
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A consumer's config. librdkafka assigns partitions through its group handle, so it
/// needs a `group.id` even to `assign`; assigning does not join the group, and with
/// automatic commits off it never commits.
fn consumer_config(addr: std::net::SocketAddr) -> ClientConfig {
    let mut config = config(addr);
    config
        .set("group.id", "rdkafka-assigned")
        .set("enable.auto.commit", "false");
    config
}

/// A message's headers as (name, value) text pairs, sorted: Ferry gives them back by name.
fn headers_of<M: Message>(message: &M) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = message
        .headers()
        .map(|headers| {
            headers
                .iter()
                .map(|h| {
                    (
                        h.key.to_owned(),
                        String::from_utf8(h.value.unwrap_or_default().to_vec()).unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    pairs
}

fn text(bytes: Option<&[u8]>) -> &str {
    std::str::from_utf8(bytes.expect("present")).unwrap()
}

fn admin(addr: std::net::SocketAddr) -> AdminClient<DefaultClientContext> {
    config(addr).create().expect("an admin client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn future_producer_with_acks_all_then_assigned_consumers_read_keys_and_headers() {
    let server = common::start(KafkaConfig::default()).await;
    let admin = admin(server.addr);
    let options = AdminOptions::new().operation_timeout(Some(WAIT));
    let created = admin
        .create_topics(
            &[NewTopic::new("rd-orders", 2, TopicReplication::Fixed(1))],
            &options,
        )
        .await
        .unwrap();
    assert_eq!(created, [Ok("rd-orders".to_owned())]);

    let producer: FutureProducer = config(server.addr)
        .set("acks", "all")
        .set("message.timeout.ms", "10000")
        .create()
        .unwrap();
    let before = now_ms();
    let mut offsets = Vec::new();
    for (key, value) in [("order-1", "{\"total\":12}"), ("order-2", "{\"total\":7}")] {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "type",
                value: Some("order.created"),
            })
            .insert(Header {
                key: "source",
                value: Some("rdkafka"),
            });
        let delivered = producer
            .send(
                FutureRecord::to("rd-orders")
                    .partition(1)
                    .key(key)
                    .payload(value)
                    .headers(headers),
                WAIT,
            )
            .await
            .map_err(|(e, _)| e)
            .expect("delivered");
        offsets.push(delivered);
    }
    let after = now_ms();
    assert_eq!(offsets, [(1, 0), (1, 1)], "partition 1, offsets 0 and 1");

    // A BaseConsumer assigned partition 1 from the beginning: both records.
    let consumer: BaseConsumer = consumer_config(server.addr)
        .set("enable.partition.eof", "false")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset("rd-orders", 1, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let read = tokio::task::block_in_place(|| {
        let mut read = Vec::new();
        let deadline = std::time::Instant::now() + WAIT;
        while read.len() < 2 && std::time::Instant::now() < deadline {
            if let Some(message) = consumer.poll(Duration::from_millis(200)) {
                let message = message.expect("a record");
                let Timestamp::CreateTime(at) = message.timestamp() else {
                    panic!("a CreateTime timestamp, got {:?}", message.timestamp());
                };
                read.push((
                    message.partition(),
                    message.offset(),
                    text(message.key()).to_owned(),
                    text(message.payload()).to_owned(),
                    headers_of(&message),
                    at,
                ));
            }
        }
        read
    });
    assert_eq!(read.len(), 2, "{read:?}");
    for (i, (key, value)) in [("order-1", "{\"total\":12}"), ("order-2", "{\"total\":7}")]
        .into_iter()
        .enumerate()
    {
        let (partition, offset, k, v, headers, at) = &read[i];
        assert_eq!((*partition, *offset), (1, i as i64));
        assert_eq!((k.as_str(), v.as_str()), (key, value));
        assert_eq!(
            headers,
            &[
                ("source".to_owned(), "rdkafka".to_owned()),
                ("type".to_owned(), "order.created".to_owned())
            ]
        );
        // The producer's CreateTime, which Ferry keeps (docs/compat/kafka.md, "Timestamps").
        assert!(
            (before..=after).contains(at),
            "{at} outside {before}..={after}"
        );
    }

    // A StreamConsumer assigned partition 1 from offset 1: the second record only.
    let stream: StreamConsumer = consumer_config(server.addr).create().unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset("rd-orders", 1, Offset::Offset(1))
        .unwrap();
    stream.assign(&assignment).unwrap();
    let message = tokio::time::timeout(WAIT, stream.recv())
        .await
        .expect("a record within the wait")
        .unwrap();
    assert_eq!(message.offset(), 1);
    assert_eq!(text(message.key()), "order-2");
    assert_eq!(text(message.payload()), "{\"total\":7}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_client_creates_describes_and_deletes_topics() {
    let server = common::start(KafkaConfig::default()).await;
    let admin = admin(server.addr);
    let options = AdminOptions::new().operation_timeout(Some(WAIT));

    let created = admin
        .create_topics(
            &[
                NewTopic::new("rd-admin-a", 3, TopicReplication::Fixed(1)),
                NewTopic::new("rd-admin-b", 1, TopicReplication::Fixed(1)),
            ],
            &options,
        )
        .await
        .unwrap();
    assert_eq!(
        created,
        [Ok("rd-admin-a".to_owned()), Ok("rd-admin-b".to_owned())]
    );
    let again = admin
        .create_topics(
            &[NewTopic::new("rd-admin-a", 3, TopicReplication::Fixed(1))],
            &options,
        )
        .await
        .unwrap();
    assert_eq!(
        again,
        [Err((
            "rd-admin-a".to_owned(),
            RDKafkaErrorCode::TopicAlreadyExists
        ))]
    );
    let replicated = admin
        .create_topics(
            &[NewTopic::new("rd-admin-c", 1, TopicReplication::Fixed(3))],
            &options,
        )
        .await
        .unwrap();
    assert_eq!(
        replicated,
        [Err((
            "rd-admin-c".to_owned(),
            RDKafkaErrorCode::InvalidReplicationFactor
        ))],
        "one node holds every copy"
    );

    // Metadata: the node and each topic's partitions, led by node 0.
    let metadata = tokio::task::block_in_place(|| {
        admin
            .inner()
            .fetch_metadata(None, WAIT)
            .expect("metadata for all topics")
    });
    assert_eq!(metadata.brokers().len(), 1);
    assert_eq!(metadata.brokers()[0].id(), 0);
    assert_eq!(metadata.brokers()[0].port(), i32::from(server.addr.port()));
    let mut topics: Vec<(&str, usize)> = metadata
        .topics()
        .iter()
        .map(|t| (t.name(), t.partitions().len()))
        .collect();
    topics.sort_unstable();
    assert_eq!(topics, [("rd-admin-a", 3), ("rd-admin-b", 1)]);
    let a = metadata
        .topics()
        .iter()
        .find(|t| t.name() == "rd-admin-a")
        .unwrap();
    for partition in a.partitions() {
        assert_eq!(partition.leader(), 0);
        assert_eq!(partition.replicas(), [0]);
        assert!(partition.error().is_none());
    }

    let deleted = admin
        .delete_topics(&["rd-admin-a", "rd-admin-missing"], &options)
        .await
        .unwrap();
    assert_eq!(
        deleted,
        [
            Ok("rd-admin-a".to_owned()),
            Err((
                "rd-admin-missing".to_owned(),
                RDKafkaErrorCode::UnknownTopicOrPartition
            ))
        ]
    );
    let metadata = tokio::task::block_in_place(|| {
        admin
            .inner()
            .fetch_metadata(Some("rd-admin-b"), WAIT)
            .expect("metadata for one topic")
    });
    assert_eq!(metadata.topics().len(), 1);
    assert_eq!(metadata.topics()[0].name(), "rd-admin-b");
    let remaining = tokio::task::block_in_place(|| admin.inner().fetch_metadata(None, WAIT));
    let remaining: Vec<String> = remaining
        .map_err(|e: KafkaError| e.to_string())
        .unwrap()
        .topics()
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(remaining, ["rd-admin-b"], "rd-admin-a is gone");
}
