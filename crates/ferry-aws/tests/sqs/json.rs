use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use crate::support::{Served, expected_md5, md5_hex};

#[tokio::test]
async fn a_message_goes_round_trip_with_attributes_of_every_type_and_their_digests() {
    let s = Served::start().await;
    let url = s.create("orders", json!({})).await;
    assert_eq!(url, s.url("orders"));
    let body = "{\"order\": 7, \"note\": \"naïve ☃\"}";
    let binary = [0u8, 1, 2, 254, 255];
    let sent = s
        .ok(
            "SendMessage",
            json!({
                "QueueUrl": url,
                "MessageBody": body,
                "MessageAttributes": {
                    "kind": {"DataType": "String", "StringValue": "order.created"},
                    "count": {"DataType": "Number", "StringValue": "42"},
                    "blob": {"DataType": "Binary", "BinaryValue": STANDARD.encode(binary)},
                    "price": {"DataType": "Number.float", "StringValue": "9.99"},
                },
                "MessageSystemAttributes": {
                    "AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-abc"}
                }
            }),
        )
        .await;
    let attributes_md5 = expected_md5(&[
        ("kind", "String", b"order.created"),
        ("count", "Number", b"42"),
        ("blob", "Binary", &binary),
        ("price", "Number.float", b"9.99"),
    ]);
    assert_eq!(sent["MD5OfMessageBody"], md5_hex(body.as_bytes()));
    assert_eq!(sent["MD5OfMessageAttributes"], attributes_md5);
    assert_eq!(
        sent["MD5OfMessageSystemAttributes"],
        expected_md5(&[("AWSTraceHeader", "String", b"Root=1-abc")])
    );
    let got = s
        .ok(
            "ReceiveMessage",
            json!({
                "QueueUrl": url,
                "MessageAttributeNames": ["All"],
                "MessageSystemAttributeNames": ["All"],
            }),
        )
        .await;
    let m = &got["Messages"][0];
    assert_eq!(m["Body"], body);
    assert_eq!(m["MessageId"], sent["MessageId"]);
    assert_eq!(m["MD5OfBody"], md5_hex(body.as_bytes()));
    assert_eq!(m["MD5OfMessageAttributes"], attributes_md5);
    assert_eq!(
        m["MessageAttributes"]["blob"]["BinaryValue"],
        STANDARD.encode(binary)
    );
    assert_eq!(m["MessageAttributes"]["price"]["DataType"], "Number.float");
    assert_eq!(m["Attributes"]["ApproximateReceiveCount"], "1");
    assert_eq!(m["Attributes"]["AWSTraceHeader"], "Root=1-abc");
    assert!(
        m["Attributes"]["SentTimestamp"]
            .as_str()
            .unwrap()
            .parse::<i64>()
            .unwrap()
            > 0
    );
    s.ok(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": m["ReceiptHandle"]}),
    )
    .await;
    let again = s.ok("ReceiveMessage", json!({"QueueUrl": url})).await;
    assert!(again.get("Messages").is_none(), "{again}");
    assert_eq!(s.broker.describe_queue("orders").unwrap().stats.acked, 1);
}

#[tokio::test]
async fn only_the_attributes_asked_for_come_back_and_the_digest_covers_those() {
    let s = Served::start().await;
    let url = s.create("q", json!({})).await;
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "x", "MessageAttributes": {
            "app.a": {"DataType": "String", "StringValue": "1"},
            "app.b": {"DataType": "String", "StringValue": "2"},
            "other": {"DataType": "String", "StringValue": "3"},
        }}),
    )
    .await;
    let got = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "MessageAttributeNames": ["app.*"], "VisibilityTimeout": 0}),
        )
        .await;
    let m = &got["Messages"][0];
    let names: Vec<&String> = m["MessageAttributes"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["app.a", "app.b"]);
    assert_eq!(
        m["MD5OfMessageAttributes"],
        expected_md5(&[("app.a", "String", b"1"), ("app.b", "String", b"2")])
    );
    assert!(m.get("Attributes").is_none());
}

