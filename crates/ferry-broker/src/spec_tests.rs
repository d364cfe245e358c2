use super::*;

fn setting_of(spec: &QueueSpec) -> &'static str {
    match spec.validate() {
        Err(BrokerError::InvalidSetting { setting, .. }) => setting,
        other => panic!("expected InvalidSetting, got {other:?}"),
    }
}

fn name(s: &str) -> Name {
    Name::new(s).unwrap()
}

#[test]
fn defaults_match_the_design_and_are_valid() {
    let spec = QueueSpec::default();
    spec.validate().unwrap();
    assert_eq!(spec.retry, RetryPolicy::default());
    assert_eq!(spec.dead_letter, DeadLetter::Default);
    assert_eq!(spec.dedup_window, Duration::from_secs(300));
    assert_eq!(spec.default_ttl, None);
    assert_eq!(spec.lease, Duration::from_secs(30));
    assert_eq!(spec.max_delay, Duration::from_secs(90 * 86_400));
    assert_eq!(spec.priority_levels, 1);
    assert_eq!(spec.lower_priority_share, 0.1);
    assert_eq!(spec.ordering, OrderingMode::Shared);
    assert_eq!(spec.length_limit, LengthLimit::default());
    assert_eq!(spec.length_limit.overflow, OverflowPolicy::RejectPublish);
    assert_eq!(spec.durability, Durability::Fsync);
    assert_eq!(spec.dead_letter_retention, Duration::from_secs(14 * 86_400));
}

#[test]
fn invalid_retry_policy_fails_the_spec() {
    let mut spec = QueueSpec::default();
    spec.retry.max_deliveries = 0;
    assert_eq!(setting_of(&spec), "retry.max_deliveries");
}

#[test]
fn zero_lease_is_rejected() {
    for lease in [Duration::ZERO, Duration::from_micros(500)] {
        let spec = QueueSpec {
            lease,
            ..QueueSpec::default()
        };
        assert_eq!(setting_of(&spec), "lease");
    }
}

#[test]
fn lease_longer_than_12_hours_is_rejected() {
    let spec = QueueSpec {
        lease: QueueSpec::MAX_LEASE + Duration::from_secs(1),
        ..QueueSpec::default()
    };
    assert_eq!(setting_of(&spec), "lease");
    let at_max = QueueSpec {
        lease: QueueSpec::MAX_LEASE,
        ..QueueSpec::default()
    };
    at_max.validate().unwrap();
}

#[test]
fn dedup_window_beyond_7_days_is_rejected_and_zero_turns_dedup_off() {
    let long = QueueSpec {
        dedup_window: QueueSpec::MAX_DEDUP_WINDOW + Duration::from_secs(1),
        ..QueueSpec::default()
    };
    assert_eq!(setting_of(&long), "dedup_window");
    let off = QueueSpec {
        dedup_window: Duration::ZERO,
        ..QueueSpec::default()
    };
    off.validate().unwrap();
}

#[test]
fn default_ttl_must_be_between_1ms_and_90_days() {
    for ttl in [Duration::ZERO, QueueSpec::MAX_TTL + Duration::from_secs(1)] {
        let spec = QueueSpec {
            default_ttl: Some(ttl),
            ..QueueSpec::default()
        };
        assert_eq!(setting_of(&spec), "default_ttl");
    }
}

#[test]
fn max_delay_beyond_90_days_is_rejected() {
    let spec = QueueSpec {
        max_delay: QueueSpec::MAX_DELAY + Duration::from_secs(1),
        ..QueueSpec::default()
    };
    assert_eq!(setting_of(&spec), "max_delay");
}

#[test]
fn priority_levels_outside_1_to_10_are_rejected() {
    for levels in [0, 11] {
        let spec = QueueSpec {
            priority_levels: levels,
            ..QueueSpec::default()
        };
        assert_eq!(setting_of(&spec), "priority_levels");
    }
}

