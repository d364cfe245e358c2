use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{Served, expected_md5};

fn receipt(got: &serde_json::Value) -> String {
    got["Messages"][0]["ReceiptHandle"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_unsettled_message_comes_back_after_its_visibility_timeout_with_its_count_raised() {
    let s = Served::start().await;
    let url = s.create("q", json!({"VisibilityTimeout": "1"})).await;
    s.ok("SendMessage", json!({"QueueUrl": url, "MessageBody": "m"}))
        .await;
    let first = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "AttributeNames": ["All"]}),
        )
        .await;
    assert_eq!(
        first["Messages"][0]["Attributes"]["ApproximateReceiveCount"],
        "1"
    );
    let hidden = s.ok("ReceiveMessage", json!({"QueueUrl": url})).await;
    assert!(
        hidden.get("Messages").is_none(),
        "visible while in flight: {hidden}"
    );
    let again = s
        .ok("ReceiveMessage", json!({"QueueUrl": url, "WaitTimeSeconds": 5, "AttributeNames": ["ApproximateReceiveCount"]}))
        .await;
    assert_eq!(
        again["Messages"][0]["Attributes"]["ApproximateReceiveCount"],
        "2"
    );
    // The first receive's handle is stale now: deleting with it deletes nothing (and
    // succeeds, as in SQS); changing its visibility says it is not in flight.
    s.ok(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": receipt(&first)}),
    )
    .await;
    s.fails(
        "ChangeMessageVisibility",
        json!({"QueueUrl": url, "ReceiptHandle": receipt(&first), "VisibilityTimeout": 10}),
        400,
        "AWS.SimpleQueueService.MessageNotInflight",
    )
    .await;
    assert_eq!(
        s.broker.describe_queue("q").unwrap().stats.state.in_flight,
        1
    );
    s.ok(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": receipt(&again)}),
    )
    .await;
    assert_eq!(s.broker.describe_queue("q").unwrap().stats.acked, 1);
}

#[tokio::test]
async fn a_visibility_of_zero_shows_the_message_at_once_and_a_longer_one_hides_it() {
    let s = Served::start().await;
    let url = s.create("q", json!({})).await;
    s.ok("SendMessage", json!({"QueueUrl": url, "MessageBody": "m"}))
        .await;
    let got = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "VisibilityTimeout": 1}),
        )
        .await;
    s.ok(
        "ChangeMessageVisibility",
        json!({"QueueUrl": url, "ReceiptHandle": receipt(&got), "VisibilityTimeout": 60}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let hidden = s.ok("ReceiveMessage", json!({"QueueUrl": url})).await;
    assert!(
        hidden.get("Messages").is_none(),
        "the extension did not hold: {hidden}"
    );
    s.ok(
        "ChangeMessageVisibility",
        json!({"QueueUrl": url, "ReceiptHandle": receipt(&got), "VisibilityTimeout": 0}),
    )
    .await;
    let back = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "WaitTimeSeconds": 2, "AttributeNames": ["All"]}),
        )
        .await;
    assert_eq!(back["Messages"][0]["Body"], "m");
    assert_eq!(
        back["Messages"][0]["Attributes"]["ApproximateReceiveCount"],
        "2"
    );
}