#[tokio::test]
async fn every_refusal_has_its_code_and_status_and_changes_nothing() {
    let s = Served::start().await;
    let url = s.create("q", json!({"VisibilityTimeout": "60"})).await;
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "kept"}),
    )
    .await;
    let missing = s.url("nope");
    let non_existent = "AWS.SimpleQueueService.NonExistentQueue";
    s.fails(
        "GetQueueUrl",
        json!({"QueueName": "nope"}),
        400,
        non_existent,
    )
    .await;
    s.fails(
        "SendMessage",
        json!({"QueueUrl": missing, "MessageBody": "x"}),
        400,
        non_existent,
    )
    .await;
    s.fails(
        "ReceiveMessage",
        json!({"QueueUrl": s.url("bad name!")}),
        400,
        non_existent,
    )
    .await;
    let reply = s.call("GetQueueUrl", json!({"QueueName": "nope"})).await;
    assert_eq!(reply.error().1, "QueueDoesNotExist");
    // Same attributes: the URL; different ones: refused.
    assert_eq!(s.create("q", json!({"VisibilityTimeout": "60"})).await, url);
    s.fails(
        "CreateQueue",
        json!({"QueueName": "q", "Attributes": {"VisibilityTimeout": "61"}}),
        400,
        "QueueAlreadyExists",
    )
    .await;
    let reply = s
        .call(
            "CreateQueue",
            json!({"QueueName": "q", "Attributes": {"DelaySeconds": "5"}}),
        )
        .await;
    assert_eq!(
        reply.error(),
        ("QueueAlreadyExists".into(), "QueueNameExists".into())
    );
    s.fails(
        "CreateQueue",
        json!({"QueueName": "r", "Attributes": {"Colour": "blue"}}),
        400,
        "InvalidAttributeName",
    )
    .await;
    s.fails(
        "CreateQueue",
        json!({"QueueName": "r", "Attributes": {"DelaySeconds": "901"}}),
        400,
        "InvalidAttributeValue",
    )
    .await;
    s.fails(
        "CreateQueue",
        json!({"QueueName": "bad name"}),
        400,
        "InvalidParameterValue",
    )
    .await;
    s.fails("CreateQueue", json!({}), 400, "MissingParameter")
        .await;
    s.fails(
        "SendMessage",
        json!({"QueueUrl": url}),
        400,
        "MissingParameter",
    )
    .await;
    s.fails(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "bad \u{1} char"}),
        400,
        "InvalidMessageContents",
    )
    .await;
    s.fails(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "x", "DelaySeconds": 901}),
        400,
        "InvalidParameterValue",
    )
    .await;
    s.fails(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "x", "MessageDeduplicationId": "d"}),
        400,
        "InvalidParameterValue",
    )
    .await;
    s.fails("SendMessage", json!({"QueueUrl": url, "MessageBody": "x", "MessageAttributes": {"AWS.x": {"DataType": "String", "StringValue": "v"}}}), 400, "InvalidParameterValue").await;
    s.fails(
        "ReceiveMessage",
        json!({"QueueUrl": url, "MaxNumberOfMessages": 11}),
        400,
        "InvalidParameterValue",
    )
    .await;
    s.fails(
        "ReceiveMessage",
        json!({"QueueUrl": url, "WaitTimeSeconds": 21}),
        400,
        "InvalidParameterValue",
    )
    .await;
    s.fails(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": "forged"}),
        404,
        "ReceiptHandleIsInvalid",
    )
    .await;
    s.fails(
        "ChangeMessageVisibility",
        json!({"QueueUrl": url, "ReceiptHandle": "forged", "VisibilityTimeout": 5}),
        404,
        "ReceiptHandleIsInvalid",
    )
    .await;
    let entry = |id: &str| json!({"Id": id, "MessageBody": "b"});
    s.fails(
        "SendMessageBatch",
        json!({"QueueUrl": url, "Entries": []}),
        400,
        "AWS.SimpleQueueService.EmptyBatchRequest",
    )
    .await;
    let eleven: Vec<_> = (0..11).map(|i| entry(&format!("e{i}"))).collect();
    s.fails(
        "SendMessageBatch",
        json!({"QueueUrl": url, "Entries": eleven}),
        400,
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
    )
    .await;
    s.fails(
        "SendMessageBatch",
        json!({"QueueUrl": url, "Entries": [entry("a"), entry("a")]}),
        400,
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
    )
    .await;
    s.fails(
        "SendMessageBatch",
        json!({"QueueUrl": url, "Entries": [entry("not ok!")]}),
        400,
        "AWS.SimpleQueueService.InvalidBatchEntryId",
    )
    .await;
    let big = "x".repeat(600_000);
    let long = json!([{"Id": "a", "MessageBody": big}, {"Id": "b", "MessageBody": big}]);
    s.fails(
        "SendMessageBatch",
        json!({"QueueUrl": url, "Entries": long}),
        400,
        "AWS.SimpleQueueService.BatchRequestTooLong",
    )
    .await;
    s.fails(
        "DeleteMessageBatch",
        json!({"QueueUrl": url, "Entries": []}),
        400,
        "AWS.SimpleQueueService.EmptyBatchRequest",
    )
    .await;
    s.fails(
        "AddPermission",
        json!({"QueueUrl": url, "Label": "l"}),
        400,
        "MissingParameter",
    )
    .await;
    s.fails("StartMessageMoveTask", json!({}), 400, "MissingParameter")
        .await;
    s.fails("MakeCoffee", json!({}), 400, "InvalidAction").await;
    let reply = s
        .raw(
            "POST / HTTP/1.1\r\nX-Amz-Target: AmazonSQS.ListQueues\r\n",
            b"{not json",
        )
        .await;
    assert_eq!(reply.status, 400);
    // Nothing changed: one queue, one message, nothing in flight.
    let names: Vec<String> = s
        .broker
        .list_queues()
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(names, ["q"]);
    let state = s.broker.describe_queue("q").unwrap().stats.state;
    assert_eq!((state.ready, state.in_flight), (1, 0));
    // The purge refused within its minute changes nothing either.
    s.ok("PurgeQueue", json!({"QueueUrl": url})).await;
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "after"}),
    )
    .await;
    s.fails(
        "PurgeQueue",
        json!({"QueueUrl": url}),
        403,
        "AWS.SimpleQueueService.PurgeQueueInProgress",
    )
    .await;
    let got = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "MaxNumberOfMessages": 10}),
        )
        .await;
    let bodies: Vec<&str> = got["Messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["after"]);
}

