//! Producing as Kafka's producers do, over a socket with the raw client of `common`:
//! InitProducerId and idempotence (retries answered with their first offsets — after a
//! restart of the broker too —, epochs, gaps, five batches in flight), lz4 and zstd
//! batches, and Produce v0–2 with legacy message sets (magic 0 and 1).

mod common;

use std::io::Write;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::{Client, start, start_in};
use ferry_broker::{Position, TopicSpec, header};
use ferry_kafka::KafkaConfig;
use kafka_protocol::ResponseError;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, FetchRequest, InitProducerIdRequest, ListOffsetsRequest,
    ProduceRequest, ProduceResponse, ProducerId, RequestHeader, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

/// Records `values` as one batch v2, stamped by `producer` (`(id, epoch, first sequence)`)
/// when given.
fn batch(values: &[&str], producer: Option<(i64, i16, i32)>, timestamp: i64) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: producer.map_or(-1, |p| p.0),
            producer_epoch: producer.map_or(-1, |p| p.1),
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: producer.map_or(i as i32, |p| p.2 + i as i32),
            timestamp: timestamp + i as i64,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: IndexMap::new(),
        })
        .collect();
    common::encode_batch(&records, Compression::None)
}

/// `batch` with its records compressed by `codec` (3 lz4, 4 zstd) by crates other than the
/// codec, which is built without them: attributes, length and CRC-32C rewritten.
fn compressed(batch: &[u8], codec: u8, compress: impl Fn(&[u8]) -> Vec<u8>) -> Bytes {
    const HEADER: usize = 61;
    let mut out = batch[..HEADER].to_vec();
    out.extend(compress(&batch[HEADER..]));
    out[22] |= codec; // attributes, low byte
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(out)
}

fn lz4(data: &[u8]) -> Vec<u8> {
    let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn zstd(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

fn produce_request(topic: &str, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ]),
        ])
}

fn produced(response: &ProduceResponse) -> (i16, i64) {
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Every record of the topic's partition 0 from `offset`: (value, timestamp).
async fn fetch_all(client: &mut Client, topic: &str, offset: i64) -> Vec<(String, i64)> {
    let request = FetchRequest::default()
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
        ]);
    let response = client.call(&request, 12).await;
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
        .map(|r| {
            (
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
                r.timestamp,
            )
        })
        .collect()
}

async fn init(client: &mut Client, version: i16, current: Option<(i64, i16)>) -> (i16, i64, i16) {
    let (id, epoch) = current.unwrap_or((-1, -1));
    let response = client
        .call(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch),
            version,
        )
        .await;
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

async fn create(server: &common::Server, topic: &str) {
    server
        .broker
        .create_topic(topic, TopicSpec::with_partitions(1))
        .await
        .unwrap();
}

fn end_offset(server: &common::Server, topic: &str) -> u64 {
    server.broker.describe_topic(topic).unwrap().partitions[0].end_offset
}

