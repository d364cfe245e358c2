//! The front end driven over a socket by a raw client built on the `kafka-protocol` codec:
//! every API served, the answers a client relies on, and the refusals.

mod common;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use common::{Client, start};
use ferry_broker::{OutgoingMessage, TopicSpec};
use ferry_kafka::KafkaConfig;
use kafka_protocol::ResponseError;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest,
    FetchResponse, ListOffsetsRequest, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder, TimestampType};

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

fn record(key: &str, value: &str, headers: &[(&str, &str)]) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: Some(Bytes::copy_from_slice(key.as_bytes())),
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    StrBytes::from_string((*k).to_owned()),
                    Some(Bytes::copy_from_slice(v.as_bytes())),
                )
            })
            .collect::<IndexMap<_, _>>(),
    }
}

fn batch(records: &[Record], compression: Compression) -> Bytes {
    let mut records = records.to_vec();
    for (i, r) in records.iter_mut().enumerate() {
        // One batch, as producers send: the codec batches records while offset − sequence
        // is constant.
        r.offset = i as i64;
        r.sequence = i as i32;
    }
    common::encode_batch(&records, compression)
}

fn produce_request(topic: &str, partition: i32, acks: i16, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(records)),
                ]),
        ])
}

fn fetch_request(topic: &str, partition: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

/// The one partition's (error code, records) of a fetch answer.
fn fetched(response: &FetchResponse) -> (i16, Vec<Record>) {
    let partition = &response.responses[0].partitions[0];
    let mut data = partition.records.clone().unwrap_or_default();
    let records = if data.is_empty() {
        Vec::new()
    } else {
        RecordBatchDecoder::decode_all(&mut data)
            .unwrap()
            .into_iter()
            .flat_map(|set| set.records)
            .collect()
    };
    (partition.error_code, records)
}

fn produced(response: &ProduceResponse) -> (i16, i64) {
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

async fn create(broker: &ferry_broker::Broker, topic: &str, partitions: u32) {
    broker
        .create_topic(topic, TopicSpec::with_partitions(partitions))
        .await
        .unwrap();
}

#[tokio::test]
async fn api_versions_advertises_what_is_served_and_answers_newer_versions_at_v0() {
    let server = start(KafkaConfig::default()).await;
    let mut client = Client::connect(server.addr).await;
    let response = client.call(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(response.error_code, 0);
    let keys: Vec<i16> = response.api_keys.iter().map(|k| k.api_key).collect();
    for api in [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::Metadata,
        ApiKey::ListOffsets,
    ] {
        assert!(keys.contains(&(api as i16)), "{api:?} advertised");
    }
    assert!(keys.contains(&(ApiKey::JoinGroup as i16)));
    assert!(keys.contains(&(ApiKey::InitProducerId as i16)));
    assert!(!keys.contains(&(ApiKey::EndTxn as i16)));

    // A version newer than served: UNSUPPORTED_VERSION, in a v0 answer with header v0.
    let correlation = client.send(&ApiVersionsRequest::default(), 4).await;
    let response = client.receive::<ApiVersionsRequest>(0, correlation).await;
    assert_eq!(
        response.error_code,
        ResponseError::UnsupportedVersion.code()
    );
    assert!(!response.api_keys.is_empty());
}

#[tokio::test]
async fn produce_then_fetch_round_trips_key_headers_and_offsets() {
    let server = start(KafkaConfig::default()).await;
    create(&server.broker, "orders", 2).await;
    let mut client = Client::connect(server.addr).await;
    for compression in [Compression::None, Compression::Gzip, Compression::Snappy] {
        let records = batch(
            &[
                record("k1", "v1", &[("type", "order.created")]),
                record("k2", "v2", &[]),
            ],
            compression,
        );
        let response = client
            .call(&produce_request("orders", 1, -1, records), 8)
            .await;
        assert_eq!(produced(&response).0, 0);
    }
    let response = client.call(&fetch_request("orders", 1, 0, 0), 11).await;
    let (code, records) = fetched(&response);
    assert_eq!(code, 0);
    assert_eq!(records.len(), 6);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.offset, i as i64);
    }
    assert_eq!(records[2].key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(records[2].value.as_deref(), Some(&b"v1"[..]));
    assert_eq!(
        records[2].headers.get(&StrBytes::from_static_str("type")),
        Some(&Some(Bytes::from_static(b"order.created")))
    );
    assert_eq!(response.responses[0].partitions[0].high_watermark, 6);

    // Base offsets are Ferry's offsets: the next produce starts at 6, and Ferry reads it.
    let response = client
        .call(
            &produce_request(
                "orders",
                1,
                1,
                batch(&[record("k", "v", &[])], Compression::None),
            ),
            3,
        )
        .await;
    assert_eq!(produced(&response), (0, 6));
    let read = server
        .broker
        .read_topic("orders", 1, ferry_broker::Position::Offset(6), 10)
        .unwrap();
    assert_eq!(read[0].message.payload, &b"v"[..]);
    assert_eq!(read[0].message.key.as_deref(), Some(&b"k"[..]));

    // From the middle: the records from the offset asked for.
    let response = client.call(&fetch_request("orders", 1, 4, 0), 4).await;
    let (_, records) = fetched(&response);
    assert_eq!(records.first().map(|r| r.offset), Some(4));
}

#[tokio::test]
async fn records_published_through_ferry_are_fetched_with_key_headers_and_timestamp() {
    let server = start(KafkaConfig::default()).await;
    create(&server.broker, "events", 1).await;
    server
        .broker
        .publish_to_partition(
            "events",
            0,
            vec![
                OutgoingMessage::new("payload")
                    .with_key("key-1")
                    .with_header("type", "thing.happened"),
            ],
        )
        .await
        .unwrap();
    let stored = server
        .broker
        .read_topic("events", 0, ferry_broker::Position::Earliest, 1)
        .unwrap();
    let mut client = Client::connect(server.addr).await;
    let (code, records) = fetched(&client.call(&fetch_request("events", 0, 0, 0), 12).await);
    assert_eq!(code, 0);
    let r = &records[0];
    assert_eq!(r.key.as_deref(), Some(&b"key-1"[..]));
    assert_eq!(r.value.as_deref(), Some(&b"payload"[..]));
    assert_eq!(
        r.headers.get(&StrBytes::from_static_str("type")),
        Some(&Some(Bytes::from_static(b"thing.happened")))
    );
    assert_eq!(r.timestamp, stored[0].message.published_at);
}

#[tokio::test]
async fn acks_zero_gets_no_answer_and_stores_the_records() {
    let server = start(KafkaConfig::default()).await;
    create(&server.broker, "fire", 1).await;
    let mut client = Client::connect(server.addr).await;
    client
        .send(
            &produce_request(
                "fire",
                0,
                0,
                batch(&[record("k", "v", &[])], Compression::None),
            ),
            7,
        )
        .await;
    // The next answer on the connection is the metadata's: no produce answer came first.
    let metadata = client
        .call(&MetadataRequest::default().with_topics(None), 9)
        .await;
    assert_eq!(metadata.topics.len(), 1);
    let info = server.broker.describe_topic("fire").unwrap();
    assert_eq!(info.partitions[0].end_offset, 1);
}

#[tokio::test]
async fn a_long_poll_waits_and_is_woken_by_a_produce() {
    let server = start(KafkaConfig::default()).await;
    create(&server.broker, "waits", 1).await;
    let mut idle = Client::connect(server.addr).await;
    let started = Instant::now();
    let (_, records) = fetched(&idle.call(&fetch_request("waits", 0, 0, 300), 11).await);
    assert!(records.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(300));

    let mut consumer = Client::connect(server.addr).await;
    let correlation = consumer
        .send(&fetch_request("waits", 0, 0, 20_000), 11)
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let mut producer = Client::connect(server.addr).await;
    let response = producer
        .call(
            &produce_request(
                "waits",
                0,
                1,
                batch(&[record("k", "woke", &[])], Compression::None),
            ),
            8,
        )
        .await;
    assert_eq!(produced(&response).0, 0);
    let response = consumer.receive::<FetchRequest>(11, correlation).await;
    let (_, records) = fetched(&response);
    assert_eq!(records[0].value.as_deref(), Some(&b"woke"[..]));
    assert!(started.elapsed() < Duration::from_secs(5));

    // Appends through Ferry's own API wake it too, by the periodic re-read.
    let correlation = consumer
        .send(&fetch_request("waits", 0, 1, 20_000), 11)
        .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    server
        .broker
        .publish_to_partition("waits", 0, vec![OutgoingMessage::new("ferry")])
        .await
        .unwrap();
    let (_, records) = fetched(&consumer.receive::<FetchRequest>(11, correlation).await);
    assert_eq!(records[0].value.as_deref(), Some(&b"ferry"[..]));
}

#[tokio::test]
async fn max_bytes_bounds_an_answer_but_one_record_always_comes() {
    let server = start(KafkaConfig::default()).await;
    create(&server.broker, "big", 1).await;
    let payload = "x".repeat(1000);
    let messages = (0..20)
        .map(|_| OutgoingMessage::new(payload.clone()))
        .collect();
    server
        .broker
        .publish_to_partition("big", 0, messages)
        .await
        .unwrap();
    let mut client = Client::connect(server.addr).await;
    let mut request = fetch_request("big", 0, 0, 0);
    request.max_bytes = 5_000;
    let response = client.call(&request, 11).await;
    let bytes = response.responses[0].partitions[0]
        .records
        .as_ref()
        .unwrap()
        .len();
    assert!(bytes <= 5_000, "{bytes} bytes");
    let (_, records) = fetched(&response);
    assert!((1..20).contains(&records.len()), "{}", records.len());

    request.max_bytes = 10;
    let (_, records) = fetched(&client.call(&request, 11).await);
    assert_eq!(records.len(), 1);
}

#[tokio::test]
async fn out_of_range_and_unknown_partitions_get_kafkas_codes() {
    let server = start(KafkaConfig::default()).await;
    create(&server.broker, "small", 1).await;
    let mut client = Client::connect(server.addr).await;
    let (code, _) = fetched(&client.call(&fetch_request("small", 0, 5, 0), 11).await);
    assert_eq!(code, ResponseError::OffsetOutOfRange.code());
    let (code, _) = fetched(&client.call(&fetch_request("small", 3, 0, 0), 11).await);
    assert_eq!(code, ResponseError::UnknownTopicOrPartition.code());
    let (code, _) = fetched(&client.call(&fetch_request("nothing", 0, 0, 0), 11).await);
    assert_eq!(code, ResponseError::UnknownTopicOrPartition.code());
    let response = client
        .call(
            &produce_request(
                "nothing",
                0,
                1,
                batch(&[record("k", "v", &[])], Compression::None),
            ),
            8,
        )
        .await;
    assert_eq!(
        produced(&response).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let response = client
        .call(
            &produce_request(
                "small",
                0,
                2,
                batch(&[record("k", "v", &[])], Compression::None),
            ),
            8,
        )
        .await;
    assert_eq!(
        produced(&response).0,
        ResponseError::InvalidRequiredAcks.code()
    );
    assert_eq!(
        server.broker.describe_topic("small").unwrap().partitions[0].end_offset,
        0,
        "refused produces store nothing"
    );
}

#[tokio::test]
async fn metadata_lists_topics_and_auto_creates_when_allowed() {
    let config = KafkaConfig {
        default_partitions: 3,
        advertised: Some("kafka.example:19092".parse().unwrap()),
        ..KafkaConfig::default()
    };
    let server = start(config).await;
    let mut client = Client::connect(server.addr).await;
    let ask = |topic: &str, allow: bool| {
        MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name(topic))),
            ]))
            .with_allow_auto_topic_creation(allow)
    };
    let response = client.call(&ask("not-made", false), 9).await;
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert!(server.broker.describe_topic("not-made").is_err());

    let response = client.call(&ask("made", true), 12).await;
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(response.topics[0].partitions.len(), 3);
    assert_eq!(response.brokers[0].host.as_str(), "kafka.example");
    assert_eq!(response.brokers[0].port, 19092);
    assert_eq!(
        server
            .broker
            .describe_topic("made")
            .unwrap()
            .spec
            .partitions,
        3
    );

    let response = client.call(&ask("bad name!", true), 9).await;
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::InvalidTopicException.code()
    );

    // Named by id only: Ferry keeps no topic ids.
    let by_id = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default().with_name(None)]));
    let response = client.call(&by_id, 12).await;
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicId.code()
    );

    // All topics: a null list (and for v0 an empty one).
    let all = client
        .call(&MetadataRequest::default().with_topics(None), 1)
        .await;
    assert_eq!(all.topics.len(), 1);
    let all = client
        .call(&MetadataRequest::default().with_topics(Some(vec![])), 0)
        .await;
    assert_eq!(all.topics.len(), 1);
}

