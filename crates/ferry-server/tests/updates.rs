//! Changing a queue's or topic's settings in place, over gRPC (`UpdateQueue`,
//! `UpdateTopic`) and HTTP (`PUT /v1/queues/{q}`, `PUT /v1/topics/{t}`): what may change
//! changes and keeps the messages; a setting fixed at creation is refused and nothing
//! changes.

mod support;

use ferry_proto::v1;
use ferry_server::Server;
use support::{GrpcClients, Served, exchange, fresh_broker};
use tonic::Code;

async fn served() -> Served {
    let (broker, dir) = fresh_broker().await;
    Served::serve(broker, Some(dir), |server: Server| server).await
}

fn retry(max_deliveries: u32) -> Option<v1::RetryPolicy> {
    Some(v1::RetryPolicy {
        max_deliveries: Some(max_deliveries),
        ..Default::default()
    })
}

#[tokio::test]
async fn a_queue_changes_in_place_and_a_fixed_setting_is_refused_over_grpc() {
    let s = served().await;
    let mut admin = s.admin();
    admin
        .create_queue(v1::CreateQueueRequest {
            name: "orders".into(),
            spec: Some(v1::QueueSpec {
                retry: retry(5),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    s.broker
        .publish("orders", ferry_broker::OutgoingMessage::new("kept"))
        .await
        .unwrap();

    let now = admin
        .update_queue(v1::UpdateQueueRequest {
            name: "orders".into(),
            spec: Some(v1::QueueSpec {
                retry: retry(9),
                default_ttl_ms: Some(3_600_000),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .spec
        .unwrap();
    assert_eq!(now.retry.unwrap().max_deliveries, Some(9));
    assert_eq!(now.default_ttl_ms, Some(3_600_000));
    let info = s.broker.describe_queue("orders").unwrap();
    assert_eq!(info.spec.retry.max_deliveries, 9);
    assert_eq!(info.stats.state.ready, 1, "the message is kept");

    let refused = admin
        .update_queue(v1::UpdateQueueRequest {
            name: "orders".into(),
            spec: Some(v1::QueueSpec {
                retry: retry(3),
                ordering: v1::OrderingMode::KeyShared as i32,
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(
        refused.message().contains("ordering"),
        "{}",
        refused.message()
    );
    assert_eq!(
        s.broker
            .describe_queue("orders")
            .unwrap()
            .spec
            .retry
            .max_deliveries,
        9,
        "a refused update changes nothing"
    );
    let missing = admin
        .update_queue(v1::UpdateQueueRequest {
            name: "nope".into(),
            spec: None,
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    s.stop().await;
}

#[tokio::test]
async fn a_topic_changes_its_retention_in_place_and_keeps_its_partitions() {
    let s = served().await;
    let mut admin = s.admin();
    admin
        .create_topic(v1::CreateTopicRequest {
            name: "events".into(),
            spec: Some(v1::TopicSpec {
                partitions: 4,
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let now = admin
        .update_topic(v1::UpdateTopicRequest {
            name: "events".into(),
            spec: Some(v1::TopicSpec {
                retention: Some(v1::TopicRetention {
                    max_age_ms: Some(86_400_000),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .spec
        .unwrap();
    assert_eq!(now.partitions, 4, "partitions 0 keeps the count");
    assert_eq!(now.retention.unwrap().max_age_ms, Some(86_400_000));
    let refused = admin
        .update_topic(v1::UpdateTopicRequest {
            name: "events".into(),
            spec: Some(v1::TopicSpec {
                partitions: 2,
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    s.stop().await;
}

#[tokio::test]
async fn http_put_changes_a_queue_and_grows_a_topic() {
    let s = served().await;
    let create = exchange(
        s.http,
        "",
        "POST",
        "/v1/queues",
        br#"{"name": "jobs", "spec": {"retry": {"max_deliveries": 5}}}"#,
    )
    .await;
    assert_eq!(create.status, 201);
    let put = exchange(
        s.http,
        "",
        "PUT",
        "/v1/queues/jobs",
        br#"{"retry": {"max_deliveries": 8}}"#,
    )
    .await;
    let body = String::from_utf8(put.body).unwrap();
    assert_eq!(put.status, 200, "{body}");
    assert!(body.contains("\"max_deliveries\":8"), "{body}");
    let fixed = exchange(
        s.http,
        "",
        "PUT",
        "/v1/queues/jobs",
        br#"{"retry": {"max_deliveries": 8}, "ordering": "key_shared"}"#,
    )
    .await;
    let body = String::from_utf8(fixed.body).unwrap();
    assert_eq!(fixed.status, 400, "{body}");
    assert!(body.contains("\"code\":\"queue_setting_fixed\""), "{body}");
    assert_eq!(
        s.broker
            .describe_queue("jobs")
            .unwrap()
            .spec
            .retry
            .max_deliveries,
        8
    );

    let topic = exchange(
        s.http,
        "",
        "POST",
        "/v1/topics",
        br#"{"name": "clicks", "spec": {"partitions": 2}}"#,
    )
    .await;
    assert_eq!(topic.status, 201);
    let grown = exchange(
        s.http,
        "",
        "PUT",
        "/v1/topics/clicks",
        br#"{"partitions": 6}"#,
    )
    .await;
    assert_eq!(
        grown.status,
        200,
        "{}",
        String::from_utf8_lossy(&grown.body)
    );
    assert_eq!(
        s.broker.describe_topic("clicks").unwrap().spec.partitions,
        6
    );
    let fewer = exchange(
        s.http,
        "",
        "PUT",
        "/v1/topics/clicks",
        br#"{"partitions": 3}"#,
    )
    .await;
    assert_eq!(
        fewer.status,
        400,
        "{}",
        String::from_utf8_lossy(&fewer.body)
    );
    s.stop().await;
}
