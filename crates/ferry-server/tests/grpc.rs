//! The gRPC services over a real socket: admin, publish, the credit-based consume stream,
//! dead letters (peek and redrive), topics and groups, and bad input answered with the
//! right status and no change.

use std::time::Duration;

use ferry_proto::v1::{
    self, consume_request, consume_response, dead_letters_client::DeadLettersClient,
    groups_client::GroupsClient,
};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

mod support;

use support::{GrpcClients, Served as Running};

impl Running {
    async fn start() -> Running {
        let (broker, dir) = support::fresh_broker().await;
        Running::serve(broker, Some(dir), |server| server).await
    }
}

fn message(text: &str) -> v1::OutgoingMessage {
    v1::OutgoingMessage {
        payload: text.as_bytes().to_vec().into(),
        ..Default::default()
    }
}

fn queue_spec(max_deliveries: u32) -> v1::QueueSpec {
    v1::QueueSpec {
        retry: Some(v1::RetryPolicy {
            max_deliveries: Some(max_deliveries),
            backoff: None,
        }),
        lease_ms: Some(30_000),
        ..Default::default()
    }
}

async fn create_queue(s: &Running, name: &str, max_deliveries: u32) {
    s.admin()
        .create_queue(v1::CreateQueueRequest {
            name: name.into(),
            spec: Some(queue_spec(max_deliveries)),
        })
        .await
        .unwrap();
}

async fn publish(s: &Running, queue: &str, texts: &[&str]) -> Vec<String> {
    s.publisher()
        .publish(v1::PublishRequest {
            batch_id: None,
            queue: queue.into(),
            messages: texts.iter().map(|t| message(t)).collect(),
        })
        .await
        .unwrap()
        .into_inner()
        .ids
}

fn stats(s: &Running, queue: &str) -> ferry_broker::QueueStats {
    s.broker.describe_queue(queue).unwrap().stats
}

/// A consume stream: the requests sent and the responses read.
struct Stream {
    send: mpsc::Sender<v1::ConsumeRequest>,
    responses: tonic::Streaming<v1::ConsumeResponse>,
}

impl Stream {
    async fn open(s: &Running, queue: &str) -> Stream {
        let (send, requests) = mpsc::channel(16);
        send.send(v1::ConsumeRequest {
            kind: Some(consume_request::Kind::Open(v1::ConsumeOpen {
                queue: queue.into(),
                consumer: "c1".into(),
                lease_ms: None,
            })),
        })
        .await
        .unwrap();
        let responses = s
            .consumer()
            .consume(ReceiverStream::new(requests))
            .await
            .unwrap()
            .into_inner();
        Stream { send, responses }
    }

    async fn credit(&self, n: u32) {
        self.send
            .send(v1::ConsumeRequest {
                kind: Some(consume_request::Kind::Credit(n)),
            })
            .await
            .unwrap();
    }

    async fn settle(&self, d: &v1::Delivery, outcome: v1::settle::Outcome) {
        self.send
            .send(v1::ConsumeRequest {
                kind: Some(consume_request::Kind::Settle(v1::Settle {
                    seq: d.seq,
                    token: d.token,
                    outcome: Some(outcome),
                })),
            })
            .await
            .unwrap();
    }

    async fn next(&mut self) -> consume_response::Kind {
        tokio::time::timeout(Duration::from_secs(10), self.responses.next())
            .await
            .expect("a response in time")
            .expect("the stream is open")
            .expect("not an error")
            .kind
            .unwrap()
    }

    async fn delivery(&mut self) -> v1::Delivery {
        match self.next().await {
            consume_response::Kind::Delivery(d) => d,
            other => panic!("expected a delivery, got {other:?}"),
        }
    }

    async fn settled(&mut self) -> v1::SettleResult {
        match self.next().await {
            consume_response::Kind::Settled(r) => r,
            other => panic!("expected a settle result, got {other:?}"),
        }
    }

