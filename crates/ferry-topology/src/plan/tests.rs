use proptest::prelude::*;

use super::*;
use crate::Topology;
use crate::format::{
    Alerts, Broker, ChannelKind, Consumers, DeadLetter, DeliveryPolicy, Limits, Name, Ordering,
    OrderingMode, Queue, Retry, Subscription, Topic,
};

fn topology(body: &str) -> Topology {
    Topology::from_yaml(&format!("version: 1\nname: t\n{body}")).unwrap()
}

fn lines(desired: &str, current: &str, options: Options) -> Vec<String> {
    let plan = plan(&topology(desired), &topology(current), options).unwrap();
    plan.changes.iter().map(ToString::to_string).collect()
}

const ORDERS: &str = "queues:\n  - name: orders\n    broker: ferry\n    type: queue\n";

fn orders(delivery: &str) -> String {
    format!("{ORDERS}    delivery: {{ {delivery} }}\n")
}

#[test]
fn creates_come_topics_first_then_each_dead_letter_queue_before_its_sender() {
    let desired = "topics:\n  - name: events\n    broker: ferry\n    type: topic\n    partitions: 3\n    subscriptions:\n      - name: audit\n        dead_letter: { name: audit-dlq }\nqueues:\n  - name: orders\n    broker: ferry\n    type: queue\n    dead_letter: { name: a-orders-dlq, retention: 14d }\n";
    assert_eq!(
        lines(desired, "", Options::default()),
        [
            "+ topic events",
            "+ queue a-orders-dlq",
            "+ queue audit-dlq",
            "+ subscription audit",
            "+ queue orders",
        ]
    );
    let plan = plan(&topology(desired), &topology(""), Options::default()).unwrap();
    let dlq = plan.desired.get(Kind::Queue, "a-orders-dlq").unwrap();
    assert_eq!(dlq.dead_letter_of, ["orders"]);
    assert!(plan.data_losing().next().is_none());
}

#[test]
fn the_same_file_on_both_sides_plans_nothing() {
    let file = include_str!("../../../../examples/topology/ecommerce.yaml");
    let file = Topology::from_yaml(file).unwrap();
    let plan = plan(&file, &file, Options::default()).unwrap();
    assert!(plan.is_empty(), "{plan}");
    assert_eq!(plan.to_string(), "no changes\n");
}

#[test]
fn a_changed_retry_setting_is_made_in_place_and_a_fixed_one_recreates_the_queue() {
    let changes = lines(
        &orders("max_deliveries: 7"),
        &orders("max_deliveries: 5"),
        Options::default(),
    );
    assert_eq!(changes, ["~ queue orders: max_deliveries 5 → 7"]);
    let changes = lines(
        &orders("ordering: { mode: key-shared }"),
        &orders("ordering: { mode: shared }"),
        Options::default(),
    );
    assert_eq!(
        changes,
        [
            "~ queue orders: ordering.mode \"shared\" → \"key-shared\" (loses data: the server changes it only by recreating it, emptied)"
        ]
    );
}

#[test]
fn every_managed_delivery_setting_is_compared() {
    let desired = orders(
        "max_deliveries: 3, retry: { initial: 2s, multiplier: 3, max: 1m, jitter: 0.5 }, ordering: { mode: key-shared }, dedup_window: 5m, priorities: 4",
    );
    let current = orders(
        "max_deliveries: 3, retry: { initial: 1s, multiplier: 2, max: 30s, jitter: 0.25 }, ordering: { mode: shared }, dedup_window: 1m, priorities: 1",
    );
    let changes = lines(&desired, &current, Options::default());
    let settings: Vec<&str> = changes
        .iter()
        .map(|c| c.split(": ").nth(1).unwrap().split(' ').next().unwrap())
        .collect();
    assert_eq!(
        settings,
        [
            "retry.initial",
            "retry.multiplier",
            "retry.max",
            "retry.jitter",
            "ordering.mode",
            "dedup_window",
            "priorities"
        ]
    );
    assert!(
        changes[4].contains("\"shared\" → \"key-shared\""),
        "{changes:?}"
    );
}

