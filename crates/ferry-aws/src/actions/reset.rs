//! The test-only reset: `POST /moto-api/reset` deletes every queue and every topic with the
//! front ends' records of them (SQS queue records, SNS topics and subscriptions, remembered
//! receive attempts), so that a test suite written for a mock SQS/SNS server (which calls
//! this path between tests) can run against Ferry from a clean slate each time.
//!
//! **Off unless asked for** ([`crate::Sqs::with_test_reset`], `ferry serve
//! --aws-test-reset`): anyone who can reach the endpoint could wipe every queue of the
//! broker with it, Ferry's own included. Never for a real deployment.

use axum::body::Body;
use axum::extract::State;
use axum::http::{Response, StatusCode};
use serde_json::json;

use crate::{Inner, Sqs};

/// The path test suites call.
pub const PATH: &str = "/moto-api/reset";

/// Deletes every queue, dead-letter sources before their targets (the broker refuses to
/// delete a queue another dead-letters into), and forgets every queue record; then every
/// topic, with the SNS front end's topic and subscription records. Answers 200 with how
/// many queues and topics went, or 500 naming the queues and topics left.
pub async fn reset(State(sqs): State<Sqs>) -> Response<Body> {
    let (deleted, left) = delete_all(&sqs.inner).await;
    sqs.inner.receive_attempts.clear();
    let (topics_deleted, topics_left) = sqs.inner.sns.reset(&sqs.inner.broker).await;
    let (status, body) = if left.is_empty() && topics_left.is_empty() {
        (
            StatusCode::OK,
            json!({ "deleted": deleted, "topics_deleted": topics_deleted }),
        )
    } else {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({
                "deleted": deleted,
                "left": left,
                "topics_deleted": topics_deleted,
                "topics_left": topics_left,
            }),
        )
    };
    tracing::info!(
        deleted,
        left = left.len(),
        topics_deleted,
        topics_left = topics_left.len(),
        "test reset: queues and topics deleted"
    );
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("a valid response")
}

async fn delete_all(sqs: &Inner) -> (usize, Vec<String>) {
    let mut deleted = 0;
    loop {
        let names = sqs.broker.list_queues();
        let mut progress = false;
        for name in &names {
            if sqs.broker.delete_queue(name.as_str()).await.is_ok() {
                deleted += 1;
                progress = true;
            }
        }
        let left: Vec<String> = sqs
            .broker
            .list_queues()
            .iter()
            .map(|n| n.as_str().to_owned())
            .collect();
        if left.is_empty() || !progress {
            if let Err(e) = sqs.store.retain(|name| left.iter().any(|l| l == name)) {
                tracing::warn!(error = %e, "test reset: forgetting queue records failed");
            }
            return (deleted, left);
        }
    }
}
