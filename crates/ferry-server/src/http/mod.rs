//! The broker over HTTP/1.1 and JSON, for `curl` and scripts: admin, publish, receive and
//! settle, dead letters, and the operational endpoints `/healthz`, `/readyz` and
//! `/metrics`.
//!
//! | method | path | body → reply |
//! | --- | --- | --- |
//! | `POST` | `/v1/queues` | `{"name", "spec"?}` → 201 `{"name"}` |
//! | `GET` | `/v1/queues` | → `{"names": [..]}` |
//! | `GET` | `/v1/queues/{queue}` | → queue info (spec and stats) |
//! | `DELETE` | `/v1/queues/{queue}` | → 204, also with messages in flight (their leases end with the queue) |
//! | `POST` | `/v1/queues/{queue}/messages` | `{"messages": [..]}` → `{"ids": [..]}` |
//! | `POST` | `/v1/queues/{queue}/receive` | `{"consumer", "max"?, "lease_ms"?, "wait_ms"?}` → `{"deliveries": [..]}` |
//! | `POST` | `/v1/queues/{queue}/messages/{seq}/ack` | `{"token"}` → `{"already_settled"}` |
//! | `POST` | `/v1/queues/{queue}/messages/{seq}/nack` | `{"token", "delay_ms"?, "error"?}` → `{"retry_at_ms"}` or `{"dead_lettered"}` |
//! | `POST` | `/v1/queues/{queue}/messages/{seq}/reject` | `{"token", "reason"}` → `{}` |
//! | `POST` | `/v1/queues/{queue}/messages/{seq}/extend` | `{"token", "by_ms"}` → `{"lease_until_ms"}` |
//! | `GET` | `/v1/queues/{dlq}/dead-letters` | query `reason`, `header_name`+`header_value`, `older_than_ms`, `newer_than_ms`, `after_seq`, `max` → `{"letters": [..], "next_after_seq"}`, redacted header values as `***` ([`crate::redaction`]) |
//! | `POST` | `/v1/queues/{dlq}/redrive` | `{"target"?, "filter"?, "max_messages"?, "rate_per_sec"?}` → `{"moved", "skipped"}` |
//! | `POST` | `/v1/topics` | `{"name", "spec"?}` → 201 `{"name"}` |
//! | `GET` | `/v1/topics` | → `{"names": [..]}` |
//! | `GET` | `/v1/topics/{topic}` | → topic info |
//! | `DELETE` | `/v1/topics/{topic}` | → 204 |
//! | `POST` | `/v1/topics/{topic}/messages` | `{"messages", "partition"?, "producer_id"?, "first_sequence"?}` → `{"positions": [..]}` |
//! | `GET` | `/v1/topics/{topic}/groups/{group}` | → group info with lag per partition |
//! | `POST` | `/v1/subscriptions` | `{"name", "spec": {"topic", ..}}` → 201 `{"name"}` |
//! | `GET` | `/v1/subscriptions/{name}` | → subscription info |
//! | `DELETE` | `/v1/subscriptions/{name}` | → 204 |
//! | `GET` | `/healthz` | 200 while the process serves |
//! | `GET` | `/readyz` | 200 when the broker takes traffic; 503 once shutdown began |
//! | `GET` | `/metrics` | Prometheus text format (see `docs/metrics.md`) |
//!
//! ```sh
//! curl -s localhost:7071/v1/queues -d '{"name": "jobs", "spec": {"retry": {"max_deliveries": 5}}}'
//! curl -s localhost:7071/v1/queues/jobs/messages -d '{"messages": [{"payload": "hello", "delay_ms": 1000}]}'
//! curl -s localhost:7071/v1/queues/jobs/receive -d '{"consumer": "w1", "max": 10, "wait_ms": 5000}'
//! curl -s localhost:7071/v1/queues/jobs/messages/0/ack -d '{"token": 1099511627776}'
//! curl -s 'localhost:7071/v1/queues/jobs.dlq/dead-letters?reason=max_deliveries&max=20'
//! ```
//!
//! Specs and messages take the shapes of `ferry.v1`'s messages, with enums as lower-case
//! words (`"ordering": "key_shared"`) and every field optional but the names; unknown
//! fields are refused. Payloads and keys are UTF-8 text (`payload`, `key`) or base64
//! (`payload_base64`, `key_base64`); deliveries come back the same way, as text when it is
//! valid UTF-8. A receive's `max` is 1 to [`MAX_RECEIVE`] (unset: 1), its `lease_ms` 1 ms to
//! 12 hours (unset: the queue's); `wait_ms` is cut to [`MAX_WAIT`]. Out-of-range numbers are
//! refused, never clamped — except the wait, which only bounds how long an empty poll lasts.
//! Dead-letter pages go on from `next_after_seq`.
//!
//! Failures answer `{"error", "code"}` with a status from the kind of failure (see
//! [`error`]). Every request is checked whole before the broker sees it, so a refused
//! request changes nothing. With tokens configured ([`crate::auth`]), requests but the
//! operational endpoints send `Authorization: Bearer <token>`: 401 `unauthenticated`
//! without a known one, 403 `forbidden` without the permission, 413 `batch_too_large`
//! over the batch limit, 429 `over_quota` over the token's publish rate. A publish on a
//! full disk is 507 `disk_full` (gRPC: `RESOURCE_EXHAUSTED`) and stores nothing; receives
//! and acks keep working, and publishes resume once space is freed.

