//! The request/reply behaviours every transport must show, run by `request_reply.rs`
//! (embedded broker), `request_reply_server.rs` (a Ferry server), `request_reply_nats.rs`
//! (NATS JetStream, which has no message TTL: there the deadline header alone keeps stale
//! requests from being handled), `request_reply_redis.rs`, `request_reply_rabbitmq.rs` and
//! `request_reply_postgres.rs`. Where the transport has temporary queues the reply queue is
//! one; elsewhere it is a named queue.
#![allow(dead_code)] // Each test file runs its own part.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferry::capability::Feature;
use ferry::message::{header::CORRELATION_ID, now_ms};
use ferry::request_reply::{Requester, Responded, Responder, header};
use ferry::{
    ConsumerOptions, Delivery, Destination, Error, Ferry, Message, QueueDecl, Received, Source,
    TemporaryQueueDecl,
};
use ferry_testkit::fresh;
use tokio::task::JoinHandle;

/// A request queue whose failed requests come back quickly.
pub async fn request_queue(ferry: &Ferry, what: &str) -> String {
    let mut decl = QueueDecl::new(fresh("rr", what));
    decl.delivery.backoff.base = Duration::from_millis(50);
    decl.delivery.backoff.cap = Duration::from_millis(100);
    ferry.declare_queue(&decl).await.expect("declare requests");
    decl.name
}

pub async fn delete_queue(ferry: &Ferry, queue: &str) {
    let _ = ferry.delete(&Source::queue(queue)).await;
    let _ = ferry.delete(&Source::queue(queue).dead_letters()).await;
}

fn options() -> ConsumerOptions {
    ConsumerOptions {
        prefetch: 4,
        poll: Duration::from_millis(50),
        ..ConsumerOptions::default()
    }
}

/// The reply a test responder gives: `re:` and the request's payload.
pub async fn echo(request: Received) -> Result<Message, Infallible> {
    let text = String::from_utf8_lossy(&request.payload).into_owned();
    Ok(Message::new(format!("re:{text}")))
}

fn text(message: &Received) -> String {
    String::from_utf8_lossy(&message.payload).into_owned()
}

/// A responder answering `queue` with [`echo`] until aborted.
pub fn serve(ferry: &Ferry, queue: &str, responder: Arc<Responder>) -> JoinHandle<()> {
    let (ferry, queue) = (ferry.clone(), queue.to_owned());
    tokio::spawn(async move {
        let mut consumer = ferry
            .consumer(Source::queue(&queue), options())
            .await
            .expect("request consumer");
        while let Some(request) = consumer.next().await {
            let request = request.expect("fetch a request");
            responder.respond(request, echo).await.expect("respond");
        }
    })
}

/// The next request on `queue`, taken by hand.
async fn take(ferry: &Ferry, queue: &str) -> Delivery {
    let mut consumer = ferry
        .consumer(Source::queue(queue), options())
        .await
        .unwrap();
    let delivery = consumer
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a request within 5 s");
    consumer.close().await.unwrap();
    delivery
}

pub async fn round_trip_and_close(ferry: &Ferry) {
    let queue = request_queue(ferry, "round-trip").await;
    let responder = Arc::new(Responder::new(ferry));
    let server = serve(ferry, &queue, responder.clone());
    let requester = Requester::open(ferry, "replies").await.unwrap();
    let reply = requester
        .request(&queue, Message::new("hello"), Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(text(&reply), "re:hello");
    assert!(reply.header(CORRELATION_ID).is_some());
    // The responder counts a reply once its send returns, which can be after the requester
    // has it.
    ferry_testkit::eventually("the responder's count", || responder.replied() == 1).await;

    let reply_queue = requester.reply_queue().to_owned();
    requester.close().await.unwrap();
    requester.close().await.unwrap();
    let err = requester
        .request(&queue, Message::new("again"), Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Closed), "{err}");
    let gone = ferry
        .delete(&Source::queue(&reply_queue))
        .await
        .unwrap_err();
    assert!(
        matches!(gone, Error::NotFound { .. }),
        "the reply queue was deleted: {gone}"
    );
    server.abort();
    delete_queue(ferry, &queue).await;
}

pub async fn no_reply_times_out(ferry: &Ferry) {
    let queue = request_queue(ferry, "timeout").await;
    let requester = Requester::open(ferry, "replies").await.unwrap();
    let timeout = Duration::from_millis(200);
    let err = requester
        .request(&queue, Message::new("anyone?"), timeout)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(t) if t == timeout), "{err}");
    requester.close().await.unwrap();
    delete_queue(ferry, &queue).await;
}

