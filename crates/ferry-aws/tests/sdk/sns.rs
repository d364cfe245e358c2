use std::collections::HashMap;

use aws_sdk_sns::types::MessageAttributeValue as SnsAttribute;
use aws_sdk_sqs::types::Message;
use serde_json::{Value, json};

use crate::support::{Served, attributes_md5, md5_hex, queue_arn, text};

fn sns_text(data_type: &str, value: &str) -> SnsAttribute {
    SnsAttribute::builder()
        .data_type(data_type)
        .string_value(value)
        .build()
        .unwrap()
}

/// Every message the queue has within `wait` seconds of the last, deleted as read.
async fn drain(s: &Served, url: &str, wait: i32) -> Vec<Message> {
    let mut out = Vec::new();
    loop {
        let got = s
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(wait)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        if got.messages().is_empty() {
            return out;
        }
        for m in got.messages() {
            s.sqs
                .delete_message()
                .queue_url(url)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
        out.extend(got.messages().iter().cloned());
    }
}

fn envelope(m: &Message) -> Value {
    serde_json::from_str(m.body().unwrap()).unwrap()
}

#[tokio::test]
async fn topics_are_made_listed_described_and_deleted() {
    let s = Served::start().await;
    let created = s
        .sns
        .create_topic()
        .name("sdk-news")
        .attributes("DisplayName", "News")
        .tags(
            aws_sdk_sns::types::Tag::builder()
                .key("team")
                .value("core")
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let topic = created.topic_arn().unwrap().to_owned();
    assert_eq!(topic, "arn:aws:sns:us-east-1:000000000000:sdk-news");
    let listed = s.sns.list_topics().send().await.unwrap();
    let arns: Vec<&str> = listed
        .topics()
        .iter()
        .filter_map(|t| t.topic_arn())
        .collect();
    assert_eq!(arns, [topic.as_str()]);
    let attributes = s
        .sns
        .get_topic_attributes()
        .topic_arn(&topic)
        .send()
        .await
        .unwrap();
    let a = attributes.attributes().unwrap();
    assert_eq!(a.get("TopicArn"), Some(&topic));
    assert_eq!(a.get("DisplayName").map(String::as_str), Some("News"));
    assert_eq!(a.get("Owner").map(String::as_str), Some("000000000000"));
    let tags = s
        .sns
        .list_tags_for_resource()
        .resource_arn(&topic)
        .send()
        .await
        .unwrap();
    assert_eq!(tags.tags().len(), 1);
    assert_eq!(tags.tags()[0].key(), "team");
    s.sns.delete_topic().topic_arn(&topic).send().await.unwrap();
    assert!(
        s.sns
            .list_topics()
            .send()
            .await
            .unwrap()
            .topics()
            .is_empty()
    );
    s.stop().await;
}

#[tokio::test]
async fn a_publish_reaches_a_subscribed_queue_in_the_envelope() {
    let s = Served::start().await;
    let url = s.queue("sdk-inbox", &[]).await;
    let topic = s
        .sns
        .create_topic()
        .name("sdk-events")
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    let subscribed = s
        .sns
        .subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(queue_arn("sdk-inbox"))
        .return_subscription_arn(true)
        .send()
        .await
        .unwrap();
    let subscription = subscribed.subscription_arn().unwrap().to_owned();
    assert!(
        subscription.starts_with(&format!("{topic}:")),
        "{subscription}"
    );
    let by_topic = s
        .sns
        .list_subscriptions_by_topic()
        .topic_arn(&topic)
        .send()
        .await
        .unwrap();
    let subs = by_topic.subscriptions();
    assert_eq!(subs.len(), 1);
    assert_eq!(subs[0].protocol(), Some("sqs"));
    assert_eq!(subs[0].endpoint(), Some(queue_arn("sdk-inbox").as_str()));

    let published = s
        .sns
        .publish()
        .topic_arn(&topic)
        .subject("greeting")
        .message("hello <world> & \"all\"")
        .message_attributes("kind", sns_text("String", "greeting"))
        .message_attributes("size", sns_text("Number", "3"))
        .send()
        .await
        .unwrap();
    let message_id = published.message_id().unwrap();
    let got = drain(&s, &url, 5).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let m = &got[0];
    assert_eq!(
        m.md5_of_body(),
        Some(md5_hex(m.body().unwrap().as_bytes()).as_str())
    );
    let e = envelope(m);
    assert_eq!(e["Type"], "Notification");
    assert_eq!(e["MessageId"], message_id);
    assert_eq!(e["TopicArn"], topic);
    assert_eq!(e["Subject"], "greeting");
    assert_eq!(e["Message"], "hello <world> & \"all\"");
    assert_eq!(
        e["MessageAttributes"],
        json!({
            "kind": {"Type": "String", "Value": "greeting"},
            "size": {"Type": "Number", "Value": "3"},
        })
    );
    assert!(m.message_attributes().is_none_or(HashMap::is_empty));

    // Unsubscribed, the queue gets nothing more.
    s.sns
        .unsubscribe()
        .subscription_arn(&subscription)
        .send()
        .await
        .unwrap();
    s.sns
        .publish()
        .topic_arn(&topic)
        .message("after")
        .send()
        .await
        .unwrap();
    assert!(drain(&s, &url, 1).await.is_empty());
    s.stop().await;
}

#[tokio::test]
async fn raw_delivery_and_a_filter_policy() {
    let s = Served::start().await;
    let raw_url = s.queue("sdk-raw", &[]).await;
    let filtered_url = s.queue("sdk-filtered", &[]).await;
    let topic = s
        .sns
        .create_topic()
        .name("sdk-orders")
        .send()
        .await
        .unwrap()
        .topic_arn
        .unwrap();
    s.sns
        .subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(queue_arn("sdk-raw"))
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .unwrap();
    let policy = r#"{"kind":["order"],"amount":[{"numeric":[">",100]}]}"#;
    let filtered = s
        .sns
        .subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(queue_arn("sdk-filtered"))
        .attributes("FilterPolicy", policy)
        .return_subscription_arn(true)
        .send()
        .await
        .unwrap()
        .subscription_arn
        .unwrap();
    let attributes = s
        .sns
        .get_subscription_attributes()
        .subscription_arn(&filtered)
        .send()
        .await
        .unwrap();
    let a = attributes.attributes().unwrap();
    let stored: Value = serde_json::from_str(&a["FilterPolicy"]).unwrap();
    assert_eq!(stored, serde_json::from_str::<Value>(policy).unwrap());
    assert_eq!(
        a.get("RawMessageDelivery").map(String::as_str),
        Some("false")
    );

    for (kind, amount) in [("order", "150"), ("order", "50"), ("refund", "500")] {
        s.sns
            .publish()
            .topic_arn(&topic)
            .message(format!("{kind} {amount}"))
            .message_attributes("kind", sns_text("String", kind))
            .message_attributes("amount", sns_text("Number", amount))
            .send()
            .await
            .unwrap();
    }

    // Raw: the message itself, its attributes as SQS message attributes with their MD5.
    let raw = drain(&s, &raw_url, 2).await;
    let mut bodies: Vec<&str> = raw.iter().filter_map(Message::body).collect();
    bodies.sort();
    assert_eq!(bodies, ["order 150", "order 50", "refund 500"]);
    for m in &raw {
        let got = m.message_attributes().unwrap();
        let (kind, amount) = m.body().unwrap().split_once(' ').unwrap();
        assert_eq!(
            got,
            &HashMap::from([
                ("kind".to_owned(), text("String", kind)),
                ("amount".to_owned(), text("Number", amount)),
            ])
        );
        assert_eq!(
            m.md5_of_message_attributes(),
            Some(attributes_md5(got).as_str())
        );
    }

    // Filtered: only the order over 100, in the envelope.
    let got = drain(&s, &filtered_url, 2).await;
    let messages: Vec<String> = got
        .iter()
        .map(|m| envelope(m)["Message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(messages, ["order 150"]);

    // A new policy applies to the next publish.
    s.sns
        .set_subscription_attributes()
        .subscription_arn(&filtered)
        .attribute_name("FilterPolicy")
        .attribute_value(r#"{"kind":["refund"]}"#)
        .send()
        .await
        .unwrap();
    s.sns
        .publish()
        .topic_arn(&topic)
        .message("refund 1")
        .message_attributes("kind", sns_text("String", "refund"))
        .send()
        .await
        .unwrap();
    let got = drain(&s, &filtered_url, 2).await;
    assert_eq!(got.len(), 1);
    assert_eq!(envelope(&got[0])["Message"], "refund 1");
    s.stop().await;
}
