//! Settings changed after creation and purges, both through the broker: what
//! SetQueueAttributes changes reaches Ferry's own consumers, and a purge deletes what is in
//! flight too.

use std::time::Duration;

use ferry_broker::DeadLetter;
use serde_json::json;

use crate::support::Served;

fn policy(target: &str, count: u32) -> String {
    json!({
        "deadLetterTargetArn": format!("arn:aws:sqs:us-east-1:000000000000:{target}"),
        "maxReceiveCount": count,
    })
    .to_string()
}

async fn attribute(s: &Served, url: &str, name: &str) -> Option<String> {
    let got = s
        .ok(
            "GetQueueAttributes",
            json!({"QueueUrl": url, "AttributeNames": [name]}),
        )
        .await;
    got["Attributes"][name].as_str().map(str::to_owned)
}

#[tokio::test]
async fn a_redrive_policy_is_set_changed_and_removed_through_the_broker() {
    let s = Served::start().await;
    let url = s.create("q", json!({})).await;
    let first = s.create("first-dlq", json!({})).await;
    s.create("second-dlq", json!({})).await;

    s.ok(
        "SetQueueAttributes",
        json!({"QueueUrl": url, "Attributes": {"RedrivePolicy": policy("first-dlq", 1)}}),
    )
    .await;
    assert_eq!(
        attribute(&s, &url, "RedrivePolicy").await.unwrap(),
        policy("first-dlq", 1)
    );
    // It works: one receive, and the message is a dead letter of the new target.
    s.ok("SendMessage", json!({"QueueUrl": url, "MessageBody": "m"}))
        .await;
    s.ok(
        "ReceiveMessage",
        json!({"QueueUrl": url, "VisibilityTimeout": 0}),
    )
    .await;
    let dead = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": first, "WaitTimeSeconds": 5}),
        )
        .await;
    assert_eq!(dead["Messages"][0]["Body"], "m", "{dead}");

    s.ok(
        "SetQueueAttributes",
        json!({"QueueUrl": url, "Attributes": {"RedrivePolicy": policy("second-dlq", 4)}}),
    )
    .await;
    let spec = s.broker.describe_queue("q").unwrap().spec;
    assert_eq!(spec.retry.max_deliveries, 4);
    assert_eq!(
        spec.dead_letter,
        DeadLetter::Named(ferry_broker::Name::new("second-dlq").unwrap())
    );
    let sources = s
        .ok(
            "ListDeadLetterSourceQueues",
            json!({"QueueUrl": s.url("second-dlq")}),
        )
        .await;
    assert_eq!(sources["queueUrls"], json!([url]));

    // An empty string removes it, as in SQS.
    s.ok(
        "SetQueueAttributes",
        json!({"QueueUrl": url, "Attributes": {"RedrivePolicy": ""}}),
    )
    .await;
    assert_eq!(attribute(&s, &url, "RedrivePolicy").await, None);
    assert_eq!(
        s.broker.describe_queue("q").unwrap().spec.dead_letter,
        DeadLetter::Disabled
    );
}

#[tokio::test]
async fn a_change_the_broker_refuses_changes_nothing() {
    let s = Served::start().await;
    s.create("b", json!({})).await;
    let a = s
        .create(
            "a",
            json!({"RedrivePolicy": policy("b", 3), "VisibilityTimeout": "20"}),
        )
        .await;
    let b = s.url("b");
    // b → a would close the circle a → b → a.
    let message = s
        .fails(
            "SetQueueAttributes",
            json!({"QueueUrl": b, "Attributes": {"RedrivePolicy": policy("a", 3), "DelaySeconds": "5"}}),
            400,
            "InvalidParameterValue",
        )
        .await;
    assert!(message.contains("cycle"), "{message}");
    assert_eq!(attribute(&s, &b, "RedrivePolicy").await, None);
    assert_eq!(
        attribute(&s, &b, "DelaySeconds").await.as_deref(),
        Some("0"),
        "nothing of the refused request is kept"
    );
    // A target that does not exist, and a queue as its own target.
    for target in ["nowhere", "a"] {
        s.fails(
            "SetQueueAttributes",
            json!({"QueueUrl": a, "Attributes": {"RedrivePolicy": policy(target, 3)}}),
            400,
            "InvalidParameterValue",
        )
        .await;
    }
    assert_eq!(
        attribute(&s, &a, "RedrivePolicy").await.unwrap(),
        policy("b", 3)
    );
    assert_eq!(
        s.broker.describe_queue("a").unwrap().spec.lease,
        Duration::from_secs(20)
    );
}