    /// Nothing arrives for a while.
    async fn quiet(&mut self) {
        let got = tokio::time::timeout(Duration::from_millis(700), self.responses.next()).await;
        assert!(got.is_err(), "expected nothing, got {got:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_publish_and_the_consume_stream_respect_credit() {
    let s = Running::start().await;
    create_queue(&s, "orders", 5).await;
    let names = s
        .admin()
        .list_queues(v1::ListQueuesRequest {})
        .await
        .unwrap()
        .into_inner()
        .names;
    assert_eq!(names, ["orders", "orders.dlq"]);
    let info = s
        .admin()
        .describe_queue(v1::DescribeQueueRequest {
            name: "orders".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.spec.unwrap().retry.unwrap().max_deliveries, Some(5));

    let ids = publish(&s, "orders", &["a", "b", "c", "d", "e"]).await;
    assert_eq!(ids.len(), 5);

    let mut stream = Stream::open(&s, "orders").await;
    stream.quiet().await; // no credit, no delivery
    stream.credit(2).await;
    let first = stream.delivery().await;
    let second = stream.delivery().await;
    assert_eq!(
        (first.payload.as_ref(), second.payload.as_ref()),
        (&b"a"[..], &b"b"[..])
    );
    assert_eq!(first.id, ids[0]);
    stream.quiet().await; // credit used up
    assert_eq!(stats(&s, "orders").state.in_flight, 2);

    stream.settle(&first, v1::settle::Outcome::Ack(true)).await;
    assert!(stream.settled().await.ok);
    stream.settle(&first, v1::settle::Outcome::Ack(true)).await;
    assert!(stream.settled().await.ok, "a repeated ack finds it settled");
    stream
        .settle(&second, v1::settle::Outcome::ExtendMs(60_000))
        .await;
    let extended = stream.settled().await;
    assert!(extended.ok && extended.lease_until_ms.unwrap() > second.lease_until_ms);
    let wrong = v1::Delivery {
        token: second.token + 1_000_000,
        ..second.clone()
    };
    stream.settle(&wrong, v1::settle::Outcome::Ack(true)).await;
    let refused = stream.settled().await;
    assert!(
        !refused.ok && !refused.error.is_empty(),
        "a stale token is refused"
    );

    stream.credit(1).await;
    assert_eq!(stream.delivery().await.payload.as_ref(), b"c");
    assert_eq!(stats(&s, "orders").acked, 1);

    // The client goes away: its two unsettled deliveries are ready again at once.
    drop(stream);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while stats(&s, "orders").state.in_flight > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "released in time: {:?}",
            stats(&s, "orders")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let again = s
        .consumer()
        .receive(v1::ReceiveRequest {
            queue: "orders".into(),
            consumer: "c2".into(),
            max: 10,
            lease_ms: None,
            wait_ms: None,
        })
        .await
        .unwrap()
        .into_inner()
        .deliveries;
    let payloads: Vec<&[u8]> = again.iter().map(|d| d.payload.as_ref()).collect();
    assert_eq!(
        payloads,
        [&b"b"[..], b"c", b"d", b"e"],
        "ready again at once, in order"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_lands_in_the_dlq_and_is_redriven() {
    let s = Running::start().await;
    create_queue(&s, "jobs", 2).await;
    publish(&s, "jobs", &["ok", "poison"]).await;
    let mut consumer = s.consumer();
    for _ in 0..2 {
        let got = consumer
            .receive(v1::ReceiveRequest {
                queue: "jobs".into(),
                consumer: "w".into(),
                max: 10,
                lease_ms: None,
                wait_ms: Some(2_000),
            })
            .await
            .unwrap()
            .into_inner()
            .deliveries;
        for d in got {
            if d.payload.as_ref() == b"ok" {
                consumer
                    .ack(v1::AckRequest {
                        queue: "jobs".into(),
                        seq: d.seq,
                        token: d.token,
                    })
                    .await
                    .unwrap();
            } else {
                consumer
                    .nack(v1::NackRequest {
                        queue: "jobs".into(),
                        seq: d.seq,
                        token: d.token,
                        delay_ms: Some(0),
                        error: Some("cannot parse".into()),
                    })
                    .await
                    .unwrap();
            }
        }
    }
    let mut dlq = DeadLettersClient::new(s.channel.clone());
    let letters = dlq
        .peek(v1::PeekRequest {
            dlq: "jobs.dlq".into(),
            filter: None,
            max: 10,
            after_seq: None,
        })
        .await
        .unwrap()
        .into_inner()
        .letters;
    assert_eq!(letters.len(), 1);
    let info = letters[0].dead_letter.as_ref().unwrap();
    assert_eq!(
        (
            info.reason.as_str(),
            info.deliveries,
            info.last_error.as_deref()
        ),
        ("max_deliveries", 2, Some("cannot parse"))
    );
    assert_eq!(
        stats(&s, "jobs.dlq").state.ready,
        1,
        "peeking takes nothing"
    );

    let report = dlq
        .redrive(v1::RedriveRequest {
            dlq: "jobs.dlq".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((report.moved, report.skipped), (1, 0));
    assert_eq!(stats(&s, "jobs").state.ready, 1);
    assert_eq!(stats(&s, "jobs.dlq").state.ready, 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_subscriptions_and_groups() {
    let s = Running::start().await;
    let mut admin = s.admin();
    admin
        .create_topic(v1::CreateTopicRequest {
            name: "events".into(),
            spec: Some(v1::TopicSpec {
                partitions: 3,
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    admin
        .create_subscription(v1::CreateSubscriptionRequest {
            name: "eu-orders".into(),
            spec: Some(v1::SubscriptionSpec {
                topic: "events".into(),
                filter: "subject ~ orders.* and region = eu".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let events: Vec<v1::OutgoingMessage> = [
        ("orders.created", "eu"),
        ("orders.created", "us"),
        ("users.created", "eu"),
    ]
    .iter()
    .enumerate()
    .map(|(i, (subject, region))| v1::OutgoingMessage {
        key: Some(format!("k{i}").into_bytes().into()),
        headers: [
            ("subject".to_owned(), subject.to_string()),
            ("region".to_owned(), region.to_string()),
        ]
        .into(),
        ..message(&format!("e{i}"))
    })
    .collect();
    let positions = s
        .publisher()
        .publish_to_topic(v1::PublishToTopicRequest {
            topic: "events".into(),
            messages: events,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .positions;
    assert_eq!(positions.len(), 3);
    let sub = admin
        .describe_subscription(v1::DescribeSubscriptionRequest {
            name: "eu-orders".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(sub.queue.unwrap().stats.unwrap().ready, 1, "only eu orders");

    let mut groups = GroupsClient::new(s.channel.clone());
    let member = groups
        .join(v1::JoinGroupRequest {
            topic: "events".into(),
            group: "audit".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(member.partitions, [0, 1, 2]);
    let records = groups
        .poll(v1::PollRequest {
            topic: "events".into(),
            group: "audit".into(),
            member_id: member.member_id.clone(),
            max_records: 100,
        })
        .await
        .unwrap()
        .into_inner()
        .records;
    assert_eq!(records.len(), 3);
    for r in &records {
        groups
            .commit(v1::CommitRequest {
                topic: "events".into(),
                group: "audit".into(),
                member_id: member.member_id.clone(),
                partition: r.partition,
                offset: r.offset + 1,
            })
            .await
            .unwrap();
    }
    let group = admin
        .describe_group(v1::DescribeGroupRequest {
            topic: "events".into(),
            group: "audit".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(group.partitions.iter().all(|p| p.lag_records == 0));
    let stranger = groups
        .commit(v1::CommitRequest {
            topic: "events".into(),
            group: "audit".into(),
            member_id: "nobody".into(),
            partition: 0,
            offset: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(stranger.code(), Code::FailedPrecondition);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_retried_with_its_batch_id_is_stored_once() {
    let s = Running::start().await;
    create_queue(&s, "q", 3).await;
    let mut publisher = s.publisher();
    let call = |batch_id: &str| v1::PublishRequest {
        batch_id: Some(batch_id.into()),
        queue: "q".into(),
        messages: vec![message("a"), message("b"), message("c")],
    };
    let batch_id = "01HZX3J9Q5W6B2F8N4K7M1R0TA";
    let first = publisher
        .publish(call(batch_id))
        .await
        .unwrap()
        .into_inner();
    let retried = publisher
        .publish(call(batch_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(retried.ids, first.ids);
    assert_eq!(first.ids.len(), 3);
    assert_eq!(stats(&s, "q").next_seq, 3, "the retry stored nothing");
    let other = publisher
        .publish(call("01HZX3J9Q5W6B2F8N4K7M1R0TB"))
        .await
        .unwrap()
        .into_inner();
    assert!(other.ids.iter().all(|id| !first.ids.contains(id)));
    assert_eq!(stats(&s, "q").next_seq, 6);

    for bad in ["not-a-ulid", "00000000000000000000000000"] {
        let refused = publisher.publish(call(bad)).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{bad}");
    }
    let reused = publisher
        .publish(v1::PublishRequest {
            messages: vec![message("a")],
            ..call(batch_id)
        })
        .await
        .unwrap_err();
    assert_eq!(reused.code(), Code::InvalidArgument);
    assert!(
        reused.message().contains("new batch id"),
        "{}",
        reused.message()
    );
    assert_eq!(stats(&s, "q").next_seq, 6, "nothing stored");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_status_and_changes_nothing() {
    let s = Running::start().await;
    create_queue(&s, "q", 3).await;
    let mut publisher = s.publisher();
    let missing = publisher
        .publish(v1::PublishRequest {
            batch_id: None,
            queue: "nope".into(),
            messages: vec![message("x")],
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    assert!(missing.message().contains("nope"));

    // One bad message in a batch: nothing of the batch is stored.
    let oversized = v1::OutgoingMessage {
        payload: vec![0u8; 2 * 1024 * 1024].into(),
        ..Default::default()
    };
    let refused = publisher
        .publish(v1::PublishRequest {
            batch_id: None,
            queue: "q".into(),
            messages: vec![message("fine"), oversized],
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    let bad_priority = v1::OutgoingMessage {
        priority: 1000,
        ..message("x")
    };
    let refused = publisher
        .publish(v1::PublishRequest {
            batch_id: None,
            queue: "q".into(),
            messages: vec![bad_priority],
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(stats(&s, "q").next_seq, 0, "nothing stored");

    let mut admin = s.admin();
    let bad_name = admin
        .create_queue(v1::CreateQueueRequest {
            name: "has space".into(),
            spec: None,
        })
        .await
        .unwrap_err();
    assert_eq!(bad_name.code(), Code::InvalidArgument);
    let dup = admin
        .create_queue(v1::CreateQueueRequest {
            name: "q".into(),
            spec: None,
        })
        .await
        .unwrap_err();
    assert_eq!(dup.code(), Code::AlreadyExists);
    let bad_enum = admin
        .create_queue(v1::CreateQueueRequest {
            name: "r".into(),
            spec: Some(v1::QueueSpec {
                ordering: 99,
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(bad_enum.code(), Code::InvalidArgument);
    let bad_filter = admin
        .create_subscription(v1::CreateSubscriptionRequest {
            name: "s".into(),
            spec: Some(v1::SubscriptionSpec {
                topic: "missing".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(bad_filter.code(), Code::NotFound);
    assert_eq!(s.broker.list_queues().len(), 2, "q and q.dlq only");

    // A consume stream must start with `open`.
    let (send, requests) = mpsc::channel(1);
    send.send(v1::ConsumeRequest {
        kind: Some(consume_request::Kind::Credit(5)),
    })
    .await
    .unwrap();
    let refused = s
        .consumer()
        .consume(ReceiverStream::new(requests))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    s.stop().await;
}

/// A stream's ack that arrives after its lease ended, when the message has meanwhile been
/// acked through another delivery or dead-lettered, fails: it must not tell a second
/// consumer that its ack took (the broker's own ack stays idempotent for unary retries).
#[tokio::test]
async fn a_late_ack_of_an_expired_delivery_fails_after_a_redelivery_was_acked() {
    // What a consumer held up past its lease (a pause, a slow link) sees: its delivery's
    // lease expires, the message goes to another consumer who acks it, and only then does
    // the first ack arrive — here over the unary call and over a consume stream that did
    // not deliver it (as the SDK settles deliveries fetched by Receive). Neither may answer
    // OK: both consumers would believe their ack took.
    use v1::settle::Outcome;
    let s = Running::start().await;
    s.admin()
        .create_queue(v1::CreateQueueRequest {
            name: "expiring".into(),
            spec: Some(v1::QueueSpec {
                retry: Some(v1::RetryPolicy {
                    max_deliveries: Some(5),
                    backoff: Some(v1::Backoff {
                        base_ms: Some(1),
                        cap_ms: Some(1),
                        multiplier: Some(1.0),
                        jitter: Some(0.0),
                    }),
                }),
                lease_ms: Some(30_000),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let receive = |consumer: &str, lease_ms: Option<u64>| {
        let mut client = s.consumer();
        let request = v1::ReceiveRequest {
            queue: "expiring".into(),
            consumer: consumer.into(),
            max: 1,
            lease_ms,
            wait_ms: Some(10_000),
        };
        async move {
            let mut got = client
                .receive(request)
                .await
                .unwrap()
                .into_inner()
                .deliveries;
            assert_eq!(got.len(), 1);
            got.remove(0)
        }
    };
    let ack = |d: &v1::Delivery| {
        let mut client = s.consumer();
        let request = v1::AckRequest {
            queue: "expiring".into(),
            seq: d.seq,
            token: d.token,
        };
        async move { client.ack(request).await }
    };

    for late_over_stream in [false, true] {
        publish(&s, "expiring", &["m"]).await;
        let first = receive("paused", Some(200)).await;
        // The lease expires; the redelivery goes to a second consumer, who acks it.
        let second = receive("fast", None).await;
        assert_eq!((second.seq, second.delivery), (first.seq, 2));
        let acked = ack(&second).await.unwrap().into_inner();
        assert!(!acked.already_settled);

        if late_over_stream {
            let mut stream = Stream::open(&s, "expiring").await;
            stream.settle(&first, Outcome::Ack(true)).await;
            let late = stream.settled().await;
            assert!(!late.ok, "{late:?}");
            assert!(late.error.contains("not the current lease"), "{late:?}");
        } else {
            let late = ack(&first).await.unwrap_err();
            assert_eq!(late.code(), tonic::Code::FailedPrecondition, "{late:?}");
        }
        // The acking delivery may repeat its ack.
        let again = ack(&second).await.unwrap().into_inner();
        assert!(again.already_settled);
    }
    assert_eq!(stats(&s, "expiring").acked, 2);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ack_after_the_message_was_settled_elsewhere_fails() {
    use ferry_broker::LeaseToken;
    use v1::settle::Outcome;
    let s = Running::start().await;

    // Acked through a second delivery.
    create_queue(&s, "late", 5).await;
    publish(&s, "late", &["m"]).await;
    let mut stream = Stream::open(&s, "late").await;
    stream.credit(1).await;
    let first = stream.delivery().await;
    // The lease ends (a nack through the broker stands in for an expiry while the
    // consumer was cut off) and another consumer gets the message and acks it.
    s.broker
        .nack(
            "late",
            first.seq,
            LeaseToken(first.token),
            Some(Duration::ZERO),
            None,
        )
        .await
        .unwrap();
    let again = s
        .consumer()
        .receive(v1::ReceiveRequest {
            queue: "late".into(),
            consumer: "c2".into(),
            max: 1,
            lease_ms: None,
            wait_ms: Some(5_000),
        })
        .await
        .unwrap()
        .into_inner()
        .deliveries;
    assert_eq!(again.len(), 1);
    let acked = s
        .consumer()
        .ack(v1::AckRequest {
            queue: "late".into(),
            seq: again[0].seq,
            token: again[0].token,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!acked.already_settled);
    stream.settle(&first, Outcome::Ack(true)).await;
    let late = stream.settled().await;
    assert!(!late.ok, "{late:?}");
    assert!(late.error.contains("not the current lease"), "{late:?}");
    assert_eq!(stats(&s, "late").acked, 1);

    // Dead-lettered: out of deliveries when its lease ended.
    create_queue(&s, "late-dl", 1).await;
    publish(&s, "late-dl", &["m"]).await;
    let mut stream = Stream::open(&s, "late-dl").await;
    stream.credit(1).await;
    let only = stream.delivery().await;
    s.broker
        .nack("late-dl", only.seq, LeaseToken(only.token), None, None)
        .await
        .unwrap();
    assert_eq!(stats(&s, "late-dl").dead_lettered, 1);
    stream.settle(&only, Outcome::Ack(true)).await;
    let late = stream.settled().await;
    assert!(!late.ok, "{late:?}");

    // An ack in time still succeeds on the stream.
    publish(&s, "late", &["n"]).await;
    let mut stream = Stream::open(&s, "late").await;
    stream.credit(1).await;
    let d = stream.delivery().await;
    stream.settle(&d, Outcome::Ack(true)).await;
    assert!(stream.settled().await.ok);
    s.stop().await;
}

#[tokio::test]
async fn a_connection_carries_at_most_max_streams_per_connection_calls_at_once() {
    let (broker, dir) = support::fresh_broker().await;
    let s = Running::serve(broker, Some(dir), |server| {
        server.max_streams_per_connection(1)
    })
    .await;
    // A first call, so the client has the server's settings before the stream opens.
    create_queue(&s, "q", 5).await;
    let (tx, rx) = mpsc::channel(1);
    let open = s
        .publisher()
        .publish_stream(ReceiverStream::new(rx))
        .await
        .unwrap();
    // The one call the connection may carry is the open stream: the next one waits.
    let waited = tokio::time::timeout(
        Duration::from_millis(500),
        s.admin().list_queues(v1::ListQueuesRequest {}),
    )
    .await;
    assert!(waited.is_err(), "served beside the open stream: {waited:?}");
    drop(tx);
    drop(open);
    let listed = tokio::time::timeout(
        Duration::from_secs(10),
        s.admin().list_queues(v1::ListQueuesRequest {}),
    )
    .await
    .expect("served once the stream ended")
    .unwrap();
    assert!(listed.into_inner().names.contains(&"q".to_owned()));
    s.stop().await;
}