#[tokio::test]
async fn metadata_does_not_create_when_auto_creation_is_off() {
    let config = KafkaConfig {
        auto_create_topics: false,
        ..KafkaConfig::default()
    };
    let server = start(config).await;
    let mut client = Client::connect(server.addr).await;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("absent"))),
        ]))
        .with_allow_auto_topic_creation(true);
    let response = client.call(&request, 9).await;
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert!(server.broker.list_topics().is_empty());
}

#[tokio::test]
async fn create_and_delete_topics() {
    let server = start(KafkaConfig::default()).await;
    let mut client = Client::connect(server.addr).await;
    let topic = |n: &str, partitions: i32, replication: i16| {
        CreatableTopic::default()
            .with_name(name(n))
            .with_num_partitions(partitions)
            .with_replication_factor(replication)
    };
    let request = CreateTopicsRequest::default().with_topics(vec![
        topic("a", 4, 1),
        topic("b", -1, -1),
        topic("c", 1, 3),
        topic("d", 0, 1),
    ]);
    let response = client.call(&request, 4).await;
    let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![
            0,
            0,
            ResponseError::InvalidReplicationFactor.code(),
            ResponseError::InvalidPartitions.code()
        ]
    );
    assert_eq!(
        server.broker.describe_topic("a").unwrap().spec.partitions,
        4
    );
    assert_eq!(
        server.broker.describe_topic("b").unwrap().spec.partitions,
        1
    );
    assert!(server.broker.describe_topic("c").is_err());

    let again = client
        .call(
            &CreateTopicsRequest::default().with_topics(vec![topic("a", 1, 1)]),
            2,
        )
        .await;
    assert_eq!(
        again.topics[0].error_code,
        ResponseError::TopicAlreadyExists.code()
    );
    let validate = CreateTopicsRequest::default()
        .with_topics(vec![topic("e", 2, 1)])
        .with_validate_only(true);
    assert_eq!(client.call(&validate, 4).await.topics[0].error_code, 0);
    assert!(server.broker.describe_topic("e").is_err());

    let request = DeleteTopicsRequest::default().with_topic_names(vec![name("a"), name("zz")]);
    let response = client.call(&request, 5).await;
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(
        response.responses[1].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert!(server.broker.describe_topic("a").is_err());
}

