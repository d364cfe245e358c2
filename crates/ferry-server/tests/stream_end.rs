//! What the end of a consume stream spends: a delivery the server sent fails its attempt
//! ("consumer disconnected"), one it never sent spends none, and a stream whose client
//! went away leases nothing more.

use std::time::Duration;

use ferry_proto::v1::{self, consume_request, consume_response};
use ferry_testkit::eventually;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

mod support;

use support::{GrpcClients, Served};

/// Long enough for anything a loaded machine does; the tests wait on events, and this only
/// bounds how long a broken build takes to fail.
const PATIENCE: Duration = Duration::from_secs(20);

async fn serve_queue(name: &str, max_deliveries: u32) -> Served {
    let (broker, dir) = support::fresh_broker().await;
    let s = Served::serve(broker, Some(dir), |server| server).await;
    s.admin()
        .create_queue(v1::CreateQueueRequest {
            name: name.into(),
            spec: Some(v1::QueueSpec {
                retry: Some(v1::RetryPolicy {
                    max_deliveries: Some(max_deliveries),
                    backoff: None,
                }),
                lease_ms: Some(30_000),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    s
}

async fn publish(s: &Served, queue: &str, text: &str) {
    s.publisher()
        .publish(v1::PublishRequest {
            batch_id: None,
            queue: queue.into(),
            messages: vec![v1::OutgoingMessage {
                payload: text.as_bytes().to_vec().into(),
                ..Default::default()
            }],
        })
        .await
        .unwrap();
}

/// A consume stream of consumer `c1`: the requests sent and the responses read.
struct Stream {
    send: mpsc::Sender<v1::ConsumeRequest>,
    responses: tonic::Streaming<v1::ConsumeResponse>,
}

impl Stream {
    async fn open(s: &Served, queue: &str, credit: u32) -> Stream {
        let (send, requests) = mpsc::channel(16);
        for kind in [
            consume_request::Kind::Open(v1::ConsumeOpen {
                queue: queue.into(),
                consumer: "c1".into(),
                lease_ms: None,
            }),
            consume_request::Kind::Credit(credit),
        ] {
            send.send(v1::ConsumeRequest { kind: Some(kind) })
                .await
                .unwrap();
        }
        let responses = s
            .consumer()
            .consume(ReceiverStream::new(requests))
            .await
            .unwrap()
            .into_inner();
        Stream { send, responses }
    }

    async fn next(&mut self) -> consume_response::Kind {
        tokio::time::timeout(PATIENCE, self.responses.next())
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
}

/// The deliverer of a stream with credit left waits in the broker's receive for the next
/// message. Its client goes away, and a message is published: a stream nobody reads must
/// not lease it, or give it back as an attempt spent. With one delivery allowed, that
/// attempt was a dead letter no consumer ever saw.
#[tokio::test]
async fn a_client_gone_while_its_stream_waits_spends_no_attempt_of_the_next_message() {
    let s = serve_queue("jobs", 1).await;
    let mut stream = Stream::open(&s, "jobs", 2).await;
    publish(&s, "jobs", "a").await;
    let a = stream.delivery().await;
    // With "a" sent, the deliverer holds the second credit and waits for a message.
    stream
        .send
        .send(v1::ConsumeRequest {
            kind: Some(consume_request::Kind::Settle(v1::Settle {
                seq: a.seq,
                token: a.token,
                outcome: Some(v1::settle::Outcome::Ack(true)),
            })),
        })
        .await
        .unwrap();
    assert!(matches!(stream.next().await, consume_response::Kind::Settled(r) if r.ok));

    // The client goes. Its end reaches the server on the connection ahead of the publish
    // (both go over the one channel), so this waits on nothing in time.
    drop(stream);
    publish(&s, "jobs", "b").await;

    let got = s
        .broker
        .receive("jobs", "c2", 10, None, Some(PATIENCE))
        .await
        .unwrap();
    let seen: Vec<(&[u8], u32)> = got
        .iter()
        .map(|m| (m.payload.as_ref(), m.delivery))
        .collect();
    assert_eq!(seen, [(&b"b"[..], 1)], "its first delivery, to c2");
    let stats = s.broker.describe_queue("jobs").unwrap().stats;
    assert_eq!((stats.nacked, stats.dead_lettered), (0, 0), "{stats:?}");
    s.stop().await;
}

/// A delivery the server sent may have reached the consumer, which may have crashed on
/// it: the stream's end fails its attempt, which is how a poison message reaches the
/// dead-letter queue.
#[tokio::test]
async fn a_delivery_sent_before_the_client_went_still_spends_its_attempt() {
    let s = serve_queue("jobs", 1).await;
    let mut stream = Stream::open(&s, "jobs", 1).await;
    publish(&s, "jobs", "poison").await;
    let sent = stream.delivery().await;
    assert_eq!(sent.delivery, 1);
    drop(stream);

    let letters = s
        .broker
        .receive("jobs.dlq", "d", 10, None, Some(PATIENCE))
        .await
        .unwrap();
    assert_eq!(letters.len(), 1, "dead-lettered once the stream ended");
    let info = letters[0].dead_letter.as_ref().unwrap();
    assert_eq!(
        (
            info.reason.as_str(),
            info.deliveries,
            info.last_error.as_deref(),
            info.consumer.as_deref()
        ),
        (
            "max_deliveries",
            1,
            Some("consumer disconnected"),
            Some("c1")
        )
    );
    assert_eq!(&letters[0].payload[..], b"poison");
    s.stop().await;
}

/// A client that stops reading leaves deliveries in the stream's outgoing channel, behind
/// HTTP/2 flow control: the server never sends them. When the client goes, those spend no
/// attempt and are ready again with delivery 1; only the ones tonic took to send count.
#[tokio::test]
async fn deliveries_still_waiting_in_the_stream_when_the_client_goes_spend_no_attempt() {
    // Far more than the client's HTTP/2 window (2 MiB by default) and the server's send
    // buffer hold, so most of them cannot have been taken to send.
    const MESSAGES: usize = 12;
    const PAYLOAD: usize = 512 << 10;
    let s = serve_queue("bulk", 1).await;
    for i in 0..MESSAGES {
        let mut payload = vec![b'x'; PAYLOAD];
        payload[0] = i as u8;
        s.broker
            .publish("bulk", ferry_broker::OutgoingMessage::new(payload))
            .await
            .unwrap();
    }
    let stream = Stream::open(&s, "bulk", MESSAGES as u32).await;
    // Its responses are never read. Wait until the stream holds every message.
    let stats = || s.broker.describe_queue("bulk").unwrap().stats;
    eventually("all leased to the stream", || {
        stats().state.in_flight == MESSAGES
    })
    .await;
    drop(stream);
    let dlq = || {
        s.broker
            .describe_queue("bulk.dlq")
            .unwrap()
            .stats
            .state
            .tracked
    };
    eventually("every delivery given back", || {
        stats().state.in_flight == 0 && stats().state.ready + dlq() == MESSAGES
    })
    .await;

    let again = s
        .broker
        .receive("bulk", "c2", MESSAGES, None, None)
        .await
        .unwrap();
    assert!(
        !again.is_empty(),
        "some deliveries were never sent, and are back: {:?}",
        stats()
    );
    assert!(again.iter().all(|m| m.delivery == 1), "no attempt spent");
    let letters = s
        .broker
        .receive("bulk.dlq", "d", MESSAGES, None, None)
        .await
        .unwrap();
    for letter in &letters {
        let info = letter.dead_letter.as_ref().unwrap();
        assert_eq!(info.last_error.as_deref(), Some("consumer disconnected"));
    }
    assert_eq!(again.len() + letters.len(), MESSAGES);
    s.stop().await;
}
