use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, MessageSystemAttributeNameForSends,
    MessageSystemAttributeValue, QueueAttributeName, SendMessageBatchRequestEntry,
};

use crate::support::{
    Served, attributes_md5, every_type, md5_hex, queue_arn, system_attributes_md5, text,
};

#[tokio::test]
async fn a_queues_lifecycle_and_attributes() {
    let s = Served::start().await;
    let url = s
        .queue(
            "sdk-orders",
            &[
                ("VisibilityTimeout", "45"),
                ("DelaySeconds", "0"),
                ("MessageRetentionPeriod", "86400"),
                ("MaximumMessageSize", "2048"),
                ("ReceiveMessageWaitTimeSeconds", "2"),
            ],
        )
        .await;
    assert!(url.ends_with("/000000000000/sdk-orders"), "{url}");
    // The same name with the same attributes is the same queue.
    let again = s
        .sqs
        .create_queue()
        .queue_name("sdk-orders")
        .attributes(QueueAttributeName::VisibilityTimeout, "45")
        .attributes(QueueAttributeName::DelaySeconds, "0")
        .attributes(QueueAttributeName::MessageRetentionPeriod, "86400")
        .attributes(QueueAttributeName::MaximumMessageSize, "2048")
        .attributes(QueueAttributeName::ReceiveMessageWaitTimeSeconds, "2")
        .send()
        .await
        .unwrap();
    assert_eq!(again.queue_url(), Some(url.as_str()));
    s.queue("sdk-other", &[]).await;

    let got = s
        .sqs
        .get_queue_url()
        .queue_name("sdk-orders")
        .send()
        .await
        .unwrap();
    assert_eq!(got.queue_url(), Some(url.as_str()));
    let listed = s
        .sqs
        .list_queues()
        .queue_name_prefix("sdk-o")
        .send()
        .await
        .unwrap();
    let mut urls = listed.queue_urls().to_vec();
    urls.sort();
    assert_eq!(urls.len(), 2, "{urls:?}");
    assert!(urls[0].ends_with("/sdk-orders") && urls[1].ends_with("/sdk-other"));

    let attributes = s
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    let a = attributes.attributes().unwrap();
    let get = |name: QueueAttributeName| a.get(&name).map(String::as_str);
    assert_eq!(get(QueueAttributeName::VisibilityTimeout), Some("45"));
    assert_eq!(get(QueueAttributeName::DelaySeconds), Some("0"));
    assert_eq!(
        get(QueueAttributeName::MessageRetentionPeriod),
        Some("86400")
    );
    assert_eq!(get(QueueAttributeName::MaximumMessageSize), Some("2048"));
    assert_eq!(
        get(QueueAttributeName::ReceiveMessageWaitTimeSeconds),
        Some("2")
    );
    assert_eq!(
        get(QueueAttributeName::QueueArn),
        Some(queue_arn("sdk-orders").as_str())
    );
    assert_eq!(
        get(QueueAttributeName::ApproximateNumberOfMessages),
        Some("0")
    );
    for name in [
        QueueAttributeName::CreatedTimestamp,
        QueueAttributeName::LastModifiedTimestamp,
    ] {
        let value = get(name.clone()).unwrap_or_else(|| panic!("{name:?} missing: {a:?}"));
        assert!(
            value.parse::<u64>().is_ok_and(|t| t > 1_600_000_000),
            "{value}"
        );
    }
    // Every name is one the SDK's model knows.
    for name in a.keys() {
        assert!(
            QueueAttributeName::values().contains(&name.as_str()),
            "an attribute the model does not name: {name:?}"
        );
    }

    s.sqs
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::VisibilityTimeout, "60")
        .attributes(QueueAttributeName::DelaySeconds, "1")
        .send()
        .await
        .unwrap();
    let attributes = s
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::VisibilityTimeout)
        .attribute_names(QueueAttributeName::DelaySeconds)
        .send()
        .await
        .unwrap();
    assert_eq!(
        attributes.attributes().unwrap(),
        &HashMap::from([
            (QueueAttributeName::VisibilityTimeout, "60".to_owned()),
            (QueueAttributeName::DelaySeconds, "1".to_owned()),
        ])
    );

    s.sqs
        .tag_queue()
        .queue_url(&url)
        .tags("team", "core")
        .tags("cost-center", "42")
        .send()
        .await
        .unwrap();
    s.sqs
        .untag_queue()
        .queue_url(&url)
        .tag_keys("cost-center")
        .send()
        .await
        .unwrap();
    let tags = s
        .sqs
        .list_queue_tags()
        .queue_url(&url)
        .send()
        .await
        .unwrap();
    assert_eq!(
        tags.tags().unwrap(),
        &HashMap::from([("team".to_owned(), "core".to_owned())])
    );

    s.sqs.delete_queue().queue_url(&url).send().await.unwrap();
    let err = s
        .sqs
        .get_queue_url()
        .queue_name("sdk-orders")
        .send()
        .await
        .unwrap_err();
    assert!(
        err.into_service_error().is_queue_does_not_exist(),
        "a deleted queue is gone"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_message_with_every_attribute_type_round_trips_with_its_md5s() {
    let s = Served::start().await;
    let url = s.queue("sdk-attributes", &[]).await;
    let body = "héllo <wörld> & \"all\"\r\n\u{1F680}";
    let attributes = every_type();
    let trace = MessageSystemAttributeValue::builder()
        .data_type("String")
        .string_value("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1")
        .build()
        .unwrap();
    let sent = s
        .sqs
        .send_message()
        .queue_url(&url)
        .message_body(body)
        .set_message_attributes(Some(attributes.clone()))
        .message_system_attributes(
            MessageSystemAttributeNameForSends::AwsTraceHeader,
            trace.clone(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        sent.md5_of_message_body(),
        Some(md5_hex(body.as_bytes()).as_str())
    );
    assert_eq!(
        sent.md5_of_message_attributes(),
        Some(attributes_md5(&attributes).as_str())
    );
    assert_eq!(
        sent.md5_of_message_system_attributes(),
        Some(system_attributes_md5(&trace).as_str())
    );
    let id = sent.message_id().unwrap().to_owned();

    let received = s
        .sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .wait_time_seconds(5)
        .message_attribute_names("All")
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    let messages = received.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    let m = &messages[0];
    assert_eq!(m.message_id(), Some(id.as_str()));
    assert_eq!(m.body(), Some(body));
    assert_eq!(m.md5_of_body(), Some(md5_hex(body.as_bytes()).as_str()));
    let got = m.message_attributes().unwrap();
    assert_eq!(got, &attributes);
    assert_eq!(
        m.md5_of_message_attributes(),
        Some(attributes_md5(got).as_str())
    );
    let system = m.attributes().unwrap();
    let sys = |name: MessageSystemAttributeName| system.get(&name).map(String::as_str);
    assert_eq!(
        sys(MessageSystemAttributeName::ApproximateReceiveCount),
        Some("1")
    );
    assert_eq!(
        sys(MessageSystemAttributeName::SenderId),
        Some("000000000000")
    );
    assert_eq!(
        sys(MessageSystemAttributeName::AwsTraceHeader),
        trace.string_value()
    );
    let sent_at: u64 = sys(MessageSystemAttributeName::SentTimestamp)
        .unwrap()
        .parse()
        .unwrap();
    let first: u64 = sys(MessageSystemAttributeName::ApproximateFirstReceiveTimestamp)
        .unwrap()
        .parse()
        .unwrap();
    assert!(first >= sent_at, "{first} < {sent_at}");

    // Asked for some attributes by name, the digest covers those returned only.
    s.sqs
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(m.receipt_handle().unwrap())
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    let again = s
        .sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(5)
        .message_attribute_names("city")
        .message_attribute_names("count")
        .send()
        .await
        .unwrap();
    let m = &again.messages()[0];
    let got = m.message_attributes().unwrap();
    let mut names: Vec<&str> = got.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, ["city", "count"]);
    assert_eq!(
        m.md5_of_message_attributes(),
        Some(attributes_md5(got).as_str())
    );
    s.stop().await;
}

#[tokio::test]
async fn a_batch_of_ten_is_sent_received_and_deleted() {
    let s = Served::start().await;
    let url = s.queue("sdk-batch", &[]).await;
    let every = every_type();
    let entries: Vec<SendMessageBatchRequestEntry> = (0..10)
        .map(|i| {
            let mut entry = SendMessageBatchRequestEntry::builder()
                .id(format!("entry-{i}"))
                .message_body(format!("message {i}"));
            // Each entry a different subset of the attribute types, the last none.
            for (name, value) in every.iter().filter(|(n, _)| n.len() % 7 != i % 7) {
                if i < 9 {
                    entry = entry.message_attributes(name, value.clone());
                }
            }
            entry.build().unwrap()
        })
        .collect();
    let sent = s
        .sqs
        .send_message_batch()
        .queue_url(&url)
        .set_entries(Some(entries.clone()))
        .send()
        .await
        .unwrap();
    assert!(sent.failed().is_empty(), "{:?}", sent.failed());
    assert_eq!(sent.successful().len(), 10);
    let mut ids = HashMap::new();
    for ok in sent.successful() {
        let entry = entries.iter().find(|e| e.id() == ok.id()).unwrap();
        assert_eq!(
            ok.md5_of_message_body(),
            md5_hex(entry.message_body().as_bytes())
        );
        match entry.message_attributes() {
            Some(a) if !a.is_empty() => {
                assert_eq!(
                    ok.md5_of_message_attributes(),
                    Some(attributes_md5(a).as_str())
                )
            }
            _ => assert_eq!(ok.md5_of_message_attributes(), None, "{}", ok.id()),
        }
        ids.insert(ok.message_id().to_owned(), entry.clone());
    }
    assert_eq!(ids.len(), 10, "message ids are distinct");

    let mut received = Vec::new();
    while received.len() < 10 {
        let got = s
            .sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .wait_time_seconds(5)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        assert!(!got.messages().is_empty(), "only {} of 10", received.len());
        received.extend(got.messages().iter().cloned());
    }
    assert_eq!(received.len(), 10);
    for m in &received {
        let entry = &ids[m.message_id().unwrap()];
        assert_eq!(m.body(), Some(entry.message_body()));
        assert_eq!(
            m.md5_of_body(),
            Some(md5_hex(entry.message_body().as_bytes()).as_str())
        );
        let sent_attributes = entry.message_attributes().cloned().unwrap_or_default();
        assert_eq!(
            m.message_attributes().cloned().unwrap_or_default(),
            sent_attributes
        );
        if sent_attributes.is_empty() {
            assert_eq!(m.md5_of_message_attributes(), None);
        } else {
            assert_eq!(
                m.md5_of_message_attributes(),
                Some(attributes_md5(&sent_attributes).as_str())
            );
        }
    }

    let deletes: Vec<DeleteMessageBatchRequestEntry> = received
        .iter()
        .enumerate()
        .map(|(i, m)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(format!("d{i}"))
                .receipt_handle(m.receipt_handle().unwrap())
                .build()
                .unwrap()
        })
        .collect();
    let deleted = s
        .sqs
        .delete_message_batch()
        .queue_url(&url)
        .set_entries(Some(deletes))
        .send()
        .await
        .unwrap();
    assert!(deleted.failed().is_empty(), "{:?}", deleted.failed());
    assert_eq!(deleted.successful().len(), 10);
    let counts = s
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap();
    for value in counts.attributes().unwrap().values() {
        assert_eq!(value, "0", "{counts:?}");
    }
    s.stop().await;
}