#[test]
fn a_shorter_retention_is_marked_as_expiring_what_is_stored() {
    // A message keeps the TTL it was published with: a shorter default TTL loses nothing.
    let changes = lines(&orders("ttl: 1h"), &orders("ttl: 1d"), Options::default());
    assert_eq!(changes, ["~ queue orders: ttl 1d → 1h"]);
    // `retention` on a queue is the same setting as `delivery.ttl`.
    let longer = lines(
        &format!("{ORDERS}    retention: 2d\n"),
        &orders("ttl: 1d"),
        Options::default(),
    );
    assert_eq!(longer, ["~ queue orders: ttl 1d → 2d"]);
    let topic = |r: &str| {
        format!("topics:\n  - name: t\n    broker: ferry\n    type: topic\n    retention: {r}\n")
    };
    let changes = lines(&topic("1d"), &topic("7d"), Options::default());
    assert!(
        changes[0].ends_with("(loses data: what is stored expires sooner)"),
        "{changes:?}"
    );
    let dead = |r: &str| format!("{ORDERS}    dead_letter: {{ name: d, retention: {r} }}\n");
    let changes = lines(&dead("1d"), &dead("14d"), Options::default());
    assert_eq!(
        changes,
        [
            "~ queue orders: dead_letter.retention 14d → 1d (loses data: what is stored expires sooner)"
        ]
    );
}

#[test]
fn more_partitions_grow_in_place_and_fewer_are_an_error_naming_the_topic() {
    let topic = |n: u32| {
        format!(
            "topics:\n  - name: events\n    broker: kafka\n    type: topic\n    partitions: {n}\n"
        )
    };
    assert_eq!(
        lines(&topic(6), &topic(3), Options::default()),
        ["~ topic events: partitions 3 → 6"]
    );
    let error = plan(
        &topology(&topic(2)),
        &topology(&topic(3)),
        Options::default(),
    )
    .unwrap_err();
    assert_eq!(
        error,
        PlanError::FewerPartitions {
            topic: "events".into(),
            current: 3,
            desired: 2
        }
    );
    assert!(
        error
            .to_string()
            .starts_with("topic events: partitions cannot go from 3 down to 2")
    );
}

#[test]
fn channels_missing_from_the_file_are_deleted_only_when_pruning() {
    let current = "topics:\n  - name: old\n    broker: ferry\n    type: topic\n    subscriptions:\n      - name: old-sub\n        dead_letter: { name: old-sub.dlq }\nqueues:\n  - name: old-sub.dlq\n    broker: ferry\n    type: queue\n";
    let kept = plan(&topology(""), &topology(current), Options::default()).unwrap();
    assert!(kept.is_empty());
    assert_eq!(
        kept.unmanaged
            .iter()
            .map(|u| (u.kind, u.name.as_str()))
            .collect::<Vec<_>>(),
        [
            (Kind::Topic, "old"),
            (Kind::Subscription, "old-sub"),
            (Kind::Queue, "old-sub.dlq")
        ]
    );
    let prune = Options {
        prune: true,
        ..Options::default()
    };
    assert_eq!(
        lines("", current, prune),
        [
            "- subscription old-sub (loses data: its messages are deleted)",
            "- queue old-sub.dlq (loses data: its messages are deleted)",
            "- topic old (loses data: its messages are deleted)",
        ]
    );
}

#[test]
fn pruning_keeps_the_dead_letter_queue_of_a_channel_the_file_keeps() {
    // The file leaves the dead-letter queue to the server's default (`orders.dlq`).
    let current = format!(
        "{ORDERS}    dead_letter: {{ name: orders.dlq }}\n  - name: orders.dlq\n    broker: ferry\n    type: queue\n"
    );
    let prune = Options {
        prune: true,
        ..Options::default()
    };
    let plan = plan(&topology(ORDERS), &topology(&current), prune).unwrap();
    assert!(plan.is_empty(), "{plan}");
    assert!(plan.unmanaged.is_empty());
}

#[test]
fn a_setting_the_file_leaves_out_is_not_a_difference_but_a_removed_filter_is() {
    assert!(
        lines(
            ORDERS,
            &orders("max_deliveries: 9, ttl: 1h"),
            Options::default()
        )
        .is_empty()
    );
    let sub = |filter: &str| {
        format!(
            "topics:\n  - name: t\n    broker: ferry\n    type: topic\n    subscriptions:\n      - name: s\n{filter}"
        )
    };
    assert_eq!(
        lines(
            &sub(""),
            &sub("        filter: subject ~ a.*\n"),
            Options::default()
        ),
        [
            "~ subscription s: filter \"subject ~ a.*\" → \"\" (loses data: the server changes it only by recreating it, emptied)"
        ]
    );
}

