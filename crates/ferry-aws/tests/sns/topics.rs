use ferry_broker::TopicSpec;

use crate::support::{Served, queue_arn, topic_arn};

#[tokio::test]
async fn topics_are_created_idempotently_listed_described_changed_and_deleted() {
    let s = Served::start().await;
    let arn = s.topic("orders", &[]).await;
    assert_eq!(arn, topic_arn("orders"));
    assert_eq!(s.topic("orders", &[]).await, arn);
    assert!(
        s.broker
            .list_topics()
            .iter()
            .any(|t| t.as_str() == "orders")
    );
    // The same name with other attributes is refused.
    s.sns_fails(
        "CreateTopic",
        &[
            ("Name", "orders"),
            ("Attributes.entry.1.key", "DisplayName"),
            ("Attributes.entry.1.value", "x"),
        ],
        400,
        "InvalidParameter",
    )
    .await;
    // A Ferry topic made by Ferry's own API is an SNS topic.
    s.broker
        .create_topic("native", TopicSpec::default())
        .await
        .unwrap();
    let listed = s.sns_ok("ListTopics", &[]).await.all("TopicArn");
    assert_eq!(listed, [topic_arn("native"), topic_arn("orders")]);

    let attributes = s.sns_ok("GetTopicAttributes", &[("TopicArn", &arn)]).await;
    assert_eq!(attributes.attribute("TopicArn").unwrap(), arn);
    assert_eq!(attributes.attribute("Owner").unwrap(), "000000000000");
    assert_eq!(attributes.attribute("SubscriptionsConfirmed").unwrap(), "0");
    assert_eq!(attributes.attribute("FifoTopic"), None);
    s.sns_ok(
        "SetTopicAttributes",
        &[
            ("TopicArn", &arn),
            ("AttributeName", "DisplayName"),
            ("AttributeValue", "Orders"),
        ],
    )
    .await;
    let attributes = s.sns_ok("GetTopicAttributes", &[("TopicArn", &arn)]).await;
    assert_eq!(attributes.attribute("DisplayName").unwrap(), "Orders");
    s.sns_fails(
        "SetTopicAttributes",
        &[
            ("TopicArn", &arn),
            ("AttributeName", "Bogus"),
            ("AttributeValue", "1"),
        ],
        400,
        "InvalidParameter",
    )
    .await;
    s.sns_fails(
        "SetTopicAttributes",
        &[
            ("TopicArn", &arn),
            ("AttributeName", "ContentBasedDeduplication"),
            ("AttributeValue", "true"),
        ],
        400,
        "InvalidParameter",
    )
    .await;

    // Tags.
    s.sns_ok(
        "TagResource",
        &[
            ("ResourceArn", &arn),
            ("Tags.member.1.Key", "team"),
            ("Tags.member.1.Value", "core"),
        ],
    )
    .await;
    let tags = s
        .sns_ok("ListTagsForResource", &[("ResourceArn", &arn)])
        .await;
    assert_eq!(tags.all("Key"), ["team"]);
    assert_eq!(tags.all("Value"), ["core"]);
    s.sns_ok(
        "UntagResource",
        &[("ResourceArn", &arn), ("TagKeys.member.1", "team")],
    )
    .await;
    assert!(
        s.sns_ok("ListTagsForResource", &[("ResourceArn", &arn)])
            .await
            .all("Key")
            .is_empty()
    );

    s.sns_ok("DeleteTopic", &[("TopicArn", &arn)]).await;
    assert!(
        !s.broker
            .list_topics()
            .iter()
            .any(|t| t.as_str() == "orders")
    );
    // Deleting again is not an error, as on AWS.
    s.sns_ok("DeleteTopic", &[("TopicArn", &arn)]).await;
    s.sns_fails("GetTopicAttributes", &[("TopicArn", &arn)], 404, "NotFound")
        .await;
}