#[tokio::test]
async fn a_long_poll_waits_for_a_send_and_an_empty_one_for_its_time() {
    let s = Served::start().await;
    let url = s.queue("sdk-long-poll", &[]).await;

    let started = Instant::now();
    let empty = s
        .sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    assert!(empty.messages().is_empty());
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );

    let sender = s.sqs.clone();
    let target = url.clone();
    let send = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        sender
            .send_message()
            .queue_url(target)
            .message_body("late")
            .send()
            .await
            .unwrap()
    });
    let started = Instant::now();
    let got = s
        .sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(20)
        .send()
        .await
        .unwrap();
    let waited = started.elapsed();
    let sent = send.await.unwrap();
    assert_eq!(got.messages().len(), 1);
    assert_eq!(got.messages()[0].message_id(), sent.message_id());
    assert!(
        waited < Duration::from_secs(20),
        "the poll ended with the send"
    );
    s.stop().await;
}

#[tokio::test]
async fn visibility_hides_redelivers_and_changes() {
    let s = Served::start().await;
    let url = s
        .queue("sdk-visibility", &[("VisibilityTimeout", "30")])
        .await;
    s.sqs
        .send_message()
        .queue_url(&url)
        .message_body("work")
        .send()
        .await
        .unwrap();
    let receive = |visibility: Option<i32>, wait: i32| {
        s.sqs
            .receive_message()
            .queue_url(&url)
            .set_visibility_timeout(visibility)
            .wait_time_seconds(wait)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
    };
    let count = |m: &aws_sdk_sqs::types::Message| {
        m.attributes().unwrap()[&MessageSystemAttributeName::ApproximateReceiveCount].clone()
    };

    // Received under a 3 s visibility timeout: hidden, then delivered again.
    let first = receive(Some(3), 5).await.unwrap();
    assert_eq!(first.messages().len(), 1);
    assert_eq!(count(&first.messages()[0]), "1");
    assert!(receive(None, 0).await.unwrap().messages().is_empty());
    let second = receive(None, 10).await.unwrap();
    assert_eq!(
        second.messages().len(),
        1,
        "visible again after its timeout"
    );
    let m = &second.messages()[0];
    assert_eq!(count(m), "2");
    let handle = m.receipt_handle().unwrap().to_owned();

    // Under the queue's 30 s it stays hidden; a change to 0 makes it visible at once.
    assert!(receive(None, 0).await.unwrap().messages().is_empty());
    s.sqs
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(&handle)
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    let third = receive(None, 5).await.unwrap();
    assert_eq!(third.messages().len(), 1);
    assert_eq!(count(&third.messages()[0]), "3");
    let handle = third.messages()[0].receipt_handle().unwrap().to_owned();

    // Extended, it stays hidden; deleted, it is gone for good.
    s.sqs
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(&handle)
        .visibility_timeout(120)
        .send()
        .await
        .unwrap();
    assert!(receive(None, 1).await.unwrap().messages().is_empty());
    s.sqs
        .delete_message()
        .queue_url(&url)
        .receipt_handle(&handle)
        .send()
        .await
        .unwrap();
    // Deleting again with the same handle succeeds and changes nothing.
    s.sqs
        .delete_message()
        .queue_url(&url)
        .receipt_handle(&handle)
        .send()
        .await
        .unwrap();
    let attributes = s
        .sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap();
    for value in attributes.attributes().unwrap().values() {
        assert_eq!(value, "0");
    }
    s.stop().await;
}

