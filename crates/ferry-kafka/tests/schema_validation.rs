//! Confluent Server's broker-side schema validation over the Kafka protocol: the topic
//! config `confluent.value.schema.validation` sets the topic's schema subject
//! (`<topic>-value`) at CreateTopics and IncrementalAlterConfigs and reads back at
//! DescribeConfigs; a record the broker's validator refuses is INVALID_RECORD with the
//! field in the error message, and nothing of its batch is stored;
//! `confluent.key.schema.validation=true` is refused at configuration time.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{Client, serve};
use ferry_broker::{
    Broker, BrokerConfig, OutgoingMessage, PayloadValidator, Position, SchemaRejection,
};
use ferry_kafka::KafkaConfig;
use kafka_protocol::ResponseError;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    CreateTopicsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest, ProduceRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, TimestampType};

const VALIDATION: &str = "confluent.value.schema.validation";

/// Takes values that start with `ok` under any subject ending `-value`; refuses the rest,
/// naming the field `order.id`.
#[derive(Debug)]
struct StartsWithOk;

impl PayloadValidator for StartsWithOk {
    fn validate(&self, subject: &str, message: &OutgoingMessage) -> Result<(), SchemaRejection> {
        if subject.ends_with("-value") && message.payload.starts_with(b"ok") {
            return Ok(());
        }
        Err(SchemaRejection {
            field: "order.id".into(),
            reason: "expected a long, found the end of the payload".into(),
        })
    }
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn name(topic: &str) -> TopicName {
    TopicName(s(topic))
}

fn creatable(topic: &str, configs: &[(&str, &str)]) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(s(k))
                        .with_value(Some(s(v)))
                })
                .collect(),
        )
}

fn batch(values: &[&str]) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: IndexMap::new(),
        })
        .collect();
    common::encode_batch(&records, Compression::None)
}

async fn produce(client: &mut Client, topic: &str, values: &[&str]) -> (i16, Option<String>) {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch(values))),
                ]),
        ]);
    let response = client.call(&request, 8).await;
    let partition = &response.responses[0].partition_responses[0];
    (
        partition.error_code,
        partition.error_message.as_ref().map(|m| m.to_string()),
    )
}

async fn validation_config(client: &mut Client, topic: &str) -> String {
    let request = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configuration_keys(Some(vec![s(VALIDATION)])),
    ]);
    let response = client.call(&request, 4).await;
    let result = &response.results[0];
    assert_eq!(result.error_code, 0);
    assert_eq!(result.configs.len(), 1);
    result.configs[0].value.as_ref().unwrap().to_string()
}

async fn alter_validation(client: &mut Client, topic: &str, op: i8, value: Option<&str>) -> i16 {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(s(VALIDATION))
                    .with_config_operation(op)
                    .with_value(value.map(s)),
            ]),
    ]);
    let response = client.call(&request, 1).await;
    response.responses[0].error_code
}

async fn validated_server() -> (tempfile::TempDir, common::Server) {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        payload_validator: Some(Arc::new(StartsWithOk)),
        ..BrokerConfig::default()
    };
    let broker = Broker::open(dir.path(), config).await.unwrap();
    (dir, serve(broker, KafkaConfig::default()).await)
}

#[tokio::test]
async fn value_schema_validation_requires_the_topic_value_subject_and_refuses_records_with_invalid_record()
 {
    let (_dir, server) = validated_server().await;
    let mut client = Client::connect(server.addr).await;
    let request = CreateTopicsRequest::default().with_topics(vec![
        creatable("orders", &[(VALIDATION, "true")]),
        creatable("keys", &[("confluent.key.schema.validation", "true")]),
        creatable("odd", &[(VALIDATION, "yes")]),
    ]);
    let response = client.call(&request, 4).await;
    let codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
    let invalid = ResponseError::InvalidConfig.code();
    assert_eq!(codes, [0, invalid, invalid]);
    let refusal = response.topics[1]
        .error_message
        .as_ref()
        .unwrap()
        .to_string();
    assert!(refusal.contains("not keys"), "{refusal}");
    assert!(server.broker.describe_topic("keys").is_err());
    let spec = server.broker.describe_topic("orders").unwrap().spec;
    assert_eq!(spec.schema_subject.as_deref(), Some("orders-value"));
    assert_eq!(validation_config(&mut client, "orders").await, "true");

    // A batch with one refused record: INVALID_RECORD naming the field, nothing stored.
    let (code, message) = produce(&mut client, "orders", &["ok 1", "garbage"]).await;
    assert_eq!(code, ResponseError::InvalidRecord.code());
    assert_eq!(code, 87);
    let message = message.unwrap();
    assert!(message.contains("field `order.id`"), "{message}");
    assert!(message.contains("orders-value"), "{message}");
    let (code, _) = produce(&mut client, "orders", &["ok 1", "ok 2"]).await;
    assert_eq!(code, 0);
    let records = server
        .broker
        .read_topic("orders", 0, Position::Earliest, 10)
        .unwrap();
    let values: Vec<_> = records.iter().map(|r| r.message.payload.clone()).collect();
    assert_eq!(values, [Bytes::from("ok 1"), Bytes::from("ok 2")]);

    // DELETE turns the check off; SET true turns it back on.
    assert_eq!(alter_validation(&mut client, "orders", 1, None).await, 0);
    assert_eq!(validation_config(&mut client, "orders").await, "false");
    assert_eq!(produce(&mut client, "orders", &["anything"]).await.0, 0);
    assert_eq!(
        alter_validation(&mut client, "orders", 0, Some("true")).await,
        0
    );
    let spec = server.broker.describe_topic("orders").unwrap().spec;
    assert_eq!(spec.schema_subject.as_deref(), Some("orders-value"));
    assert_eq!(
        produce(&mut client, "orders", &["anything"]).await.0,
        ResponseError::InvalidRecord.code()
    );
}
