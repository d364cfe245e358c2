//! A design exported as AsyncAPI 3.0 and imported again is the same design, and the
//! document says in AsyncAPI's own fields what AsyncAPI has fields for.

use ferry_topology::{Topology, asyncapi};
use serde_json::Value;

fn example(name: &str) -> Topology {
    let path = format!(
        "{}/../../examples/topology/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    Topology::from_yaml(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn examples() -> Vec<(String, Topology)> {
    let dir = format!("{}/../../examples/topology", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert!(names.len() >= 2, "{names:?}");
    names
        .into_iter()
        .map(|n| (n.clone(), example(&n)))
        .collect()
}

#[test]
fn every_example_reads_back_from_its_json_document_as_the_same_file() {
    for (name, topology) in examples() {
        let text = asyncapi::to_document(&topology).to_string();
        let back = asyncapi::from_document(&text)
            .unwrap_or_else(|error| panic!("{name}: {error}\n{text}"));
        assert_eq!(back.to_yaml(), topology.to_yaml(), "{name}");
    }
}

#[test]
fn every_example_reads_back_from_its_yaml_document_as_the_same_file() {
    for (name, topology) in examples() {
        let text = asyncapi::to_yaml_document(&topology);
        let back = asyncapi::from_document(&text)
            .unwrap_or_else(|error| panic!("{name}: {error}\n{text}"));
        assert_eq!(back.to_yaml(), topology.to_yaml(), "{name}");
    }
}

#[test]
fn an_exported_document_reads_back_without_notes() {
    for (name, topology) in examples() {
        let imported = asyncapi::import(&asyncapi::to_document(&topology).to_string()).unwrap();
        assert!(imported.notes.is_empty(), "{name}: {:?}", imported.notes);
    }
}

#[test]
fn the_sns_fan_out_is_written_in_sns_and_sqs_bindings() {
    let doc = asyncapi::to_document(&example("ecommerce.yaml"));
    assert_eq!(doc["asyncapi"], "3.0.0");
    assert_eq!(doc["info"]["title"], "ecommerce-order-processing");
    let topic = &doc["channels"]["ecommerce-order-events"];
    assert_eq!(topic["address"], "ecommerce-order-events");
    assert_eq!(topic["bindings"]["sns"]["name"], "ecommerce-order-events");
    assert_eq!(topic["bindings"]["sns"]["ordering"]["type"], "standard");
    assert_eq!(
        topic["messages"]["OrderPlaced"]["$ref"],
        "#/components/messages/OrderPlaced"
    );
    let inventory = &doc["channels"]["inventory-reservation.fifo"]["bindings"]["sqs"];
    assert_eq!(inventory["queue"]["fifoQueue"], true);
    assert_eq!(inventory["queue"]["messageRetentionPeriod"], 7 * 86_400);
    assert_eq!(
        inventory["queue"]["redrivePolicy"]["deadLetterQueue"]["name"],
        "inventory-reservation-dlq.fifo"
    );
    assert_eq!(inventory["queue"]["redrivePolicy"]["maxReceiveCount"], 5);
    assert_eq!(
        inventory["deadLetterQueue"]["messageRetentionPeriod"],
        14 * 86_400
    );
    // What SQS cannot say stays in the extension, and only that.
    let extension = &doc["channels"]["inventory-reservation.fifo"]["x-ferry"];
    assert_eq!(extension["topic"], "ecommerce-order-events");
    assert_eq!(extension["delivery"]["retry"]["initial"], "1s");
    assert_eq!(extension["delivery"]["max_deliveries"], Value::Null);
    assert_eq!(extension["consumers"]["name"], "inventory-service");
    assert_eq!(extension.get("retention"), None);
    // Operations: publish to the topic, each subscription consumed.
    assert_eq!(
        doc["operations"]["send-ecommerce-order-events"]["action"],
        "send"
    );
    assert_eq!(
        doc["operations"]["receive-payment-processing.fifo"]["channel"]["$ref"],
        "#/channels/payment-processing.fifo"
    );
}

#[test]
fn a_message_has_its_schema_format_and_its_key_as_correlation_id() {
    let doc = asyncapi::to_document(&example("ecommerce.yaml"));
    let message = &doc["components"]["messages"]["OrderPlaced"];
    assert_eq!(message["name"], "OrderPlaced");
    assert_eq!(message["contentType"], "application/json");
    assert_eq!(
        message["payload"]["schemaFormat"],
        "application/schema+json;version=draft-07"
    );
    assert_eq!(
        message["payload"]["schema"]["properties"]["subtotal_cents"]["type"],
        "integer"
    );
    assert_eq!(
        message["correlationId"]["location"],
        "$message.payload#/order_id"
    );
    assert_eq!(message["x-ferry"]["idempotency_key"], "id");
    assert_eq!(message["x-ferry"]["guarantee"], "at-least-once");
}

#[test]
fn kafka_topics_carry_partitions_retention_and_consumer_groups() {
    let doc = asyncapi::to_document(&example("bad.yaml"));
    let kafka = &doc["channels"]["user-events"]["bindings"]["kafka"];
    assert_eq!(kafka["topic"], "user-events");
    assert_eq!(kafka["partitions"], 3);
    assert_eq!(kafka["topicConfiguration"]["max.message.bytes"], 5 << 20);
    assert_eq!(kafka["topicConfiguration"]["cleanup.policy"][0], "delete");
    let group = &doc["operations"]["receive-user-events-crm-sync"];
    assert_eq!(group["bindings"]["kafka"]["groupId"]["enum"][0], "crm-sync");
    // Avro payloads are Avro records.
    let payment = &doc["components"]["messages"]["PaymentTaken"]["payload"];
    assert_eq!(
        payment["schemaFormat"],
        "application/vnd.apache.avro;version=1.9.0"
    );
    assert_eq!(payment["schema"]["fields"][1]["type"], "long");
    // A message named twice gets two components; an undefined one none.
    assert_eq!(
        doc["components"]["messages"]["AuditNote-2"]["name"],
        "AuditNote"
    );
    assert_eq!(doc["components"]["messages"].get("UserDeleted"), None);
}

#[test]
fn the_order_of_channels_and_messages_survives_an_object_that_sorts_its_keys() {
    let text = "version: 1\nname: order\ntopics:\n  - { name: zz, broker: nats, type: topic }\n  - { name: aa, broker: ferry, type: topic }\nmessages:\n  - { name: Zed }\n  - { name: Alpha }\n";
    let topology = Topology::from_yaml(text).unwrap();
    let back = asyncapi::from_document(&asyncapi::to_document(&topology).to_string()).unwrap();
    assert_eq!(back.to_yaml(), topology.to_yaml());
}

#[test]
fn an_asyncapi_2_document_is_refused_with_a_typed_error() {
    let text = "asyncapi: '2.6.0'\ninfo: { title: old, version: '1.0.0' }\nchannels: {}\n";
    let error = asyncapi::from_document(text).unwrap_err();
    assert!(matches!(error, asyncapi::Error::Version2 { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("AsyncAPI 2.6.0 is not supported"),
        "{error}"
    );
}

#[test]
fn an_x_ferry_value_the_format_refuses_is_an_error_naming_the_channel() {
    let mut doc = asyncapi::to_document(&example("ecommerce.yaml"));
    doc["channels"]["email-notifications"]["x-ferry"]["delivery"]["ttl"] = "soon".into();
    let error = asyncapi::from_document(&doc.to_string()).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("channel `email-notifications`: "),
        "{error}"
    );
}

#[test]
fn a_channel_added_to_an_exported_document_by_hand_is_imported_too() {
    let mut doc = asyncapi::to_document(&example("ecommerce.yaml"));
    doc["channels"]["refunds"] = serde_json::json!({
        "address": "refunds",
        "bindings": {"sqs": {"queue": {"name": "refunds", "fifoQueue": false}}}
    });
    let topology = asyncapi::from_document(&doc.to_string()).unwrap();
    let queues: Vec<&str> = topology.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(queues, ["refunds"]);
}
