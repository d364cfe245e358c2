use super::*;

const NOW: i64 = 1_700_000_000_000;

fn limits() -> Limits {
    Limits::default()
}

fn check(message: &OutgoingMessage) -> Result<()> {
    message.validate(&limits(), NOW)
}

fn rng() -> fastrand::Rng {
    fastrand::Rng::with_seed(11)
}

#[test]
fn limit_defaults_match_the_design() {
    let l = Limits::default();
    assert_eq!(l.max_payload_bytes, 1024 * 1024);
    assert_eq!(l.max_headers, 64);
    assert_eq!(l.max_header_name_bytes, 256);
    assert_eq!(l.max_header_value_bytes, 8 * 1024);
    assert_eq!(l.max_dedup_id_bytes, 512);
    assert_eq!(l.max_key_bytes, 4 * 1024);
    assert_eq!(l.max_delay, Duration::from_secs(90 * 86_400));
    assert_eq!(l.max_ttl, Duration::from_secs(90 * 86_400));
}

#[test]
fn a_message_at_every_limit_is_accepted() {
    let l = limits();
    let mut m = OutgoingMessage::new(vec![0u8; l.max_payload_bytes])
        .with_key(vec![b'k'; l.max_key_bytes])
        .with_dedup_id("d".repeat(l.max_dedup_id_bytes))
        .with_delay(l.max_delay - Duration::from_secs(1))
        .with_ttl(l.max_ttl);
    for i in 0..l.max_headers {
        let name = format!("{i:0>256}");
        m = m.with_header(name, "v".repeat(l.max_header_value_bytes));
    }
    check(&m).unwrap();
}

#[test]
fn payload_over_the_limit_is_rejected_with_size_and_max() {
    let e = check(&OutgoingMessage::new(vec![0u8; (1 << 20) + 1])).unwrap_err();
    assert!(matches!(
        e,
        BrokerError::PayloadTooLarge {
            size: 1_048_577,
            max: 1_048_576
        }
    ));
}

#[test]
fn too_many_headers_are_rejected() {
    let mut m = OutgoingMessage::new("x");
    for i in 0..65 {
        m = m.with_header(format!("h{i}"), "v");
    }
    assert!(matches!(
        check(&m),
        Err(BrokerError::TooManyHeaders { count: 65, max: 64 })
    ));
}

#[test]
fn oversized_header_name_and_value_are_rejected() {
    let long_name = OutgoingMessage::new("x").with_header("n".repeat(257), "v");
    assert!(matches!(
        check(&long_name),
        Err(BrokerError::HeaderNameTooLong {
            len: 257,
            max: 256,
            ..
        })
    ));
    let long_value = OutgoingMessage::new("x").with_header("n", "v".repeat(8193));
    assert!(matches!(
        check(&long_value),
        Err(BrokerError::HeaderValueTooLong {
            len: 8193,
            max: 8192,
            ..
        })
    ));
}

#[test]
fn user_header_in_the_ferry_namespace_is_rejected_in_any_case() {
    for name in ["ferry-id", "Ferry-Deliver-At", "FERRY-anything"] {
        let e = check(&OutgoingMessage::new("x").with_header(name, "1")).unwrap_err();
        assert!(matches!(&e, BrokerError::ReservedHeaderName { name: n } if n == name));
        assert!(e.to_string().contains("ferry-"), "{e}");
    }
}

#[test]
fn empty_header_name_or_one_with_a_newline_is_rejected() {
    let empty = OutgoingMessage::new("x").with_header("", "v");
    assert!(matches!(check(&empty), Err(BrokerError::EmptyHeaderName)));
    let newline = OutgoingMessage::new("x").with_header("a\r\nb", "v");
    assert!(matches!(
        check(&newline),
        Err(BrokerError::HeaderNameHasControlCharacter { position: 1, .. })
    ));
}

#[test]
fn key_over_the_limit_is_rejected() {
    let m = OutgoingMessage::new("x").with_key(vec![0u8; 4097]);
    assert!(matches!(
        check(&m),
        Err(BrokerError::KeyTooLarge {
            size: 4097,
            max: 4096
        })
    ));
}

#[test]
fn empty_or_oversized_dedup_id_is_rejected() {
    let empty = OutgoingMessage::new("x").with_dedup_id("");
    assert!(matches!(check(&empty), Err(BrokerError::EmptyDedupId)));
    let long = OutgoingMessage::new("x").with_dedup_id("d".repeat(513));
    assert!(matches!(
        check(&long),
        Err(BrokerError::DedupIdTooLong { len: 513, max: 512 })
    ));
}

#[test]
fn nil_message_id_is_rejected() {
    let m = OutgoingMessage::new("x").with_id(MessageId::from_ulid(ulid::Ulid::nil()));
    assert!(matches!(check(&m), Err(BrokerError::NilMessageId)));
}

