//! Definitions exported from a real RabbitMQ (`rabbitmqctl export_definitions -`, which
//! needs no management plugin) import as the design that was declared: queues, their
//! dead-letter queues found through the dead-letter exchange, TTL, max length,
//! priorities, delivery limit, exchanges, bindings as filtered subscriptions, a policy's
//! settings, and notes for what the format cannot say.
//!
//! Uses the machine's RabbitMQ on 127.0.0.1:5672 (guest/guest) in a vhost of its own,
//! deleted afterwards. Skips loudly when RabbitMQ or rabbitmqctl is missing; fails under
//! `CI=true`.

use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use ferry_topology::format::{ChannelKind, OrderingMode};
use ferry_topology::{Imported, rabbitmq};
use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Connection, ConnectionProperties, ExchangeKind};

fn rabbitmqctl(args: &[&str]) -> std::io::Result<Output> {
    Command::new("rabbitmqctl").args(args).output()
}

fn unavailable(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "RabbitMQ is required under CI=true: {why}"
    );
    eprintln!("SKIPPED: RabbitMQ definitions import not tested against a real RabbitMQ: {why}");
}

/// A vhost of this test run, deleted with everything in it on drop.
struct Vhost(String);

impl Vhost {
    fn create() -> Result<Self, String> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("ferry-topology-test-{}-{nanos}", std::process::id());
        let run = |args: &[&str]| -> Result<(), String> {
            let output = rabbitmqctl(args).map_err(|e| format!("rabbitmqctl: {e}"))?;
            if output.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "rabbitmqctl {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&output.stderr)
                ))
            }
        };
        run(&["add_vhost", &name])?;
        let vhost = Self(name);
        run(&["set_permissions", "-p", &vhost.0, "guest", ".*", ".*", ".*"])?;
        Ok(vhost)
    }
}

impl Drop for Vhost {
    fn drop(&mut self) {
        let _ = rabbitmqctl(&["delete_vhost", &self.0]);
    }
}

fn args(entries: &[(&str, AMQPValue)]) -> FieldTable {
    let mut table = FieldTable::default();
    for (key, value) in entries {
        table.insert((*key).into(), value.clone());
    }
    table
}

fn text(value: &str) -> AMQPValue {
    AMQPValue::LongString(value.into())
}

fn number(value: i64) -> AMQPValue {
    AMQPValue::LongLongInt(value)
}

