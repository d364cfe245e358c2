//! Generates the servers of `google.pubsub.v1.Publisher`, `google.pubsub.v1.Subscriber`,
//! `google.pubsub.v1.SchemaService` (`google/pubsub/v1/schema.proto`) and
//! `google.iam.v1.IAMPolicy` (`google/iam/v1/iam_policy.proto`).
//!
//! The messages come from `googleapis-tonic-google-pubsub-v1` (generated from Google's
//! published protos and kept in step with them), whose generated code has clients only. The
//! services are described here method by method with tonic-build's manual builder, from the
//! same protos (`google/pubsub/v1/pubsub.proto`), so no proto file has to be fetched or kept
//! here. A method left out would answer UNIMPLEMENTED, which the tests of each method catch.

use tonic_build::manual::{Builder, Method, Service};

const TYPES: &str = "googleapis_tonic_google_pubsub_v1::google::pubsub::v1";
const CODEC: &str = "tonic_prost::ProstCodec";

/// A method: its Rust name, its wire name, request and response types (`()` is
/// `google.protobuf.Empty`, named through an alias in `src/lib.rs`: the builder takes a
/// type path), and whether each side streams.
struct Rpc(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    bool,
);

fn service(name: &str, rpcs: &[Rpc]) -> Service {
    service_in("google.pubsub.v1", TYPES, name, rpcs)
}

/// A service of `package`, its messages in the Rust module `types`.
fn service_in(package: &str, types: &str, name: &str, rpcs: &[Rpc]) -> Service {
    let mut builder = Service::builder().name(name).package(package);
    for Rpc(method, route, input, output, client_streams, server_streams) in rpcs {
        let ty = |t: &str| {
            if t == "()" {
                "crate::generated::Empty".to_owned()
            } else {
                format!("{types}::{t}")
            }
        };
        let mut m = Method::builder()
            .name(*method)
            .route_name(*route)
            .input_type(ty(input))
            .output_type(ty(output))
            .codec_path(CODEC);
        if *client_streams {
            m = m.client_streaming();
        }
        if *server_streams {
            m = m.server_streaming();
        }
        builder = builder.method(m.build());
    }
    builder.build()
}