pub async fn a_late_reply_is_dropped_not_given_to_the_next_request(ferry: &Ferry) {
    let queue = request_queue(ferry, "late").await;
    let requester = Requester::open(ferry, "replies").await.unwrap();
    let first = requester.request(&queue, Message::new("first"), Duration::from_millis(300));
    let (outcome, request) = tokio::join!(first, take(ferry, &queue));
    assert!(matches!(outcome, Err(Error::Timeout(_))), "{outcome:?}");

    // The slow responder answers the first request after its requester gave up.
    let correlation = request.header(CORRELATION_ID).unwrap().to_owned();
    let reply_to = request.header(header::REPLY_TO).unwrap().to_owned();
    assert_eq!(reply_to, requester.reply_queue());
    ferry
        .publisher(Destination::queue(&reply_to))
        .send(Message::new("re:first").with_header(CORRELATION_ID, &correlation))
        .await
        .unwrap();
    request.ack().await.unwrap();

    let server = serve(ferry, &queue, Arc::new(Responder::new(ferry)));
    let reply = requester
        .request(&queue, Message::new("second"), Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(text(&reply), "re:second");
    assert_ne!(reply.header(CORRELATION_ID), Some(correlation.as_str()));
    for _ in 0..100 {
        if requester.late_replies() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(requester.late_replies(), 1);
    server.abort();
    requester.close().await.unwrap();
    delete_queue(ferry, &queue).await;
}

pub async fn an_expired_request_is_acked_unhandled(ferry: &Ferry) {
    let queue = request_queue(ferry, "expired").await;
    let request = Message::new("stale")
        .with_header(CORRELATION_ID, "c-1")
        .with_header(header::REPLY_TO, fresh("rr", "nobody"))
        .with_header(header::DEADLINE, (now_ms() - 1).to_string());
    ferry
        .publisher(Destination::queue(&queue))
        .send(request)
        .await
        .unwrap();
    let responder = Responder::new(ferry);
    let handled = AtomicBool::new(false);
    let outcome = responder
        .respond(take(ferry, &queue).await, async |request| {
            handled.store(true, Ordering::SeqCst);
            echo(request).await
        })
        .await
        .unwrap();
    assert!(matches!(outcome, Responded::Expired), "{outcome:?}");
    assert!(!handled.load(Ordering::SeqCst));
    assert_eq!((responder.expired(), responder.replied()), (1, 0));
    assert_no_request_left(ferry, &queue).await;
    delete_queue(ferry, &queue).await;
}

/// The request was settled: nothing comes back from the queue.
async fn assert_no_request_left(ferry: &Ferry, queue: &str) {
    let mut consumer = ferry
        .consumer(Source::queue(queue), options())
        .await
        .unwrap();
    let left = consumer
        .next_within(Duration::from_millis(300))
        .await
        .unwrap();
    assert!(left.is_none(), "left in the queue: {left:?}");
    consumer.close().await.unwrap();
}

/// A requester gives up; the responder that takes the request afterwards skips it.
pub async fn a_request_taken_after_its_timeout_is_skipped(ferry: &Ferry) {
    let queue = request_queue(ferry, "skipped").await;
    let requester = Requester::open(ferry, "replies").await.unwrap();
    let err = requester
        .request(&queue, Message::new("slow"), Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    let responder = Responder::new(ferry);
    let outcome = responder
        .respond(take(ferry, &queue).await, echo)
        .await
        .unwrap();
    assert!(matches!(outcome, Responded::Expired), "{outcome:?}");
    assert_eq!(responder.expired(), 1);
    requester.close().await.unwrap();
    delete_queue(ferry, &queue).await;
}

pub async fn many_concurrent_requests_get_their_own_replies(ferry: &Ferry) {
    let queue = request_queue(ferry, "many").await;
    let responder = Arc::new(Responder::new(ferry));
    let servers = [
        serve(ferry, &queue, responder.clone()),
        serve(ferry, &queue, responder.clone()),
    ];
    let requester = Arc::new(Requester::open(ferry, "replies").await.unwrap());
    let mut requests = tokio::task::JoinSet::new();
    for i in 0..50 {
        let (requester, queue) = (requester.clone(), queue.clone());
        requests.spawn(async move {
            let reply = requester
                .request(
                    &queue,
                    Message::new(format!("n{i}")),
                    // A real margin: 50 round trips on a loaded 2-core CI box.
                    Duration::from_secs(20),
                )
                .await
                .unwrap();
            (i, text(&reply))
        });
    }
    let mut answered = 0;
    while let Some(done) = requests.join_next().await {
        let (i, reply) = done.unwrap();
        assert_eq!(reply, format!("re:n{i}"));
        answered += 1;
    }
    assert_eq!(answered, 50);
    assert_eq!(requester.late_replies(), 0);
    for server in servers {
        server.abort();
    }
    requester.close().await.unwrap();
    delete_queue(ferry, &queue).await;
}

pub async fn a_request_without_reply_to_is_rejected(ferry: &Ferry) {
    let queue = request_queue(ferry, "malformed").await;
    ferry
        .publisher(Destination::queue(&queue))
        .send(Message::new("who do I answer?"))
        .await
        .unwrap();
    let outcome = Responder::new(ferry)
        .respond(take(ferry, &queue).await, echo)
        .await
        .unwrap();
    assert!(matches!(outcome, Responded::Malformed), "{outcome:?}");
    delete_queue(ferry, &queue).await;
}

pub async fn a_reply_to_a_closed_requester_is_dropped(ferry: &Ferry) {
    let queue = request_queue(ferry, "gone").await;
    let request = Message::new("anyone there?")
        .with_header(CORRELATION_ID, "c-2")
        .with_header(header::REPLY_TO, fresh("rr", "closed-replies"))
        .with_header(header::DEADLINE, (now_ms() + 60_000).to_string());
    ferry
        .publisher(Destination::queue(&queue))
        .send(request)
        .await
        .unwrap();
    let responder = Responder::new(ferry);
    let outcome = responder
        .respond(take(ferry, &queue).await, echo)
        .await
        .unwrap();
    assert!(matches!(outcome, Responded::RequesterGone), "{outcome:?}");
    assert_no_request_left(ferry, &queue).await;
    delete_queue(ferry, &queue).await;
}

pub async fn a_failed_handler_is_retried_while_the_requester_waits(ferry: &Ferry) {
    let queue = request_queue(ferry, "retried").await;
    let requester = Requester::open(ferry, "replies").await.unwrap();
    let request = requester.request(&queue, Message::new("flaky"), Duration::from_secs(2));
    let respond = async {
        let responder = Responder::new(ferry);
        let failed = responder
            .respond(take(ferry, &queue).await, async |_| {
                Err::<Message, _>("the price service is down")
            })
            .await
            .unwrap();
        assert!(matches!(failed, Responded::Failed(_)), "{failed:?}");
        let again = take(ferry, &queue).await;
        assert_eq!(again.attempt, 2);
        responder.respond(again, echo).await.unwrap()
    };
    let (reply, responded) = tokio::join!(request, respond);
    assert!(matches!(responded, Responded::Replied), "{responded:?}");
    assert_eq!(text(&reply.unwrap()), "re:flaky");
    requester.close().await.unwrap();
    delete_queue(ferry, &queue).await;
}

/// The reply queue is a temporary queue exactly where the transport has them; elsewhere
/// declaring one is refused as unsupported, and the requester keeps its named reply queue.
pub async fn the_reply_queue_is_temporary_where_the_transport_has_them(ferry: &Ferry) {
    let has_them = ferry.capabilities().supports(Feature::TemporaryQueues);
    let requester = Requester::open(ferry, "replies").await.unwrap();
    let reply_queue = requester.reply_queue().to_owned();
    if has_them {
        assert!(reply_queue.starts_with("tmp."), "{reply_queue}");
    } else {
        assert!(reply_queue.starts_with("replies-"), "{reply_queue}");
        let err = ferry
            .declare_temporary_queue(&TemporaryQueueDecl::default())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    }
    requester.close().await.unwrap();
    let gone = ferry
        .delete(&Source::queue(&reply_queue))
        .await
        .unwrap_err();
    assert!(matches!(gone, Error::NotFound { .. }), "{gone}");
}

/// The suite's tests for one transport, each named after its behaviour. `$connect` is an
/// async expression giving `Option` of something that derefs to a [`Ferry`] (`None`: the
/// engine is missing and the test skips, loudly — a failure under `CI=true`). Not here:
/// [`a_request_taken_after_its_timeout_is_skipped`], which holds where requests have no TTL
/// (NATS) — elsewhere the request's TTL may have removed it before a responder looks.
#[macro_export]
macro_rules! request_reply_tests {
    ($connect:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_request_gets_its_reply_and_close_deletes_the_reply_queue() {
            let Some(target) = $connect.await else { return };
            request_reply_support::round_trip_and_close(&target).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_request_without_a_reply_times_out() {
            let Some(target) = $connect.await else { return };
            request_reply_support::no_reply_times_out(&target).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_late_reply_is_dropped_and_never_given_to_the_next_request() {
            let Some(target) = $connect.await else { return };
            request_reply_support::a_late_reply_is_dropped_not_given_to_the_next_request(&target)
                .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_request_past_its_deadline_is_acked_without_handling() {
            let Some(target) = $connect.await else { return };
            request_reply_support::an_expired_request_is_acked_unhandled(&target).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn many_concurrent_requests_each_get_their_own_reply() {
            let Some(target) = $connect.await else { return };
            request_reply_support::many_concurrent_requests_get_their_own_replies(&target).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_request_without_reply_to_is_rejected() {
            let Some(target) = $connect.await else { return };
            request_reply_support::a_request_without_reply_to_is_rejected(&target).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_reply_to_a_closed_requester_is_dropped_and_the_request_acked() {
            let Some(target) = $connect.await else { return };
            request_reply_support::a_reply_to_a_closed_requester_is_dropped(&target).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_failed_handler_is_retried_while_the_requester_waits() {
            let Some(target) = $connect.await else { return };
            request_reply_support::a_failed_handler_is_retried_while_the_requester_waits(&target)
                .await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn the_reply_queue_is_temporary_where_the_transport_has_them() {
            let Some(target) = $connect.await else { return };
            request_reply_support::the_reply_queue_is_temporary_where_the_transport_has_them(
                &target,
            )
            .await;
        }
    };
}
