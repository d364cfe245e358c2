//! What the end of a consume stream spends: a delivery the server sent fails its attempt
//! ("consumer disconnected"), one it never sent spends none, and a stream whose client
//! went away leases nothing more.

use std::time::Duration;

use ferry_proto::v1::{self, consume_request, consume_response};
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