#[tokio::test]
async fn list_offsets_earliest_latest_and_by_time() {
    let server = start(KafkaConfig::default()).await;
    create(&server.broker, "times", 1).await;
    let before = ferry_time_now();
    server
        .broker
        .publish_to_partition(
            "times",
            0,
            vec![OutgoingMessage::new("a"), OutgoingMessage::new("b")],
        )
        .await
        .unwrap();
    let mut client = Client::connect(server.addr).await;
    let ask = |timestamp: i64| {
        ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(name("times"))
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(timestamp),
                    ]),
            ])
    };
    let offset = |r: &kafka_protocol::messages::ListOffsetsResponse| {
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.offset)
    };
    assert_eq!(offset(&client.call(&ask(-2), 5).await), (0, 0));
    assert_eq!(offset(&client.call(&ask(-1), 5).await), (0, 2));
    assert_eq!(offset(&client.call(&ask(before - 1000), 5).await), (0, 0));
    assert_eq!(
        offset(&client.call(&ask(before + 3_600_000), 1).await),
        (0, -1)
    );
}

#[test]
fn advertised_addresses_parse_or_say_why_not() {
    let ok: ferry_kafka::Advertised = "kafka.internal:9092".parse().unwrap();
    assert_eq!((ok.host.as_str(), ok.port), ("kafka.internal", 9092));
    assert_eq!(ok.to_string(), "kafka.internal:9092");
    for bad in ["kafka.internal", "host:0", "host:70000", ":9092", "a b:1"] {
        assert!(bad.parse::<ferry_kafka::Advertised>().is_err(), "{bad}");
    }
}

