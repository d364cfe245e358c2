use ferry_broker::{SubscriptionSpec, TopicSpec};
use serde_json::{Value, json};

use crate::support::{Served, queue_arn, topic_arn};

fn envelope(message: &Value) -> Value {
    serde_json::from_str(message["Body"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn a_publish_reaches_a_subscribed_queue_in_snss_envelope() {
    let s = Served::start().await;
    let url = s.queue("inbox", json!({})).await;
    let topic = s.topic("news", &[]).await;
    let subscription = s.subscribe(&topic, "inbox", &[]).await;
    assert!(
        subscription.starts_with(&format!("{topic}:")),
        "{subscription}"
    );
    // Subscribing again is the same subscription.
    assert_eq!(s.subscribe(&topic, "inbox", &[]).await, subscription);
    let listed = s.sns_ok("ListSubscriptions", &[]).await;
    assert_eq!(
        listed.all("SubscriptionArn"),
        std::slice::from_ref(&subscription)
    );
    assert_eq!(listed.all("Endpoint"), [queue_arn("inbox")]);
    assert_eq!(listed.all("Protocol"), ["sqs"]);

    let published = s
        .sns_ok(
            "Publish",
            &[
                ("TopicArn", &topic),
                ("Message", "hello <world> & \"all\""),
                ("Subject", "greeting"),
                ("MessageAttributes.entry.1.Name", "kind"),
                ("MessageAttributes.entry.1.Value.DataType", "String"),
                ("MessageAttributes.entry.1.Value.StringValue", "greeting"),
                ("MessageAttributes.entry.2.Name", "size"),
                ("MessageAttributes.entry.2.Value.DataType", "Number"),
                ("MessageAttributes.entry.2.Value.StringValue", "3"),
            ],
        )
        .await;
    let message_id = published.one("MessageId");
    assert!(published.all("SequenceNumber").is_empty());
    let got = s.drain(&url, 5).await;
    assert_eq!(got.len(), 1, "{got:?}");
    let e = envelope(&got[0]);
    assert_eq!(e["Type"], "Notification");
    assert_eq!(e["MessageId"], message_id);
    assert_eq!(e["TopicArn"], topic);
    assert_eq!(e["Subject"], "greeting");
    assert_eq!(e["Message"], "hello <world> & \"all\"");
    assert_eq!(e["SignatureVersion"], "1");
    for field in ["Signature", "SigningCertURL", "UnsubscribeURL", "Timestamp"] {
        assert!(
            e[field].as_str().is_some_and(|v| !v.is_empty()),
            "{field}: {e}"
        );
    }
    let timestamp = e["Timestamp"].as_str().unwrap();
    assert_eq!(timestamp.len(), 24, "{timestamp}");
    assert!(timestamp.ends_with('Z') && timestamp.as_bytes()[10] == b'T');
    assert!(
        e["UnsubscribeURL"]
            .as_str()
            .unwrap()
            .contains(&subscription)
    );
    assert_eq!(
        e["MessageAttributes"]["kind"],
        json!({"Type": "String", "Value": "greeting"})
    );
    assert_eq!(
        e["MessageAttributes"]["size"],
        json!({"Type": "Number", "Value": "3"})
    );
    // The envelope carries the attributes; the SQS message has none of its own.
    assert!(got[0].get("MessageAttributes").is_none(), "{:?}", got[0]);

    // The topic is a Ferry topic: Ferry's own subscriptions see the message too.
    let native = "native-sub";
    s.broker
        .create_subscription(
            native,
            SubscriptionSpec::new(ferry_broker::Name::new("news").unwrap()),
        )
        .await
        .unwrap();
    s.sns_ok("Publish", &[("TopicArn", &topic), ("Message", "second")])
        .await;
    let received = s
        .broker
        .receive(
            native,
            "c",
            10,
            None,
            Some(std::time::Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].payload.as_ref(), b"second");
    assert_eq!(s.drain(&url, 5).await.len(), 1);

    // The envelope's UnsubscribeURL works: unsubscribed, the queue gets nothing more.
    let link = e["UnsubscribeURL"].as_str().unwrap();
    let reply = s.get(&link[link.find("/?").unwrap()..]).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        s.sns_ok("ListSubscriptions", &[])
            .await
            .all("SubscriptionArn")
            .is_empty()
    );
    s.sns_ok("Publish", &[("TopicArn", &topic), ("Message", "third")])
        .await;
    assert!(s.drain(&url, 1).await.is_empty());
}

#[tokio::test]
async fn raw_delivery_hands_the_message_and_its_attributes_to_sqs_as_they_are() {
    let s = Served::start().await;
    let url = s.queue("raw", json!({})).await;
    let topic = s.topic("raw-topic", &[]).await;
    let subscription = s
        .subscribe(&topic, "raw", &[("RawMessageDelivery", "true")])
        .await;
    let attributes = s
        .sns_ok(
            "GetSubscriptionAttributes",
            &[("SubscriptionArn", &subscription)],
        )
        .await;
    assert_eq!(attributes.attribute("RawMessageDelivery").unwrap(), "true");
    assert_eq!(
        attributes.attribute("PendingConfirmation").unwrap(),
        "false"
    );
    assert_eq!(attributes.attribute("TopicArn").unwrap(), topic);
    s.sns_ok(
        "Publish",
        &[
            ("TopicArn", &topic),
            ("Message", "{\"raw\": true}"),
            ("MessageAttributes.entry.1.Name", "trace"),
            ("MessageAttributes.entry.1.Value.DataType", "String"),
            ("MessageAttributes.entry.1.Value.StringValue", "abc"),
        ],
    )
    .await;
    let got = s.drain(&url, 5).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["Body"], "{\"raw\": true}");
    assert_eq!(
        got[0]["MessageAttributes"]["trace"],
        json!({"DataType": "String", "StringValue": "abc"})
    );

    // Switched off, the envelope comes back.
    s.sns_ok(
        "SetSubscriptionAttributes",
        &[
            ("SubscriptionArn", &subscription),
            ("AttributeName", "RawMessageDelivery"),
            ("AttributeValue", "false"),
        ],
    )
    .await;
    s.sns_ok("Publish", &[("TopicArn", &topic), ("Message", "wrapped")])
        .await;
    let got = s.drain(&url, 5).await;
    assert_eq!(envelope(&got[0])["Message"], "wrapped");
    s.sns_fails(
        "SetSubscriptionAttributes",
        &[
            ("SubscriptionArn", &subscription),
            ("AttributeName", "RawMessageDelivery"),
            ("AttributeValue", "maybe"),
        ],
        400,
        "InvalidParameter",
    )
    .await;
}

#[tokio::test]
async fn filter_policies_pick_messages_by_attributes_and_by_body() {
    let s = Served::start().await;
    let by_attributes = s.queue("by-attributes", json!({})).await;
    let by_body = s.queue("by-body", json!({})).await;
    let everything = s.queue("everything", json!({})).await;
    let topic = s.topic("orders", &[]).await;
    s.subscribe(
        &topic,
        "by-attributes",
        &[(
            "FilterPolicy",
            r#"{"store": ["example_corp"], "price_usd": [{"numeric": [">=", 100]}]}"#,
        )],
    )
    .await;
    let body_subscription = s
        .subscribe(
            &topic,
            "by-body",
            &[
                ("FilterPolicy", r#"{"order": {"status": [{"anything-but": "cancelled"}], "city": [{"prefix": "Sea"}]}}"#),
                ("FilterPolicyScope", "MessageBody"),
            ],
        )
        .await;
    s.subscribe(&topic, "everything", &[]).await;
    let attributes = s
        .sns_ok(
            "GetSubscriptionAttributes",
            &[("SubscriptionArn", &body_subscription)],
        )
        .await;
    assert_eq!(
        attributes.attribute("FilterPolicyScope").unwrap(),
        "MessageBody"
    );

    let publish = |body: &'static str, store: &'static str, price: &'static str| {
        let s = &s;
        let topic = topic.clone();
        async move {
            s.sns_ok(
                "Publish",
                &[
                    ("TopicArn", &topic),
                    ("Message", body),
                    ("MessageAttributes.entry.1.Name", "store"),
                    ("MessageAttributes.entry.1.Value.DataType", "String"),
                    ("MessageAttributes.entry.1.Value.StringValue", store),
                    ("MessageAttributes.entry.2.Name", "price_usd"),
                    ("MessageAttributes.entry.2.Value.DataType", "Number"),
                    ("MessageAttributes.entry.2.Value.StringValue", price),
                ],
            )
            .await;
        }
    };
    publish(
        r#"{"order": {"status": "placed", "city": "Seattle"}}"#,
        "example_corp",
        "210.75",
    )
    .await;
    publish(
        r#"{"order": {"status": "cancelled", "city": "Seattle"}}"#,
        "example_corp",
        "50",
    )
    .await;
    publish(
        r#"{"order": {"status": "placed", "city": "Portland"}}"#,
        "other_corp",
        "500",
    )
    .await;
    publish("not json at all", "example_corp", "100").await;

    let bodies = |messages: Vec<Value>| -> Vec<String> {
        let mut out: Vec<String> = messages
            .iter()
            .map(|m| envelope(m)["Message"].as_str().unwrap().to_owned())
            .collect();
        out.sort();
        out
    };
    assert_eq!(
        bodies(s.drain(&by_attributes, 5).await),
        [
            "not json at all",
            r#"{"order": {"status": "placed", "city": "Seattle"}}"#
        ]
    );
    assert_eq!(
        bodies(s.drain(&by_body, 5).await),
        [r#"{"order": {"status": "placed", "city": "Seattle"}}"#]
    );
    assert_eq!(s.drain(&everything, 5).await.len(), 4);

    // A malformed policy is refused and changes nothing.
    for bad in [
        r#"{"store": "example_corp"}"#,
        r#"{"store": [{"wildcard": "*"}]}"#,
        "[1]",
    ] {
        s.sns_fails(
            "SetSubscriptionAttributes",
            &[
                ("SubscriptionArn", &body_subscription),
                ("AttributeName", "FilterPolicy"),
                ("AttributeValue", bad),
            ],
            400,
            "InvalidParameter",
        )
        .await;
    }
    // A body-scope policy is not an attribute-scope one: changing the scope back is refused.
    s.sns_fails(
        "SetSubscriptionAttributes",
        &[
            ("SubscriptionArn", &body_subscription),
            ("AttributeName", "FilterPolicyScope"),
            ("AttributeValue", "MessageAttributes"),
        ],
        400,
        "InvalidParameter",
    )
    .await;
    // Removing the policy lets everything through.
    s.sns_ok(
        "SetSubscriptionAttributes",
        &[
            ("SubscriptionArn", &body_subscription),
            ("AttributeName", "FilterPolicy"),
            ("AttributeValue", ""),
        ],
    )
    .await;
    publish("anything", "x", "1").await;
    assert_eq!(s.drain(&by_body, 5).await.len(), 1);
}

#[tokio::test]
async fn a_fifo_topic_keeps_group_order_and_deduplicates_into_fifo_queues() {
    let s = Served::start().await;
    let fifo = s.queue("ledger.fifo", json!({"FifoQueue": "true"})).await;
    let standard = s.queue("audit", json!({})).await;
    let topic = s.topic("payments.fifo", &[("FifoTopic", "true")]).await;
    s.subscribe(&topic, "ledger.fifo", &[]).await;
    s.subscribe(&topic, "audit", &[("RawMessageDelivery", "true")])
        .await;
    // A FIFO topic needs a group and a deduplication id (no content-based deduplication).
    s.sns_fails(
        "Publish",
        &[
            ("TopicArn", &topic),
            ("Message", "m"),
            ("MessageDeduplicationId", "d"),
        ],
        400,
        "InvalidParameter",
    )
    .await;
    s.sns_fails(
        "Publish",
        &[
            ("TopicArn", &topic),
            ("Message", "m"),
            ("MessageGroupId", "g"),
        ],
        400,
        "InvalidParameter",
    )
    .await;

    let mut ids = Vec::new();
    let mut sequences = Vec::new();
    for i in 0..6 {
        let group = if i % 2 == 0 { "a" } else { "b" };
        let body = format!("{group}-{i}");
        let dedup = format!("d{i}");
        let reply = s
            .sns_ok(
                "Publish",
                &[
                    ("TopicArn", &topic),
                    ("Message", &body),
                    ("MessageGroupId", group),
                    ("MessageDeduplicationId", &dedup),
                ],
            )
            .await;
        ids.push(reply.one("MessageId"));
        sequences.push(reply.one("SequenceNumber"));
    }
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    // A repeat of d2 within five minutes is accepted, answered with the first's id, and
    // not delivered.
    let again = s
        .sns_ok(
            "Publish",
            &[
                ("TopicArn", &topic),
                ("Message", "a-2 again"),
                ("MessageGroupId", "a"),
                ("MessageDeduplicationId", "d2"),
            ],
        )
        .await;
    assert_eq!(again.one("MessageId"), ids[2]);

    let got = s.drain(&fifo, 5).await;
    let bodies: Vec<String> = got
        .iter()
        .map(|m| envelope(m)["Message"].as_str().unwrap().to_owned())
        .collect();
    let in_group = |g: &str| -> Vec<String> {
        bodies
            .iter()
            .filter(|b| b.starts_with(g))
            .cloned()
            .collect()
    };
    assert_eq!(in_group("a"), ["a-0", "a-2", "a-4"]);
    assert_eq!(in_group("b"), ["b-1", "b-3", "b-5"]);
    for m in &got {
        let e = envelope(m);
        assert!(e["SequenceNumber"].as_str().is_some(), "{e}");
        assert_eq!(
            m["Attributes"]["MessageGroupId"],
            e["Message"].as_str().unwrap()[..1]
        );
        assert!(
            m["Attributes"]["MessageDeduplicationId"]
                .as_str()
                .unwrap()
                .starts_with('d')
        );
    }
    // A standard queue on a FIFO topic gets every message once too.
    assert_eq!(s.drain(&standard, 5).await.len(), 6);

    // Content-based deduplication: the body's SHA-256 is the id.
    let cbd = s
        .topic(
            "cbd.fifo",
            &[("FifoTopic", "true"), ("ContentBasedDeduplication", "true")],
        )
        .await;
    let cbd_queue = s
        .queue("cbd-queue.fifo", json!({"FifoQueue": "true"}))
        .await;
    s.subscribe(&cbd, "cbd-queue.fifo", &[]).await;
    for body in ["same", "same", "other"] {
        s.sns_ok(
            "Publish",
            &[
                ("TopicArn", &cbd),
                ("Message", body),
                ("MessageGroupId", "g"),
            ],
        )
        .await;
    }
    assert_eq!(s.drain(&cbd_queue, 5).await.len(), 2);
}

#[tokio::test]
async fn fifo_queues_and_other_protocols_are_refused_where_aws_refuses_them() {
    let s = Served::start().await;
    s.queue("jobs.fifo", json!({"FifoQueue": "true"})).await;
    let standard = s.topic("plain", &[]).await;
    let message = s
        .sns_fails(
            "Subscribe",
            &[
                ("TopicArn", &standard),
                ("Protocol", "sqs"),
                ("Endpoint", &queue_arn("jobs.fifo")),
            ],
            400,
            "InvalidParameter",
        )
        .await;
    assert!(
        message.contains("FIFO SQS Queues can not be subscribed to standard SNS topics"),
        "{message}"
    );
    for (protocol, endpoint) in [
        ("http", "http://example.com/hook"),
        ("https", "https://example.com/hook"),
        ("email", "ops@example.com"),
        ("email-json", "ops@example.com"),
        ("sms", "+15555550100"),
        ("lambda", "arn:aws:lambda:us-east-1:000000000000:function:f"),
        (
            "application",
            "arn:aws:sns:us-east-1:000000000000:endpoint/GCM/app/1",
        ),
        (
            "firehose",
            "arn:aws:firehose:us-east-1:000000000000:deliverystream/s",
        ),
        ("carrier-pigeon", "coop"),
    ] {
        let message = s
            .sns_fails(
                "Subscribe",
                &[
                    ("TopicArn", &standard),
                    ("Protocol", protocol),
                    ("Endpoint", endpoint),
                ],
                400,
                "InvalidParameter",
            )
            .await;
        assert!(message.contains(protocol), "{protocol}: {message}");
    }
    // An endpoint that is no SQS queue ARN of this account and region.
    s.sns_fails(
        "Subscribe",
        &[
            ("TopicArn", &standard),
            ("Protocol", "sqs"),
            ("Endpoint", "arn:aws:sqs:eu-west-1:000000000000:q"),
        ],
        400,
        "InvalidParameter",
    )
    .await;
    s.sns_fails(
        "Subscribe",
        &[
            ("TopicArn", &standard),
            ("Protocol", "sqs"),
            ("Endpoint", &queue_arn("q")),
            ("Attributes.entry.1.key", "Bogus"),
            ("Attributes.entry.1.value", "1"),
        ],
        400,
        "InvalidParameter",
    )
    .await;
    assert!(
        s.sns_ok("ListSubscriptions", &[])
            .await
            .all("SubscriptionArn")
            .is_empty()
    );
    s.sns_fails(
        "ConfirmSubscription",
        &[("TopicArn", &standard), ("Token", "t")],
        400,
        "InvalidParameter",
    )
    .await;
}

#[tokio::test]
async fn publish_batch_checks_its_entries_as_sns_does() {
    let s = Served::start().await;
    let url = s.queue("batched", json!({})).await;
    let topic = s.topic("batches", &[]).await;
    s.subscribe(&topic, "batched", &[]).await;
    let entry = |i: usize, id: &str, message: &str| -> Vec<(String, String)> {
        vec![
            (
                format!("PublishBatchRequestEntries.member.{i}.Id"),
                id.to_owned(),
            ),
            (
                format!("PublishBatchRequestEntries.member.{i}.Message"),
                message.to_owned(),
            ),
        ]
    };
    let call = |entries: Vec<(String, String)>| {
        let mut params = vec![("TopicArn".to_owned(), topic.clone())];
        params.extend(entries);
        params
    };
    let run = |params: Vec<(String, String)>, code: &'static str| {
        let s = &s;
        async move {
            let refs: Vec<(&str, &str)> = params
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            s.sns_fails("PublishBatch", &refs, 400, code).await;
        }
    };
    run(call(vec![]), "EmptyBatchRequest").await;
    run(
        call(
            (1..=11)
                .flat_map(|i| entry(i, &format!("e{i}"), "m"))
                .collect(),
        ),
        "TooManyEntriesInBatchRequest",
    )
    .await;
    run(
        call([entry(1, "same", "a"), entry(2, "same", "b")].concat()),
        "BatchEntryIdsNotDistinct",
    )
    .await;
    run(call(entry(1, "bad id!", "a")), "InvalidBatchEntryId").await;
    run(
        call(entry(1, "big", &"x".repeat(262_145))),
        "BatchRequestTooLong",
    )
    .await;
    assert!(
        s.drain(&url, 1).await.is_empty(),
        "a refused batch delivers nothing"
    );

    // One bad entry fails alone.
    let params = call(
        [
            entry(1, "ok", "fine"),
            entry(2, "empty", ""),
            entry(3, "ok2", "also fine"),
        ]
        .concat(),
    );
    let refs: Vec<(&str, &str)> = params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let reply = s.sns_ok("PublishBatch", &refs).await;
    let mut ids = reply.all("Id");
    ids.sort();
    assert_eq!(ids, ["empty", "ok", "ok2"], "{}", reply.body);
    assert_eq!(reply.all("MessageId").len(), 2);
    assert_eq!(reply.one("Code"), "InvalidParameter");
    assert_eq!(reply.one("SenderFault"), "true");
    let mut got: Vec<String> = s
        .drain(&url, 5)
        .await
        .iter()
        .map(|m| envelope(m)["Message"].as_str().unwrap().to_owned())
        .collect();
    got.sort();
    assert_eq!(got, ["also fine", "fine"]);
}

#[tokio::test]
async fn message_structure_json_sends_the_sqs_entry_or_the_default() {
    let s = Served::start().await;
    let url = s.queue("structured", json!({})).await;
    let topic = s.topic("structured", &[]).await;
    s.subscribe(&topic, "structured", &[("RawMessageDelivery", "true")])
        .await;
    for (message, expected) in [
        (
            r#"{"default": "for all", "sqs": "for queues", "email": "for people"}"#,
            "for queues",
        ),
        (r#"{"default": "for all", "http": "for hooks"}"#, "for all"),
    ] {
        s.sns_ok(
            "Publish",
            &[
                ("TopicArn", &topic),
                ("Message", message),
                ("MessageStructure", "json"),
            ],
        )
        .await;
        let got = s.drain(&url, 5).await;
        assert_eq!(got[0]["Body"], expected);
    }
    for bad in [r#"{"sqs": "no default"}"#, "not json"] {
        s.sns_fails(
            "Publish",
            &[
                ("TopicArn", &topic),
                ("Message", bad),
                ("MessageStructure", "json"),
            ],
            400,
            "InvalidParameter",
        )
        .await;
    }
    s.sns_fails(
        "Publish",
        &[
            ("TopicArn", &topic),
            ("Message", "m"),
            ("MessageDeduplicationId", "d"),
        ],
        400,
        "InvalidParameter",
    )
    .await;
    s.sns_fails(
        "Publish",
        &[("TopicArn", &topic), ("Message", "")],
        400,
        "InvalidParameter",
    )
    .await;
    s.sns_fails(
        "Publish",
        &[
            ("TopicArn", &topic),
            ("Message", "m"),
            ("Subject", "two\nlines"),
        ],
        400,
        "InvalidParameter",
    )
    .await;
    s.sns_fails(
        "Publish",
        &[
            ("TopicArn", &topic),
            ("Message", "m"),
            ("MessageAttributes.entry.1.Name", "n"),
            ("MessageAttributes.entry.1.Value.DataType", "Number"),
            ("MessageAttributes.entry.1.Value.StringValue", "ten"),
        ],
        400,
        "ParameterValueInvalid",
    )
    .await;
    s.sns_fails(
        "Publish",
        &[
            ("TopicArn", &topic),
            ("Message", "m"),
            ("MessageAttributes.entry.1.Name", "tags"),
            ("MessageAttributes.entry.1.Value.DataType", "String.Array"),
            (
                "MessageAttributes.entry.1.Value.StringValue",
                "not an array",
            ),
        ],
        400,
        "ParameterValueInvalid",
    )
    .await;
}

#[tokio::test]
async fn an_undeliverable_message_goes_to_the_subscriptions_dead_letter_queue() {
    let s = Served::start().await;
    let dlq = s.queue("undelivered", json!({})).await;
    let topic = s.topic("alerts", &[]).await;
    s.queue("gone", json!({})).await;
    let redrive = json!({"deadLetterTargetArn": queue_arn("undelivered")}).to_string();
    s.subscribe(&topic, "gone", &[("RedrivePolicy", &redrive)])
        .await;
    s.sqs(
        "DeleteQueue",
        json!({"QueueUrl": format!("http://{}/000000000000/gone", s.addr)}),
    )
    .await;
    s.sns_ok("Publish", &[("TopicArn", &topic), ("Message", "fire")])
        .await;
    let got = s.drain(&dlq, 5).await;
    assert_eq!(got.len(), 1);
    assert_eq!(envelope(&got[0])["Message"], "fire");
    // A RedrivePolicy must name an SQS queue.
    s.sns_fails(
        "Subscribe",
        &[
            ("TopicArn", &topic),
            ("Protocol", "sqs"),
            ("Endpoint", &queue_arn("other")),
            ("Attributes.entry.1.key", "RedrivePolicy"),
            (
                "Attributes.entry.1.value",
                r#"{"deadLetterTargetArn": "nope"}"#,
            ),
        ],
        400,
        "InvalidParameter",
    )
    .await;
}

#[tokio::test]
async fn topics_subscriptions_and_their_attributes_survive_a_restart() {
    let s = Served::start().await;
    let url = s.queue("kept", json!({})).await;
    let topic = s.topic("durable", &[("DisplayName", "Durable")]).await;
    let subscription = s
        .subscribe(
            &topic,
            "kept",
            &[
                ("RawMessageDelivery", "true"),
                ("FilterPolicy", r#"{"k": ["v"]}"#),
            ],
        )
        .await;
    let s = s.restart().await;
    let attributes = s
        .sns_ok("GetTopicAttributes", &[("TopicArn", &topic)])
        .await;
    assert_eq!(attributes.attribute("DisplayName").unwrap(), "Durable");
    let attributes = s
        .sns_ok(
            "GetSubscriptionAttributes",
            &[("SubscriptionArn", &subscription)],
        )
        .await;
    assert_eq!(attributes.attribute("RawMessageDelivery").unwrap(), "true");
    for value in ["v", "w"] {
        s.sns_ok(
            "Publish",
            &[
                ("TopicArn", &topic),
                ("Message", value),
                ("MessageAttributes.entry.1.Name", "k"),
                ("MessageAttributes.entry.1.Value.DataType", "String"),
                ("MessageAttributes.entry.1.Value.StringValue", value),
            ],
        )
        .await;
    }
    let got = s.drain(&url, 5).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["Body"], "v");
    assert_eq!(topic, topic_arn("durable"));
}

#[tokio::test]
async fn deleting_a_topic_deletes_its_subscriptions() {
    let s = Served::start().await;
    s.queue("q", json!({})).await;
    let topic = s.topic("short-lived", &[]).await;
    s.broker
        .create_topic("other", TopicSpec::default())
        .await
        .unwrap();
    let subscription = s.subscribe(&topic, "q", &[]).await;
    s.sns_ok("DeleteTopic", &[("TopicArn", &topic)]).await;
    assert!(
        s.sns_ok("ListSubscriptions", &[])
            .await
            .all("SubscriptionArn")
            .is_empty()
    );
    s.sns_fails(
        "GetSubscriptionAttributes",
        &[("SubscriptionArn", &subscription)],
        404,
        "NotFound",
    )
    .await;
    // Made again, the topic has no subscriptions.
    let topic = s.topic("short-lived", &[]).await;
    assert!(
        s.sns_ok("ListSubscriptionsByTopic", &[("TopicArn", &topic)])
            .await
            .all("SubscriptionArn")
            .is_empty()
    );
    // Nor when the topic was deleted through Ferry's own API.
    s.subscribe(&topic, "q", &[]).await;
    s.broker.delete_topic("short-lived").await.unwrap();
    s.sns_fails(
        "Publish",
        &[("TopicArn", &topic), ("Message", "m")],
        404,
        "NotFound",
    )
    .await;
    let topic = s.topic("short-lived", &[]).await;
    assert!(
        s.sns_ok("ListSubscriptionsByTopic", &[("TopicArn", &topic)])
            .await
            .all("SubscriptionArn")
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_publishes_to_a_fifo_topic_reach_every_queue_in_one_order() {
    let s = std::sync::Arc::new(Served::start().await);
    let first = s.queue("first.fifo", json!({"FifoQueue": "true"})).await;
    let second = s.queue("second.fifo", json!({"FifoQueue": "true"})).await;
    let topic = s.topic("busy.fifo", &[("FifoTopic", "true")]).await;
    s.subscribe(&topic, "first.fifo", &[]).await;
    s.subscribe(&topic, "second.fifo", &[("RawMessageDelivery", "true")])
        .await;
    let mut tasks = Vec::new();
    for i in 0..40 {
        let s = std::sync::Arc::clone(&s);
        let topic = topic.clone();
        tasks.push(tokio::spawn(async move {
            let body = format!("m{i}");
            let reply = s
                .sns_ok(
                    "Publish",
                    &[
                        ("TopicArn", &topic),
                        ("Message", &body),
                        ("MessageGroupId", "one-group"),
                        ("MessageDeduplicationId", &body),
                    ],
                )
                .await;
            (reply.one("SequenceNumber"), body)
        }));
    }
    let mut by_sequence = Vec::new();
    for t in tasks {
        by_sequence.push(t.await.unwrap());
    }
    by_sequence.sort();
    let expected: Vec<String> = by_sequence.into_iter().map(|(_, b)| b).collect();
    let mut from_first = Vec::new();
    let mut from_second = Vec::new();
    // One message of the group at a time: receive and delete one by one.
    while from_first.len() < expected.len() {
        let got = s.drain(&first, 5).await;
        assert!(!got.is_empty(), "{from_first:?}");
        from_first.extend(
            got.iter()
                .map(|m| envelope(m)["Message"].as_str().unwrap().to_owned()),
        );
    }
    while from_second.len() < expected.len() {
        let got = s.drain(&second, 5).await;
        assert!(!got.is_empty(), "{from_second:?}");
        from_second.extend(got.iter().map(|m| m["Body"].as_str().unwrap().to_owned()));
    }
    assert_eq!(from_first, expected);
    assert_eq!(from_second, expected);
}

#[tokio::test]
async fn a_delivery_larger_than_the_queue_takes_goes_to_the_dead_letter_queue() {
    let s = Served::start().await;
    let small = s
        .queue("small", json!({"MaximumMessageSize": "1024"}))
        .await;
    let dlq = s.queue("small-dlq", json!({})).await;
    let topic = s.topic("big-news", &[]).await;
    let redrive = json!({"deadLetterTargetArn": queue_arn("small-dlq")}).to_string();
    s.subscribe(
        &topic,
        "small",
        &[("RedrivePolicy", &redrive), ("RawMessageDelivery", "true")],
    )
    .await;
    let big = "x".repeat(2000);
    s.sns_ok("Publish", &[("TopicArn", &topic), ("Message", &big)])
        .await;
    s.sns_ok("Publish", &[("TopicArn", &topic), ("Message", "fits")])
        .await;
    let got = s.drain(&small, 5).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["Body"], "fits");
    let dead = s.drain(&dlq, 5).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["Body"].as_str().unwrap().len(), 2000);
}

#[tokio::test]
async fn a_fifo_topics_deduplication_window_survives_a_restart() {
    let s = Served::start().await;
    let fifo = s
        .queue("orders-in.fifo", json!({"FifoQueue": "true"}))
        .await;
    let topic = s.topic("orders-out.fifo", &[("FifoTopic", "true")]).await;
    s.subscribe(&topic, "orders-in.fifo", &[]).await;
    let publish = |dedup: &'static str| {
        let s = &s;
        let topic = topic.clone();
        async move {
            let reply = s
                .sns_ok(
                    "Publish",
                    &[
                        ("TopicArn", &topic),
                        ("Message", "placed"),
                        ("MessageGroupId", "order-7"),
                        ("MessageDeduplicationId", dedup),
                    ],
                )
                .await;
            (reply.one("MessageId"), reply.one("SequenceNumber"))
        }
    };
    let first = publish("row-1").await;
    assert_eq!(s.drain(&fifo, 5).await.len(), 1);

    let s = s.restart().await;
    let publish_again = |dedup: &'static str| {
        let s = &s;
        let topic = topic.clone();
        async move {
            let reply = s
                .sns_ok(
                    "Publish",
                    &[
                        ("TopicArn", &topic),
                        ("Message", "placed"),
                        ("MessageGroupId", "order-7"),
                        ("MessageDeduplicationId", dedup),
                    ],
                )
                .await;
            (reply.one("MessageId"), reply.one("SequenceNumber"))
        }
    };
    // The relay publishing row-1 again after the restart: the same answer, and the queue
    // (which deduplicates too) gets nothing new; the topic keeps one copy.
    assert_eq!(publish_again("row-1").await, first);
    assert!(s.drain(&fifo, 1).await.is_empty());
    let kept = s
        .broker
        .read_topic("orders-out.fifo", 0, ferry_broker::Position::Earliest, 10)
        .unwrap();
    assert_eq!(kept.len(), 1);
    // Sequence numbers keep growing across the restart.
    let second = publish_again("row-2").await;
    assert!(second.1 > first.1, "{second:?} after {first:?}");
    assert_eq!(s.drain(&fifo, 5).await.len(), 1);

    // A topic deleted and made again is a new one: the id is new to it.
    s.sns_ok("DeleteTopic", &[("TopicArn", &topic)]).await;
    s.topic("orders-out.fifo", &[("FifoTopic", "true")]).await;
    s.subscribe(&topic, "orders-in.fifo", &[]).await;
    let third = publish_again("row-2").await;
    assert_ne!(third.0, second.0);
}