#[test]
fn delay_beyond_the_max_is_rejected_as_a_duration_or_an_absolute_time() {
    let max = limits().max_delay;
    let relative = OutgoingMessage::new("x").with_delay(max + Duration::from_millis(1));
    assert!(matches!(
        check(&relative),
        Err(BrokerError::DelayTooLong { .. })
    ));
    let absolute = OutgoingMessage::new("x").with_deliver_at(NOW + millis(max) + 1);
    assert!(matches!(
        check(&absolute),
        Err(BrokerError::DelayTooLong { .. })
    ));
    check(&OutgoingMessage::new("x").with_deliver_at(NOW + millis(max))).unwrap();
}

#[test]
fn deliver_at_in_the_past_is_accepted_and_means_now() {
    let m = OutgoingMessage::new("x").with_deliver_at(NOW - 3_600_000);
    let stored = m.into_message(&limits(), NOW, &mut rng()).unwrap();
    assert_eq!(stored.deliver_at, None);
    assert!(stored.is_due(NOW));
    let very_old = OutgoingMessage::new("x").with_deliver_at(i64::MIN);
    check(&very_old).unwrap();
}

#[test]
fn ttl_shorter_than_a_millisecond_or_beyond_the_max_is_rejected() {
    let short = OutgoingMessage::new("x").with_ttl(Duration::from_micros(999));
    assert!(matches!(
        check(&short),
        Err(BrokerError::TtlTooShort { .. })
    ));
    let long = OutgoingMessage::new("x").with_ttl(limits().max_ttl + Duration::from_secs(1));
    assert!(matches!(check(&long), Err(BrokerError::TtlTooLong { .. })));
}

#[test]
fn message_that_would_expire_before_its_delivery_time_is_rejected() {
    let m = OutgoingMessage::new("x")
        .with_delay(Duration::from_secs(60))
        .with_ttl(Duration::from_secs(60));
    let e = check(&m).unwrap_err();
    assert!(matches!(e, BrokerError::ExpiresBeforeDelivery { .. }));
    let ok = m.with_ttl(Duration::from_secs(61));
    check(&ok).unwrap();
}

#[test]
fn accepted_message_gets_absolute_times_from_one_clock_reading() {
    let m = OutgoingMessage::new("body")
        .with_header(header::TYPE, "order.created")
        .with_priority(3)
        .with_delay(Duration::from_millis(1500))
        .with_ttl(Duration::from_secs(10));
    let stored = m.into_message(&limits(), NOW, &mut rng()).unwrap();
    assert_eq!(stored.published_at, NOW);
    assert_eq!(stored.id.timestamp_ms(), NOW as u64);
    assert_eq!(stored.deliver_at, Some(NOW + 1500));
    assert_eq!(stored.expires_at, Some(NOW + 10_000));
    assert_eq!(stored.priority, 3);
    assert_eq!(stored.headers[header::TYPE], "order.created");
}

#[test]
fn producer_supplied_id_is_kept() {
    let id = MessageId::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV").unwrap();
    let stored = OutgoingMessage::new("x")
        .with_id(id)
        .into_message(&limits(), NOW, &mut rng())
        .unwrap();
    assert_eq!(stored.id, id);
}

#[test]
fn invalid_message_is_not_turned_into_a_stored_message() {
    let m = OutgoingMessage::new(vec![0u8; (1 << 20) + 1]);
    assert!(m.into_message(&limits(), NOW, &mut rng()).is_err());
}

#[test]
fn expiry_instant_counts_as_expired_and_delivery_instant_as_due() {
    let stored = OutgoingMessage::new("x")
        .with_delay(Duration::from_secs(1))
        .with_ttl(Duration::from_secs(2))
        .into_message(&limits(), NOW, &mut rng())
        .unwrap();
    assert!(!stored.is_due(NOW + 999));
    assert!(stored.is_due(NOW + 1000));
    assert!(!stored.is_expired(NOW + 1999));
    assert!(stored.is_expired(NOW + 2000));
}

#[test]
fn a_creation_time_is_the_one_reserved_header_a_publisher_may_set() {
    let created = OutgoingMessage::new("x").with_header("ferry-created-at", "1700000000000");
    assert!(check(&created).is_ok());
    for bad in ["-1", "soon", ""] {
        let e = check(&OutgoingMessage::new("x").with_header("ferry-created-at", bad));
        assert!(
            matches!(
                e,
                Err(BrokerError::InvalidSetting {
                    setting: "ferry-created-at",
                    ..
                })
            ),
            "{bad:?}"
        );
    }
    // Only so spelled.
    let shouted = OutgoingMessage::new("x").with_header("Ferry-Created-At", "1");
    assert!(matches!(
        check(&shouted),
        Err(BrokerError::ReservedHeaderName { .. })
    ));
}
