//! Handler metrics through the `metrics` facade (a no-op until the application installs a
//! recorder, e.g. a Prometheus exporter), all labelled by `source`:
//!
//! - `ferry_handler_handled_total` (counter), also by `outcome`: `ack`, `retry`, `reject`,
//!   `deferred` — the settlement the worker will make;
//! - `ferry_handler_duration_seconds` (histogram): time through the stack inside this
//!   layer, retries included;
//! - `ferry_handler_in_flight` (gauge): messages inside this layer now.

use std::task::{Context, Poll};
use std::time::Instant;

use tower::{Layer, Service, ServiceExt};

use super::{HandlerContext, HandlerError, HandlerFuture};

pub const HANDLED: &str = "ferry_handler_handled_total";
pub const DURATION: &str = "ferry_handler_duration_seconds";
pub const IN_FLIGHT: &str = "ferry_handler_in_flight";

#[derive(Debug, Clone, Copy, Default)]
pub struct MetricsLayer;

impl<S> Layer<S> for MetricsLayer {
    type Service = Metrics<S>;
    fn layer(&self, inner: S) -> Metrics<S> {
        Metrics { inner }
    }
}

/// See [`MetricsLayer`].
#[derive(Debug, Clone)]
pub struct Metrics<S> {
    inner: S,
}

impl<S> Service<HandlerContext> for Metrics<S>
where
    S: Service<HandlerContext, Response = (), Error = HandlerError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = ();
    type Error = HandlerError;
    type Future = HandlerFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), HandlerError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, ctx: HandlerContext) -> HandlerFuture {
        let inner = self.inner.clone();
        let source = ctx.source().to_owned();
        Box::pin(async move {
            let in_flight = InFlight::enter(&source);
            let started = Instant::now();
            let result = inner.oneshot(ctx).await;
            let outcome = match &result {
                Ok(()) => "ack",
                Err(e) => e.outcome(),
            };
            metrics::histogram!(DURATION, "source" => source.clone())
                .record(started.elapsed().as_secs_f64());
            metrics::counter!(HANDLED, "source" => source.clone(), "outcome" => outcome)
                .increment(1);
            drop(in_flight);
            result
        })
    }
}

/// Keeps the in-flight gauge right when a handling is dropped half-way (shutdown).
struct InFlight {
    gauge: metrics::Gauge,
}

impl InFlight {
    fn enter(source: &str) -> InFlight {
        let gauge = metrics::gauge!(IN_FLIGHT, "source" => source.to_owned());
        gauge.increment(1.0);
        InFlight { gauge }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.gauge.decrement(1.0);
    }
}