#[test]
fn fields_the_server_cannot_hold_are_never_a_difference() {
    let documented = format!(
        "{ORDERS}    partitions: 4\n    consumers: {{ name: billing, idempotent: true, instances: 3 }}\n    messages: [OrderPlaced]\n    limits: {{ max_message_size: 256KiB }}\n    alerts: {{ dlq_depth: 0, oldest_age: 5s }}\n    delivery: {{ ordering: {{ mode: key-shared, park_failed_keys: true }} }}\nmessages:\n  - name: OrderPlaced\n    key: order_id\n"
    );
    let bare = orders("ordering: { mode: key-shared }");
    assert!(lines(&documented, &bare, Options::default()).is_empty());
}

#[test]
fn a_queue_becoming_a_subscription_frees_its_name_first() {
    let desired = "topics:\n  - name: t\n    broker: ferry\n    type: topic\n    subscriptions:\n      - name: orders\n";
    assert_eq!(
        lines(desired, ORDERS, Options::default()),
        [
            "+ topic t",
            "- queue orders (loses data: its messages are deleted)",
            "+ subscription orders",
        ]
    );
}

#[test]
fn channels_of_brokers_the_server_does_not_serve_are_refused_or_skipped_by_name() {
    let desired = format!(
        "{ORDERS}  - name: jobs\n    broker: rabbitmq\n    type: queue\n  - name: mail\n    broker: sqs\n    type: queue\ntopics:\n  - name: clicks\n    broker: nats\n    type: stream\n"
    );
    let error = plan(&topology(&desired), &topology(""), Options::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the Ferry server does not serve the broker of topic clicks (broker: nats), queue jobs (broker: rabbitmq); apply them with their broker's own tools, or skip them explicitly"
    );
    let skip = Options {
        skip_foreign: true,
        ..Options::default()
    };
    let plan = plan(&topology(&desired), &topology(""), skip).unwrap();
    assert_eq!(
        plan.changes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["+ queue mail", "+ queue orders"]
    );
    let skipped: Vec<String> = plan.skipped.iter().map(|f| f.name.clone()).collect();
    assert_eq!(skipped, ["clicks", "jobs"]);
}

#[test]
fn a_file_that_names_a_channel_twice_or_gives_two_ttls_is_refused() {
    let twice = format!("{ORDERS}{}", &ORDERS["queues:\n".len()..]);
    assert_eq!(
        plan(&topology(&twice), &topology(""), Options::default()).unwrap_err(),
        PlanError::Duplicate {
            name: "orders".into()
        }
    );
    let two = format!("{ORDERS}    retention: 1d\n    delivery: {{ ttl: 2d }}\n");
    let error = plan(&topology(&two), &topology(""), Options::default()).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("orders: `delivery.ttl` (2d) and `retention` (1d)"),
        "{error}"
    );
}

#[test]
fn the_json_form_names_the_action_setting_and_loss() {
    let plan = plan(
        &topology(&orders("max_deliveries: 7")),
        &topology(&orders("max_deliveries: 5")),
        Options::default(),
    )
    .unwrap();
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(
        json["changes"][0],
        serde_json::json!({
            "kind": "queue", "name": "orders", "action": "update",
            "setting": "max_deliveries", "from": 5, "to": 7, "loses_data": null,
        })
    );
    let create = plan_json("", &orders("ttl: 1h"));
    assert_eq!(
        create["changes"][0],
        serde_json::json!({
            "kind": "queue", "name": "orders", "action": "create",
            "settings": { "ttl": "1h" }, "loses_data": null,
        })
    );
}

#[test]
fn the_json_form_lists_unmanaged_and_skipped_channels_as_objects() {
    let desired = "queues:\n  - name: jobs\n    broker: rabbitmq\n    type: queue\n";
    let skip = Options {
        skip_foreign: true,
        ..Options::default()
    };
    let plan = plan(&topology(desired), &topology(ORDERS), skip).unwrap();
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(
        json["unmanaged"],
        serde_json::json!([{ "kind": "queue", "name": "orders" }])
    );
    assert_eq!(
        json["skipped"],
        serde_json::json!([{ "kind": "queue", "name": "jobs", "broker": "rabbitmq" }])
    );
}

fn plan_json(current: &str, desired: &str) -> serde_json::Value {
    let plan = plan(&topology(desired), &topology(current), Options::default()).unwrap();
    serde_json::to_value(&plan).unwrap()
}

// ---- plan(x, x) is empty for any design ----

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,6}"
}

fn duration() -> impl Strategy<Value = crate::format::Duration> {
    (1u64..100_000).prop_map(crate::format::Duration::from_secs)
}