/// Declares the design over AMQP, and a policy with rabbitmqctl.
async fn declare(connection: &Connection, vhost: &str) {
    let channel = connection.create_channel().await.unwrap();
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for (name, kind) in [
        ("orders", ExchangeKind::Topic),
        ("orders.dlx", ExchangeKind::Direct),
        ("legacy", ExchangeKind::Fanout),
    ] {
        channel
            .exchange_declare(name, kind, durable, FieldTable::default())
            .await
            .unwrap();
    }
    let queue = |name: &'static str, arguments: FieldTable| {
        let channel = channel.clone();
        async move {
            let options = QueueDeclareOptions {
                durable: true,
                ..Default::default()
            };
            channel
                .queue_declare(name, options, arguments)
                .await
                .unwrap();
        }
    };
    queue(
        "payments",
        args(&[
            ("x-queue-type", text("quorum")),
            ("x-delivery-limit", number(4)),
            ("x-dead-letter-exchange", text("orders.dlx")),
            ("x-dead-letter-routing-key", text("payments")),
        ]),
    )
    .await;
    queue(
        "emails",
        args(&[
            ("x-message-ttl", number(60_000)),
            ("x-max-priority", number(5)),
            ("x-single-active-consumer", AMQPValue::Boolean(true)),
            ("x-dead-letter-exchange", text("orders.dlx")),
            ("x-dead-letter-routing-key", text("emails")),
        ]),
    )
    .await;
    queue(
        "audit",
        args(&[
            ("x-max-length", number(1000)),
            ("x-dead-letter-exchange", text("")),
            ("x-dead-letter-routing-key", text("audit.dlq")),
        ]),
    )
    .await;
    queue(
        "payments.dlq",
        args(&[("x-message-ttl", number(14 * 86_400_000))]),
    )
    .await;
    queue("emails.dlq", FieldTable::default()).await;
    queue("audit.dlq", FieldTable::default()).await;
    queue("reports", FieldTable::default()).await;
    queue("legacy-sink", FieldTable::default()).await;
    for (queue, exchange, key) in [
        ("payments", "orders", "orders.paid.*"),
        ("emails", "orders", "#"),
        ("payments.dlq", "orders.dlx", "payments"),
        ("emails.dlq", "orders.dlx", "emails"),
        ("legacy-sink", "legacy", ""),
    ] {
        channel
            .queue_bind(
                queue,
                exchange,
                key,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
    }
    let output = rabbitmqctl(&[
        "set_policy",
        "-p",
        vhost,
        "reports-limits",
        "^reports$",
        r#"{"message-ttl": 3600000, "max-length": 50, "max-length-bytes": 1048576}"#,
        "--apply-to",
        "queues",
    ])
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The node writes the file itself, as its own user, so a path must be one that user can
/// write; `-` (standard output) needs none.
fn export(vhost: &Vhost) -> Imported {
    let output = rabbitmqctl(&["export_definitions", "-", "--silent"]).unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    rabbitmq::from_vhost_definitions(&text, &vhost.0).unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn exported_definitions_import_as_the_declared_design() {
    if rabbitmqctl(&["--version"]).is_err() {
        return unavailable("rabbitmqctl is not installed");
    }
    let vhost = match Vhost::create() {
        Ok(vhost) => vhost,
        Err(why) => return unavailable(&why),
    };
    let properties = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio);
    let uri = format!("amqp://guest:guest@127.0.0.1:5672/{}", vhost.0);
    let connection = match Connection::connect(&uri, properties).await {
        Ok(connection) => connection,
        Err(error) => return unavailable(&format!("no AMQP on 127.0.0.1:5672: {error}")),
    };
    declare(&connection, &vhost.0).await;
    let Imported { topology, notes } = export(&vhost);
    let _ = connection.close(200, "done").await;
    let notes: Vec<String> = notes.iter().map(ToString::to_string).collect();
    let has = |text: &str| notes.iter().any(|n| n.contains(text));

    // Exchanges are topics; the dead-letter exchange is plumbing, not a topic.
    let topics: Vec<&str> = topology.topics.iter().map(|t| t.name.as_str()).collect();
    // Sorted by name: RabbitMQ exports in no particular order.
    assert_eq!(topics, ["legacy", "orders"]);
    assert!(
        topology
            .topics
            .iter()
            .all(|t| t.kind == ChannelKind::Exchange)
    );

    // Bound queues are subscriptions; the routing key is the filter (`#` is none).
    let orders = &topology.topics[1];
    let subscriptions: Vec<(&str, Option<&str>)> = orders
        .subscriptions
        .iter()
        .map(|s| (s.name.as_str(), s.filter.as_deref()))
        .collect();
    assert_eq!(
        subscriptions,
        [("emails", None), ("payments", Some("orders.paid.*"))]
    );

    // Dead-letter queues found through the DLX and its bindings, with their TTL as
    // retention; the delivery limit as deliveries.
    let payments = &orders.subscriptions[1];
    let dead_letter = payments.dead_letter.as_ref().unwrap();
    assert_eq!(dead_letter.name, "payments.dlq");
    assert_eq!(dead_letter.retention.unwrap().to_string(), "14d");
    assert_eq!(payments.delivery.as_ref().unwrap().max_deliveries, Some(5));
    assert!(has("queue \"payments\": a quorum queue"), "{notes:?}");

    let emails = &orders.subscriptions[0];
    assert_eq!(emails.dead_letter.as_ref().unwrap().name, "emails.dlq");
    let delivery = emails.delivery.as_ref().unwrap();
    assert_eq!(delivery.ttl.unwrap().to_string(), "1m");
    assert_eq!(delivery.priorities, Some(5));
    assert_eq!(
        delivery.ordering.as_ref().unwrap().mode,
        OrderingMode::Exclusive
    );

    // Unbound queues stay queues; dead-letter queues are not queues of their own.
    let queues: Vec<&str> = topology.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(queues, ["audit", "reports"]);
    let audit = &topology.queues[0];
    assert_eq!(audit.limits.as_ref().unwrap().max_length, Some(1000));
    // Through the default exchange: the routing key names the queue.
    assert_eq!(audit.dead_letter.as_ref().unwrap().name, "audit.dlq");

    // A policy's settings count as the queue's.
    let reports = &topology.queues[1];
    assert_eq!(reports.limits.as_ref().unwrap().max_length, Some(50));
    assert_eq!(
        reports.delivery.as_ref().unwrap().ttl.unwrap().to_string(),
        "1h"
    );
    assert!(
        has(
            "queue \"reports\": policy \"reports-limits\" max-length-bytes = 1048576 is not carried over"
        ),
        "{notes:?}"
    );

    // The fanout exchange and its queue, with a note on the exchange type.
    assert_eq!(
        topology.topics[0].subscriptions[0].name.as_str(),
        "legacy-sink"
    );
    assert!(has("exchange \"legacy\": a fanout exchange"), "{notes:?}");
    // And nothing else: the design above is all the format can say.
    assert_eq!(notes.len(), 3, "{notes:#?}");

    // The imported design goes on to AsyncAPI and back unchanged.
    let document = ferry_topology::asyncapi::to_document(&topology).to_string();
    let again = ferry_topology::asyncapi::from_document(&document).unwrap();
    assert_eq!(again.to_yaml(), topology.to_yaml());
}

#[test]
fn text_that_is_not_definitions_is_a_typed_error() {
    assert!(matches!(
        rabbitmq::from_definitions("{\"openapi\": \"3.1.0\"}").unwrap_err(),
        rabbitmq::Error::NotDefinitions
    ));
    assert!(matches!(
        rabbitmq::from_definitions("queues: []").unwrap_err(),
        rabbitmq::Error::Json { line: 1, .. }
    ));
    let two = r#"{"queues": [{"name": "a", "vhost": "one"}, {"name": "b", "vhost": "two"}]}"#;
    let error = rabbitmq::from_definitions(two).unwrap_err();
    assert!(
        matches!(error, rabbitmq::Error::SeveralVhosts { ref vhosts } if vhosts == &["one", "two"]),
        "{error}"
    );
    assert!(matches!(
        rabbitmq::from_vhost_definitions(two, "three").unwrap_err(),
        rabbitmq::Error::UnknownVhost { .. }
    ));
    let nameless = r#"{"queues": [{"vhost": "/"}]}"#;
    assert!(
        rabbitmq::from_definitions(nameless)
            .unwrap_err()
            .to_string()
            .contains("missing field `name`")
    );
}

fn notes_of(imported: &Imported) -> Vec<String> {
    imported.notes.iter().map(ToString::to_string).collect()
}

#[test]
fn the_lower_limit_of_argument_and_policy_wins_and_the_highest_priority_policy_applies() {
    let text = r#"{
      "queues": [{"name": "jobs", "vhost": "/", "durable": true, "auto_delete": false,
                  "arguments": {"x-message-ttl": 60000, "x-max-length": 10}}],
      "policies": [
        {"vhost": "/", "name": "low", "pattern": "^jobs$", "apply-to": "queues", "priority": 1,
         "definition": {"message-ttl": 1000, "max-length": 100, "dead-letter-exchange": ""}},
        {"vhost": "/", "name": "high", "pattern": "^job", "apply-to": "queues", "priority": 5,
         "definition": {"message-ttl": 30000, "max-length": 500,
                        "dead-letter-exchange": "", "dead-letter-routing-key": "jobs.dlq"}}
      ]
    }"#;
    let imported = rabbitmq::from_definitions(text).unwrap();
    let jobs = &imported.topology.queues[0];
    assert_eq!(
        jobs.delivery.as_ref().unwrap().ttl.unwrap().to_string(),
        "30s"
    );
    assert_eq!(jobs.limits.as_ref().unwrap().max_length, Some(10));
    assert_eq!(jobs.dead_letter.as_ref().unwrap().name, "jobs.dlq");
    assert!(imported.notes.is_empty(), "{:?}", notes_of(&imported));
}

