//! Fan-out by reference: each subscribed queue holds a reference to the topic's one copy
//! of the message, rendered as SNS's envelope or the raw body when it is received.

use md5::{Digest, Md5};
use serde_json::{Value, json};

use crate::support::{Served, topic_arn};

fn envelope(message: &Value) -> Value {
    serde_json::from_str(message["Body"].as_str().unwrap()).unwrap()
}

fn md5_hex(body: &str) -> String {
    Md5::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Bytes written so far to queues' message logs and to topics' partition logs.
fn written(s: &Served) -> (u64, u64) {
    let stats = s.broker.storage_stats();
    (
        stats.queue_messages.commit_bytes.sum,
        stats.topic_partitions.commit_bytes.sum,
    )
}

#[tokio::test]
async fn a_publish_to_four_subscribed_queues_writes_its_payload_once() {
    let s = Served::start().await;
    let topic = s.topic("big", &[]).await;
    let mut urls = Vec::new();
    for (i, raw) in ["false", "true", "false", "true"].iter().enumerate() {
        let queue = format!("reader-{i}");
        urls.push((s.queue(&queue, json!({})).await, *raw == "true"));
        s.subscribe(&topic, &queue, &[("RawMessageDelivery", raw)])
            .await;
    }
    let payload = "p".repeat(200_000);
    // A first publish attaches the queues; measured from the second.
    s.sns_ok("Publish", &[("TopicArn", &topic), ("Message", "warm")])
        .await;
    let (queues_before, topics_before) = written(&s);
    let published = s
        .sns_ok("Publish", &[("TopicArn", &topic), ("Message", &payload)])
        .await;
    let (queues_after, topics_after) = written(&s);
    let topic_grew = topics_after - topics_before;
    let queues_grew = queues_after - queues_before;
    println!("the topic grew by {topic_grew} bytes, the four queues by {queues_grew}");
    assert!(topic_grew >= 200_000, "{topic_grew}");
    assert!(
        queues_grew < 4 * 1024,
        "four subscribed queues wrote {queues_grew} bytes for a payload of 200000"
    );
    let message_id = published.one("MessageId");
    for (url, raw) in &urls {
        let got = s.drain(url, 5).await;
        assert_eq!(got.len(), 2, "{url}");
        let m = &got[1];
        let body = m["Body"].as_str().unwrap();
        assert_eq!(m["MD5OfBody"], md5_hex(body), "{url}");
        if *raw {
            assert_eq!(body, payload);
        } else {
            let e = envelope(m);
            assert_eq!(e["Message"], payload.as_str());
            assert_eq!(e["MessageId"], message_id);
            assert_eq!(e["TopicArn"], topic);
        }
    }
}

#[tokio::test]
async fn a_queue_takes_direct_sends_beside_two_topics_it_is_subscribed_to() {
    let s = Served::start().await;
    let url = s.queue("inbox", json!({})).await;
    let orders = s.topic("orders", &[]).await;
    let refunds = s.topic("refunds", &[]).await;
    let to_orders = s.subscribe(&orders, "inbox", &[]).await;
    let to_refunds = s.subscribe(&refunds, "inbox", &[]).await;
    s.sqs(
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "direct"}),
    )
    .await;
    s.sns_ok("Publish", &[("TopicArn", &orders), ("Message", "order-1")])
        .await;
    s.sns_ok(
        "Publish",
        &[("TopicArn", &refunds), ("Message", "refund-1")],
    )
    .await;
    let got = s.drain(&url, 5).await;
    let mut seen: Vec<(String, String)> = got
        .iter()
        .map(
            |m| match serde_json::from_str::<Value>(m["Body"].as_str().unwrap()) {
                Ok(e) if e.is_object() => (
                    e["Message"].as_str().unwrap().to_owned(),
                    e["UnsubscribeURL"].as_str().unwrap().to_owned(),
                ),
                _ => (m["Body"].as_str().unwrap().to_owned(), String::new()),
            },
        )
        .collect();
    seen.sort();
    assert_eq!(seen.len(), 3, "{got:?}");
    assert_eq!(seen[0], ("direct".to_owned(), String::new()));
    assert_eq!(seen[1].0, "order-1");
    assert!(seen[1].1.ends_with(&to_orders), "{}", seen[1].1);
    assert_eq!(seen[2].0, "refund-1");
    assert!(seen[2].1.ends_with(&to_refunds), "{}", seen[2].1);
    // Nothing of the broker's leaks into what the consumer sees.
    for m in &got {
        if let Ok(e) = serde_json::from_str::<Value>(m["Body"].as_str().unwrap())
            && e.is_object()
        {
            assert!(e.get("MessageAttributes").is_none(), "{e}");
        }
    }
    assert!(!got.iter().any(|m| {
        m["MessageAttributes"]
            .as_object()
            .is_some_and(|a| a.keys().any(|k| k.starts_with("ferry-")))
    }));
}

