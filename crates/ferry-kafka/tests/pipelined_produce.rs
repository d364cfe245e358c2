//! Produce requests pipelined on one connection, as librdkafka and the Java client send them
//! (up to five in flight): answered strictly in request order, stored in request order,
//! with other requests between them seeing every record of the produces before them —
//! and more requests in flight than the connection keeps pending, which it must still take.

mod common;

use bytes::Bytes;
use common::{Client, start};
use ferry_broker::TopicSpec;
use ferry_kafka::KafkaConfig;
use kafka_protocol::ResponseError;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    FetchRequest, MetadataRequest, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder, TimestampType};

const PRODUCE_VERSION: i16 = 8;
const FETCH_VERSION: i16 = 12;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// `values` as one batch v2 of no idempotent producer.
fn batch(values: &[String]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: 1_700_000_000_000 + i as i64,
            key: None,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: IndexMap::new(),
        })
        .collect();
    common::encode_batch(&records, Compression::None)
}

fn produce(topic: &str, partition: i32, values: &[String]) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(batch(values))),
                ]),
        ])
}

fn values(request: usize) -> Vec<String> {
    (0..3).map(|j| format!("r{request}-{j}")).collect()
}

fn produced(response: &ProduceResponse) -> (i16, i64) {
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn fetch(topic: &str, offset: i64) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

/// The values of a Fetch answer's records, in order.
fn fetched(response: &kafka_protocol::messages::FetchResponse) -> Vec<String> {
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    let mut data = partition.records.clone().unwrap_or_default();
    if data.is_empty() {
        return Vec::new();
    }
    RecordBatchDecoder::decode_all(&mut data)
        .unwrap()
        .into_iter()
        .flat_map(|set| set.records)
        .map(|r| String::from_utf8(r.value.unwrap().to_vec()).unwrap())
        .collect()
}

async fn everything(client: &mut Client, topic: &str) -> Vec<String> {
    let mut all = Vec::new();
    loop {
        let got = fetched(
            &client
                .call(&fetch(topic, all.len() as i64), FETCH_VERSION)
                .await,
        );
        if got.is_empty() {
            return all;
        }
        all.extend(got);
    }
}

#[tokio::test]
async fn produces_sent_without_waiting_are_answered_in_request_order_and_stored_in_it() {
    let server = start(KafkaConfig::default()).await;
    // Fsync, as the endpoint's benchmark runs it: appends in flight share group commits.
    let spec = TopicSpec {
        durability: ferry_broker::Durability::Fsync,
        ..TopicSpec::with_partitions(1)
    };
    server.broker.create_topic("p", spec).await.unwrap();
    let mut client = Client::connect(server.addr).await;
    // More than the five answers a connection keeps pending: the rest wait in the socket.
    let requests = 12;
    let mut sent = Vec::new();
    for i in 0..requests {
        sent.push(
            client
                .send(&produce("p", 0, &values(i)), PRODUCE_VERSION)
                .await,
        );
    }
    for (i, correlation) in sent.into_iter().enumerate() {
        // `receive` checks the correlation id: the i-th answer is the i-th request's.
        let response = client
            .receive::<ProduceRequest>(PRODUCE_VERSION, correlation)
            .await;
        assert_eq!(produced(&response), (0, 3 * i as i64), "request {i}");
    }
    let expected: Vec<String> = (0..requests).flat_map(values).collect();
    assert_eq!(everything(&mut client, "p").await, expected);
}

#[tokio::test]
async fn metadata_and_fetch_between_pipelined_produces_keep_their_place_and_see_what_came_before() {
    let server = start(KafkaConfig::default()).await;
    server
        .broker
        .create_topic("p", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let mut client = Client::connect(server.addr).await;
    let produce_0 = client
        .send(&produce("p", 0, &values(0)), PRODUCE_VERSION)
        .await;
    let produce_1 = client
        .send(&produce("p", 0, &values(1)), PRODUCE_VERSION)
        .await;
    let metadata = client
        .send(&MetadataRequest::default().with_topics(None), 9)
        .await;
    let produce_2 = client
        .send(&produce("p", 0, &values(2)), PRODUCE_VERSION)
        .await;
    // A partition that does not exist: that request's own error, nothing else changes.
    let refused = client
        .send(&produce("p", 7, &values(99)), PRODUCE_VERSION)
        .await;
    let fetch_0 = client.send(&fetch("p", 0), FETCH_VERSION).await;
    let produce_3 = client
        .send(&produce("p", 0, &values(3)), PRODUCE_VERSION)
        .await;
    let produce_4 = client
        .send(&produce("p", 0, &values(4)), PRODUCE_VERSION)
        .await;

    let answer = client
        .receive::<ProduceRequest>(PRODUCE_VERSION, produce_0)
        .await;
    assert_eq!(produced(&answer), (0, 0));
    let answer = client
        .receive::<ProduceRequest>(PRODUCE_VERSION, produce_1)
        .await;
    assert_eq!(produced(&answer), (0, 3));
    let answer = client.receive::<MetadataRequest>(9, metadata).await;
    assert_eq!(answer.topics.len(), 1);
    let answer = client
        .receive::<ProduceRequest>(PRODUCE_VERSION, produce_2)
        .await;
    assert_eq!(produced(&answer), (0, 6));
    let answer = client
        .receive::<ProduceRequest>(PRODUCE_VERSION, refused)
        .await;
    assert_eq!(
        produced(&answer),
        (ResponseError::UnknownTopicOrPartition.code(), -1)
    );
    // The fetch sees exactly what the produces before it stored.
    let answer = client.receive::<FetchRequest>(FETCH_VERSION, fetch_0).await;
    let before: Vec<String> = (0..3).flat_map(values).collect();
    assert_eq!(fetched(&answer), before);
    let answer = client
        .receive::<ProduceRequest>(PRODUCE_VERSION, produce_3)
        .await;
    assert_eq!(produced(&answer), (0, 9));
    let answer = client
        .receive::<ProduceRequest>(PRODUCE_VERSION, produce_4)
        .await;
    assert_eq!(produced(&answer), (0, 12));

    let expected: Vec<String> = (0..5).flat_map(values).collect();
    assert_eq!(everything(&mut client, "p").await, expected);
}

#[tokio::test]
async fn pipelined_produces_to_several_topics_are_each_stored_in_request_order() {
    let server = start(KafkaConfig::default()).await;
    for topic in ["a", "b"] {
        server
            .broker
            .create_topic(topic, TopicSpec::with_partitions(1))
            .await
            .unwrap();
    }
    let mut client = Client::connect(server.addr).await;
    let mut sent = Vec::new();
    for i in 0..10 {
        let topic = if i % 3 == 0 { "a" } else { "b" };
        let correlation = client
            .send(&produce(topic, 0, &values(i)), PRODUCE_VERSION)
            .await;
        sent.push((topic, i, correlation));
    }
    let mut next = std::collections::HashMap::from([("a", 0i64), ("b", 0i64)]);
    for (topic, i, correlation) in sent {
        let answer = client
            .receive::<ProduceRequest>(PRODUCE_VERSION, correlation)
            .await;
        let base = next.get_mut(topic).unwrap();
        assert_eq!(produced(&answer), (0, *base), "request {i} to {topic}");
        *base += 3;
    }
    let of = |keep: fn(usize) -> bool| -> Vec<String> {
        (0..10).filter(|&i| keep(i)).flat_map(values).collect()
    };
    assert_eq!(everything(&mut client, "a").await, of(|i| i % 3 == 0));
    assert_eq!(everything(&mut client, "b").await, of(|i| i % 3 != 0));
}