#[tokio::test]
async fn fifo_groups_keep_order_and_deduplicate() {
    let s = Served::start().await;
    let url = s
        .queue(
            "sdk-jobs.fifo",
            &[("FifoQueue", "true"), ("VisibilityTimeout", "30")],
        )
        .await;
    let send = |group: &str, dedup: &str, body: &str| {
        s.sqs
            .send_message()
            .queue_url(&url)
            .message_group_id(group)
            .message_deduplication_id(dedup)
            .message_body(body)
            .send()
    };
    let a1 = send("a", "a1", "a-1").await.unwrap();
    let a2 = send("a", "a2", "a-2").await.unwrap();
    let b1 = send("b", "b1", "b-1").await.unwrap();
    // A repeated deduplication id answers the first message's id and stores nothing.
    let again = send("a", "a1", "a-1 again").await.unwrap();
    assert_eq!(again.message_id(), a1.message_id());
    let sequence = |o: &aws_sdk_sqs::operation::send_message::SendMessageOutput| {
        o.sequence_number().unwrap().parse::<u128>().unwrap()
    };
    assert!(sequence(&a1) < sequence(&a2) && sequence(&a2) < sequence(&b1));

    // A batch into group c, in entry order.
    let batch = s
        .sqs
        .send_message_batch()
        .queue_url(&url)
        .set_entries(Some(
            (1..=3)
                .map(|i| {
                    SendMessageBatchRequestEntry::builder()
                        .id(format!("c{i}"))
                        .message_group_id("c")
                        .message_deduplication_id(format!("c{i}"))
                        .message_body(format!("c-{i}"))
                        .build()
                        .unwrap()
                })
                .collect(),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(batch.successful().len(), 3, "{:?}", batch.failed());
    assert!(
        batch
            .successful()
            .iter()
            .all(|e| e.sequence_number().is_some())
    );

    // Each group's messages come in send order, in runs of a group per receive.
    let mut seen: HashMap<String, Vec<String>> = HashMap::new();
    let mut total = 0;
    while total < 6 {
        let got = s
            .sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .wait_time_seconds(5)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap();
        assert!(!got.messages().is_empty(), "{seen:?}");
        let mut groups: Vec<&str> = Vec::new();
        for m in got.messages() {
            let a = m.attributes().unwrap();
            let group = &a[&MessageSystemAttributeName::MessageGroupId];
            // As AWS's FIFO delivery logic: a receive takes a run of a group's messages,
            // in order, before another group's; a group never comes back within it.
            if groups.last() != Some(&group.as_str()) {
                assert!(
                    !groups.contains(&group.as_str()),
                    "group {group} split within one receive"
                );
                groups.push(group);
            }
            assert!(a.contains_key(&MessageSystemAttributeName::SequenceNumber));
            assert!(a.contains_key(&MessageSystemAttributeName::MessageDeduplicationId));
            seen.entry(group.clone())
                .or_default()
                .push(m.body().unwrap().to_owned());
            total += 1;
        }
        let deletes = got
            .messages()
            .iter()
            .enumerate()
            .map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(format!("d{i}"))
                    .receipt_handle(m.receipt_handle().unwrap())
                    .build()
                    .unwrap()
            })
            .collect();
        let deleted = s
            .sqs
            .delete_message_batch()
            .queue_url(&url)
            .set_entries(Some(deletes))
            .send()
            .await
            .unwrap();
        assert!(deleted.failed().is_empty());
    }
    assert_eq!(seen["a"], ["a-1", "a-2"]);
    assert_eq!(seen["b"], ["b-1"]);
    assert_eq!(seen["c"], ["c-1", "c-2", "c-3"]);

    // Content-based deduplication: the same body twice is one message.
    let url = s
        .queue(
            "sdk-content.fifo",
            &[("FifoQueue", "true"), ("ContentBasedDeduplication", "true")],
        )
        .await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let sent = s
            .sqs
            .send_message()
            .queue_url(&url)
            .message_group_id("g")
            .message_body("same body")
            .send()
            .await
            .unwrap();
        ids.push(sent.message_id().unwrap().to_owned());
    }
    assert_eq!(ids[0], ids[1]);
    let got = s
        .sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    assert_eq!(got.messages().len(), 1);
    s.stop().await;
}

#[tokio::test]
async fn attributes_of_a_batch_entry_reach_the_receiver_unchanged() {
    // A String attribute whose value needs escaping in every protocol, beside a Number.
    let s = Served::start().await;
    let url = s.queue("sdk-escape", &[]).await;
    let attributes = HashMap::from([
        ("note".to_owned(), text("String", "a&b<c>\"d\"'e'\r\nf")),
        ("n".to_owned(), text("Number", "7")),
    ]);
    let sent = s
        .sqs
        .send_message_batch()
        .queue_url(&url)
        .entries(
            SendMessageBatchRequestEntry::builder()
                .id("only")
                .message_body("x")
                .set_message_attributes(Some(attributes.clone()))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(
        sent.successful()[0].md5_of_message_attributes(),
        Some(attributes_md5(&attributes).as_str())
    );
    let got = s
        .sqs
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(5)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap();
    assert_eq!(got.messages()[0].message_attributes(), Some(&attributes));
    s.stop().await;
}
