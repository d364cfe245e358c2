use super::*;
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;

/// A record as storage would return it for `new` appended at `offset`.
fn stored(new: NewRecord, offset: u64) -> Record {
    Record {
        offset,
        timestamp: new
            .timestamp
            .expect("to_record always stamps the publish time"),
        key: new.key,
        headers: new.headers,
        value: new.value,
    }
}

fn minimal() -> Message {
    Message {
        id: MessageId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap(),
        key: None,
        headers: Headers::new(),
        payload: Bytes::from_static(b"hello"),
        published_at: 1_700_000_000_000,
        priority: 0,
        deliver_at: None,
        expires_at: None,
        dedup_id: None,
        id_chosen: false,
        dead_letter: None,
    }
}

fn full() -> Message {
    Message {
        key: Some(Bytes::from_static(b"order-7")),
        headers: [(header::TYPE.to_owned(), "order.created".to_owned())].into(),
        priority: 9,
        deliver_at: Some(1_700_000_060_000),
        expires_at: Some(1_700_000_600_000),
        dedup_id: Some("order-7-created".into()),
        id_chosen: true,
        dead_letter: None,
        ..minimal()
    }
}

fn with_header(mut record: Record, name: &str, value: &str) -> Record {
    record.headers.push((
        Bytes::copy_from_slice(name.as_bytes()),
        Bytes::copy_from_slice(value.as_bytes()),
    ));
    record
}

fn problem<T: std::fmt::Debug>(result: Result<T>) -> String {
    match result {
        Err(BrokerError::MalformedRecord {
            offset: 42,
            problem,
        }) => problem,
        other => panic!("expected MalformedRecord at offset 42, got {other:?}"),
    }
}

#[test]
fn message_without_optional_fields_writes_only_its_id() {
    let record = minimal().to_record();
    assert_eq!(record.headers.len(), 1);
    assert_eq!(record.headers[0].0, ID);
    assert_eq!(record.key, None);
    assert_eq!(Message::from_record(stored(record, 0)).unwrap(), minimal());
}

#[test]
fn message_with_every_field_round_trips() {
    let record = full().to_record();
    assert_eq!(record.timestamp, Some(1_700_000_000_000));
    assert_eq!(record.key.as_deref(), Some(&b"order-7"[..]));
    assert_eq!(record.value, "hello");
    assert_eq!(Message::from_record(stored(record, 0)).unwrap(), full());
}

#[test]
fn record_without_an_id_is_rejected_with_its_offset() {
    let mut record = stored(minimal().to_record(), 42);
    record.headers.clear();
    assert!(problem(Message::from_record(record)).contains(ID));
}

#[test]
fn unknown_broker_header_is_an_error_not_dropped() {
    let record = with_header(stored(minimal().to_record(), 42), "ferry-redrive", "1");
    let text = problem(Message::from_record(record));
    assert!(
        text.contains("ferry-redrive") && text.contains("newer"),
        "{text}"
    );
}

#[test]
fn repeated_headers_are_rejected() {
    let record = with_header(
        stored(minimal().to_record(), 42),
        ID,
        "01ARZ3NDEKTSV4RRFFQ69G5FAV",
    );
    assert!(problem(Message::from_record(record)).contains("more than once"));
    let record = with_header(stored(full().to_record(), 42), header::TYPE, "again");
    assert!(problem(Message::from_record(record)).contains("more than once"));
}

#[test]
fn unreadable_broker_values_are_rejected() {
    for (name, value) in [(PRIORITY, "256"), (DELIVER_AT, "soon"), (EXPIRES_AT, "")] {
        let record = with_header(stored(minimal().to_record(), 42), name, value);
        assert!(problem(Message::from_record(record)).contains(name));
    }
    let mut record = stored(minimal().to_record(), 42);
    record.headers[0].1 = Bytes::from_static(b"not-a-ulid");
    assert!(problem(Message::from_record(record)).contains("unreadable"));
}

#[test]
fn non_utf8_user_header_is_rejected() {
    let mut record = stored(minimal().to_record(), 42);
    record.headers.push((
        Bytes::from_static(b"bin"),
        Bytes::from_static(&[0xff, 0xfe]),
    ));
    assert!(problem(Message::from_record(record)).contains("not UTF-8"));
}

#[test]
fn messages_survive_a_real_log_append_and_read() {
    use ferry_storage::{Durability, Log, LogConfig};
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        durability: Durability::None,
        preallocate_bytes: 0,
        ..LogConfig::default()
    };
    let log = Log::open(dir.path(), config).unwrap();
    log.append(vec![minimal().to_record(), full().to_record()])
        .unwrap();
    let read: Vec<Message> = log
        .read(0, 1 << 20)
        .unwrap()
        .into_iter()
        .map(|r| Message::from_record(r).unwrap())
        .collect();
    assert_eq!(read, [minimal(), full()]);
    log.close().unwrap();
}