fn main() {
    let publisher = service(
        "Publisher",
        &[
            Rpc(
                "create_topic",
                "CreateTopic",
                "Topic",
                "Topic",
                false,
                false,
            ),
            Rpc(
                "update_topic",
                "UpdateTopic",
                "UpdateTopicRequest",
                "Topic",
                false,
                false,
            ),
            Rpc(
                "publish",
                "Publish",
                "PublishRequest",
                "PublishResponse",
                false,
                false,
            ),
            Rpc(
                "get_topic",
                "GetTopic",
                "GetTopicRequest",
                "Topic",
                false,
                false,
            ),
            Rpc(
                "list_topics",
                "ListTopics",
                "ListTopicsRequest",
                "ListTopicsResponse",
                false,
                false,
            ),
            Rpc(
                "list_topic_subscriptions",
                "ListTopicSubscriptions",
                "ListTopicSubscriptionsRequest",
                "ListTopicSubscriptionsResponse",
                false,
                false,
            ),
            Rpc(
                "list_topic_snapshots",
                "ListTopicSnapshots",
                "ListTopicSnapshotsRequest",
                "ListTopicSnapshotsResponse",
                false,
                false,
            ),
            Rpc(
                "delete_topic",
                "DeleteTopic",
                "DeleteTopicRequest",
                "()",
                false,
                false,
            ),
            Rpc(
                "detach_subscription",
                "DetachSubscription",
                "DetachSubscriptionRequest",
                "DetachSubscriptionResponse",
                false,
                false,
            ),
        ],
    );
    let subscriber = service(
        "Subscriber",
        &[
            Rpc(
                "create_subscription",
                "CreateSubscription",
                "Subscription",
                "Subscription",
                false,
                false,
            ),
            Rpc(
                "get_subscription",
                "GetSubscription",
                "GetSubscriptionRequest",
                "Subscription",
                false,
                false,
            ),
            Rpc(
                "update_subscription",
                "UpdateSubscription",
                "UpdateSubscriptionRequest",
                "Subscription",
                false,
                false,
            ),
            Rpc(
                "list_subscriptions",
                "ListSubscriptions",
                "ListSubscriptionsRequest",
                "ListSubscriptionsResponse",
                false,
                false,
            ),
            Rpc(
                "delete_subscription",
                "DeleteSubscription",
                "DeleteSubscriptionRequest",
                "()",
                false,
                false,
            ),
            Rpc(
                "modify_ack_deadline",
                "ModifyAckDeadline",
                "ModifyAckDeadlineRequest",
                "()",
                false,
                false,
            ),
            Rpc(
                "acknowledge",
                "Acknowledge",
                "AcknowledgeRequest",
                "()",
                false,
                false,
            ),
            Rpc("pull", "Pull", "PullRequest", "PullResponse", false, false),
            Rpc(
                "streaming_pull",
                "StreamingPull",
                "StreamingPullRequest",
                "StreamingPullResponse",
                true,
                true,
            ),
            Rpc(
                "modify_push_config",
                "ModifyPushConfig",
                "ModifyPushConfigRequest",
                "()",
                false,
                false,
            ),
            Rpc(
                "get_snapshot",
                "GetSnapshot",
                "GetSnapshotRequest",
                "Snapshot",
                false,
                false,
            ),
            Rpc(
                "list_snapshots",
                "ListSnapshots",
                "ListSnapshotsRequest",
                "ListSnapshotsResponse",
                false,
                false,
            ),
            Rpc(
                "create_snapshot",
                "CreateSnapshot",
                "CreateSnapshotRequest",
                "Snapshot",
                false,
                false,
            ),
            Rpc(
                "update_snapshot",
                "UpdateSnapshot",
                "UpdateSnapshotRequest",
                "Snapshot",
                false,
                false,
            ),
            Rpc(
                "delete_snapshot",
                "DeleteSnapshot",
                "DeleteSnapshotRequest",
                "()",
                false,
                false,
            ),
            Rpc("seek", "Seek", "SeekRequest", "SeekResponse", false, false),
        ],
    );
    let schemas = service(
        "SchemaService",
        &[
            Rpc(
                "create_schema",
                "CreateSchema",
                "CreateSchemaRequest",
                "Schema",
                false,
                false,
            ),
            Rpc(
                "get_schema",
                "GetSchema",
                "GetSchemaRequest",
                "Schema",
                false,
                false,
            ),
            Rpc(
                "list_schemas",
                "ListSchemas",
                "ListSchemasRequest",
                "ListSchemasResponse",
                false,
                false,
            ),
            Rpc(
                "list_schema_revisions",
                "ListSchemaRevisions",
                "ListSchemaRevisionsRequest",
                "ListSchemaRevisionsResponse",
                false,
                false,
            ),
            Rpc(
                "commit_schema",
                "CommitSchema",
                "CommitSchemaRequest",
                "Schema",
                false,
                false,
            ),
            Rpc(
                "rollback_schema",
                "RollbackSchema",
                "RollbackSchemaRequest",
                "Schema",
                false,
                false,
            ),
            Rpc(
                "delete_schema_revision",
                "DeleteSchemaRevision",
                "DeleteSchemaRevisionRequest",
                "Schema",
                false,
                false,
            ),
            Rpc(
                "delete_schema",
                "DeleteSchema",
                "DeleteSchemaRequest",
                "()",
                false,
                false,
            ),
            Rpc(
                "validate_schema",
                "ValidateSchema",
                "ValidateSchemaRequest",
                "ValidateSchemaResponse",
                false,
                false,
            ),
            Rpc(
                "validate_message",
                "ValidateMessage",
                "ValidateMessageRequest",
                "ValidateMessageResponse",
                false,
                false,
            ),
        ],
    );
    // google.iam.v1.IAMPolicy (`google/iam/v1/iam_policy.proto`), which Pub/Sub's clients
    // call on the same endpoint for topics, subscriptions, snapshots and schemas.
    let iam = service_in(
        "google.iam.v1",
        "googleapis_tonic_google_iam_v1::google::iam::v1",
        "IAMPolicy",
        &[
            Rpc(
                "set_iam_policy",
                "SetIamPolicy",
                "SetIamPolicyRequest",
                "Policy",
                false,
                false,
            ),
            Rpc(
                "get_iam_policy",
                "GetIamPolicy",
                "GetIamPolicyRequest",
                "Policy",
                false,
                false,
            ),
            Rpc(
                "test_iam_permissions",
                "TestIamPermissions",
                "TestIamPermissionsRequest",
                "TestIamPermissionsResponse",
                false,
                false,
            ),
        ],
    );
    Builder::new()
        .build_client(false)
        .build_transport(false)
        .compile(&[publisher, subscriber, schemas, iam]);
}
