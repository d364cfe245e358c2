//! Each SQS action family against keys that may and may not do it: allowed calls work, a
//! refused one is AccessDenied (403) and changes nothing; lists show what a key may see.

use serde_json::{Value, json};

use crate::support::{ADMIN, Auth, CONSUMER, DLQ_READER, PUBLISHER, Served, signer};

/// A front end with the queues `orders`, `payments` and `orders-dlq` (the dead-letter
/// queue of `orders`), made by the admin key.
async fn with_queues() -> Served {
    let served = Served::start().await;
    served
        .sqs_ok(ADMIN, "CreateQueue", json!({"QueueName": "orders-dlq"}))
        .await;
    let redrive = json!({
        "deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:orders-dlq",
        "maxReceiveCount": 1
    })
    .to_string();
    served
        .sqs_ok(
            ADMIN,
            "CreateQueue",
            json!({"QueueName": "orders", "Attributes": {"RedrivePolicy": redrive}}),
        )
        .await;
    served
        .sqs_ok(ADMIN, "CreateQueue", json!({"QueueName": "payments"}))
        .await;
    served
}

fn send(url: &str) -> Value {
    json!({"QueueUrl": url, "MessageBody": "hello"})
}

#[tokio::test]
async fn sends_need_publish_on_the_queue() {
    let served = with_queues().await;
    served
        .sqs_ok(PUBLISHER, "SendMessage", send(&served.url("orders")))
        .await;
    assert_eq!(served.messages("orders").await, (1, 0));
    let message = served
        .sqs_denied(PUBLISHER, "SendMessage", send(&served.url("payments")))
        .await;
    assert!(
        message.contains("arn:aws:iam::000000000000:user/orders-publisher")
            && message.contains("sqs:SendMessage")
            && message.contains("publish permission on payments"),
        "{message}"
    );
    let batch = json!({
        "QueueUrl": served.url("payments"),
        "Entries": [{"Id": "a", "MessageBody": "x"}, {"Id": "b", "MessageBody": "y"}]
    });
    served
        .sqs_denied(PUBLISHER, "SendMessageBatch", batch)
        .await;
    served
        .sqs_denied(CONSUMER, "SendMessage", send(&served.url("orders")))
        .await;
    assert_eq!(served.messages("payments").await, (0, 0));
    assert_eq!(served.messages("orders").await, (1, 0));
}

#[tokio::test]
async fn receives_and_settles_need_consume_and_a_dead_letter_queue_needs_dead_letters() {
    let served = with_queues().await;
    served
        .sqs_ok(PUBLISHER, "SendMessage", send(&served.url("orders")))
        .await;
    let receive = json!({"QueueUrl": served.url("orders")});
    served
        .sqs_denied(PUBLISHER, "ReceiveMessage", receive.clone())
        .await;
    assert_eq!(served.messages("orders").await, (1, 0), "still visible");
    let got = served.sqs_ok(CONSUMER, "ReceiveMessage", receive).await;
    let handle = got["Messages"][0]["ReceiptHandle"]
        .as_str()
        .unwrap()
        .to_owned();
    let settle = json!({"QueueUrl": served.url("orders"), "ReceiptHandle": handle});
    served
        .sqs_denied(PUBLISHER, "DeleteMessage", settle.clone())
        .await;
    let visibility = json!({
        "QueueUrl": served.url("orders"), "ReceiptHandle": handle, "VisibilityTimeout": 0
    });
    served
        .sqs_denied(PUBLISHER, "ChangeMessageVisibility", visibility)
        .await;
    let batch = json!({"QueueUrl": served.url("orders"), "Entries": [{"Id": "a", "ReceiptHandle": handle}]});
    served
        .sqs_denied(PUBLISHER, "DeleteMessageBatch", batch)
        .await;
    assert_eq!(served.messages("orders").await, (0, 1), "still in flight");
    served.sqs_ok(CONSUMER, "DeleteMessage", settle).await;
    assert_eq!(served.messages("orders").await, (0, 0));

    // `consume:#` does not read a dead-letter queue; `dlq:orders-dlq` does.
    served
        .sqs_ok(ADMIN, "SendMessage", send(&served.url("orders-dlq")))
        .await;
    let receive_dlq = json!({"QueueUrl": served.url("orders-dlq")});
    let message = served
        .sqs_denied(CONSUMER, "ReceiveMessage", receive_dlq.clone())
        .await;
    assert!(
        message.contains("dead_letters permission on orders-dlq"),
        "{message}"
    );
    assert_eq!(served.messages("orders-dlq").await, (1, 0));
    let got = served
        .sqs_ok(DLQ_READER, "ReceiveMessage", receive_dlq)
        .await;
    assert_eq!(got["Messages"].as_array().unwrap().len(), 1);
    served
        .sqs_denied(
            DLQ_READER,
            "ReceiveMessage",
            json!({"QueueUrl": served.url("orders")}),
        )
        .await;
}