#[tokio::test]
async fn fifo_topics_need_the_suffix_and_the_attribute_together() {
    let s = Served::start().await;
    for (name, attributes) in [
        ("events.fifo", vec![]),
        ("events", vec![("FifoTopic", "true")]),
        ("bad name!", vec![]),
        ("", vec![]),
    ] {
        let mut params = vec![("Name", name)];
        if let Some((k, v)) = attributes.first() {
            params.push(("Attributes.entry.1.key", k));
            params.push(("Attributes.entry.1.value", v));
        }
        s.sns_fails("CreateTopic", &params, 400, "InvalidParameter")
            .await;
    }
    assert!(s.broker.list_topics().is_empty());
    let arn = s
        .topic(
            "events.fifo",
            &[("FifoTopic", "true"), ("ContentBasedDeduplication", "true")],
        )
        .await;
    let attributes = s.sns_ok("GetTopicAttributes", &[("TopicArn", &arn)]).await;
    assert_eq!(attributes.attribute("FifoTopic").unwrap(), "true");
    assert_eq!(
        attributes.attribute("ContentBasedDeduplication").unwrap(),
        "true"
    );
}

#[tokio::test]
async fn unknown_topics_and_malformed_arns_are_refused_with_the_models_codes() {
    let s = Served::start().await;
    let missing = topic_arn("missing");
    s.sns_fails(
        "Publish",
        &[("TopicArn", &missing), ("Message", "m")],
        404,
        "NotFound",
    )
    .await;
    s.sns_fails(
        "Subscribe",
        &[
            ("TopicArn", &missing),
            ("Protocol", "sqs"),
            ("Endpoint", &queue_arn("q")),
        ],
        404,
        "NotFound",
    )
    .await;
    s.sns_fails(
        "GetTopicAttributes",
        &[("TopicArn", &missing)],
        404,
        "NotFound",
    )
    .await;
    s.sns_fails(
        "ListSubscriptionsByTopic",
        &[("TopicArn", &missing)],
        404,
        "NotFound",
    )
    .await;
    s.sns_fails(
        "PublishBatch",
        &[
            ("TopicArn", &missing),
            ("PublishBatchRequestEntries.member.1.Id", "a"),
            ("PublishBatchRequestEntries.member.1.Message", "m"),
        ],
        404,
        "NotFound",
    )
    .await;
    s.sns_fails(
        "ListTagsForResource",
        &[("ResourceArn", &missing)],
        404,
        "ResourceNotFound",
    )
    .await;
    // Another region's topic is not here.
    s.sns_fails(
        "GetTopicAttributes",
        &[("TopicArn", "arn:aws:sns:eu-west-1:000000000000:missing")],
        404,
        "NotFound",
    )
    .await;
    s.sns_fails(
        "GetTopicAttributes",
        &[("TopicArn", "not-an-arn")],
        400,
        "InvalidParameter",
    )
    .await;
    s.sns_fails("Publish", &[("Message", "m")], 400, "InvalidParameter")
        .await;
    s.sns_fails(
        "GetSubscriptionAttributes",
        &[(
            "SubscriptionArn",
            &format!("{}:00000000-0000-4000-a000-000000000000", topic_arn("t")),
        )],
        404,
        "NotFound",
    )
    .await;
    s.sns_fails("ListPlatformApplications", &[], 400, "InvalidAction")
        .await;
}

#[tokio::test]
async fn sns_is_told_from_sqs_by_its_action_without_a_signature() {
    let s = Served::start().await;
    // No Authorization header: the Action alone routes it.
    let reply = s.sns_unsigned("CreateTopic", &[("Name", "plain")]).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply
            .body
            .contains("xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\"")
    );
    // SQS requests still reach SQS.
    let url = s.queue("still-sqs", serde_json::json!({})).await;
    assert!(url.ends_with("/000000000000/still-sqs"));
    // An action both APIs name is SQS's unless signed for SNS.
    let reply = s
        .sns_unsigned("AddPermission", &[("QueueUrl", &url), ("Label", "l")])
        .await;
    // SQS answers it (here: the permission's actions are missing), in SQS's namespace.
    assert!(
        reply.body.contains("queue.amazonaws.com") && !reply.body.contains("sns.amazonaws.com"),
        "{}",
        reply.body
    );
    let reply = s
        .sns("AddPermission", &[("TopicArn", &topic_arn("plain"))])
        .await;
    assert!(
        reply.body.contains("InvalidAction") && reply.body.contains("sns.amazonaws.com"),
        "{}",
        reply.body
    );
}