fn user_header_name() -> impl Strategy<Value = String> {
    // Any printable text, including look-alikes of the reserved prefix that are not it.
    "[a-zA-Z0-9 ._:/é-]{1,24}".prop_filter("reserved", |n| !header::is_reserved(n))
}

fn any_message() -> impl Strategy<Value = Message> {
    (
        (1u128..=u128::MAX).prop_map(|bits| MessageId::from_ulid(ulid::Ulid(bits))),
        option::of(vec(any::<u8>(), 0..32).prop_map(Bytes::from)),
        btree_map(user_header_name(), ".{0,24}", 0..6),
        vec(any::<u8>(), 0..256).prop_map(Bytes::from),
        any::<i64>(),
        any::<u8>(),
        option::of(any::<i64>()),
        option::of(any::<i64>()),
        option::of(".{0,24}"),
    )
        .prop_map(
            |(
                id,
                key,
                headers,
                payload,
                published_at,
                priority,
                deliver_at,
                expires_at,
                dedup_id,
            )| {
                Message {
                    id,
                    key,
                    headers,
                    payload,
                    published_at,
                    priority,
                    deliver_at,
                    expires_at,
                    // Varied by the priority bits rather than a new strategy (the tuple is full).
                    id_chosen: priority % 2 == 1,
                    dedup_id,
                    dead_letter: None,
                }
            },
        )
}

proptest! {
    #[test]
    fn every_message_round_trips_through_a_record(message in any_message(), offset in any::<u64>()) {
        let back = Message::from_record(stored(message.to_record(), offset)).unwrap();
        prop_assert_eq!(back, message);
    }
}

#[test]
fn dead_letter_metadata_round_trips_and_partial_metadata_is_refused() {
    let mut message = full();
    message.dead_letter = Some(crate::record::DeadLetterInfo {
        reason: "rejected".into(),
        deliveries: 3,
        origin_queue: "orders".into(),
        origin_seq: 42,
        origin_published_at: 1_700_000_000_000,
        last_error: Some("boom".into()),
        first_failure_ms: Some(1),
        last_failure_ms: Some(2),
        consumer: Some("worker-1".into()),
    });
    let back = Message::from_record(stored(message.to_record(), 9)).unwrap();
    assert_eq!(back, message);

    let mut record = message.to_record();
    record
        .headers
        .retain(|(name, _)| name.as_ref() != crate::record::DLQ_ORIGIN_SEQ.as_bytes());
    let err = Message::from_record(stored(record, 9)).unwrap_err();
    assert!(err.to_string().contains("ferry-dlq-origin-seq"), "{err}");
}

#[test]
fn redrive_headers_read_back_as_headers_and_a_bad_count_is_an_error() {
    let mut message = minimal();
    message
        .headers
        .insert(crate::record::REDRIVE_COUNT.to_owned(), "2".to_owned());
    message
        .headers
        .insert(crate::record::REDRIVE_FROM.to_owned(), "q.dlq".to_owned());
    let back = Message::from_record(stored(message.to_record(), 42)).unwrap();
    assert_eq!(back, message);
    let bad = with_header(
        stored(minimal().to_record(), 42),
        crate::record::REDRIVE_COUNT,
        "two",
    );
    assert!(problem(Message::from_record(bad)).contains("ferry-redrive-count"));
}

#[test]
fn id_chosen_marker_reads_back_and_rejects_other_values_or_repeats() {
    let chosen = Message {
        id_chosen: true,
        ..minimal()
    };
    let back = Message::from_record(stored(chosen.to_record(), 42)).unwrap();
    assert!(back.id_chosen);
    assert!(
        !Message::from_record(stored(minimal().to_record(), 42))
            .unwrap()
            .id_chosen
    );
    let record = stored(minimal().to_record(), 42);
    assert!(
        problem(Message::from_record(with_header(record, ID_CHOSEN, "yes"))).contains(ID_CHOSEN)
    );
    let record = stored(chosen.to_record(), 42);
    assert!(
        problem(Message::from_record(with_header(record, ID_CHOSEN, "1")))
            .contains("more than once")
    );
}