fn delivery() -> impl Strategy<Value = DeliveryPolicy> {
    (
        proptest::option::of(1u32..20),
        proptest::option::of((
            duration(),
            proptest::option::of(1.0f64..4.0),
            proptest::option::of(duration()),
            proptest::option::of(0.0f64..1.0),
        )),
        proptest::option::of((
            prop_oneof![
                Just(OrderingMode::Shared),
                Just(OrderingMode::KeyShared),
                Just(OrderingMode::Exclusive)
            ],
            any::<bool>(),
        )),
        proptest::option::of(duration()),
        proptest::option::of(duration()),
        proptest::option::of(0u8..10),
    )
        .prop_map(
            |(max_deliveries, retry, ordering, dedup_window, ttl, priorities)| DeliveryPolicy {
                max_deliveries,
                retry: retry.map(|(initial, multiplier, max, jitter)| Retry {
                    initial,
                    multiplier,
                    max,
                    jitter,
                }),
                ordering: ordering.map(|(mode, park_failed_keys)| Ordering {
                    mode,
                    park_failed_keys,
                }),
                dedup_window,
                ttl,
                priorities,
            },
        )
}

fn dead_letter() -> impl Strategy<Value = Option<DeadLetter>> {
    proptest::option::of((name(), proptest::option::of(duration()))).prop_map(|d| {
        d.map(|(name, retention)| DeadLetter {
            name: format!("dlq-{name}"),
            retention,
        })
    })
}

fn queue() -> impl Strategy<Value = Queue> {
    (
        name(),
        proptest::option::of(1u32..8),
        delivery(),
        dead_letter(),
        proptest::option::of(1u64..1000),
        any::<bool>(),
    )
        .prop_map(
            |(name, partitions, delivery, dead_letter, max_length, alerts)| Queue {
                name: Name::new(format!("q-{name}")),
                broker: Broker::Ferry,
                kind: ChannelKind::Queue,
                partitions,
                retention: None,
                consumers: Some(Consumers {
                    name: "svc".into(),
                    idempotent: true,
                    instances: Some(2),
                }),
                dead_letter,
                messages: Vec::new(),
                limits: Some(Limits {
                    max_message_size: None,
                    max_length,
                }),
                delivery: Some(delivery),
                alerts: alerts.then_some(Alerts {
                    dlq_depth: Some(0),
                    oldest_age: None,
                    lag: None,
                }),
            },
        )
}

fn topic() -> impl Strategy<Value = Topic> {
    (
        name(),
        proptest::option::of(1u32..16),
        proptest::option::of(duration()),
        proptest::collection::vec(
            (
                name(),
                proptest::option::of("[a-z.*#]{1,8}"),
                delivery(),
                dead_letter(),
            ),
            0..3,
        ),
    )
        .prop_map(|(name, partitions, retention, subs)| Topic {
            name: Name::new(format!("t-{name}")),
            broker: Broker::Kafka,
            kind: ChannelKind::Topic,
            partitions,
            retention,
            messages: Vec::new(),
            limits: None,
            subscriptions: subs
                .into_iter()
                .map(|(sub, filter, delivery, dead_letter)| Subscription {
                    name: Name::new(format!("s-{name}-{sub}")),
                    filter,
                    retention: None,
                    consumers: None,
                    dead_letter,
                    delivery: Some(delivery),
                    alerts: None,
                })
                .collect(),
            consumer_groups: Vec::new(),
        })
}

fn design() -> impl Strategy<Value = Topology> {
    (
        proptest::collection::vec(topic(), 0..4),
        proptest::collection::vec(queue(), 0..5),
    )
        .prop_map(|(mut topics, mut queues)| {
            // Names are unique in a valid design.
            let mut seen = std::collections::BTreeSet::new();
            topics.retain(|t| seen.insert(t.name.to_string()));
            for t in &mut topics {
                t.subscriptions.retain(|s| seen.insert(s.name.to_string()));
            }
            queues.retain(|q| seen.insert(q.name.to_string()));
            Topology {
                version: 1,
                name: Name::new("generated"),
                longest_consumer_outage: None,
                topics,
                queues,
                messages: Vec::new(),
            }
        })
}

proptest! {
    #[test]
    fn a_design_planned_against_itself_has_no_changes(design in design(), prune in any::<bool>()) {
        let options = Options { prune, skip_foreign: false };
        let same = plan(&design, &design, options).unwrap();
        prop_assert!(same.is_empty(), "{}", same);
        prop_assert!(same.unmanaged.is_empty());
        // Through the file format too: what export writes, plan reads back the same.
        let reread = Topology::from_yaml(&design.to_yaml()).unwrap();
        let across = plan(&design, &reread, options).unwrap();
        prop_assert!(across.is_empty(), "{}", across);
    }
}