#[test]
fn lower_priority_share_outside_0_to_half_is_rejected() {
    for share in [-0.1, 0.51, f64::NAN] {
        let spec = QueueSpec {
            lower_priority_share: share,
            ..QueueSpec::default()
        };
        assert_eq!(setting_of(&spec), "lower_priority_share");
    }
    for share in [0.0, 0.5] {
        let spec = QueueSpec {
            lower_priority_share: share,
            ..QueueSpec::default()
        };
        spec.validate().unwrap();
    }
}

#[test]
fn a_publish_above_the_levels_is_refused_and_a_stored_message_above_them_takes_the_top() {
    let spec = QueueSpec {
        priority_levels: 3,
        ..QueueSpec::default()
    };
    let q = Name::new("q").unwrap();
    assert!(spec.check_priority(&q, 2).is_ok());
    assert!(matches!(
        spec.check_priority(&q, 3),
        Err(BrokerError::PriorityAboveLevels {
            priority: 3,
            levels: 3,
            ..
        })
    ));
    assert_eq!(spec.effective_priority(0), 0);
    assert_eq!(spec.effective_priority(2), 2);
    assert_eq!(spec.effective_priority(200), 2);
    assert_eq!(QueueSpec::default().effective_priority(9), 0);
}

#[test]
fn zero_length_limits_are_rejected() {
    let messages = QueueSpec {
        length_limit: LengthLimit {
            max_messages: Some(0),
            ..LengthLimit::default()
        },
        ..QueueSpec::default()
    };
    assert_eq!(setting_of(&messages), "length_limit.max_messages");
    let bytes = QueueSpec {
        length_limit: LengthLimit {
            max_bytes: Some(0),
            ..LengthLimit::default()
        },
        ..QueueSpec::default()
    };
    assert_eq!(setting_of(&bytes), "length_limit.max_bytes");
}

#[test]
fn dead_letter_head_overflow_without_a_dead_letter_queue_is_rejected() {
    let spec = QueueSpec {
        dead_letter: DeadLetter::Disabled,
        length_limit: LengthLimit {
            max_messages: Some(100),
            max_bytes: None,
            overflow: OverflowPolicy::DeadLetterHead,
        },
        ..QueueSpec::default()
    };
    assert_eq!(setting_of(&spec), "length_limit.overflow");
}

#[test]
fn zero_interval_durability_is_rejected() {
    let spec = QueueSpec {
        durability: Durability::Interval(Duration::ZERO),
        ..QueueSpec::default()
    };
    assert_eq!(setting_of(&spec), "durability");
}

#[test]
fn dead_letter_retention_must_be_positive() {
    let spec = QueueSpec {
        dead_letter_retention: Duration::ZERO,
        ..QueueSpec::default()
    };
    assert_eq!(setting_of(&spec), "dead_letter_retention");
}

#[test]
fn default_dead_letter_target_is_name_dot_dlq() {
    let spec = QueueSpec::default();
    let target = spec.dead_letter_target(&name("orders")).unwrap();
    assert_eq!(target, Some(name("orders.dlq")));
}

#[test]
fn named_and_disabled_dead_letter_targets_resolve_as_given() {
    let named = QueueSpec {
        dead_letter: DeadLetter::Named(name("all-failures")),
        ..QueueSpec::default()
    };
    assert_eq!(
        named.dead_letter_target(&name("orders")).unwrap(),
        Some(name("all-failures"))
    );
    let disabled = QueueSpec {
        dead_letter: DeadLetter::Disabled,
        ..QueueSpec::default()
    };
    assert_eq!(disabled.dead_letter_target(&name("orders")).unwrap(), None);
}

#[test]
fn dead_letter_queue_cannot_derive_a_dead_letter_queue_of_its_own() {
    let e = QueueSpec::default()
        .dead_letter_target(&name("orders.dlq"))
        .unwrap_err();
    assert!(matches!(
        e,
        BrokerError::DeadLetterQueueNeedsExplicitTarget { .. }
    ));
    assert!(e.to_string().contains("Disabled"), "{e}");
}

#[test]
fn queue_name_too_long_for_a_derived_dead_letter_queue_is_an_error() {
    let long = name(&"q".repeat(Name::MAX_LEN));
    assert!(matches!(
        QueueSpec::default().dead_letter_target(&long),
        Err(BrokerError::DeadLetterNameTooLong { .. })
    ));
}