#[tokio::test]
async fn a_redrive_policy_moves_a_message_to_the_dead_letter_queue_after_max_receive_count() {
    let s = Served::start().await;
    let policy = |target: &str| {
        json!({"deadLetterTargetArn": format!("arn:aws:sqs:us-east-1:000000000000:{target}"), "maxReceiveCount": 2}).to_string()
    };
    s.fails(
        "CreateQueue",
        json!({"QueueName": "src", "Attributes": {"RedrivePolicy": policy("missing")}}),
        400,
        "InvalidParameterValue",
    )
    .await;
    let dlq = s.create("dead", json!({})).await;
    let src = s
        .create("src", json!({"RedrivePolicy": policy("dead")}))
        .await;
    let attributes = s
        .ok(
            "GetQueueAttributes",
            json!({"QueueUrl": src, "AttributeNames": ["RedrivePolicy"]}),
        )
        .await;
    let redrive: serde_json::Value =
        serde_json::from_str(attributes["Attributes"]["RedrivePolicy"].as_str().unwrap()).unwrap();
    assert_eq!(redrive["maxReceiveCount"], 2);
    s.ok("SendMessage", json!({"QueueUrl": src, "MessageBody": "poison", "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}}})).await;
    for _ in 0..2 {
        let got = s
            .ok(
                "ReceiveMessage",
                json!({"QueueUrl": src, "WaitTimeSeconds": 2}),
            )
            .await;
        assert_eq!(got["Messages"][0]["Body"], "poison");
        s.ok(
            "ChangeMessageVisibility",
            json!({"QueueUrl": src, "ReceiptHandle": receipt(&got), "VisibilityTimeout": 0}),
        )
        .await;
    }
    let none = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": src, "WaitTimeSeconds": 1}),
        )
        .await;
    assert!(none.get("Messages").is_none(), "{none}");
    let dead = s
        .ok("ReceiveMessage", json!({"QueueUrl": dlq, "WaitTimeSeconds": 2, "AttributeNames": ["All"], "MessageAttributeNames": ["All"]}))
        .await;
    let m = &dead["Messages"][0];
    assert_eq!(m["Body"], "poison");
    assert_eq!(m["MessageAttributes"]["k"]["StringValue"], "v");
    assert_eq!(
        m["Attributes"]["DeadLetterQueueSourceArn"],
        "arn:aws:sqs:us-east-1:000000000000:src"
    );
    // Ferry's reason comes as attributes, covered by the attributes' MD5.
    let reason = &m["MessageAttributes"]["Ferry.DeadLetter.Reason"];
    assert_eq!(reason["StringValue"], "max_deliveries", "{m}");
    let deliveries = &m["MessageAttributes"]["Ferry.DeadLetter.Deliveries"];
    assert_eq!(deliveries["DataType"], "Number");
    assert_eq!(deliveries["StringValue"], "2");
    assert_eq!(
        m["MessageAttributes"]["Ferry.DeadLetter.OriginQueue"]["StringValue"],
        "src"
    );
    let mut listed: Vec<(String, String, Vec<u8>)> = m["MessageAttributes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, a)| {
            let value = a["StringValue"].as_str().unwrap().as_bytes().to_vec();
            (
                name.clone(),
                a["DataType"].as_str().unwrap().to_owned(),
                value,
            )
        })
        .collect();
    listed.sort();
    let borrowed: Vec<(&str, &str, &[u8])> = listed
        .iter()
        .map(|(n, t, v)| (n.as_str(), t.as_str(), v.as_slice()))
        .collect();
    assert_eq!(m["MD5OfMessageAttributes"], expected_md5(&borrowed));
    // Asked for by prefix, only they come.
    s.ok(
        "ChangeMessageVisibility",
        json!({"QueueUrl": dlq, "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}),
    )
    .await;
    let again = s
        .ok("ReceiveMessage", json!({"QueueUrl": dlq, "WaitTimeSeconds": 2, "MessageAttributeNames": ["Ferry.DeadLetter.*"]}))
        .await;
    let names: Vec<&String> = again["Messages"][0]["MessageAttributes"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert!(
        names.iter().all(|n| n.starts_with("Ferry.DeadLetter.")),
        "{names:?}"
    );
    assert!(names.len() >= 3, "{names:?}");
    let sources = s
        .ok("ListDeadLetterSourceQueues", json!({"QueueUrl": dlq}))
        .await;
    assert_eq!(sources["queueUrls"], json!([src]));
    // A dead-letter queue that allows no one refuses new sources.
    let closed = s
        .create(
            "closed",
            json!({"RedriveAllowPolicy": "{\"redrivePermission\":\"denyAll\"}"}),
        )
        .await;
    let _ = closed;
    s.fails(
        "CreateQueue",
        json!({"QueueName": "src2", "Attributes": {"RedrivePolicy": policy("closed")}}),
        400,
        "InvalidParameterValue",
    )
    .await;
}

#[tokio::test]
async fn a_fifo_queue_keeps_group_order_holds_a_group_in_flight_and_drops_duplicates() {
    let s = Served::start().await;
    let url = s
        .create(
            "jobs.fifo",
            json!({"FifoQueue": "true", "ContentBasedDeduplication": "true"}),
        )
        .await;
    s.fails(
        "CreateQueue",
        json!({"QueueName": "plain", "Attributes": {"FifoQueue": "true"}}),
        400,
        "InvalidParameterValue",
    )
    .await;
    let send = |group: &str, body: &str| json!({"QueueUrl": url, "MessageBody": body, "MessageGroupId": group});
    let a = s.ok("SendMessage", send("g1", "a")).await;
    s.ok("SendMessage", send("g1", "b")).await;
    s.ok("SendMessage", send("g2", "c")).await;
    let duplicate = s.ok("SendMessage", send("g1", "a")).await;
    assert_eq!(duplicate["MessageId"], a["MessageId"]);
    assert!(a["SequenceNumber"].as_str().is_some());
    s.fails(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "x"}),
        400,
        "MissingParameter",
    )
    .await;
    s.fails(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "x", "MessageGroupId": "g", "DelaySeconds": 1}),
        400,
        "InvalidParameterValue",
    )
    .await;
    let got = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "AttributeNames": ["All"]}),
        )
        .await;
    let messages = got["Messages"].as_array().unwrap();
    let bodies: Vec<&str> = messages
        .iter()
        .map(|m| m["Body"].as_str().unwrap())
        .collect();
    assert_eq!(
        bodies,
        ["a", "b", "c"],
        "a group's messages first, in order"
    );
    assert_eq!(messages[0]["Attributes"]["MessageGroupId"], "g1");
    assert_eq!(
        messages[0]["Attributes"]["SequenceNumber"],
        a["SequenceNumber"]
    );
    assert_eq!(
        messages[0]["Attributes"]["MessageDeduplicationId"]
            .as_str()
            .unwrap()
            .len(),
        64
    );
    let blocked = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "MaxNumberOfMessages": 10}),
        )
        .await;
    assert!(
        blocked.get("Messages").is_none(),
        "g1's next must wait: {blocked}"
    );
    s.ok("SendMessage", send("g1", "d")).await;
    for m in &messages[..2] {
        let held = s
            .ok(
                "ReceiveMessage",
                json!({"QueueUrl": url, "MaxNumberOfMessages": 10}),
            )
            .await;
        assert!(held.get("Messages").is_none(), "g1 is in flight: {held}");
        s.ok(
            "DeleteMessage",
            json!({"QueueUrl": url, "ReceiptHandle": m["ReceiptHandle"]}),
        )
        .await;
    }
    let next = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "MaxNumberOfMessages": 10}),
        )
        .await;
    assert_eq!(next["Messages"][0]["Body"], "d");
    // Without content-based deduplication a FIFO send needs its own id.
    let strict = s.create("strict.fifo", json!({})).await;
    s.fails(
        "SendMessage",
        json!({"QueueUrl": strict, "MessageBody": "x", "MessageGroupId": "g"}),
        400,
        "InvalidParameterValue",
    )
    .await;
    let first = s.ok("SendMessage", json!({"QueueUrl": strict, "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "d1"})).await;
    let again = s.ok("SendMessage", json!({"QueueUrl": strict, "MessageBody": "other body", "MessageGroupId": "g", "MessageDeduplicationId": "d1"})).await;
    assert_eq!(first["MessageId"], again["MessageId"]);
    assert_eq!(
        s.broker
            .describe_queue("strict.fifo")
            .unwrap()
            .stats
            .next_seq,
        1
    );
}

#[tokio::test]
async fn a_long_poll_waits_for_a_message_and_an_empty_one_for_its_whole_wait() {
    let s = Served::start().await;
    let url = s.create("q", json!({})).await;
    let started = Instant::now();
    let empty = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "WaitTimeSeconds": 1}),
        )
        .await;
    assert!(empty.get("Messages").is_none());
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    let s = std::sync::Arc::new(s);
    let poller = {
        let s = s.clone();
        let url = url.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let got = s
                .ok(
                    "ReceiveMessage",
                    json!({"QueueUrl": url, "WaitTimeSeconds": 10}),
                )
                .await;
            (got, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "late"}),
    )
    .await;
    let (got, waited) = poller.await.unwrap();
    assert_eq!(got["Messages"][0]["Body"], "late");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
}