#[tokio::test]
async fn unsubscribing_keeps_what_was_delivered_through_a_restart_and_the_topics_deletion() {
    let s = Served::start().await;
    let url = s.queue("kept", json!({})).await;
    let topic = s.topic("fleeting", &[]).await;
    let subscription = s.subscribe(&topic, "kept", &[]).await;
    s.sns_ok("Publish", &[("TopicArn", &topic), ("Message", "before")])
        .await;
    s.sns_ok("Unsubscribe", &[("SubscriptionArn", &subscription)])
        .await;
    s.sns_ok("Publish", &[("TopicArn", &topic), ("Message", "after")])
        .await;
    let s = s.restart().await;
    s.sns_ok("DeleteTopic", &[("TopicArn", &topic)]).await;
    assert!(s.broker.list_topics().is_empty());
    let got = s.drain(&url, 5).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let e = envelope(&got[0]);
    assert_eq!(e["Message"], "before");
    assert_eq!(e["TopicArn"], topic_arn("fleeting"));
    assert!(
        e["UnsubscribeURL"]
            .as_str()
            .unwrap()
            .ends_with(&subscription)
    );
}

#[tokio::test]
async fn changing_a_subscriptions_delivery_keeps_earlier_deliveries_as_they_were() {
    let s = Served::start().await;
    let url = s.queue("shapes", json!({})).await;
    let topic = s.topic("shaped", &[]).await;
    let subscription = s.subscribe(&topic, "shapes", &[]).await;
    let publish = |text: &'static str| {
        let s = &s;
        let topic = topic.clone();
        async move {
            s.sns_ok(
                "Publish",
                &[
                    ("TopicArn", &topic),
                    ("Message", text),
                    ("MessageAttributes.entry.1.Name", "colour"),
                    ("MessageAttributes.entry.1.Value.DataType", "String"),
                    ("MessageAttributes.entry.1.Value.StringValue", "blue"),
                ],
            )
            .await;
        }
    };
    publish("wrapped").await;
    s.sns_ok(
        "SetSubscriptionAttributes",
        &[
            ("SubscriptionArn", &subscription),
            ("AttributeName", "RawMessageDelivery"),
            ("AttributeValue", "true"),
        ],
    )
    .await;
    publish("bare").await;
    s.sns_ok(
        "SetSubscriptionAttributes",
        &[
            ("SubscriptionArn", &subscription),
            ("AttributeName", "FilterPolicy"),
            ("AttributeValue", r#"{"colour": ["red"]}"#),
        ],
    )
    .await;
    publish("filtered out").await;
    let got = s.drain(&url, 5).await;
    assert_eq!(got.len(), 2, "{got:?}");
    let (wrapped, bare): (Vec<&Value>, Vec<&Value>) = got
        .iter()
        .partition(|m| m["Body"].as_str().unwrap().starts_with('{'));
    assert_eq!(envelope(wrapped[0])["Message"], "wrapped");
    assert!(wrapped[0].get("MessageAttributes").is_none());
    assert_eq!(bare[0]["Body"], "bare");
    let attributes = bare[0]["MessageAttributes"].as_object().unwrap();
    assert_eq!(attributes.len(), 1, "{attributes:?}");
    assert_eq!(attributes["colour"]["StringValue"], "blue");
}