mod admin;
mod dead_letters;
pub mod error;
mod message;
mod messaging;
mod path;
pub mod prometheus;
mod spec;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::{get, post};
use bytes::Bytes;
use ferry_broker::Broker;
use serde::de::DeserializeOwned;

use crate::auth::{Action, Caller, Gate};
use crate::metrics::Meters;
use crate::redaction::Redaction;
use error::ApiError;

pub use message::{Delivery, GroupInfo, QueueInfo, SubscriptionInfo, TopicInfo};
pub use messaging::{MAX_RECEIVE, MAX_WAIT};
pub use spec::{QueueSpec, SubscriptionSpec, TopicSpec};

/// What every handler shares.
#[derive(Clone)]
pub struct Shared {
    pub broker: Broker,
    pub meters: Arc<Meters>,
    /// Tokens, permissions and limits every call passes first.
    pub gate: Arc<Gate>,
    /// Headers whose values dead-letter peeks mask.
    pub redaction: Arc<Redaction>,
    /// Set when shutdown begins: `/readyz` turns 503 so balancers stop sending.
    pub shutting_down: Arc<AtomicBool>,
}

impl Shared {
    /// The caller presenting the request's `authorization` header.
    pub(crate) fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let value = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        Ok(self.gate.caller(value)?)
    }

    /// The caller, if it may do `action` on `name`.
    pub(crate) fn allow(
        &self,
        headers: &HeaderMap,
        action: Action,
        name: &str,
    ) -> Result<Caller, ApiError> {
        let who = self.caller(headers)?;
        self.gate.allow(who, action, name)?;
        Ok(who)
    }

    /// The caller, if it may read `queue`: `consume` on an ordinary queue, `dead_letters`
    /// on a dead-letter queue (see [`Gate::allow_read`]).
    pub(crate) fn allow_read(&self, headers: &HeaderMap, queue: &str) -> Result<Caller, ApiError> {
        let who = self.caller(headers)?;
        self.gate
            .allow_read(who, queue, |q| self.broker.is_dead_letter_queue(q))?;
        Ok(who)
    }
}

/// A request body as `T`, or the API's own 400 saying what is wrong with the JSON. The
/// content type is not checked: `curl -d` sends form-encoded by default.
pub(crate) fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        body
    };
    serde_json::from_slice(body).map_err(ApiError::malformed_json)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(shared): State<Shared>) -> (StatusCode, &'static str) {
    if shared.shutting_down.load(Ordering::SeqCst) {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
    } else {
        (StatusCode::OK, "ready\n")
    }
}

async fn wrong_method() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not take that method; see the HTTP API table in ferry-server's docs",
    )
}

async fn no_route() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_route",
        "no such endpoint; see the HTTP API table in ferry-server's docs",
    )
}

/// The HTTP API, taking request bodies up to `max_body` bytes.
pub fn router(shared: Shared, max_body: usize) -> Router {
    use admin::*;
    use dead_letters::*;
    use messaging::*;
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus::scrape))
        .route("/v1/queues", post(create_queue).get(list_queues))
        .route(
            "/v1/queues/{queue}",
            get(describe_queue).delete(delete_queue),
        )
        .route("/v1/queues/{queue}/messages", post(publish))
        .route("/v1/queues/{queue}/receive", post(receive))
        .route("/v1/queues/{queue}/messages/{seq}/{outcome}", post(settle))
        .route("/v1/queues/{queue}/dead-letters", get(peek))
        .route("/v1/queues/{queue}/redrive", post(redrive))
        .route("/v1/topics", post(create_topic).get(list_topics))
        .route(
            "/v1/topics/{topic}",
            get(describe_topic).delete(delete_topic),
        )
        .route("/v1/topics/{topic}/messages", post(publish_to_topic))
        .route("/v1/topics/{topic}/groups/{group}", get(describe_group))
        .route("/v1/subscriptions", post(create_subscription))
        .route(
            "/v1/subscriptions/{name}",
            get(describe_subscription).delete(delete_subscription),
        )
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(shared)
}
