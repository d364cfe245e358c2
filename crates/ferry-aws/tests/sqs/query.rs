use crate::support::{Served, expected_md5, md5_hex};

/// The text of the first `<tag>` element in `xml`.
fn element<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let start = xml.find(&format!("<{tag}>"))? + tag.len() + 2;
    let end = xml[start..].find(&format!("</{tag}>"))? + start;
    Some(&xml[start..end])
}

#[tokio::test]
async fn the_query_protocol_creates_sends_receives_and_deletes_in_xml() {
    let s = Served::start().await;
    let created = s
        .query(&[
            ("Action", "CreateQueue"),
            ("QueueName", "q"),
            ("Attribute.1.Name", "VisibilityTimeout"),
            ("Attribute.1.Value", "40"),
            ("Tag.1.Key", "team"),
            ("Tag.1.Value", "orders"),
        ])
        .await;
    assert_eq!(created.status, 200, "{}", created.body);
    assert!(
        created.body.contains("<CreateQueueResponse"),
        "{}",
        created.body
    );
    let url = element(&created.body, "QueueUrl").unwrap().to_owned();
    assert_eq!(url, s.url("q"));
    let body = "a <tagged> & 'quoted' body";
    let sent = s
        .query(&[
            ("Action", "SendMessage"),
            ("QueueUrl", &url),
            ("MessageBody", body),
            ("MessageAttribute.1.Name", "kind"),
            ("MessageAttribute.1.Value.DataType", "String"),
            ("MessageAttribute.1.Value.StringValue", "created"),
            ("MessageAttribute.2.Name", "bytes"),
            ("MessageAttribute.2.Value.DataType", "Binary"),
            ("MessageAttribute.2.Value.BinaryValue", "AAEC"),
        ])
        .await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    assert_eq!(
        element(&sent.body, "MD5OfMessageBody").unwrap(),
        md5_hex(body.as_bytes())
    );
    let md5 = expected_md5(&[
        ("kind", "String", b"created"),
        ("bytes", "Binary", &[0, 1, 2]),
    ]);
    assert_eq!(element(&sent.body, "MD5OfMessageAttributes").unwrap(), md5);
    let got = s
        .query(&[
            ("Action", "ReceiveMessage"),
            ("QueueUrl", &url),
            ("AttributeName.1", "All"),
            ("MessageAttributeName.1", "All"),
        ])
        .await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(
        element(&got.body, "Body").unwrap(),
        "a &lt;tagged&gt; &amp; &apos;quoted&apos; body"
    );
    assert_eq!(element(&got.body, "MD5OfMessageAttributes").unwrap(), md5);
    assert!(
        got.body.contains(
            "<Attribute><Name>ApproximateReceiveCount</Name><Value>1</Value></Attribute>"
        ),
        "{}",
        got.body
    );
    assert!(got.body.contains("<MessageAttribute><Name>bytes</Name><Value><BinaryValue>AAEC</BinaryValue><DataType>Binary</DataType></Value></MessageAttribute>"), "{}", got.body);
    let handle = element(&got.body, "ReceiptHandle").unwrap().to_owned();
    let deleted = s
        .query(&[
            ("Action", "DeleteMessage"),
            ("QueueUrl", &url),
            ("ReceiptHandle", &handle),
        ])
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    assert!(deleted.body.contains("<DeleteMessageResponse"));
    let attributes = s
        .query(&[
            ("Action", "GetQueueAttributes"),
            ("QueueUrl", &url),
            ("AttributeName.1", "VisibilityTimeout"),
        ])
        .await;
    assert!(
        attributes
            .body
            .contains("<Attribute><Name>VisibilityTimeout</Name><Value>40</Value></Attribute>"),
        "{}",
        attributes.body
    );
    let tags = s
        .query(&[("Action", "ListQueueTags"), ("QueueUrl", &url)])
        .await;
    assert!(
        tags.body
            .contains("<Tag><Key>team</Key><Value>orders</Value></Tag>"),
        "{}",
        tags.body
    );
    let batch = s
        .query(&[
            ("Action", "SendMessageBatch"),
            ("QueueUrl", &url),
            ("SendMessageBatchRequestEntry.1.Id", "one"),
            ("SendMessageBatchRequestEntry.1.MessageBody", "1"),
            ("SendMessageBatchRequestEntry.2.Id", "two"),
            ("SendMessageBatchRequestEntry.2.MessageBody", "2"),
        ])
        .await;
    assert_eq!(
        batch.body.matches("<SendMessageBatchResultEntry>").count(),
        2,
        "{}",
        batch.body
    );
    let list = s.query(&[("Action", "ListQueues")]).await;
    assert!(
        list.body.contains(&format!("<QueueUrl>{url}</QueueUrl>")),
        "{}",
        list.body
    );
    assert_eq!(s.broker.describe_queue("q").unwrap().stats.acked, 1);
}

#[tokio::test]
async fn query_errors_are_xml_error_responses_with_the_query_codes() {
    let s = Served::start().await;
    let missing = s
        .query(&[("Action", "GetQueueUrl"), ("QueueName", "nope")])
        .await;
    assert_eq!(missing.status, 400);
    assert_eq!(
        element(&missing.body, "Code").unwrap(),
        "AWS.SimpleQueueService.NonExistentQueue"
    );
    assert_eq!(element(&missing.body, "Type").unwrap(), "Sender");
    assert!(missing.body.contains("<ErrorResponse"));
    s.query(&[("Action", "CreateQueue"), ("QueueName", "q")])
        .await;
    let exists = s
        .query(&[
            ("Action", "CreateQueue"),
            ("QueueName", "q"),
            ("Attribute.1.Name", "DelaySeconds"),
            ("Attribute.1.Value", "3"),
        ])
        .await;
    assert_eq!(element(&exists.body, "Code").unwrap(), "QueueAlreadyExists");
    let no_action = s.query(&[("QueueName", "q")]).await;
    assert_eq!(element(&no_action.body, "Code").unwrap(), "InvalidAction");
    let empty = s
        .query(&[("Action", "DeleteMessageBatch"), ("QueueUrl", &s.url("q"))])
        .await;
    assert_eq!(
        element(&empty.body, "Code").unwrap(),
        "AWS.SimpleQueueService.EmptyBatchRequest"
    );
    let forged = s
        .query(&[
            ("Action", "DeleteMessage"),
            ("QueueUrl", &s.url("q")),
            ("ReceiptHandle", "<forged>"),
        ])
        .await;
    assert_eq!(forged.status, 404);
    assert_eq!(
        element(&forged.body, "Code").unwrap(),
        "ReceiptHandleIsInvalid"
    );
    assert!(forged.body.contains("&lt;forged&gt;"), "{}", forged.body);
    // A request posted to the queue's own path is addressed to it.
    let head =
        "POST /000000000000/q HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n";
    let sent = s
        .raw(head, b"Action=SendMessage&MessageBody=via-path")
        .await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    assert_eq!(s.broker.describe_queue("q").unwrap().stats.state.ready, 1);
}
