//! Behaviours found by running moto's SQS test suite against Ferry
//! (`scripts/compat/moto-sqs.sh`), checked here without moto: queue URLs that are bare
//! names or no URL at all, SQS's wording and codes for bad names, FIFO rules on
//! per-message delays and on batches, AddPermission / RemovePermission, tag limits,
//! message attribute errors, and the test-only reset route.

use serde_json::json;

use crate::support::Served;

#[tokio::test]
async fn a_queue_url_may_be_the_bare_name_and_a_url_of_no_queue_is_a_missing_queue() {
    let s = Served::start().await;
    s.create("named", json!({})).await;
    s.ok(
        "SendMessage",
        json!({"QueueUrl": "named", "MessageBody": "by name"}),
    )
    .await;
    let got = s.ok("ReceiveMessage", json!({"QueueUrl": "named"})).await;
    assert_eq!(got["Messages"][0]["Body"], "by name");
    for url in [
        "http://whatever-incorrect-queue-address",
        "http://h/named",
        "missing",
    ] {
        s.fails(
            "GetQueueAttributes",
            json!({"QueueUrl": url}),
            400,
            "AWS.SimpleQueueService.NonExistentQueue",
        )
        .await;
    }
}

#[tokio::test]
async fn settling_on_a_missing_queue_is_a_missing_queue_whatever_the_handle() {
    let s = Served::start().await;
    let handle = json!("not-a-handle-of-anything");
    for (action, input) in [
        ("DeleteMessage", json!({"ReceiptHandle": handle})),
        (
            "ChangeMessageVisibility",
            json!({"ReceiptHandle": handle, "VisibilityTimeout": 5}),
        ),
    ] {
        let mut input = input;
        input["QueueUrl"] = json!("http://localhost:4566/000000000000/missing");
        s.fails(
            action,
            input,
            400,
            "AWS.SimpleQueueService.NonExistentQueue",
        )
        .await;
    }
}