#[tokio::test]
async fn init_producer_id_hands_out_new_ids_bumps_epochs_and_refuses_transactions() {
    let server = start(KafkaConfig::default()).await;
    let mut client = Client::connect(server.addr).await;
    let versions = client.call(&ApiVersionsRequest::default(), 3).await;
    let advertised = |api: ApiKey| {
        versions
            .api_keys
            .iter()
            .find(|k| k.api_key == api as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(advertised(ApiKey::InitProducerId), Some((0, 4)));
    assert_eq!(advertised(ApiKey::Produce), Some((0, 8)));
    assert_eq!(advertised(ApiKey::AddPartitionsToTxn), None);

    let mut ids = Vec::new();
    for version in 0..=4 {
        let (code, id, epoch) = init(&mut client, version, None).await;
        assert_eq!((code, epoch), (0, 0), "v{version}");
        ids.push(id);
    }
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");

    // KIP-360: the current id and epoch get the next epoch of the same id; the old epoch
    // is fenced afterwards (PRODUCER_FENCED from v4, INVALID_PRODUCER_EPOCH before).
    let id = ids[0];
    assert_eq!(init(&mut client, 4, Some((id, 0))).await, (0, id, 1));
    assert_eq!(
        init(&mut client, 4, Some((id, 0))).await.0,
        ResponseError::ProducerFenced.code()
    );
    assert_eq!(
        init(&mut client, 3, Some((id, 0))).await.0,
        ResponseError::InvalidProducerEpoch.code()
    );
    // An id this broker never handed out: a new one, as Kafka does without transactions.
    let (code, other, epoch) = init(&mut client, 4, Some((1 << 50, 7))).await;
    assert_eq!((code, epoch), (0, 0));
    assert!(!ids.contains(&other) && other != 1 << 50);
    // One of id and epoch without the other.
    assert_eq!(
        init(&mut client, 4, Some((id, -1))).await.0,
        ResponseError::InvalidRequest.code()
    );

    let response = client
        .call(
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            4,
        )
        .await;
    assert_eq!(
        response.error_code,
        ResponseError::TransactionalIdAuthorizationFailed.code()
    );
    assert_eq!(response.producer_id.0, -1);
}

#[tokio::test]
async fn a_retry_after_a_broker_restart_gets_its_first_offsets_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path(), KafkaConfig::default()).await;
    create(&server, "orders").await;
    let mut client = Client::connect(server.addr).await;
    let (_, id, epoch) = init(&mut client, 4, None).await;
    let first = batch(&["a", "b"], Some((id, epoch, 0)), 1_000);
    let second = batch(&["c"], Some((id, epoch, 2)), 2_000);
    for records in [first.clone(), second.clone()] {
        assert_eq!(
            produced(&client.call(&produce_request("orders", records), 8).await).0,
            0
        );
    }
    drop(client);
    server.stop().await;

    // The answer was lost; the broker restarted; the producer retries both.
    let server = start_in(dir.path(), KafkaConfig::default()).await;
    let mut client = Client::connect(server.addr).await;
    let response = client.call(&produce_request("orders", first), 8).await;
    assert_eq!(produced(&response), (0, 0));
    let response = client.call(&produce_request("orders", second), 8).await;
    assert_eq!(produced(&response), (0, 2));
    assert_eq!(end_offset(&server, "orders"), 3);
    // The producer goes on where it was; a gap is refused.
    let next = batch(&["d"], Some((id, epoch, 3)), 3_000);
    let response = client.call(&produce_request("orders", next), 8).await;
    assert_eq!(produced(&response), (0, 3));
    let gap = batch(&["z"], Some((id, epoch, 9)), 3_000);
    let response = client.call(&produce_request("orders", gap), 8).await;
    assert_eq!(
        produced(&response).0,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    let values: Vec<String> = fetch_all(&mut client, "orders", 0)
        .await
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    assert_eq!(values, ["a", "b", "c", "d"]);
    // Ids handed out before the restart are not handed out again.
    let (_, after, _) = init(&mut client, 4, None).await;
    assert!(after > id, "{after} after the restart, {id} before");
}

#[tokio::test]
async fn an_older_epoch_is_fenced_and_a_new_epoch_starts_at_sequence_zero() {
    let server = start(KafkaConfig::default()).await;
    create(&server, "epochs").await;
    let mut client = Client::connect(server.addr).await;
    let (_, id, _) = init(&mut client, 4, None).await;
    let send = |epoch: i16, sequence: i32, value: &'static str| {
        produce_request("epochs", batch(&[value], Some((id, epoch, sequence)), 1))
    };
    assert_eq!(produced(&client.call(&send(0, 0, "a"), 8).await), (0, 0));
    assert_eq!(produced(&client.call(&send(0, 1, "b"), 8).await), (0, 1));
    // The client bumps its epoch (the Java client does it itself): a new epoch must start
    // at 0, and then the old one is fenced.
    assert_eq!(
        produced(&client.call(&send(1, 2, "x"), 8).await).0,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    assert_eq!(produced(&client.call(&send(1, 0, "c"), 8).await), (0, 2));
    assert_eq!(
        produced(&client.call(&send(0, 2, "zombie"), 8).await).0,
        ResponseError::InvalidProducerEpoch.code()
    );
    // An epoch bumped through InitProducerId fences the old one before it writes.
    assert_eq!(init(&mut client, 4, Some((id, 1))).await, (0, id, 2));
    assert_eq!(
        produced(&client.call(&send(1, 1, "late"), 8).await).0,
        ResponseError::InvalidProducerEpoch.code()
    );
    assert_eq!(produced(&client.call(&send(2, 0, "d"), 8).await), (0, 3));
    assert_eq!(end_offset(&server, "epochs"), 4);
}

#[tokio::test]
async fn five_batches_in_flight_are_stored_in_order_and_answered_in_order() {
    let server = start(KafkaConfig::default()).await;
    create(&server, "pipeline").await;
    let mut client = Client::connect(server.addr).await;
    let (_, id, epoch) = init(&mut client, 4, None).await;
    let mut sent = Vec::new();
    for i in 0..5 {
        let records = batch(&["x", "y"], Some((id, epoch, 2 * i)), 1);
        sent.push(client.send(&produce_request("pipeline", records), 8).await);
    }
    for (i, correlation) in sent.into_iter().enumerate() {
        let response = client.receive::<ProduceRequest>(8, correlation).await;
        assert_eq!(produced(&response), (0, 2 * i as i64));
    }
    // All five again, as a client resends after a lost connection: answered, not stored.
    let mut sent = Vec::new();
    for i in 0..5 {
        let records = batch(&["x", "y"], Some((id, epoch, 2 * i)), 1);
        sent.push(client.send(&produce_request("pipeline", records), 8).await);
    }
    for (i, correlation) in sent.into_iter().enumerate() {
        let response = client.receive::<ProduceRequest>(8, correlation).await;
        assert_eq!(produced(&response), (0, 2 * i as i64));
    }
    assert_eq!(end_offset(&server, "pipeline"), 10);
}

#[tokio::test]
async fn lz4_and_zstd_batches_are_taken_and_zstd_needs_produce_v7() {
    let server = start(KafkaConfig::default()).await;
    create(&server, "packed").await;
    let mut client = Client::connect(server.addr).await;
    let plain = batch(&["one", "two", "three"], None, 1_000);
    let lz4_batch = compressed(&plain, 3, lz4);
    let zstd_batch = compressed(&plain, 4, zstd);
    let response = client.call(&produce_request("packed", lz4_batch), 3).await;
    assert_eq!(produced(&response), (0, 0));
    let response = client
        .call(&produce_request("packed", zstd_batch.clone()), 6)
        .await;
    assert_eq!(
        produced(&response).0,
        ResponseError::UnsupportedCompressionType.code()
    );
    let response = client.call(&produce_request("packed", zstd_batch), 7).await;
    assert_eq!(produced(&response), (0, 3));
    let values: Vec<String> = fetch_all(&mut client, "packed", 0)
        .await
        .into_iter()
        .map(|(v, _)| v)
        .collect();
    assert_eq!(values, ["one", "two", "three", "one", "two", "three"]);

    // A bomb: past kafka.max_frame_bytes once decompressed, refused and nothing stored.
    let config = KafkaConfig {
        max_frame_bytes: 64 * 1024,
        ..KafkaConfig::default()
    };
    let small = start(config).await;
    create(&small, "packed").await;
    let mut client = Client::connect(small.addr).await;
    let big = "z".repeat(200_000);
    for (codec, compress) in [(3u8, lz4 as fn(&[u8]) -> Vec<u8>), (4, zstd)] {
        let bomb = compressed(&batch(&[&big], None, 1), codec, compress);
        let response = client.call(&produce_request("packed", bomb), 8).await;
        assert_eq!(
            produced(&response).0,
            ResponseError::RecordListTooLarge.code()
        );
    }
    assert_eq!(end_offset(&small, "packed"), 0);
}

/// A legacy message (magic 0 or 1) as Kafka's clients write it into a message set.
fn legacy(magic: u8, attributes: u8, timestamp: i64, value: &[u8]) -> Vec<u8> {
    let mut body = vec![magic, attributes];
    if magic == 1 {
        body.extend_from_slice(&timestamp.to_be_bytes());
    }
    body.extend_from_slice(&(-1i32).to_be_bytes()); // null key
    body.extend_from_slice(&(value.len() as i32).to_be_bytes());
    body.extend_from_slice(value);
    let mut out = 0i64.to_be_bytes().to_vec();
    out.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Sends Produce at `version` (0–2, which the codec no longer encodes: a v3 body without
/// its transactional id) and reads the answer by hand: (error code, base offset,
/// log_append_time_ms when v2).
async fn produce_old(
    client: &mut Client,
    version: i16,
    topic: &str,
    set: Vec<u8>,
) -> (i16, i64, Option<i64>) {
    let mut frame = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(version)
        .with_correlation_id(77)
        .encode(&mut frame, 1)
        .unwrap();
    let mut body = BytesMut::new();
    produce_request(topic, Bytes::from(set))
        .encode(&mut body, 3)
        .unwrap();
    frame.put_slice(&body[2..]); // without the null transactional id
    client.send_raw(&frame).await;
    let mut answer = client.read_frame().await.expect("an answer");
    assert_eq!(answer.get_i32(), 77);
    assert_eq!(answer.get_i32(), 1); // topics
    let len = answer.get_i16() as usize;
    assert_eq!(&answer[..len], topic.as_bytes());
    answer.advance(len);
    assert_eq!(answer.get_i32(), 1); // partitions
    assert_eq!(answer.get_i32(), 0);
    let code = answer.get_i16();
    let base = answer.get_i64();
    let append_time = (version >= 2).then(|| answer.get_i64());
    if version >= 1 {
        assert_eq!(answer.get_i32(), 0); // throttle_time_ms
    }
    assert!(!answer.has_remaining());
    (code, base, append_time)
}

#[tokio::test]
async fn produce_v0_to_v2_take_legacy_message_sets_and_fetch_reads_them_as_batches_v2() {
    let server = start(KafkaConfig::default()).await;
    create(&server, "old").await;
    let mut client = Client::connect(server.addr).await;

    // v0: magic 0, two messages.
    let mut set = legacy(0, 0, 0, b"m0-a");
    set.extend(legacy(0, 0, 0, b"m0-b"));
    assert_eq!(produce_old(&mut client, 0, "old", set).await, (0, 0, None));
    // v1: magic 1 in a gzip wrapper.
    let mut inner = legacy(1, 0, 1_600_000_000_001, b"m1-a");
    inner.extend(legacy(1, 0, 1_600_000_000_002, b"m1-b"));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&inner).unwrap();
    let wrapper = legacy(1, 1, 1_600_000_000_002, &gz.finish().unwrap());
    assert_eq!(
        produce_old(&mut client, 1, "old", wrapper).await,
        (0, 2, None)
    );
    // v2: magic 1 in an lz4 wrapper; CreateTime topics answer log_append_time_ms -1.
    let wrapper = legacy(
        1,
        3,
        1_600_000_000_003,
        &lz4(&legacy(1, 0, 1_600_000_000_003, b"m1-c")),
    );
    assert_eq!(
        produce_old(&mut client, 2, "old", wrapper).await,
        (0, 4, Some(-1))
    );
    // A batch v2 is taken by v2 too (Kafka takes any format before v3).
    assert_eq!(
        produce_old(&mut client, 2, "old", batch(&["v2"], None, 1).to_vec()).await,
        (0, 5, Some(-1))
    );
    // A bad CRC is refused and stores nothing.
    let mut bad = legacy(1, 0, 0, b"bad");
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert_eq!(
        produce_old(&mut client, 2, "old", bad).await.0,
        ResponseError::CorruptMessage.code()
    );
    // A legacy set at v3 and later is refused, as Kafka does.
    let response = client
        .call(
            &produce_request("old", Bytes::from(legacy(1, 0, 0, b"late"))),
            3,
        )
        .await;
    assert_eq!(produced(&response).0, ResponseError::InvalidRecord.code());

    let fetched = fetch_all(&mut client, "old", 0).await;
    let values: Vec<&str> = fetched.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(values, ["m0-a", "m0-b", "m1-a", "m1-b", "m1-c", "v2"]);
    // Magic 1 carries CreateTimes, kept; magic 0 has none: the time Ferry stored it.
    let times: Vec<i64> = fetched.iter().map(|(_, t)| *t).collect();
    assert_eq!(
        times[2..5],
        [1_600_000_000_001, 1_600_000_000_002, 1_600_000_000_003]
    );
    let stored = server
        .broker
        .read_topic("old", 0, Position::Offset(0), 1)
        .unwrap();
    assert_eq!(times[0], stored[0].message.published_at);
    assert_eq!(end_offset(&server, "old"), 6);
}

#[tokio::test]
async fn producer_timestamps_are_kept_fetched_and_found_by_list_offsets() {
    let server = start(KafkaConfig::default()).await;
    create(&server, "times").await;
    let mut client = Client::connect(server.addr).await;
    let before = server.broker.now_ms();
    // Two batches created long ago, 4 s apart; both stored now.
    for (first, value) in [(1_000_000_000_000i64, "early"), (1_000_000_004_000, "late")] {
        let response = client
            .call(&produce_request("times", batch(&[value], None, first)), 8)
            .await;
        let p = &response.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0);
        // A CreateTime topic: no LogAppendTime in the answer.
        assert_eq!(p.log_append_time_ms, -1);
    }
    assert_eq!(
        fetch_all(&mut client, "times", 0).await,
        [
            ("early".to_owned(), 1_000_000_000_000),
            ("late".to_owned(), 1_000_000_004_000)
        ]
    );
    // Ferry keeps its own publish time, and shows the CreateTime among the headers.
    let stored = server
        .broker
        .read_topic("times", 0, Position::Offset(0), 2)
        .unwrap();
    assert!(stored[0].message.published_at >= before);
    assert_eq!(
        stored[1]
            .message
            .headers
            .get(header::CREATED_AT)
            .map(String::as_str),
        Some("1000000004000")
    );
    // By time: the CreateTimes, not the publish times.
    let by_time = |t: i64| {
        ListOffsetsRequest::default().with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(name("times"))
                .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(t)]),
        ])
    };
    for (t, expected) in [
        (0, (1_000_000_000_000, 0)),
        (1_000_000_002_000, (1_000_000_004_000, 1)),
        (1_000_000_005_000, (-1, -1)),
    ] {
        let response = client.call(&by_time(t), 6).await;
        let p = &response.topics[0].partitions[0];
        assert_eq!(
            (p.error_code, p.timestamp, p.offset),
            (0, expected.0, expected.1),
            "{t}"
        );
    }
    // A Kafka header in Ferry's namespace cannot forge the CreateTime.
    let mut forged = BytesMut::new();
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: 0,
        timestamp: 5,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: IndexMap::from([(
            StrBytes::from_static_str("ferry-created-at"),
            Some(Bytes::from_static(b"7")),
        )]),
    };
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut forged, &[record], &options).unwrap();
    let response = client
        .call(&produce_request("times", forged.freeze()), 8)
        .await;
    assert_eq!(produced(&response).0, ResponseError::InvalidRecord.code());
    assert_eq!(end_offset(&server, "times"), 2);
}

#[tokio::test]
async fn an_older_epoch_stays_fenced_after_a_broker_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path(), KafkaConfig::default()).await;
    create(&server, "zombies").await;
    let mut client = Client::connect(server.addr).await;
    let (_, id, _) = init(&mut client, 4, None).await;
    let send = |epoch: i16, sequence: i32, value: &'static str| {
        produce_request("zombies", batch(&[value], Some((id, epoch, sequence)), 1))
    };
    assert_eq!(produced(&client.call(&send(0, 0, "a"), 8).await), (0, 0));
    assert_eq!(produced(&client.call(&send(1, 0, "b"), 8).await), (0, 1));
    drop(client);
    server.stop().await;

    let server = start_in(dir.path(), KafkaConfig::default()).await;
    let mut client = Client::connect(server.addr).await;
    // The epoch-0 producer, a zombie, writes a new batch: still fenced.
    assert_eq!(
        produced(&client.call(&send(0, 1, "zombie"), 8).await).0,
        ResponseError::InvalidProducerEpoch.code()
    );
    assert_eq!(produced(&client.call(&send(1, 1, "c"), 8).await), (0, 2));
    assert_eq!(end_offset(&server, "zombies"), 3);
}
