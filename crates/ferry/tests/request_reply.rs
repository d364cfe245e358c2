//! Request/reply over the embedded broker: round trip, timeout, late replies, expired
//! requests, many concurrent requests — and the request's TTL, which this transport has.

mod request_reply_support;

use std::time::Duration;

use ferry::request_reply::Requester;
use ferry::{Error, Ferry, Message, Source};
use request_reply_support as suite;
use tempfile::TempDir;

async fn broker() -> (TempDir, Ferry) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ferry = Ferry::connect(&format!("embedded:{}", dir.path().display()))
        .await
        .expect("embedded broker");
    (dir, ferry)
}

#[tokio::test]
async fn a_request_gets_its_reply_and_close_deletes_the_reply_queue() {
    let (_dir, ferry) = broker().await;
    suite::round_trip_and_close(&ferry).await;
}

#[tokio::test]
async fn a_request_without_a_reply_times_out() {
    let (_dir, ferry) = broker().await;
    suite::no_reply_times_out(&ferry).await;
}

#[tokio::test]
async fn a_late_reply_is_dropped_and_never_given_to_the_next_request() {
    let (_dir, ferry) = broker().await;
    suite::a_late_reply_is_dropped_not_given_to_the_next_request(&ferry).await;
}

#[tokio::test]
async fn a_request_past_its_deadline_is_acked_without_handling() {
    let (_dir, ferry) = broker().await;
    suite::an_expired_request_is_acked_unhandled(&ferry).await;
}

#[tokio::test]
async fn many_concurrent_requests_each_get_their_own_reply() {
    let (_dir, ferry) = broker().await;
    suite::many_concurrent_requests_get_their_own_replies(&ferry).await;
}

#[tokio::test]
async fn a_request_without_reply_to_is_rejected() {
    let (_dir, ferry) = broker().await;
    suite::a_request_without_reply_to_is_rejected(&ferry).await;
}

/// The broker has TTLs, so a request nobody took within the timeout expires in the queue
/// (dead-lettered as `expired`) rather than waiting for a responder to skip it.
#[tokio::test]
async fn an_unanswered_request_expires_with_the_timeout_as_its_ttl() {
    let (_dir, ferry) = broker().await;
    let queue = suite::request_queue(&ferry, "ttl").await;
    let requester = Requester::open(&ferry, "replies").await.unwrap();
    let err = requester
        .request(&queue, Message::new("too slow"), Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut dead = ferry
        .consumer(Source::queue(&queue).dead_letters(), Default::default())
        .await
        .unwrap();
    let mut requests = ferry
        .consumer(Source::queue(&queue), Default::default())
        .await
        .unwrap();
    assert!(
        requests
            .next_within(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none(),
        "the expired request is not delivered"
    );
    let dead_letter = dead
        .next_within(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the expired request in the dead-letter queue");
    assert_eq!(
        dead_letter.dead_letter.as_ref().map(|d| d.reason.as_str()),
        Some(ferry::message::reason::EXPIRED)
    );
    requester.close().await.unwrap();
}

#[tokio::test]
async fn a_reply_to_a_closed_requester_is_dropped_and_the_request_acked() {
    let (_dir, ferry) = broker().await;
    suite::a_reply_to_a_closed_requester_is_dropped(&ferry).await;
}

#[tokio::test]
async fn a_failed_handler_is_retried_while_the_requester_waits() {
    let (_dir, ferry) = broker().await;
    suite::a_failed_handler_is_retried_while_the_requester_waits(&ferry).await;
}

/// Captures what `tracing` writes, for the warning checks.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// The seeds' rule: never block a request on a queue for longer than 2 s. A longer timeout
/// works, with one warning per requester; timeouts within the limit warn nothing.
#[tokio::test(flavor = "current_thread")]
async fn a_timeout_above_the_blocking_limit_warns_once() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let (_dir, ferry) = broker().await;
    let queue = suite::request_queue(&ferry, "limit").await;
    let requester = Requester::open(&ferry, "replies").await.unwrap();
    let within = ferry::request_reply::BLOCKING_LIMIT;
    let err = requester
        .request(&queue, Message::new("quick"), within / 20)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    assert!(
        !captured.text().contains("longer than the limit"),
        "{}",
        captured.text()
    );

    // Answered at once, so the long timeout costs nothing here.
    let responder = std::sync::Arc::new(ferry::request_reply::Responder::new(&ferry));
    let server = suite::serve(&ferry, &queue, responder);
    for _ in 0..2 {
        requester
            .request(&queue, Message::new("patient"), within * 3)
            .await
            .unwrap();
    }
    let text = captured.text();
    assert_eq!(
        text.matches("longer than the limit").count(),
        1,
        "one warning per requester: {text}"
    );
    assert!(text.contains("WARN"), "{text}");
    server.abort();
    requester.close().await.unwrap();
    suite::delete_queue(&ferry, &queue).await;
}

#[tokio::test]
async fn the_reply_queue_is_temporary_where_the_transport_has_them() {
    let (_dir, ferry) = broker().await;
    suite::the_reply_queue_is_temporary_where_the_transport_has_them(&ferry).await;
}
