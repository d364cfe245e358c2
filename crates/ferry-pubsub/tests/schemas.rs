//! Pub/Sub's SchemaService and topic schemas over Ferry's schema registry, driven by the
//! generated `google.pubsub.v1` clients over loopback gRPC.

mod support;

use bytes::Bytes;
use ferry_schema_registry::{Deleted, VersionSpec};
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use pb::publisher_client::PublisherClient;
use pb::schema_service_client::SchemaServiceClient;
use pb::subscriber_client::SubscriberClient;
use tonic::Code;
use tonic::transport::Channel;

use support::Served;

const PROJECT: &str = "projects/demo";
const AVRO_SCHEMA: &str = "projects/demo/schemas/orders-avro";
const PROTO_SCHEMA: &str = "projects/demo/schemas/orders-proto";
const TOPIC: &str = "projects/demo/topics/orders";
const SUB: &str = "projects/demo/subscriptions/billing";

const AVRO: &str = r#"{"type":"record","name":"Order","fields":[
    {"name":"sku","type":"string"},{"name":"count","type":"int"}]}"#;
/// AVRO with a field added: Pub/Sub takes it as a new revision without any
/// compatibility check (a field without a default breaks BACKWARD).
const AVRO_V2: &str = r#"{"type":"record","name":"Order","fields":[
    {"name":"sku","type":"string"},{"name":"count","type":"int"},{"name":"note","type":"string"}]}"#;
const PROTO: &str = "syntax = \"proto3\";\nmessage Order { string sku = 1; int32 count = 2; }";

struct Clients {
    schemas: SchemaServiceClient<Channel>,
    publisher: PublisherClient<Channel>,
    subscriber: SubscriberClient<Channel>,
}

