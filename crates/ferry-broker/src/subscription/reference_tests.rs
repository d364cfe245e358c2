use proptest::prelude::*;

use super::*;

fn record_of(new: NewRecord, offset: u64) -> Record {
    Record {
        offset,
        timestamp: new.timestamp.unwrap(),
        key: new.key,
        headers: new.headers,
        value: new.value,
    }
}

fn message() -> Message {
    let mut rng = fastrand::Rng::with_seed(1);
    crate::OutgoingMessage::new("a large payload")
        .with_key("k")
        .with_header("type", "t")
        .with_priority(3)
        .into_message(&crate::Limits::default(), 1_000, &mut rng)
        .unwrap()
}

/// What a reference keeps of `message`: no payload, no user headers.
fn slim(message: &Message) -> Message {
    Message {
        headers: Default::default(),
        payload: Bytes::new(),
        ..message.clone()
    }
}

#[test]
fn a_reference_carries_the_broker_fields_and_the_position_only() {
    let message = message();
    let at = TopicRef {
        link: 0,
        partition: 2,
        offset: 77,
        size: 19,
    };
    let new = ref_record(&message, at);
    assert_eq!(new.headers.len(), 1, "the marker only");
    let (back, got) = decode_record(record_of(new, 5)).unwrap();
    assert_eq!(got, Some(at));
    assert_eq!(back, slim(&message));
}

#[test]
fn the_binary_form_takes_about_half_the_text_forms_bytes() {
    let message = message();
    let at = TopicRef {
        link: 3,
        partition: 15,
        offset: 1_234_567,
        size: 1_100,
    };
    let binary = ref_record(&message, at).encoded_len();
    let text = text_ref_record(&message, at).encoded_len();
    assert!(binary * 10 < text * 6, "binary {binary} bytes, text {text}");
}

#[test]
fn references_in_the_text_form_still_read() {
    let message = message();
    for link in [0, 4] {
        let at = TopicRef {
            link,
            partition: 2,
            offset: 77,
            size: 19,
        };
        let (back, got) = decode_record(record_of(text_ref_record(&message, at), 5)).unwrap();
        assert_eq!(got, Some(at));
        assert_eq!(back, slim(&message));
    }
}

#[test]
fn a_plain_message_is_not_a_reference() {
    let message = message();
    let (back, got) = decode_record(record_of(message.to_record(), 0)).unwrap();
    assert_eq!(got, None);
    assert_eq!(back, message);
}

#[test]
fn a_reference_with_a_damaged_link_field_is_refused() {
    for value in ["1:2:3:0", "1:2:3:x", "1:2:3:4:5"] {
        let record = Record {
            offset: 0,
            timestamp: 0,
            key: None,
            headers: vec![(Bytes::from_static(TOPIC_REF.as_bytes()), Bytes::from(value))],
            value: Bytes::new(),
        };
        assert!(decode_record(record).is_err(), "{value}");
    }
}

#[test]
fn a_damaged_binary_reference_is_refused() {
    let mut with_dedup = message();
    with_dedup.dedup_id = Some("d".into());
    let good = ref_record(&with_dedup, TopicRef::default());
    let mut cases: Vec<NewRecord> = Vec::new();
    // Cut short anywhere.
    for len in 0..good.value.len() {
        cases.push(NewRecord {
            value: good.value.slice(..len),
            ..good.clone()
        });
    }
    let with_value = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut value = good.value.to_vec();
        f(&mut value);
        NewRecord {
            value: value.into(),
            ..good.clone()
        }
    };
    cases.push(with_value(&|v| v.push(0)));
    cases.push(with_value(&|v| v[0] = VERSION + 1));
    cases.push(with_value(&|v| v[1] |= 0x80));
    let mut two_headers = good.clone();
    two_headers
        .headers
        .push((Bytes::from("x"), Bytes::from("y")));
    cases.push(two_headers);
    let mut marker_with_value = good.clone();
    marker_with_value.headers[0].1 = Bytes::from("1");
    cases.push(marker_with_value);
    for case in cases {
        assert!(
            decode_record(record_of(case.clone(), 9)).is_err(),
            "{:?}",
            case.value
        );
    }
}

fn any_time() -> impl Strategy<Value = i64> {
    prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0i64), any::<i64>()]
}

proptest! {
    #[test]
    fn the_binary_form_round_trips(
        id in any::<u128>(),
        key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        published_at in any_time(),
        priority in any::<u8>(),
        deliver_at in proptest::option::of(any_time()),
        expires_at in proptest::option::of(any_time()),
        dedup_id in proptest::option::of("\\PC{0,30}"),
        id_chosen in any::<bool>(),
        link in any::<u32>(),
        partition in any::<u32>(),
        offset in any::<u64>(),
        size in any::<u32>(),
    ) {
        let message = Message {
            id: MessageId::from_ulid(ulid::Ulid(id)),
            key: key.map(Bytes::from),
            headers: Default::default(),
            payload: Bytes::new(),
            published_at,
            priority,
            deliver_at,
            expires_at,
            dedup_id,
            id_chosen,
            dead_letter: None,
        };
        let at = TopicRef { link, partition, offset, size };
        let (back, got) = decode_record(record_of(ref_record(&message, at), 0)).unwrap();
        prop_assert_eq!(got, Some(at));
        prop_assert_eq!(back, message);
    }
}