#[tokio::test]
async fn a_purge_deletes_what_was_sent_before_it_even_what_was_in_flight() {
    let s = Served::start().await;
    let url = s.create("q", json!({})).await;
    for body in ["old1", "old2", "old3"] {
        s.ok("SendMessage", json!({"QueueUrl": url, "MessageBody": body}))
            .await;
    }
    let in_flight = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "VisibilityTimeout": 1}),
        )
        .await;
    assert_eq!(in_flight["Messages"][0]["Body"], "old1");
    s.ok("PurgeQueue", json!({"QueueUrl": url})).await;
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "new"}),
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
    assert_eq!(bodies, ["new"]);
    s.ok(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": receipt(&got)}),
    )
    .await;
    // old1's visibility ends: it is deleted, not handed out.
    let later = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "WaitTimeSeconds": 2}),
        )
        .await;
    assert!(later.get("Messages").is_none(), "{later}");
    assert_eq!(s.broker.describe_queue("q").unwrap().stats.state.tracked, 0);
}

#[tokio::test]
async fn a_delayed_message_stays_hidden_until_its_delay_ends() {
    let s = Served::start().await;
    let url = s.create("q", json!({"DelaySeconds": "1"})).await;
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "queue-delayed"}),
    )
    .await;
    let hidden = s.ok("ReceiveMessage", json!({"QueueUrl": url})).await;
    assert!(hidden.get("Messages").is_none());
    let attributes = s
        .ok(
            "GetQueueAttributes",
            json!({"QueueUrl": url, "AttributeNames": ["ApproximateNumberOfMessagesDelayed"]}),
        )
        .await;
    assert_eq!(
        attributes["Attributes"]["ApproximateNumberOfMessagesDelayed"],
        "1"
    );
    let got = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "WaitTimeSeconds": 3}),
        )
        .await;
    assert_eq!(got["Messages"][0]["Body"], "queue-delayed");
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "now", "DelaySeconds": 0}),
    )
    .await;
    let now = s.ok("ReceiveMessage", json!({"QueueUrl": url})).await;
    assert_eq!(now["Messages"][0]["Body"], "now");
}
