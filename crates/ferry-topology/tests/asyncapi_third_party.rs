//! AsyncAPI 3.0 documents written by others (no `x-ferry`) import as designs, with a note
//! for each setting that does not carry over.

use ferry_topology::format::{Broker, ChannelKind, SchemaFormat};
use ferry_topology::{Imported, asyncapi};

fn import(name: &str) -> Imported {
    let path = format!("{}/tests/data/asyncapi/{name}", env!("CARGO_MANIFEST_DIR"));
    asyncapi::import(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn kafka_channels_become_streams_with_partitions_retention_and_groups() {
    let imported = import("streetlights-kafka.yaml");
    let topology = &imported.topology;
    assert_eq!(topology.name.as_str(), "Streetlights Kafka API");
    let names: Vec<&str> = topology.topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "smartylighting.streetlights.1.0.event.lighting.measured",
            "smartylighting.streetlights.1.0.action.turn.on"
        ]
    );
    let measured = &topology.topics[0];
    assert_eq!(measured.broker, Broker::Kafka);
    assert_eq!(measured.kind, ChannelKind::Stream);
    assert_eq!(measured.partitions, Some(12));
    assert_eq!(measured.retention.unwrap().to_string(), "7d");
    assert_eq!(
        measured
            .limits
            .as_ref()
            .unwrap()
            .max_message_size
            .unwrap()
            .as_bytes(),
        1_048_588
    );
    assert_eq!(measured.messages[0].as_str(), "lightMeasured");
    assert_eq!(
        measured.consumer_groups[0].name.as_str(),
        "lighting-dashboard"
    );

    let message = topology.message("lightMeasured").unwrap();
    assert_eq!(message.key.as_deref(), Some("streetlightId"));
    assert_eq!(
        message.schema.as_ref().unwrap().format,
        SchemaFormat::JsonSchema
    );
    let fields: Vec<(&str, Option<&str>)> = message
        .payload
        .iter()
        .map(|f| (f.name.as_str(), f.kind.as_deref()))
        .collect();
    // `sentAt` is a reference to a shared schema, followed.
    assert!(fields.contains(&("lumens", Some("integer"))), "{fields:?}");
    assert!(fields.contains(&("sentAt", Some("string"))), "{fields:?}");
    assert!(topology.message("turnOnOff").is_some());
}

#[test]
fn what_kafka_settings_do_not_carry_over_is_noted() {
    let notes: Vec<String> = import("streetlights-kafka.yaml")
        .notes
        .iter()
        .map(ToString::to_string)
        .collect();
    let has = |text: &str| notes.iter().any(|n| n.contains(text));
    assert!(
        has("channel `lightTurnOn`: cleanup.policy compact"),
        "{notes:?}"
    );
    assert!(
        has("channel `lightingMeasured`: kafka replicas"),
        "{notes:?}"
    );
    assert!(has("message `lightMeasured`: message traits"), "{notes:?}");
}

#[test]
fn amqp_and_sqs_channels_become_exchanges_and_queues_with_their_dead_letter_queue() {
    let imported = import("signup-amqp-sqs.json");
    let topology = &imported.topology;
    let exchange = &topology.topics[0];
    assert_eq!(exchange.name.as_str(), "user.events");
    assert_eq!(
        (exchange.broker, exchange.kind),
        (Broker::Rabbitmq, ChannelKind::Exchange)
    );
    let queues: Vec<(&str, Broker)> = topology
        .queues
        .iter()
        .map(|q| (q.name.as_str(), q.broker))
        .collect();
    assert_eq!(
        queues,
        [
            ("signup-audit", Broker::Rabbitmq),
            ("welcome-mail", Broker::Sqs)
        ]
    );
    let mail = &topology.queues[1];
    assert_eq!(mail.retention.unwrap().to_string(), "4d");
    let dead_letter = mail.dead_letter.as_ref().unwrap();
    // The dead-letter queue named by its ARN.
    assert_eq!(dead_letter.name, "welcome-mail-dlq");
    assert_eq!(dead_letter.retention.unwrap().to_string(), "14d");
    assert_eq!(mail.delivery.as_ref().unwrap().max_deliveries, Some(4));
    // Avro record fields in order, Avro types as the file's.
    let signed_up = topology.message("UserSignedUp").unwrap();
    assert_eq!(
        signed_up.schema.as_ref().unwrap().format,
        SchemaFormat::Avro
    );
    let fields: Vec<(&str, Option<&str>)> = signed_up
        .payload
        .iter()
        .map(|f| (f.name.as_str(), f.kind.as_deref()))
        .collect();
    assert_eq!(
        fields,
        [
            ("userId", Some("string")),
            ("email", Some("string")),
            ("signedUpAt", Some("integer"))
        ]
    );
    // A message written inline in its channel is a message type too.
    assert_eq!(mail.messages[0].as_str(), "SendWelcomeMail");
    assert!(topology.message("SendWelcomeMail").is_some());
    let notes: Vec<String> = imported.notes.iter().map(ToString::to_string).collect();
    assert_eq!(
        notes,
        ["channel `welcomeMail`: sqs queue visibilityTimeout is not carried over"]
    );
}

#[test]
fn an_imported_design_exports_and_imports_again_unchanged() {
    for name in ["streetlights-kafka.yaml", "signup-amqp-sqs.json"] {
        let topology = import(name).topology;
        let again = asyncapi::from_document(&asyncapi::to_document(&topology).to_string()).unwrap();
        assert_eq!(again.to_yaml(), topology.to_yaml(), "{name}");
    }
}