#[tokio::test]
async fn bad_queue_names_are_refused_in_sqs_words() {
    let s = Served::start().await;
    for name in ["", "/my/test", "!@£$%^&*()queue", &"p".repeat(81)] {
        let message = s
            .fails(
                "CreateQueue",
                json!({"QueueName": name}),
                400,
                "InvalidParameterValue",
            )
            .await;
        assert_eq!(
            message,
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
        );
    }
    // A FIFO queue asked for under a standard queue's name is a bad name, not a bad
    // attribute.
    let message = s
        .fails(
            "CreateQueue",
            json!({"QueueName": "plain", "Attributes": {"FifoQueue": "true"}}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert!(message.contains("must end with .fifo suffix"), "{message}");
    let listed = s.ok("ListQueues", json!({})).await;
    assert!(listed.get("QueueUrls").is_none(), "{listed}");
}

#[tokio::test]
async fn a_fifo_message_may_carry_a_zero_delay_only() {
    let s = Served::start().await;
    let url = s.create("d.fifo", json!({"DelaySeconds": "10"})).await;
    let message = s
        .fails(
            "SendMessage",
            json!({"QueueUrl": url, "MessageBody": "b", "DelaySeconds": 5,
                   "MessageGroupId": "g", "MessageDeduplicationId": "1"}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert_eq!(
        message,
        "Value 5 for parameter DelaySeconds is invalid. Reason: The request include parameter \
         that is not valid for this queue type."
    );
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "b", "DelaySeconds": 0,
               "MessageGroupId": "g", "MessageDeduplicationId": "2"}),
    )
    .await;
    let sent = s
        .ok(
            "SendMessageBatch",
            json!({"QueueUrl": url, "Entries": [
                {"Id": "a", "MessageBody": "x", "DelaySeconds": 0, "MessageGroupId": "g",
                 "MessageDeduplicationId": "3"},
            ]}),
        )
        .await;
    assert_eq!(sent["Successful"].as_array().unwrap().len(), 1, "{sent}");
}

#[tokio::test]
async fn a_standard_queue_refuses_a_deduplication_id_naming_it() {
    let s = Served::start().await;
    let url = s.create("std", json!({})).await;
    let sent = s
        .ok(
            "SendMessageBatch",
            json!({"QueueUrl": url, "Entries": [
                {"Id": "plain", "MessageBody": "x"},
                {"Id": "dedup", "MessageBody": "y", "MessageDeduplicationId": "d1"},
            ]}),
        )
        .await;
    assert_eq!(sent["Successful"][0]["Id"], "plain", "{sent}");
    assert_eq!(sent["Failed"][0]["Id"], "dedup", "{sent}");
    assert_eq!(
        sent["Failed"][0]["Message"],
        "Value d1 for parameter MessageDeduplicationId is invalid. Reason: The request includes \
         a parameter that is not valid for this queue type."
    );
}

#[tokio::test]
async fn a_fifo_batch_missing_a_group_or_a_dedup_id_is_refused_whole() {
    let s = Served::start().await;
    let url = s.create("b.fifo", json!({})).await;
    let good = json!({"Id": "good", "MessageBody": "x", "MessageGroupId": "g",
                      "MessageDeduplicationId": "1"});
    s.fails(
        "SendMessageBatch",
        json!({"QueueUrl": url, "Entries": [good, {"Id": "nogroup", "MessageBody": "y",
               "MessageDeduplicationId": "2"}]}),
        400,
        "MissingParameter",
    )
    .await;
    let message = s
        .fails(
            "SendMessageBatch",
            json!({"QueueUrl": url, "Entries": [good, {"Id": "nodedup", "MessageBody": "y",
                   "MessageGroupId": "g"}]}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert_eq!(
        message,
        "The queue should either have ContentBasedDeduplication enabled or \
         MessageDeduplicationId provided explicitly"
    );
    // Nothing was sent.
    let attributes = s
        .ok(
            "GetQueueAttributes",
            json!({"QueueUrl": url, "AttributeNames": ["ApproximateNumberOfMessages"]}),
        )
        .await;
    assert_eq!(attributes["Attributes"]["ApproximateNumberOfMessages"], "0");
}

#[tokio::test]
async fn an_empty_batch_names_the_entry_it_needs() {
    let s = Served::start().await;
    let url = s.create("e", json!({})).await;
    for (action, entry) in [
        ("SendMessageBatch", "SendMessageBatchRequestEntry"),
        ("DeleteMessageBatch", "DeleteMessageBatchRequestEntry"),
        (
            "ChangeMessageVisibilityBatch",
            "ChangeMessageVisibilityBatchRequestEntry",
        ),
    ] {
        let message = s
            .fails(
                action,
                json!({"QueueUrl": url, "Entries": []}),
                400,
                "AWS.SimpleQueueService.EmptyBatchRequest",
            )
            .await;
        assert_eq!(
            message,
            format!("There should be at least one {entry} in the request.")
        );
    }
}

#[tokio::test]
async fn bad_message_attributes_are_refused_in_sqs_words() {
    let s = Served::start().await;
    let url = s.create("m", json!({})).await;
    let message = s
        .fails(
            "SendMessage",
            json!({"QueueUrl": url, "MessageBody": "b", "MessageAttributes": {
                "öther": {"DataType": "String", "StringValue": "v"}}}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert_eq!(
        message,
        "The message attribute name 'öther' is invalid. Attribute name can contain A-Z, a-z, \
         0-9, underscore (_), hyphen (-), and period (.) characters."
    );
    let message = s
        .fails(
            "SendMessage",
            json!({"QueueUrl": url, "MessageBody": "b", "MessageAttributes": {
                "t": {"DataType": "InvalidNumber", "StringValue": "1"}}}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert_eq!(
        message,
        "The message attribute 't' has an invalid message attribute type, the set of \
         supported type prefixes is Binary, Number, and String."
    );
}

#[tokio::test]
async fn tag_limits_are_refused_in_sqs_words_and_change_nothing() {
    let s = Served::start().await;
    let url = s.create("t", json!({})).await;
    s.ok("TagQueue", json!({"QueueUrl": url, "Tags": {"k": "v"}}))
        .await;
    let many: serde_json::Map<String, serde_json::Value> =
        (0..51).map(|i| (format!("k{i}"), json!("v"))).collect();
    let message = s
        .fails(
            "TagQueue",
            json!({"QueueUrl": url, "Tags": many}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert_eq!(message, "Too many tags added for queue t.");
    let message = s
        .fails(
            "UntagQueue",
            json!({"QueueUrl": url, "TagKeys": []}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert_eq!(
        message,
        "Tag keys must be between 1 and 128 characters in length."
    );
    let tags = s.ok("ListQueueTags", json!({"QueueUrl": url})).await;
    assert_eq!(tags["Tags"], json!({"k": "v"}));
}

/// The queue's Policy, parsed, if it has one.
async fn policy(s: &Served, url: &str) -> Option<serde_json::Value> {
    let got = s
        .ok(
            "GetQueueAttributes",
            json!({"QueueUrl": url, "AttributeNames": ["Policy"]}),
        )
        .await;
    got["Attributes"]["Policy"]
        .as_str()
        .map(|p| serde_json::from_str(p).unwrap())
}

#[tokio::test]
async fn permissions_are_statements_of_the_queue_policy() {
    let s = Served::start().await;
    let url = s.create("p.fifo", json!({})).await;
    s.ok(
        "AddPermission",
        json!({"QueueUrl": url, "Label": "one", "AWSAccountIds": ["111111111111"],
               "Actions": ["*"]}),
    )
    .await;
    s.ok(
        "AddPermission",
        json!({"QueueUrl": url, "Label": "two",
               "AWSAccountIds": ["222222222222", "333333333333"],
               "Actions": ["SendMessage", "ReceiveMessage"]}),
    )
    .await;
    let arn = "arn:aws:sqs:us-east-1:000000000000:p.fifo";
    assert_eq!(
        policy(&s, &url).await.unwrap(),
        json!({
            "Version": "2012-10-17",
            "Id": format!("{arn}/SQSDefaultPolicy"),
            "Statement": [
                {"Sid": "one", "Effect": "Allow",
                 "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
                 "Action": "SQS:*", "Resource": arn},
                {"Sid": "two", "Effect": "Allow",
                 "Principal": {"AWS": ["arn:aws:iam::222222222222:root",
                                       "arn:aws:iam::333333333333:root"]},
                 "Action": ["SQS:SendMessage", "SQS:ReceiveMessage"], "Resource": arn},
            ]
        })
    );
    let refused = [
        (
            json!({"Label": "one", "AWSAccountIds": ["111111111111"], "Actions": ["SendMessage"]}),
            400,
            "InvalidParameterValue",
            "Value one for parameter Label is invalid. Reason: Already exists.",
        ),
        (
            json!({"Label": "x", "AWSAccountIds": ["111111111111"], "Actions": ["RemovePermission"]}),
            400,
            "InvalidParameterValue",
            "Value SQS:RemovePermission for parameter ActionName is invalid. Reason: Only the \
             queue owner is allowed to invoke this action.",
        ),
        (
            json!({"Label": "x", "AWSAccountIds": ["111111111111"], "Actions": []}),
            400,
            "MissingParameter",
            "The request must contain the parameter Actions.",
        ),
        (
            json!({"Label": "x", "AWSAccountIds": [], "Actions": ["SendMessage"]}),
            400,
            "InvalidParameterValue",
            "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.",
        ),
        (
            json!({"Label": "x", "AWSAccountIds": ["111111111111"], "Actions": [
                "ChangeMessageVisibility", "DeleteMessage", "GetQueueAttributes", "GetQueueUrl",
                "ListDeadLetterSourceQueues", "PurgeQueue", "ReceiveMessage", "SendMessage"]}),
            403,
            "OverLimit",
            "8 Actions were found, maximum allowed is 7.",
        ),
    ];
    for (mut input, status, code, expected) in refused {
        input["QueueUrl"] = json!(url);
        let message = s.fails("AddPermission", input, status, code).await;
        assert_eq!(message, expected);
    }
    s.ok("RemovePermission", json!({"QueueUrl": url, "Label": "two"}))
        .await;
    let message = s
        .fails(
            "RemovePermission",
            json!({"QueueUrl": url, "Label": "two"}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert_eq!(
        message,
        "Value two for parameter Label is invalid. Reason: can't find label on existing policy."
    );
    let left = policy(&s, &url).await.unwrap();
    assert_eq!(left["Statement"].as_array().unwrap().len(), 1, "{left}");
    s.ok("RemovePermission", json!({"QueueUrl": url, "Label": "one"}))
        .await;
    assert_eq!(policy(&s, &url).await, None);
}

#[tokio::test]
async fn permissions_take_the_query_protocols_numbered_lists() {
    let s = Served::start().await;
    let url = s.create("pq", json!({})).await;
    let reply = s
        .query(&[
            ("Action", "AddPermission"),
            ("QueueUrl", &url),
            ("Label", "both"),
            ("AWSAccountId.1", "111111111111"),
            ("ActionName.1", "SendMessage"),
            ("ActionName.2", "ReceiveMessage"),
        ])
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let policy = policy(&s, &url).await.unwrap();
    assert_eq!(
        policy["Statement"][0]["Action"],
        json!(["SQS:SendMessage", "SQS:ReceiveMessage"])
    );
    assert_eq!(
        policy["Statement"][0]["Principal"]["AWS"],
        "arn:aws:iam::111111111111:root"
    );
}

#[tokio::test]
async fn the_test_reset_route_is_off_unless_asked_for_and_then_deletes_every_queue() {
    let reset = "POST /moto-api/reset HTTP/1.1\r\n";
    let s = Served::start().await;
    s.create("kept", json!({})).await;
    let reply = s.raw(reset, b"").await;
    assert_ne!(reply.status, 200, "{}", reply.body);
    assert_eq!(s.broker.list_queues().len(), 1);

    let s = Served::with_test_reset().await;
    let dlq = s.create("dlq", json!({})).await;
    let arn = s
        .ok(
            "GetQueueAttributes",
            json!({"QueueUrl": dlq, "AttributeNames": ["QueueArn"]}),
        )
        .await["Attributes"]["QueueArn"]
        .as_str()
        .unwrap()
        .to_owned();
    let redrive = json!({"deadLetterTargetArn": arn, "maxReceiveCount": 3}).to_string();
    let source = s.create("source", json!({"RedrivePolicy": redrive})).await;
    s.ok("TagQueue", json!({"QueueUrl": source, "Tags": {"k": "v"}}))
        .await;
    s.create("other.fifo", json!({})).await;
    let reply = s.raw(reset, b"").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(s.broker.list_queues().is_empty());
    let listed = s.ok("ListQueues", json!({})).await;
    assert!(listed.get("QueueUrls").is_none(), "{listed}");
    // A queue made again under an old name starts clean.
    let again = s.create("source", json!({})).await;
    let tags = s.ok("ListQueueTags", json!({"QueueUrl": again})).await;
    assert!(tags.get("Tags").is_none(), "{tags}");
}

#[tokio::test]
async fn the_test_reset_route_also_deletes_every_topic_and_subscription() {
    let s = Served::with_test_reset().await;
    let queue = s.create("inbox", json!({})).await;
    let queue_arn = s
        .ok(
            "GetQueueAttributes",
            json!({"QueueUrl": queue, "AttributeNames": ["QueueArn"]}),
        )
        .await["Attributes"]["QueueArn"]
        .as_str()
        .unwrap()
        .to_owned();
    let created = s
        .sns_ok(
            "CreateTopic",
            &[
                ("Name", "news"),
                ("Tags.member.1.Key", "k"),
                ("Tags.member.1.Value", "v"),
            ],
        )
        .await;
    let topic_arn = created
        .split("<TopicArn>")
        .nth(1)
        .and_then(|rest| rest.split("</TopicArn>").next())
        .unwrap()
        .to_owned();
    s.sns_ok(
        "Subscribe",
        &[
            ("TopicArn", &topic_arn),
            ("Protocol", "sqs"),
            ("Endpoint", &queue_arn),
        ],
    )
    .await;
    s.sns_ok("CreateTopic", &[("Name", "other")]).await;
    assert_eq!(s.broker.list_topics().len(), 2);

    let reply = s.raw("POST /moto-api/reset HTTP/1.1\r\n", b"").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(s.broker.list_topics().is_empty());
    assert!(s.broker.list_queues().is_empty());
    let topics = s.sns_ok("ListTopics", &[]).await;
    assert!(!topics.contains("<TopicArn>"), "{topics}");
    let subscriptions = s.sns_ok("ListSubscriptions", &[]).await;
    assert!(
        !subscriptions.contains("<SubscriptionArn>"),
        "{subscriptions}"
    );
    // A topic made again under an old name starts clean: no tags, no subscriptions.
    s.sns_ok("CreateTopic", &[("Name", "news")]).await;
    let tags = s
        .sns_ok("ListTagsForResource", &[("ResourceArn", &topic_arn)])
        .await;
    assert!(!tags.contains("<Key>"), "{tags}");
    let listed = s
        .sns_ok("ListSubscriptionsByTopic", &[("TopicArn", &topic_arn)])
        .await;
    assert!(!listed.contains("<SubscriptionArn>"), "{listed}");
}