async fn clients(served: &Served) -> Clients {
    let channel = Channel::from_shared(format!("http://{}", served.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    Clients {
        schemas: SchemaServiceClient::new(channel.clone()),
        publisher: PublisherClient::new(channel.clone()),
        subscriber: SubscriberClient::new(channel),
    }
}

fn schema(kind: pb::schema::Type, definition: &str) -> pb::Schema {
    pb::Schema {
        r#type: kind as i32,
        definition: definition.into(),
        ..Default::default()
    }
}

async fn create(
    client: &mut SchemaServiceClient<Channel>,
    id: &str,
    kind: pb::schema::Type,
    definition: &str,
) -> Result<pb::Schema, tonic::Status> {
    client
        .create_schema(pb::CreateSchemaRequest {
            parent: PROJECT.into(),
            schema: Some(schema(kind, definition)),
            schema_id: id.into(),
        })
        .await
        .map(|r| r.into_inner())
}

async fn validate(
    client: &mut SchemaServiceClient<Channel>,
    name: &str,
    message: &[u8],
    encoding: pb::Encoding,
) -> Result<(), tonic::Status> {
    client
        .validate_message(pb::ValidateMessageRequest {
            parent: PROJECT.into(),
            message: Bytes::copy_from_slice(message),
            encoding: encoding as i32,
            schema_spec: Some(pb::validate_message_request::SchemaSpec::Name(name.into())),
        })
        .await
        .map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_are_registry_subjects_with_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start_with_registry(dir.path()).await;
    let mut c = clients(&served).await;

    let created = create(&mut c.schemas, "orders-avro", pb::schema::Type::Avro, AVRO)
        .await
        .unwrap();
    assert_eq!(created.name, AVRO_SCHEMA);
    assert_eq!(created.revision_id, "1");
    let again = create(&mut c.schemas, "orders-avro", pb::schema::Type::Avro, AVRO).await;
    assert_eq!(again.unwrap_err().code(), Code::AlreadyExists);
    let bad = create(
        &mut c.schemas,
        "broken",
        pb::schema::Type::Avro,
        r#"{"type":"recrd"}"#,
    )
    .await
    .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("Avro"), "{}", bad.message());
    let two = "syntax = \"proto3\"; message A {} message B {}";
    let bad = create(&mut c.schemas, "two", pb::schema::Type::ProtocolBuffer, two)
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("one"), "{}", bad.message());
    create(
        &mut c.schemas,
        "orders-proto",
        pb::schema::Type::ProtocolBuffer,
        PROTO,
    )
    .await
    .unwrap();

    // The registry holds them, under subjects no `<topic>-value` can be.
    let registry = served.registry.clone().unwrap();
    let subjects = registry.read(|r| r.subjects("", Deleted::Exclude));
    assert_eq!(
        subjects,
        ["pubsub:demo.orders-avro", "pubsub:demo.orders-proto"]
    );

    // A revision that breaks backward compatibility is taken, as Pub/Sub takes it.
    let committed = c
        .schemas
        .commit_schema(pb::CommitSchemaRequest {
            name: AVRO_SCHEMA.into(),
            schema: Some(schema(pb::schema::Type::Avro, AVRO_V2)),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(committed.revision_id, "2");
    let other_type = c
        .schemas
        .commit_schema(pb::CommitSchemaRequest {
            name: AVRO_SCHEMA.into(),
            schema: Some(schema(pb::schema::Type::ProtocolBuffer, PROTO)),
        })
        .await
        .unwrap_err();
    assert_eq!(other_type.code(), Code::InvalidArgument);

    // GetSchema: the latest revision, or a named one; BASIC leaves out the definition.
    let got = c
        .schemas
        .get_schema(pb::GetSchemaRequest {
            name: AVRO_SCHEMA.into(),
            view: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (got.revision_id.as_str(), got.definition.as_str()),
        ("2", AVRO_V2)
    );
    let first = c
        .schemas
        .get_schema(pb::GetSchemaRequest {
            name: format!("{AVRO_SCHEMA}@1"),
            view: pb::SchemaView::Basic as i32,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.revision_id, "1");
    assert!(first.definition.is_empty());
    assert_eq!(first.r#type, pb::schema::Type::Avro as i32);

    // ListSchemas pages; ListSchemaRevisions lists newest first.
    let page = c
        .schemas
        .list_schemas(pb::ListSchemasRequest {
            parent: PROJECT.into(),
            view: 0,
            page_size: 1,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.schemas.len(), 1);
    assert_eq!(page.schemas[0].name, AVRO_SCHEMA);
    assert!(page.schemas[0].definition.is_empty());
    let rest = c
        .schemas
        .list_schemas(pb::ListSchemasRequest {
            parent: PROJECT.into(),
            view: pb::SchemaView::Full as i32,
            page_size: 1,
            page_token: page.next_page_token,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rest.schemas[0].name, PROTO_SCHEMA);
    assert_eq!(rest.schemas[0].definition, PROTO);
    assert!(rest.next_page_token.is_empty());
    let revisions = c
        .schemas
        .list_schema_revisions(pb::ListSchemaRevisionsRequest {
            name: AVRO_SCHEMA.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let ids: Vec<&str> = revisions
        .schemas
        .iter()
        .map(|s| s.revision_id.as_str())
        .collect();
    assert_eq!(ids, ["2", "1"]);

    // Revisions go one at a time (never the last); the schema goes whole.
    let deleted = c
        .schemas
        .delete_schema_revision(pb::DeleteSchemaRevisionRequest {
            name: format!("{AVRO_SCHEMA}@1"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.revision_id, "1");
    assert_eq!(
        registry.read(|r| r.versions("pubsub:demo.orders-avro", Deleted::Include)),
        Ok(vec![2])
    );
    let last = c
        .schemas
        .delete_schema_revision(pb::DeleteSchemaRevisionRequest {
            name: format!("{AVRO_SCHEMA}@2"),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(last.code(), Code::FailedPrecondition);
    let rollback = c
        .schemas
        .rollback_schema(pb::RollbackSchemaRequest {
            name: AVRO_SCHEMA.into(),
            revision_id: "2".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(rollback.code(), Code::Unimplemented);
    c.schemas
        .delete_schema(pb::DeleteSchemaRequest {
            name: AVRO_SCHEMA.into(),
        })
        .await
        .unwrap();
    let gone = c
        .schemas
        .get_schema(pb::GetSchemaRequest {
            name: AVRO_SCHEMA.into(),
            view: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
    assert!(
        registry
            .read(|r| r.version("pubsub:demo.orders-avro", VersionSpec::Latest, true))
            .is_err()
    );

    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_validated_in_both_encodings() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start_with_registry(dir.path()).await;
    let mut c = clients(&served).await;
    create(&mut c.schemas, "orders-avro", pb::schema::Type::Avro, AVRO)
        .await
        .unwrap();
    create(
        &mut c.schemas,
        "orders-proto",
        pb::schema::Type::ProtocolBuffer,
        PROTO,
    )
    .await
    .unwrap();
    let (json, binary) = (pb::Encoding::Json, pb::Encoding::Binary);

    // Avro: {"sku":"ab","count":3}; binary is the string's length (zig-zag 2 = 4), its
    // bytes, then zig-zag 3 = 6.
    let avro_binary = [0x04, b'a', b'b', 0x06];
    validate(
        &mut c.schemas,
        AVRO_SCHEMA,
        br#"{"sku":"ab","count":3}"#,
        json,
    )
    .await
    .unwrap();
    validate(&mut c.schemas, AVRO_SCHEMA, &avro_binary, binary)
        .await
        .unwrap();
    for (bad, encoding) in [
        (&br#"{"sku":"ab","count":"3"}"#[..], json),
        (&br#"{"sku":"ab"}"#[..], json),
        (&[0x04, b'a'][..], binary),
        (&[0x04, b'a', b'b', 0x06, 0x00][..], binary),
    ] {
        let refused = validate(&mut c.schemas, AVRO_SCHEMA, bad, encoding)
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad:?}");
    }

    // Protobuf: the same order; binary is field 1 (tag 0x0a) length 2 "ab", field 2
    // (tag 0x10) varint 3.
    let proto_binary = [0x0a, 0x02, b'a', b'b', 0x10, 0x03];
    validate(
        &mut c.schemas,
        PROTO_SCHEMA,
        br#"{"sku":"ab","count":3}"#,
        json,
    )
    .await
    .unwrap();
    validate(&mut c.schemas, PROTO_SCHEMA, &proto_binary, binary)
        .await
        .unwrap();
    for (bad, encoding) in [
        (&br#"{"sku":"ab","colour":"red"}"#[..], json),
        (&b"not json"[..], json),
        (&[0x0a, 0x09, b'a'][..], binary),
    ] {
        let refused = validate(&mut c.schemas, PROTO_SCHEMA, bad, encoding)
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad:?}");
    }

    // A schema given inline, and one that does not exist.
    c.schemas
        .validate_message(pb::ValidateMessageRequest {
            parent: PROJECT.into(),
            message: Bytes::from_static(&[0x0a, 0x02, b'a', b'b']),
            encoding: binary as i32,
            schema_spec: Some(pb::validate_message_request::SchemaSpec::Schema(schema(
                pb::schema::Type::ProtocolBuffer,
                PROTO,
            ))),
        })
        .await
        .unwrap();
    let missing = validate(&mut c.schemas, "projects/demo/schemas/nothing", b"{}", json)
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    c.schemas
        .validate_schema(pb::ValidateSchemaRequest {
            parent: PROJECT.into(),
            schema: Some(schema(pb::schema::Type::Avro, AVRO)),
        })
        .await
        .unwrap();
    served.stop().await;
}

async fn create_schema_topic(c: &mut Clients, settings: pb::SchemaSettings) {
    c.publisher
        .create_topic(pb::Topic {
            name: TOPIC.into(),
            schema_settings: Some(settings),
            ..Default::default()
        })
        .await
        .unwrap();
    c.subscriber
        .create_subscription(pb::Subscription {
            name: SUB.into(),
            topic: TOPIC.into(),
            ack_deadline_seconds: 20,
            ..Default::default()
        })
        .await
        .unwrap();
}

async fn publish(c: &mut Clients, data: &[&[u8]]) -> Result<Vec<String>, tonic::Status> {
    let messages = data
        .iter()
        .map(|d| pb::PubsubMessage {
            data: Bytes::copy_from_slice(d),
            ..Default::default()
        })
        .collect();
    c.publisher
        .publish(pb::PublishRequest {
            topic: TOPIC.into(),
            messages,
        })
        .await
        .map(|r| r.into_inner().message_ids)
}

async fn pull(c: &mut Clients) -> Vec<pb::PubsubMessage> {
    #[allow(deprecated)]
    let request = pb::PullRequest {
        subscription: SUB.into(),
        max_messages: 10,
        return_immediately: true,
    };
    c.subscriber
        .pull(request)
        .await
        .unwrap()
        .into_inner()
        .received_messages
        .into_iter()
        .filter_map(|m| m.message)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_with_a_schema_refuses_bad_batches_and_marks_good_messages() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start_with_registry(dir.path()).await;
    let mut c = clients(&served).await;
    create(&mut c.schemas, "orders-avro", pb::schema::Type::Avro, AVRO)
        .await
        .unwrap();

    let missing = c
        .publisher
        .create_topic(pb::Topic {
            name: TOPIC.into(),
            schema_settings: Some(pb::SchemaSettings {
                schema: "projects/demo/schemas/nothing".into(),
                encoding: pb::Encoding::Json as i32,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    assert!(served.broker.describe_topic("demo.orders").is_err());

    let settings = pb::SchemaSettings {
        schema: AVRO_SCHEMA.into(),
        encoding: pb::Encoding::Json as i32,
        ..Default::default()
    };
    create_schema_topic(&mut c, settings.clone()).await;
    let shown = c
        .publisher
        .get_topic(pb::GetTopicRequest {
            topic: TOPIC.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(shown.schema_settings.as_ref(), Some(&settings));

    // One bad message: nothing of the batch is stored.
    let refused = publish(
        &mut c,
        &[br#"{"sku":"a","count":1}"#, br#"{"sku":"b","count":"two"}"#],
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(refused.message().contains("count"), "{}", refused.message());
    assert!(pull(&mut c).await.is_empty());

    publish(&mut c, &[br#"{"sku":"a","count":1}"#])
        .await
        .unwrap();
    let got = pull(&mut c).await;
    assert_eq!(got.len(), 1);
    let attributes = &got[0].attributes;
    assert_eq!(attributes["googclient_schemaname"], AVRO_SCHEMA);
    assert_eq!(attributes["googclient_schemaencoding"], "JSON");
    assert_eq!(attributes["googclient_schemarevisionid"], "1");

    // A message valid only under a newer revision is marked with it.
    c.schemas
        .commit_schema(pb::CommitSchemaRequest {
            name: AVRO_SCHEMA.into(),
            schema: Some(schema(pb::schema::Type::Avro, AVRO_V2)),
        })
        .await
        .unwrap();
    publish(&mut c, &[br#"{"sku":"a","count":1,"note":"n"}"#])
        .await
        .unwrap();
    let got = pull(&mut c).await;
    let newest = got
        .iter()
        .find(|m| m.data.as_ref() == br#"{"sku":"a","count":1,"note":"n"}"#)
        .expect("delivered");
    assert_eq!(newest.attributes["googclient_schemarevisionid"], "2");

    // A deleted schema shows as Pub/Sub shows it, and stops publishes.
    c.schemas
        .delete_schema(pb::DeleteSchemaRequest {
            name: AVRO_SCHEMA.into(),
        })
        .await
        .unwrap();
    let shown = c
        .publisher
        .get_topic(pb::GetTopicRequest {
            topic: TOPIC.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(shown.schema_settings.unwrap().schema, "_deleted-schema_");
    let after = publish(&mut c, &[br#"{"sku":"a","count":1}"#]).await;
    assert_eq!(after.unwrap_err().code(), Code::FailedPrecondition);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_protobuf_topic_and_its_schema_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start_with_registry(dir.path()).await;
    let mut c = clients(&served).await;
    create(
        &mut c.schemas,
        "orders-proto",
        pb::schema::Type::ProtocolBuffer,
        PROTO,
    )
    .await
    .unwrap();
    let settings = pb::SchemaSettings {
        schema: PROTO_SCHEMA.into(),
        encoding: pb::Encoding::Binary as i32,
        first_revision_id: "1".into(),
        last_revision_id: String::new(),
    };
    create_schema_topic(&mut c, settings.clone()).await;
    drop(c);
    served.stop().await;

    let served = Served::start_with_registry(dir.path()).await;
    let mut c = clients(&served).await;
    let shown = c
        .publisher
        .get_topic(pb::GetTopicRequest {
            topic: TOPIC.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(shown.schema_settings, Some(settings));
    let refused = publish(&mut c, &[&[0x0a, 0x09, b'a']]).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    publish(&mut c, &[&[0x0a, 0x02, b'a', b'b', 0x10, 0x03]])
        .await
        .unwrap();
    let got = pull(&mut c).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].attributes["googclient_schemaencoding"], "BINARY");
    assert_eq!(got[0].attributes["googclient_schemarevisionid"], "1");
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_registry_schemas_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
    let mut c = clients(&served).await;
    let refused = create(&mut c.schemas, "orders-avro", pb::schema::Type::Avro, AVRO)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unimplemented);
    let topic = c
        .publisher
        .create_topic(pb::Topic {
            name: TOPIC.into(),
            schema_settings: Some(pb::SchemaSettings {
                schema: AVRO_SCHEMA.into(),
                encoding: pb::Encoding::Json as i32,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(topic.code(), Code::Unimplemented);
    served.stop().await;
}
