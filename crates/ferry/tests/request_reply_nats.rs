//! Request/reply over NATS JetStream, an engine without per-message TTL: requests carry no
//! TTL there (asking for one would be refused), so the deadline header alone makes a
//! responder skip a request its requester gave up on. Runs against `FERRY_NATS_URL`
//! (default: the machine's server); skips loudly when nothing answers, and fails instead
//! under `CI=true`.
#![cfg(feature = "nats")]

mod request_reply_support;

use ferry::Ferry;
use ferry::capability::Feature;
use request_reply_support as suite;

async fn connect() -> Option<Ferry> {
    let url =
        ferry_testkit::url_or_skip("NATS JetStream", "FERRY_NATS_URL", "nats://127.0.0.1:4222")?;
    let ferry = Ferry::connect(&url).await.expect("connect");
    assert!(
        !ferry.capabilities().supports(Feature::Ttl),
        "these tests are about an engine without TTL"
    );
    Some(ferry)
}

#[tokio::test]
async fn a_request_gets_its_reply_and_close_deletes_the_reply_queue() {
    let Some(ferry) = connect().await else { return };
    suite::round_trip_and_close(&ferry).await;
}

#[tokio::test]
async fn a_request_without_a_reply_times_out() {
    let Some(ferry) = connect().await else { return };
    suite::no_reply_times_out(&ferry).await;
}

#[tokio::test]
async fn a_late_reply_is_dropped_and_never_given_to_the_next_request() {
    let Some(ferry) = connect().await else { return };
    suite::a_late_reply_is_dropped_not_given_to_the_next_request(&ferry).await;
}

#[tokio::test]
async fn a_request_past_its_deadline_is_acked_without_handling() {
    let Some(ferry) = connect().await else { return };
    suite::an_expired_request_is_acked_unhandled(&ferry).await;
}

#[tokio::test]
async fn without_ttl_a_request_taken_after_its_timeout_is_skipped_by_its_deadline() {
    let Some(ferry) = connect().await else { return };
    suite::a_request_taken_after_its_timeout_is_skipped(&ferry).await;
}

#[tokio::test]
async fn many_concurrent_requests_each_get_their_own_reply() {
    let Some(ferry) = connect().await else { return };
    suite::many_concurrent_requests_get_their_own_replies(&ferry).await;
}

#[tokio::test]
async fn a_reply_to_a_closed_requester_is_dropped_and_the_request_acked() {
    let Some(ferry) = connect().await else { return };
    suite::a_reply_to_a_closed_requester_is_dropped(&ferry).await;
}

#[tokio::test]
async fn the_reply_queue_is_temporary_where_the_transport_has_them() {
    let Some(ferry) = connect().await else { return };
    suite::the_reply_queue_is_temporary_where_the_transport_has_them(&ferry).await;
}
