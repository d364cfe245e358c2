//! `Ferry::apply_topology`: a topology file declared through the connected transport, on
//! the embedded broker and on a real engine of the machine.

use std::time::Duration;

use ferry::topology::{Kind, Setting};
use ferry::{ConsumerOptions, Destination, Error, Ferry, Message, Source, Topology};

fn ecommerce() -> Topology {
    Topology::from_yaml(include_str!("../../../examples/topology/ecommerce.yaml")).unwrap()
}

#[tokio::test]
async fn the_ecommerce_design_is_declared_on_the_embedded_broker_and_again_without_change() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Ferry::connect(&format!("embedded:{}", dir.path().display()))
        .await
        .unwrap();
    let applied = ferry.apply_topology(&ecommerce()).await.unwrap();
    let declared: Vec<(Kind, &str)> = applied
        .declared
        .iter()
        .map(|(kind, name)| (*kind, name.as_str()))
        .collect();
    assert_eq!(
        declared,
        [
            (Kind::Topic, "ecommerce-order-events"),
            (Kind::Subscription, "analytics-ingest"),
            (Kind::Subscription, "email-notifications"),
            (Kind::Subscription, "inventory-reservation.fifo"),
            (Kind::Subscription, "payment-processing.fifo"),
        ]
    );
    // What no declaration carries is listed, not dropped.
    let skipped = |channel: &str, setting: Setting| {
        applied
            .not_declared
            .iter()
            .any(|n| n.channel == channel && n.setting == setting)
    };
    assert!(skipped("email-notifications", Setting::Filter));
    assert!(skipped("inventory-reservation.fifo", Setting::DeadLetter));
    assert!(skipped(
        "inventory-reservation-dlq.fifo",
        Setting::DeadLetter
    ));
    assert!(skipped("ecommerce-order-events", Setting::Retention));
    assert!(!skipped("analytics-ingest", Setting::MaxDeliveries));

    let again = ferry.apply_topology(&ecommerce()).await.unwrap();
    assert_eq!(again, applied, "declaring is idempotent");

    // The subscriptions are live: a publish to the topic reaches each.
    ferry
        .publisher(Destination::topic("ecommerce-order-events"))
        .send(Message::new("order 1").with_key("order-1"))
        .await
        .unwrap();
    let options = ConsumerOptions {
        poll: Duration::from_millis(50),
        ..ConsumerOptions::default()
    };
    let mut consumer = ferry
        .consumer(
            Source::subscription("ecommerce-order-events", "analytics-ingest"),
            options,
        )
        .await
        .unwrap();
    let delivery = consumer
        .next_within(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the published order");
    assert_eq!(delivery.payload.as_ref(), b"order 1");
}

#[tokio::test]
async fn a_declaration_the_transport_refuses_names_the_channel_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Ferry::connect(&format!("embedded:{}", dir.path().display()))
        .await
        .unwrap();
    let file = Topology::from_yaml(
        "version: 1\nname: t\nqueues:\n  - name: jobs\n    broker: ferry\n    type: queue\n    delivery: { max_deliveries: 0 }\n",
    )
    .unwrap();
    let error = ferry.apply_topology(&file).await.unwrap_err();
    assert!(
        matches!(&error, Error::Invalid { what, .. } if what.contains("queue jobs of the topology")),
        "{error}"
    );
}

/// RabbitMQ has no ordering keys: the key-shared subscription of a design is refused with
/// the transport's `Unsupported`, naming it; the rest of a design without it declares.
#[cfg(feature = "amqp")]
#[tokio::test]
async fn on_rabbitmq_a_key_shared_subscription_is_unsupported_and_named() {
    let Some(url) = ferry_testkit::url_or_skip(
        "RabbitMQ",
        "FERRY_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    ) else {
        return;
    };
    let ferry = Ferry::connect(&url).await.unwrap();
    let topic = ferry_testkit::fresh("topo", "orders");
    let design = |ordering: &str| {
        Topology::from_yaml(&format!(
            "version: 1\nname: t\ntopics:\n  - name: {topic}\n    broker: rabbitmq\n    type: exchange\n    subscriptions:\n      - name: {topic}-billing\n        delivery: {{ max_deliveries: 3, retry: {{ initial: 1s, max: 10s }}{ordering} }}\n"
        ))
        .unwrap()
    };
    let error = ferry
        .apply_topology(&design(", ordering: { mode: key-shared }"))
        .await
        .unwrap_err();
    match &error {
        Error::Unsupported { feature, why, .. } => {
            assert_eq!(feature, "ordering keys", "{error}");
            assert!(
                why.contains(&format!("subscription {topic}-billing of the topology")),
                "{error}"
            );
        }
        other => panic!("not Unsupported: {other}"),
    }
    let applied = ferry.apply_topology(&design("")).await.unwrap();
    assert_eq!(applied.declared.len(), 2);
    assert_eq!(ferry.apply_topology(&design("")).await.unwrap(), applied);
    ferry
        .delete(&Source::subscription(&topic, format!("{topic}-billing")))
        .await
        .unwrap();
    ferry.delete_topic(&topic).await.unwrap();
}