#[test]
fn batch_mark_reads_back_beside_the_message_and_rejects_bad_values_or_repeats() {
    let mark = BatchMark {
        batch: MessageId::parse("01HZX3J9Q5W6B2F8N4K7M1R0TA").unwrap(),
        first: MessageId::parse("01HZX3J9Q5W6B2F8N4K7M1R0TB").unwrap(),
        count: 256,
    };
    let mut record = minimal().to_record();
    put_batch_mark(&mut record, &mark);
    let record = stored(record, 42);
    assert_eq!(batch_mark(&record).unwrap(), Some(mark));
    // The message reads as if the mark were not there.
    assert_eq!(Message::from_record(record.clone()).unwrap(), minimal());
    assert_eq!(
        batch_mark(&stored(minimal().to_record(), 42)).unwrap(),
        None
    );
    for bad in [
        "",
        "01HZX3J9Q5W6B2F8N4K7M1R0TA",
        "01HZX3J9Q5W6B2F8N4K7M1R0TA 01HZX3J9Q5W6B2F8N4K7M1R0TB",
        "01HZX3J9Q5W6B2F8N4K7M1R0TA 01HZX3J9Q5W6B2F8N4K7M1R0TB -1",
        "01HZX3J9Q5W6B2F8N4K7M1R0TA 01HZX3J9Q5W6B2F8N4K7M1R0TB 2 3",
        "nope 01HZX3J9Q5W6B2F8N4K7M1R0TB 2",
    ] {
        let record = with_header(stored(minimal().to_record(), 42), BATCH, bad);
        assert!(problem(batch_mark(&record)).contains(BATCH), "{bad:?}");
        assert!(
            problem(Message::from_record(record)).contains(BATCH),
            "{bad:?}"
        );
    }
    let twice = with_header(
        record_with_mark(&mark),
        BATCH,
        "01HZX3J9Q5W6B2F8N4K7M1R0TA 01HZX3J9Q5W6B2F8N4K7M1R0TB 1",
    );
    assert!(problem(Message::from_record(twice)).contains("more than once"));
}

fn record_with_mark(mark: &BatchMark) -> Record {
    let mut record = minimal().to_record();
    put_batch_mark(&mut record, mark);
    stored(record, 42)
}

#[test]
fn producer_stamp_round_trips_in_topic_records_and_queues_refuse_it() {
    let stamp = ProducerStamp {
        producer_id: "orders-1".into(),
        sequence: 41,
    };
    let record = stored(full().to_topic_record(Some(&stamp)), 42);
    assert_eq!(
        Message::from_topic_record(record.clone()).unwrap(),
        (full(), Some(stamp))
    );
    // A queue never writes a stamp, and reads one as an unknown broker header.
    assert!(problem(Message::from_record(record)).contains(PRODUCER_ID));
    let plain = stored(full().to_topic_record(None), 42);
    assert_eq!(Message::from_topic_record(plain).unwrap(), (full(), None));
}

#[test]
fn half_repeated_or_unreadable_producer_stamps_are_refused() {
    let plain = stored(minimal().to_record(), 42);
    let refused = |record: Record| match Message::from_topic_record(record) {
        Err(BrokerError::MalformedRecord {
            offset: 42,
            problem,
        }) => problem,
        other => panic!("expected MalformedRecord at 42, got {other:?}"),
    };
    let only_id = with_header(plain.clone(), PRODUCER_ID, "p");
    assert!(refused(only_id.clone()).contains(PRODUCER_SEQ));
    let only_seq = with_header(plain.clone(), PRODUCER_SEQ, "1");
    assert!(refused(only_seq).contains(PRODUCER_ID));
    let bad_seq = with_header(only_id.clone(), PRODUCER_SEQ, "-1");
    assert!(refused(bad_seq).contains("decimal"));
    let repeated = with_header(with_header(only_id, PRODUCER_SEQ, "1"), PRODUCER_SEQ, "2");
    assert!(refused(repeated).contains("more than once"));
}

#[test]
fn a_producers_creation_time_is_kept_among_the_headers_and_checked_when_read() {
    let mut message = minimal();
    message
        .headers
        .insert(header::CREATED_AT.to_owned(), "1699999999000".to_owned());
    let read = Message::from_record(stored(message.to_record(), 42)).unwrap();
    assert_eq!(read, message);
    assert_eq!(read.published_at, 1_700_000_000_000);
    let bad = with_header(
        stored(minimal().to_record(), 42),
        header::CREATED_AT,
        "soon",
    );
    assert!(problem(Message::from_record(bad)).contains("ferry-created-at"));
}

#[test]
fn a_schema_id_header_is_kept_among_the_headers_and_checked_when_read() {
    let mut message = minimal();
    message
        .headers
        .insert(header::SCHEMA_ID.to_owned(), "42".to_owned());
    let read = Message::from_record(stored(message.to_record(), 42)).unwrap();
    assert_eq!(read, message);
    let bad = with_header(stored(minimal().to_record(), 42), header::SCHEMA_ID, "x");
    assert!(problem(Message::from_record(bad)).contains("ferry-schema-id"));
}
