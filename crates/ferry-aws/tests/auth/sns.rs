//! SNS actions against keys that may and may not do them: AuthorizationError (403) and
//! nothing changed when refused; ListTopics shows what a key may see.

use crate::support::{ADMIN, CONSUMER, FANOUT, PUBLISHER, Served};

const NEWS: &str = "arn:aws:sns:us-east-1:000000000000:news";
const ALERTS: &str = "arn:aws:sns:us-east-1:000000000000:alerts";
const INBOX: &str = "arn:aws:sqs:us-east-1:000000000000:inbox";

async fn with_topics() -> Served {
    let served = Served::start().await;
    for name in ["news", "alerts"] {
        let reply = served
            .sns(ADMIN, &[("Action", "CreateTopic"), ("Name", name)])
            .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    served
        .sqs_ok(
            ADMIN,
            "CreateQueue",
            serde_json::json!({"QueueName": "inbox"}),
        )
        .await;
    served
}

fn assert_denied(reply: &crate::support::Reply) {
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.xml("Code"), "AuthorizationError");
}

#[tokio::test]
async fn subscribing_needs_consume_on_the_topic_and_publish_on_the_queue() {
    let served = with_topics().await;
    let subscribe = |topic: &'static str| {
        [
            ("Action", "Subscribe"),
            ("TopicArn", topic),
            ("Protocol", "sqs"),
            ("Endpoint", INBOX),
        ]
    };
    // Consumes every topic but may not write into the queue.
    let reply = served.sns(CONSUMER, &subscribe(NEWS)).await;
    assert_denied(&reply);
    assert!(
        reply.xml("Message").contains("publish permission on inbox"),
        "{}",
        reply.body
    );
    // May write into the queue but does not consume `alerts`.
    assert_denied(&served.sns(FANOUT, &subscribe(ALERTS)).await);
    let listed = served.sns(ADMIN, &[("Action", "ListSubscriptions")]).await;
    assert!(listed.all("SubscriptionArn").is_empty(), "{}", listed.body);
    let reply = served.sns(FANOUT, &subscribe(NEWS)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let subscription = reply.xml("SubscriptionArn");
    // The subscriber's own key may unsubscribe; the publisher's may not.
    let unsubscribe = [
        ("Action", "Unsubscribe"),
        ("SubscriptionArn", subscription.as_str()),
    ];
    assert_denied(&served.sns(PUBLISHER, &unsubscribe).await);
    assert_eq!(
        served
            .sns(ADMIN, &[("Action", "ListSubscriptions")])
            .await
            .all("SubscriptionArn"),
        std::slice::from_ref(&subscription)
    );
    // Published messages reach the queue through the subscription the key made.
    let reply = served
        .sns(
            PUBLISHER,
            &[("Action", "Publish"), ("TopicArn", NEWS), ("Message", "hi")],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(served.messages("inbox").await, (1, 0));
    let reply = served.sns(FANOUT, &unsubscribe).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[tokio::test]
async fn publishing_needs_publish_on_the_topic() {
    let served = with_topics().await;
    let reply = served
        .sns(
            ADMIN,
            &[
                ("Action", "Subscribe"),
                ("TopicArn", ALERTS),
                ("Protocol", "sqs"),
                ("Endpoint", INBOX),
            ],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let publish = [
        ("Action", "Publish"),
        ("TopicArn", ALERTS),
        ("Message", "hi"),
    ];
    let reply = served.sns(PUBLISHER, &publish).await;
    assert_denied(&reply);
    let message = reply.xml("Message");
    assert!(
        message.contains("user/orders-publisher") && message.contains("SNS:Publish"),
        "{message}"
    );
    let batch = [
        ("Action", "PublishBatch"),
        ("TopicArn", ALERTS),
        ("PublishBatchRequestEntries.member.1.Id", "a"),
        ("PublishBatchRequestEntries.member.1.Message", "hi"),
    ];
    assert_denied(&served.sns(PUBLISHER, &batch).await);
    assert_eq!(served.messages("inbox").await, (0, 0), "nothing delivered");
    let reply = served.sns(ADMIN, &publish).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(served.messages("inbox").await, (1, 0));
}

#[tokio::test]
async fn topic_administration_needs_admin_and_lists_show_what_a_key_may_see() {
    let served = with_topics().await;
    assert_denied(
        &served
            .sns(PUBLISHER, &[("Action", "CreateTopic"), ("Name", "orders")])
            .await,
    );
    assert!(!served.has_topic("orders"));
    assert_denied(
        &served
            .sns(CONSUMER, &[("Action", "DeleteTopic"), ("TopicArn", NEWS)])
            .await,
    );
    assert!(served.has_topic("news"));
    let set = [
        ("Action", "SetTopicAttributes"),
        ("TopicArn", NEWS),
        ("AttributeName", "DisplayName"),
        ("AttributeValue", "changed"),
    ];
    assert_denied(&served.sns(PUBLISHER, &set).await);
    let attributes = served
        .sns(
            ADMIN,
            &[("Action", "GetTopicAttributes"), ("TopicArn", NEWS)],
        )
        .await;
    assert_ne!(
        attributes.attribute("DisplayName").as_deref(),
        Some("changed")
    );
    // A look-up needs some right on the topic.
    let reply = served
        .sns(
            PUBLISHER,
            &[("Action", "GetTopicAttributes"), ("TopicArn", NEWS)],
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_denied(
        &served
            .sns(
                PUBLISHER,
                &[("Action", "GetTopicAttributes"), ("TopicArn", ALERTS)],
            )
            .await,
    );
    let all = served
        .sns(ADMIN, &[("Action", "ListTopics")])
        .await
        .all("TopicArn");
    assert_eq!(all.len(), 2, "{all:?}");
    let publisher = served
        .sns(PUBLISHER, &[("Action", "ListTopics")])
        .await
        .all("TopicArn");
    assert_eq!(publisher, [NEWS]);
}
