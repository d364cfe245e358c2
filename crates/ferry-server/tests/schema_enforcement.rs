//! Enforcement at publish over gRPC, with the server's registry as the broker's payload
//! validator: a queue created with a schema subject shows it when described, takes a
//! payload written with a live schema of the subject, and refuses any other with
//! `INVALID_ARGUMENT` and `ferry-error-kind: schema_violation`, the message naming the
//! field, storing nothing of the batch.

use std::sync::Arc;

use ferry_broker::{Broker, BrokerConfig};
use ferry_proto::v1;
use ferry_schema_registry::{NewSchema, SchemaRegistry};
use ferry_server::RegistryPayloadValidator;
use tonic::Code;

mod support;

use support::{GrpcClients, Served};

const POINT: &str = r#"{"type": "record", "name": "Point",
    "fields": [{"name": "x", "type": "int"}, {"name": "label", "type": "string"}]}"#;

fn message(payload: Vec<u8>, schema_id: u32) -> v1::OutgoingMessage {
    v1::OutgoingMessage {
        payload: payload.into(),
        headers: [("ferry-schema-id".to_owned(), schema_id.to_string())].into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_publish_that_does_not_match_the_queues_subject_is_invalid_argument_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(SchemaRegistry::open(&dir.path().join("schema-registry")).unwrap());
    let id = registry
        .change(|r| r.register("points-value", &NewSchema::avro(POINT)))
        .unwrap();
    let config = BrokerConfig {
        payload_validator: Some(Arc::new(RegistryPayloadValidator::new(registry))),
        ..BrokerConfig::default()
    };
    let broker = Broker::open(dir.path().join("data"), config).await.unwrap();
    let s = Served::serve(broker, Some(dir), |server| server).await;
    s.admin()
        .create_queue(v1::CreateQueueRequest {
            name: "points".into(),
            spec: Some(v1::QueueSpec {
                schema_subject: Some("points-value".into()),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let info = s
        .admin()
        .describe_queue(v1::DescribeQueueRequest {
            name: "points".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        info.spec.unwrap().schema_subject.as_deref(),
        Some("points-value")
    );

    // x = 3, label = "a"; then the label's length made longer than the data.
    let valid = vec![6, 2, b'a'];
    let truncated = vec![6, 4, b'a'];
    let refused = s
        .publisher()
        .publish(v1::PublishRequest {
            batch_id: None,
            queue: "points".into(),
            messages: vec![message(valid.clone(), id), message(truncated, id)],
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert_eq!(
        refused.metadata().get("ferry-error-kind").unwrap(),
        "schema_violation"
    );
    assert!(refused.message().contains("field `label`"), "{refused:?}");
    assert_eq!(
        s.broker.describe_queue("points").unwrap().stats.next_seq,
        0,
        "nothing of the batch is stored"
    );
    s.publisher()
        .publish(v1::PublishRequest {
            batch_id: None,
            queue: "points".into(),
            messages: vec![message(valid, id)],
        })
        .await
        .unwrap();
    assert_eq!(s.broker.describe_queue("points").unwrap().stats.next_seq, 1);
}