#[tokio::test]
async fn administration_needs_admin_and_a_refusal_changes_nothing() {
    let served = with_queues().await;
    served
        .sqs_ok(PUBLISHER, "SendMessage", send(&served.url("orders")))
        .await;
    let orders = served.url("orders");
    served
        .sqs_denied(PUBLISHER, "CreateQueue", json!({"QueueName": "orders-new"}))
        .await;
    assert!(!served.has_queue("orders-new"));
    served
        .sqs_denied(PUBLISHER, "DeleteQueue", json!({"QueueUrl": orders}))
        .await;
    assert!(served.has_queue("orders"));
    served
        .sqs_denied(PUBLISHER, "PurgeQueue", json!({"QueueUrl": orders}))
        .await;
    assert_eq!(served.messages("orders").await, (1, 0));
    served
        .sqs_denied(
            CONSUMER,
            "SetQueueAttributes",
            json!({"QueueUrl": orders, "Attributes": {"VisibilityTimeout": "5"}}),
        )
        .await;
    served
        .sqs_denied(
            CONSUMER,
            "TagQueue",
            json!({"QueueUrl": orders, "Tags": {"team": "x"}}),
        )
        .await;
    served
        .sqs_denied(
            CONSUMER,
            "UntagQueue",
            json!({"QueueUrl": orders, "TagKeys": ["team"]}),
        )
        .await;
    let permission = json!({
        "QueueUrl": orders, "Label": "l", "AWSAccountIds": ["111122223333"], "Actions": ["SendMessage"]
    });
    served
        .sqs_denied(CONSUMER, "AddPermission", permission.clone())
        .await;
    let attributes = served
        .sqs_ok(
            ADMIN,
            "GetQueueAttributes",
            json!({"QueueUrl": orders, "AttributeNames": ["All"]}),
        )
        .await;
    assert_eq!(attributes["Attributes"]["VisibilityTimeout"], "30");
    assert!(
        attributes["Attributes"].get("Policy").is_none(),
        "{attributes}"
    );
    let tags = served
        .sqs_ok(ADMIN, "ListQueueTags", json!({"QueueUrl": orders}))
        .await;
    assert!(tags.get("Tags").is_none(), "{tags}");
    // The admin key may do all of it.
    served.sqs_ok(ADMIN, "AddPermission", permission).await;
    served
        .sqs_ok(ADMIN, "PurgeQueue", json!({"QueueUrl": orders}))
        .await;
    served
        .sqs_ok(ADMIN, "DeleteQueue", json!({"QueueUrl": orders}))
        .await;
    assert!(!served.has_queue("orders"));
}

#[tokio::test]
async fn look_ups_need_some_right_on_the_queue_and_lists_show_only_those() {
    let served = with_queues().await;
    let url = served
        .sqs_ok(PUBLISHER, "GetQueueUrl", json!({"QueueName": "orders"}))
        .await;
    assert_eq!(url["QueueUrl"], served.url("orders"));
    served
        .sqs_denied(PUBLISHER, "GetQueueUrl", json!({"QueueName": "payments"}))
        .await;
    served
        .sqs_ok(
            PUBLISHER,
            "GetQueueAttributes",
            json!({"QueueUrl": served.url("orders")}),
        )
        .await;
    served
        .sqs_denied(
            PUBLISHER,
            "GetQueueAttributes",
            json!({"QueueUrl": served.url("payments")}),
        )
        .await;

    let listed = |out: Value| -> Vec<String> {
        out.get("QueueUrls")
            .and_then(Value::as_array)
            .map(|urls| {
                urls.iter()
                    .map(|u| u.as_str().unwrap().rsplit('/').next().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let all = listed(served.sqs_ok(ADMIN, "ListQueues", json!({})).await);
    assert_eq!(all, ["orders", "orders-dlq", "payments"]);
    let publisher = listed(served.sqs_ok(PUBLISHER, "ListQueues", json!({})).await);
    assert_eq!(publisher, ["orders"]);
    let reader = listed(served.sqs_ok(DLQ_READER, "ListQueues", json!({})).await);
    assert_eq!(reader, ["orders-dlq"]);
    let sources = served
        .sqs_ok(
            DLQ_READER,
            "ListDeadLetterSourceQueues",
            json!({"QueueUrl": served.url("orders-dlq")}),
        )
        .await;
    assert_eq!(
        sources["queueUrls"],
        json!([]),
        "orders is not the reader's to see"
    );
    let sources = served
        .sqs_ok(
            ADMIN,
            "ListDeadLetterSourceQueues",
            json!({"QueueUrl": served.url("orders-dlq")}),
        )
        .await;
    assert_eq!(sources["queueUrls"], json!([served.url("orders")]));
}

#[tokio::test]
async fn the_query_protocol_answers_access_denied_in_xml() {
    let served = with_queues().await;
    let url = served.url("payments");
    let params = [
        ("Action", "SendMessage"),
        ("QueueUrl", url.as_str()),
        ("MessageBody", "hello"),
        ("Version", "2012-11-05"),
    ];
    let reply = served
        .form(&Auth::Signed(signer(PUBLISHER, "sqs")), &params)
        .await;
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.xml("Code"), "AccessDenied");
    assert_eq!(reply.xml("Type"), "Sender");
    assert_eq!(served.messages("payments").await, (0, 0));
}

#[tokio::test]
async fn an_unknown_action_needs_admin_on_every_name() {
    let served = with_queues().await;
    let bogus = json!({"QueueUrl": served.url("orders")});
    served.sqs_denied(PUBLISHER, "Bogus", bogus.clone()).await;
    let reply = served
        .sqs(&Auth::Signed(signer(ADMIN, "sqs")), "Bogus", bogus)
        .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.query_error(), "InvalidAction");
}
