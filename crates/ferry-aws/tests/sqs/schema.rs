//! A send into a queue that requires a schema subject: the payload is checked by the
//! broker's payload validator, a refusal is InvalidParameterValue naming the field and
//! stores nothing (a batch entry's refusal is that entry's failure), and the message
//! attribute `ferry-schema-id` reaches the validator as the header of that name.

use std::sync::Arc;

use ferry_broker::{Broker, OutgoingMessage, PayloadValidator, QueueSpec, SchemaRejection, header};
use serde_json::json;

use crate::support::{Served, served_config};

/// Takes bodies starting with `ok` that name schema 7 in the `ferry-schema-id` header;
/// refuses the rest, naming the field `order.id`.
#[derive(Debug)]
struct NeedsSchemaSeven;

impl PayloadValidator for NeedsSchemaSeven {
    fn validate(&self, _subject: &str, message: &OutgoingMessage) -> Result<(), SchemaRejection> {
        let named = message.headers.get(header::SCHEMA_ID).map(String::as_str) == Some("7");
        if named && message.payload.starts_with(b"ok") {
            return Ok(());
        }
        Err(SchemaRejection {
            field: "order.id".into(),
            reason: "expected a long".into(),
        })
    }
}

#[tokio::test]
async fn a_send_that_does_not_match_the_queues_subject_is_invalid_parameter_value_naming_the_field()
{
    let dir = tempfile::tempdir().unwrap();
    let mut config = served_config();
    config.payload_validator = Some(Arc::new(NeedsSchemaSeven));
    let broker = Broker::open(dir.path().join("data"), config).await.unwrap();
    let spec = QueueSpec {
        schema_subject: Some("orders-value".into()),
        ..QueueSpec::default()
    };
    broker.create_queue("orders", spec).await.unwrap();
    let s = Served::on(broker, dir).await;
    let url = s.url("orders");
    let schema_seven = json!({"ferry-schema-id": {"DataType": "Number", "StringValue": "7"}});

    let message = s
        .fails(
            "SendMessage",
            json!({"QueueUrl": url, "MessageBody": "garbage",
                   "MessageAttributes": schema_seven}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert!(message.contains("field `order.id`"), "{message}");
    assert!(message.contains("orders-value"), "{message}");
    // Without the attribute the validator is not told the schema.
    s.fails(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "ok"}),
        400,
        "InvalidParameterValue",
    )
    .await;
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "ok 1", "MessageAttributes": schema_seven}),
    )
    .await;

    let batch = s
        .ok(
            "SendMessageBatch",
            json!({"QueueUrl": url, "Entries": [
                {"Id": "a", "MessageBody": "ok 2", "MessageAttributes": schema_seven},
                {"Id": "b", "MessageBody": "bad", "MessageAttributes": schema_seven},
            ]}),
        )
        .await;
    assert_eq!(batch["Successful"].as_array().unwrap().len(), 1, "{batch}");
    let failed = &batch["Failed"][0];
    assert_eq!(failed["Id"], "b");
    assert_eq!(failed["Code"], "InvalidParameterValue");

    let received = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "MaxNumberOfMessages": 10,
                   "MessageAttributeNames": ["All"]}),
        )
        .await;
    let bodies: Vec<&str> = received["Messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies.len(), 2, "{received}");
    assert!(
        bodies.contains(&"ok 1") && bodies.contains(&"ok 2"),
        "{bodies:?}"
    );
    assert_eq!(
        received["Messages"][0]["MessageAttributes"]["ferry-schema-id"]["StringValue"],
        "7"
    );
}