#[tokio::test]
async fn a_forged_or_altered_receipt_handle_is_refused_and_the_key_survives_a_restart() {
    let s = Served::start().await;
    let url = s.create("q", json!({"VisibilityTimeout": "300"})).await;
    let other = s.create("other", json!({})).await;
    s.ok("SendMessage", json!({"QueueUrl": url, "MessageBody": "m"}))
        .await;
    let got = s.ok("ReceiveMessage", json!({"QueueUrl": url})).await;
    let handle = got["Messages"][0]["ReceiptHandle"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut altered = handle.clone().into_bytes();
    let i = altered.len() / 2;
    altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    s.fails(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": altered}),
        404,
        "ReceiptHandleIsInvalid",
    )
    .await;
    // A real handle of one queue is no handle of another.
    s.fails(
        "DeleteMessage",
        json!({"QueueUrl": other, "ReceiptHandle": handle}),
        404,
        "ReceiptHandleIsInvalid",
    )
    .await;
    assert_eq!(
        s.broker.describe_queue("q").unwrap().stats.state.in_flight,
        1
    );
    // Restart: the front end keeps its key, so the handle is still one of ours and reaches
    // the broker — which hands out new lease tokens on every open, so the lease it names
    // is no longer held: SQS's answer to a stale handle (a delete that succeeds and
    // deletes nothing; a visibility change refused as not in flight).
    let broker_dir = s.stop().await;
    let broker = ferry_broker::Broker::open(
        broker_dir.path().join("data"),
        crate::support::served_config(),
    )
    .await
    .unwrap();
    let s = Served::on(broker, broker_dir).await;
    s.fails(
        "ChangeMessageVisibility",
        json!({"QueueUrl": url, "ReceiptHandle": handle, "VisibilityTimeout": 5}),
        400,
        "AWS.SimpleQueueService.MessageNotInflight",
    )
    .await;
    s.fails(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": altered}),
        404,
        "ReceiptHandleIsInvalid",
    )
    .await;
    s.ok(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": handle}),
    )
    .await;
    assert_eq!(s.broker.describe_queue("q").unwrap().stats.acked, 0);
}

#[tokio::test]
async fn list_queues_filters_by_prefix_and_pages() {
    let s = Served::start().await;
    for name in ["a1", "a2", "a3", "a4", "a5", "b1"] {
        s.create(name, json!({})).await;
    }
    let all = s.ok("ListQueues", json!({})).await;
    assert_eq!(all["QueueUrls"].as_array().unwrap().len(), 6);
    assert!(all.get("NextToken").is_none());
    let mut seen = Vec::new();
    let mut token = None;
    loop {
        let mut input = json!({"QueueNamePrefix": "a", "MaxResults": 2});
        if let Some(t) = &token {
            input["NextToken"] = json!(t);
        }
        let page = s.ok("ListQueues", input).await;
        let urls = page["QueueUrls"].as_array().unwrap();
        assert!(urls.len() <= 2);
        seen.extend(
            urls.iter()
                .map(|u| u.as_str().unwrap().rsplit('/').next().unwrap().to_owned()),
        );
        match page.get("NextToken") {
            Some(t) => token = Some(t.as_str().unwrap().to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ["a1", "a2", "a3", "a4", "a5"]);
    s.fails(
        "ListQueues",
        json!({"MaxResults": 0}),
        400,
        "InvalidParameterValue",
    )
    .await;
    s.fails(
        "ListQueues",
        json!({"NextToken": "!!"}),
        400,
        "InvalidParameterValue",
    )
    .await;
}

#[tokio::test]
async fn batches_answer_each_entry_and_a_bad_entry_fails_alone() {
    let s = Served::start().await;
    let url = s.create("q", json!({})).await;
    let out = s
        .ok(
            "SendMessageBatch",
            json!({"QueueUrl": url, "Entries": [
                {"Id": "a", "MessageBody": "one"},
                {"Id": "b", "MessageBody": "two", "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "NaN-ish"}}},
                {"Id": "c", "MessageBody": "three", "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}}},
            ]}),
        )
        .await;
    let ok: Vec<&str> = out["Successful"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["Id"].as_str().unwrap())
        .collect();
    assert_eq!(ok, ["a", "c"]);
    assert_eq!(
        out["Successful"][1]["MD5OfMessageAttributes"],
        expected_md5(&[("k", "String", b"v")])
    );
    assert_eq!(out["Failed"][0]["Id"], "b");
    assert_eq!(out["Failed"][0]["Code"], "InvalidParameterValue");
    assert_eq!(out["Failed"][0]["SenderFault"], true);
    let got = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "MaxNumberOfMessages": 10}),
        )
        .await;
    let messages = got["Messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    let visibility = s
        .ok(
            "ChangeMessageVisibilityBatch",
            json!({"QueueUrl": url, "Entries": [
                {"Id": "x", "ReceiptHandle": messages[0]["ReceiptHandle"], "VisibilityTimeout": 120},
                {"Id": "y", "ReceiptHandle": "forged", "VisibilityTimeout": 120},
            ]}),
        )
        .await;
    assert_eq!(visibility["Successful"][0]["Id"], "x");
    assert_eq!(visibility["Failed"][0]["Code"], "ReceiptHandleIsInvalid");
    let deleted = s
        .ok(
            "DeleteMessageBatch",
            json!({"QueueUrl": url, "Entries": [
                {"Id": "x", "ReceiptHandle": messages[0]["ReceiptHandle"]},
                {"Id": "y", "ReceiptHandle": messages[1]["ReceiptHandle"]},
                {"Id": "z", "ReceiptHandle": "forged"},
            ]}),
        )
        .await;
    assert_eq!(deleted["Successful"].as_array().unwrap().len(), 2);
    assert_eq!(deleted["Failed"][0]["Id"], "z");
    assert_eq!(s.broker.describe_queue("q").unwrap().stats.acked, 2);
}

#[tokio::test]
async fn attributes_and_tags_are_kept_and_reported() {
    let s = Served::start().await;
    let url = s
        .ok(
            "CreateQueue",
            json!({"QueueName": "q", "Attributes": {"DelaySeconds": "0", "ReceiveMessageWaitTimeSeconds": "0"}, "tags": {"team": "orders"}}),
        )
        .await["QueueUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    s.ok("SetQueueAttributes", json!({"QueueUrl": url, "Attributes": {"VisibilityTimeout": "45", "MaximumMessageSize": "2048", "Policy": "{}"}})).await;
    let all = s
        .ok(
            "GetQueueAttributes",
            json!({"QueueUrl": url, "AttributeNames": ["All"]}),
        )
        .await;
    let a = &all["Attributes"];
    assert_eq!(a["VisibilityTimeout"], "45");
    assert_eq!(a["MaximumMessageSize"], "2048");
    assert_eq!(a["QueueArn"], "arn:aws:sqs:us-east-1:000000000000:q");
    assert_eq!(a["ApproximateNumberOfMessages"], "0");
    let one = s
        .ok(
            "GetQueueAttributes",
            json!({"QueueUrl": url, "AttributeNames": ["QueueArn"]}),
        )
        .await;
    assert_eq!(one["Attributes"].as_object().unwrap().len(), 1);
    s.fails(
        "GetQueueAttributes",
        json!({"QueueUrl": url, "AttributeNames": ["Colour"]}),
        400,
        "InvalidAttributeName",
    )
    .await;
    // The new maximum size and visibility timeout apply.
    s.fails(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "x".repeat(2049)}),
        400,
        "InvalidParameterValue",
    )
    .await;
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "fits"}),
    )
    .await;
    let got = s.ok("ReceiveMessage", json!({"QueueUrl": url})).await;
    assert!(got["Messages"][0]["Body"] == "fits");
    let lease_until = s.broker.describe_queue("q").unwrap().stats.state.in_flight;
    assert_eq!(lease_until, 1);
    // Tags.
    s.ok(
        "TagQueue",
        json!({"QueueUrl": url, "Tags": {"env": "test"}}),
    )
    .await;
    s.ok("UntagQueue", json!({"QueueUrl": url, "TagKeys": ["team"]}))
        .await;
    let tags = s.ok("ListQueueTags", json!({"QueueUrl": url})).await;
    assert_eq!(tags, json!({"Tags": {"env": "test"}}));
    // FifoQueue cannot change, as in SQS.
    let message = s
        .fails(
            "SetQueueAttributes",
            json!({"QueueUrl": url, "Attributes": {"FifoQueue": "true"}}),
            400,
            "InvalidAttributeValue",
        )
        .await;
    assert!(message.contains("FifoQueue"), "{message}");
    // Deleting forgets the queue and its attributes.
    s.ok("DeleteQueue", json!({"QueueUrl": url})).await;
    s.fails(
        "GetQueueAttributes",
        json!({"QueueUrl": url, "AttributeNames": ["All"]}),
        400,
        "AWS.SimpleQueueService.NonExistentQueue",
    )
    .await;
    let url = s.create("q", json!({})).await;
    let tags = s.ok("ListQueueTags", json!({"QueueUrl": url})).await;
    assert_eq!(tags, json!({}));
}