#[tokio::test]
async fn visibility_and_retention_reach_ferrys_own_consumers() {
    let s = Served::start().await;
    let url = s.create("q", json!({})).await;
    s.ok(
        "SetQueueAttributes",
        json!({"QueueUrl": url, "Attributes": {"VisibilityTimeout": "7", "MessageRetentionPeriod": "120"}}),
    )
    .await;
    let spec = s.broker.describe_queue("q").unwrap().spec;
    assert_eq!(spec.lease, Duration::from_secs(7));
    assert_eq!(spec.default_ttl, Some(Duration::from_secs(120)));
    assert_eq!(attribute(&s, &url, "VisibilityTimeout").await.unwrap(), "7");
    assert_eq!(
        attribute(&s, &url, "MessageRetentionPeriod").await.unwrap(),
        "120"
    );
    s.ok("SendMessage", json!({"QueueUrl": url, "MessageBody": "m"}))
        .await;
    // A consumer of Ferry's own API gets the new lease without asking for one.
    let before = s.broker.now_ms();
    let got = s
        .broker
        .receive("q", "native", 1, None, None)
        .await
        .unwrap();
    let lease = got[0].lease_until_ms - before;
    assert!((7_000..8_000).contains(&lease), "{lease} ms");
    // And a Ferry-side change shows through GetQueueAttributes.
    s.broker
        .update_queue("q", |spec| spec.lease = Duration::from_secs(9))
        .await
        .unwrap();
    assert_eq!(attribute(&s, &url, "VisibilityTimeout").await.unwrap(), "9");
}

#[tokio::test]
async fn a_purge_ends_in_flight_receipts_and_frees_the_fifo_group() {
    let s = Served::start().await;
    let url = s
        .create("jobs.fifo", json!({"ContentBasedDeduplication": "true"}))
        .await;
    for body in ["first", "second"] {
        s.ok(
            "SendMessage",
            json!({"QueueUrl": url, "MessageBody": body, "MessageGroupId": "g"}),
        )
        .await;
    }
    let held = s
        .ok(
            "ReceiveMessage",
            json!({"QueueUrl": url, "VisibilityTimeout": 300}),
        )
        .await;
    assert_eq!(held["Messages"][0]["Body"], "first");
    let handle = held["Messages"][0]["ReceiptHandle"]
        .as_str()
        .unwrap()
        .to_owned();

    s.ok("PurgeQueue", json!({"QueueUrl": url})).await;
    let stats = s.broker.describe_queue("jobs.fifo").unwrap().stats;
    assert_eq!((stats.state.tracked, stats.purged), (0, 2));
    // The group is free at once, not after the purged delivery's 300 s.
    s.ok(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "after", "MessageGroupId": "g"}),
    )
    .await;
    let got = s.ok("ReceiveMessage", json!({"QueueUrl": url})).await;
    assert_eq!(got["Messages"][0]["Body"], "after", "{got}");
    // The purged delivery's handle changes nothing: its visibility cannot change, and a
    // delete of it deletes nothing (as a stale handle's does).
    s.fails(
        "ChangeMessageVisibility",
        json!({"QueueUrl": url, "ReceiptHandle": handle, "VisibilityTimeout": 10}),
        400,
        "AWS.SimpleQueueService.MessageNotInflight",
    )
    .await;
    s.ok(
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": handle}),
    )
    .await;
    assert_eq!(
        s.broker
            .describe_queue("jobs.fifo")
            .unwrap()
            .stats
            .state
            .in_flight,
        1,
        "\"after\" is still in flight"
    );
}