fn ferry_time_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test]
async fn bad_frames_close_the_connection_and_the_server_stays_up() {
    let config = KafkaConfig {
        max_frame_bytes: 1024,
        ..KafkaConfig::default()
    };
    let server = start(config).await;

    // Over the maximum frame size: closed before the body is read.
    let mut client = Client::connect(server.addr).await;
    client.send_raw(&vec![0u8; 2048]).await;
    assert!(client.closed().await);

    // A header too short, an unknown API key, an API not served, a body that does not decode.
    let mut unserved = Vec::new();
    unserved.extend_from_slice(&(ApiKey::EndTxn as i16).to_be_bytes());
    unserved.extend_from_slice(&0i16.to_be_bytes());
    unserved.extend_from_slice(&1i32.to_be_bytes());
    unserved.extend_from_slice(&(-1i16).to_be_bytes());
    let mut undecodable = Vec::new();
    undecodable.extend_from_slice(&(ApiKey::Metadata as i16).to_be_bytes());
    undecodable.extend_from_slice(&1i16.to_be_bytes());
    undecodable.extend_from_slice(&1i32.to_be_bytes());
    undecodable.extend_from_slice(&(-1i16).to_be_bytes());
    undecodable.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
    let unknown_key = [0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    for bad in [
        &[0u8, 1][..],
        &unknown_key[..],
        &unserved[..],
        &undecodable[..],
    ] {
        let mut client = Client::connect(server.addr).await;
        client.send_raw(bad).await;
        assert!(client.closed().await, "{bad:?}");
    }

    // Bytes after a request that decodes are ignored, as Kafka ignores them (librdkafka
    // 2.x sends an all-topics Metadata v12 with 3 bytes too many): answered, not closed.
    let mut client = Client::connect(server.addr).await;
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Metadata as i16)
        .with_request_api_version(12)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("trailing")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, MetadataRequest::header_version(12))
        .unwrap();
    MetadataRequest::default()
        .with_topics(None)
        .encode(&mut body, 12)
        .unwrap();
    body.extend_from_slice(&[0, 0, 0]);
    client.send_raw(&body).await;
    let answer: MetadataResponse = client.receive::<MetadataRequest>(12, 7).await;
    assert_eq!(answer.controller_id.0, 0);
    assert!(!client.closed().await);

    // A served API at a version not served closes it too.
    let mut client = Client::connect(server.addr).await;
    client.send(&MetadataRequest::default(), 13).await;
    assert!(client.closed().await);

    let mut client = Client::connect(server.addr).await;
    let response = client.call(&ApiVersionsRequest::default(), 0).await;
    assert_eq!(response.error_code, 0);
}