#[test]
fn what_does_not_map_is_noted_rather_than_dropped() {
    let text = r##"{
      "queues": [
        {"name": "a", "vhost": "v", "durable": false, "auto_delete": true,
         "arguments": {"x-expires": 60000, "x-overflow": "reject-publish",
                       "x-dead-letter-exchange": "nowhere"}},
        {"name": "b", "vhost": "v", "durable": true, "auto_delete": false,
         "arguments": {"x-dead-letter-exchange": "dlx"}},
        {"name": "b.dlq1", "vhost": "v", "durable": true, "auto_delete": false, "arguments": {}},
        {"name": "b.dlq2", "vhost": "v", "durable": true, "auto_delete": false, "arguments": {}},
        {"name": "log", "vhost": "v", "durable": true, "auto_delete": false,
         "arguments": {"x-queue-type": "stream", "x-max-age": "7D"}},
        {"name": "h", "vhost": "v", "durable": true, "auto_delete": false, "arguments": {}}
      ],
      "exchanges": [
        {"name": "dlx", "vhost": "v", "type": "fanout", "durable": true},
        {"name": "headers-in", "vhost": "v", "type": "headers", "durable": false},
        {"name": "front", "vhost": "v", "type": "topic", "durable": true,
         "arguments": {"alternate-exchange": "headers-in"}}
      ],
      "bindings": [
        {"source": "dlx", "vhost": "v", "destination": "b.dlq1", "destination_type": "queue", "routing_key": ""},
        {"source": "dlx", "vhost": "v", "destination": "b.dlq2", "destination_type": "queue", "routing_key": ""},
        {"source": "headers-in", "vhost": "v", "destination": "h", "destination_type": "queue",
         "routing_key": "", "arguments": {"x-match": "all", "kind": "audit"}},
        {"source": "front", "vhost": "v", "destination": "headers-in", "destination_type": "exchange", "routing_key": "#"}
      ],
      "parameters": [{"vhost": "v", "component": "shovel", "name": "to-dc2", "value": {}}]
    }"##;
    let imported = rabbitmq::from_definitions(text).unwrap();
    let topology = &imported.topology;
    assert_eq!(topology.name.as_str(), "v");
    let log = topology
        .queues
        .iter()
        .find(|q| q.name.as_str() == "log")
        .unwrap();
    assert_eq!(log.kind, ChannelKind::Stream);
    assert_eq!(log.retention.unwrap().to_string(), "7d");
    let b = topology
        .queues
        .iter()
        .find(|q| q.name.as_str() == "b")
        .unwrap();
    assert_eq!(b.dead_letter.as_ref().unwrap().name, "b.dlq1");
    let notes = notes_of(&imported);
    for expected in [
        "queue \"a\": its dead-letter exchange \"nowhere\" is not declared",
        "queue \"a\": argument x-expires = 60000 is not carried over",
        "queue \"a\": argument x-overflow = \"reject-publish\" is not carried over",
        "queue \"a\": not durable or auto-deleted",
        "queue \"b\": dead letters also go to \"b.dlq2\"",
        "exchange \"headers-in\": a headers exchange",
        "exchange \"headers-in\": not durable or auto-deleted",
        "header match",
        "exchange \"front\": argument alternate-exchange is not carried over",
        "binding \"front\" → exchange \"headers-in\": exchange-to-exchange bindings",
        "shovel \"to-dc2\": runtime parameters",
    ] {
        assert!(
            notes.iter().any(|n| n.contains(expected)),
            "no note `{expected}` in {notes:#?}"
        );
    }
}
