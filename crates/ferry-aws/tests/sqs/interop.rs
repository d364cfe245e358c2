use std::time::Duration;

use ferry_broker::{OutgoingMessage, QueueSpec};
use serde_json::json;

use crate::support::Served;

#[tokio::test]
async fn a_message_published_through_ferry_is_received_through_sqs_and_back() {
    let s = Served::start().await;
    // A queue made by Ferry's own API is an SQS queue.
    s.broker
        .create_queue("native", QueueSpec::default())
        .await
        .unwrap();
    let url = s.ok("GetQueueUrl", json!({"QueueName": "native"})).await["QueueUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    let listed = s
        .ok("ListQueues", json!({"QueueNamePrefix": "native"}))
        .await;
    assert_eq!(
        listed["QueueUrls"].as_array().unwrap().len(),
        2,
        "native and native.dlq"
    );
    let attributes = s
        .ok(
            "GetQueueAttributes",
            json!({"QueueUrl": url, "AttributeNames": ["All"]}),
        )
        .await;
    assert_eq!(attributes["Attributes"]["VisibilityTimeout"], "30");
    assert!(
        attributes["Attributes"]["RedrivePolicy"]
            .as_str()
            .unwrap()
            .contains("native.dlq")
    );
    s.broker
        .publish(
            "native",
            OutgoingMessage::new("from ferry").with_header("content-type", "text/plain"),
        )
        .await
        .unwrap();
    let got = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "MessageAttributeNames": ["All"]}),
        )
        .await;
    let m = &got["Messages"][0];
    assert_eq!(m["Body"], "from ferry");
    assert_eq!(
        m["MessageAttributes"]["content-type"],
        json!({"StringValue": "text/plain", "DataType": "String"})
    );
    s.ok(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": m["ReceiptHandle"]}),
    )
    .await;
    assert_eq!(s.broker.describe_queue("native").unwrap().stats.acked, 1);

    // A queue made through SQS is a Ferry queue.
    let sqs_url = s
        .create("made-by-sqs", json!({"VisibilityTimeout": "20"}))
        .await;
    assert!(
        s.broker
            .list_queues()
            .iter()
            .any(|n| n.as_str() == "made-by-sqs")
    );
    assert_eq!(
        s.broker.describe_queue("made-by-sqs").unwrap().spec.lease,
        Duration::from_secs(20)
    );
    s.ok(
        "SendMessage",
        json!({"QueueUrl": sqs_url, "MessageBody": "from sqs", "MessageAttributes": {"trace": {"DataType": "String", "StringValue": "t-1"}}}),
    )
    .await;
    let received = s
        .broker
        .receive(
            "made-by-sqs",
            "ferry-worker",
            10,
            None,
            Some(Duration::from_secs(2)),
        )
        .await
        .unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(&received[0].payload[..], b"from sqs");
    assert_eq!(received[0].headers["trace"], "t-1");
    s.broker
        .ack("made-by-sqs", received[0].seq, received[0].token)
        .await
        .unwrap();
    let none = s.ok("ReceiveMessage", json!({"QueueUrl": sqs_url})).await;
    assert!(none.get("Messages").is_none());
}