#[tokio::test]
async fn refused_batches_store_nothing() {
    let server = start(KafkaConfig::default()).await;
    create(&server.broker, "strict", 1).await;
    let mut client = Client::connect(server.addr).await;
    let mut corrupt = BytesMut::from(&batch(&[record("k", "v", &[])], Compression::None)[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x55;
    let reserved = batch(&[record("k", "v", &[("ferry-id", "x")])], Compression::None);
    for (records, code) in [
        (corrupt.freeze(), ResponseError::CorruptMessage),
        (reserved, ResponseError::InvalidRecord),
    ] {
        let response = client
            .call(&produce_request("strict", 0, -1, records), 8)
            .await;
        assert_eq!(produced(&response).0, code.code());
        assert!(
            response.responses[0].partition_responses[0]
                .error_message
                .is_some()
        );
    }
    assert_eq!(
        server.broker.describe_topic("strict").unwrap().partitions[0].end_offset,
        0
    );
}

#[tokio::test]
async fn a_batch_with_a_producer_id_is_stored_once_and_in_sequence() {
    let server = start(KafkaConfig::default()).await;
    create(&server.broker, "once", 1).await;
    let mut client = Client::connect(server.addr).await;
    let stamped = |first_sequence: i32, values: &[&str]| {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut r = record("k", v, &[]);
                r.producer_id = 5;
                r.producer_epoch = 0;
                r.offset = i as i64;
                r.sequence = first_sequence + i as i32;
                r
            })
            .collect();
        common::encode_batch(&records, Compression::None)
    };
    let first = stamped(0, &["a", "b"]);
    let response = client
        .call(&produce_request("once", 0, -1, first.clone()), 8)
        .await;
    assert_eq!(produced(&response), (0, 0));
    // A retry after a lost answer: the same offsets, nothing stored again.
    let response = client.call(&produce_request("once", 0, -1, first), 8).await;
    assert_eq!(produced(&response), (0, 0));
    let response = client
        .call(&produce_request("once", 0, -1, stamped(2, &["c"])), 8)
        .await;
    assert_eq!(produced(&response), (0, 2));
    // A gap in the sequence is refused and stores nothing.
    let response = client
        .call(&produce_request("once", 0, -1, stamped(9, &["z"])), 8)
        .await;
    assert_eq!(
        produced(&response).0,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    assert_eq!(
        server.broker.describe_topic("once").unwrap().partitions[0].end_offset,
        3
    );
}
