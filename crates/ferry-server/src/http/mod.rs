//! The broker over HTTP/1.1 and JSON, for `curl` and scripts: the handlers of the API the
//! crate docs' table lists, and the operational endpoints `/healthz`, `/readyz` and
//! `/metrics`.

mod admin;
mod browse;
pub mod console;
mod dead_letters;
mod error;
mod message;
mod messaging;
mod offsets;
mod parked;
mod path;
mod prometheus;
mod purge;
mod schema_registry;
mod spec;
mod temporary;
mod ui;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use bytes::Bytes;
use ferry_broker::Broker;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::auth::{Action, Caller, Gate};
use crate::metrics::Meters;
use crate::redaction::Redaction;
use error::ApiError;

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
    /// `/metrics` is served without a token even when tokens are configured.
    pub open_metrics: bool,
    /// The most message bytes one peek answers with.
    pub max_read_bytes: usize,
    /// The console's settings, sample history, redrive jobs and event stream.
    pub console: Arc<console::Console>,
    /// Says when serving stops, so that endless responses (the console's event stream)
    /// end and let shutdown finish; `None` for a router a program serves itself.
    pub stop: Option<watch::Receiver<bool>>,
    /// Served under `/schema-registry` when set (see `schema_registry`).
    pub schema_registry: Option<Arc<ferry_schema_registry::SchemaRegistry>>,
}

impl Shared {
    /// The caller presenting the request's `authorization` header.
    pub(crate) fn caller(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        Ok(self.gate.caller(authorization(headers))?)
    }

    /// The caller, if it may do `action` on `name`.
    pub(crate) fn allow(
        &self,
        headers: &HeaderMap,
        action: Action,
        name: &str,
    ) -> Result<Caller, ApiError> {
        Ok(self.gate.authorize(authorization(headers), action, name)?)
    }

    /// The caller, if it may read `queue`: `consume` on an ordinary queue, `dead_letters`
    /// on a dead-letter queue (see [`Gate::allow_read`]).
    pub(crate) fn allow_read(&self, headers: &HeaderMap, queue: &str) -> Result<Caller, ApiError> {
        Ok(self
            .gate
            .authorize_read(authorization(headers), &self.broker, queue)?)
    }
}

fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
}

/// Refuses a request without a valid token before anything reads its body: a handler's
/// body extractor runs before the handler, so a check in the handler would come only
/// after up to `max_body` bytes (24 MiB by default) were taken in from anyone. What the
/// token may do depends on the names in the path and the body, so each handler checks
/// the permission itself.
async fn authenticate(State(s): State<Shared>, request: Request, next: Next) -> Response {
    match s.caller(request.headers()) {
        Ok(_) => next.run(request).await,
        Err(unauthenticated) => unauthenticated.into_response(),
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
    let api = Router::new()
        .route("/v1/queues", post(create_queue).get(list_queues))
        .route(
            "/v1/queues/{queue}",
            get(describe_queue).put(update_queue).delete(delete_queue),
        )
        .route(
            "/v1/queues/{queue}/messages",
            post(publish).get(browse::browse),
        )
        .route("/v1/queues/{queue}/receive", post(receive))
        .route("/v1/queues/{queue}/messages/{seq}/{outcome}", post(settle))
        .route("/v1/queues/{queue}/dead-letters", get(peek))
        .route("/v1/queues/{queue}/redrive", post(redrive))
        .route(
            "/v1/queues/{queue}/redrive-jobs",
            post(console::redrive_jobs::start_job),
        )
        .route("/v1/redrive-jobs", get(console::redrive_jobs::list_jobs))
        .route("/v1/redrive-jobs/{id}", get(console::redrive_jobs::get_job))
        .route("/v1/queues/{queue}/purge", post(purge::purge))
        .route("/v1/queues/{queue}/parked", get(parked::list_parked))
        .route(
            "/v1/queues/{queue}/parked/{key}",
            put(parked::park).delete(parked::unpark),
        )
        .route(
            "/v1/temporary-queues",
            post(temporary::create_temporary_queue),
        )
        .route("/v1/topics", post(create_topic).get(list_topics))
        .route(
            "/v1/topics/{topic}",
            get(describe_topic).put(update_topic).delete(delete_topic),
        )
        .route("/v1/topics/{topic}/messages", post(publish_to_topic))
        .route("/v1/topics/{topic}/groups/{group}", get(describe_group))
        .route(
            "/v1/topics/{topic}/groups/{group}/offsets",
            post(offsets::reset_offsets),
        )
        .route("/v1/console/overview", get(console::overview::overview))
        .route(
            "/v1/console/queues/{queue}/history",
            get(console::history::queue_history),
        )
        .route(
            "/v1/console/topics/{topic}/history",
            get(console::history::topic_history),
        )
        .route("/v1/console/events", get(console::events::events))
        .route("/v1/console/topology", get(console::topology::topology))
        .route("/v1/subscriptions", post(create_subscription))
        .route(
            "/v1/subscriptions/{name}",
            get(describe_subscription).delete(delete_subscription),
        )
        .route_layer(middleware::from_fn_with_state(shared.clone(), authenticate));
    // The operational endpoints need no token (`/metrics` checks its own, see
    // `prometheus::scrape`): probes and scrapers do not hold API tokens.
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus::scrape))
        .merge(ui::router())
        .merge(api)
        .merge(schema_registry::router(&shared))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(shared)
}
