//! A circuit breaker around the handler: after enough failures in a row the downstream is
//! taken for dead, and deliveries are put off (nacked with a delay about the breaker's
//! remaining open time) instead of being handed to a handler that would fail them — they
//! wait safely in the queue and do not count as the handler's failures.
//!
//! Results it counts: a transient failure is a failure; success and a permanent failure
//! (the downstream answered; the message was bad) are successes; a deferral from inside
//! (the handler declined to try) closes a half-open trial as a success too, since nothing
//! says the downstream is still down.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::{Layer, Service, ServiceExt};

use crate::breaker::{BreakerState, CircuitBreaker};
use crate::error::{Error, Result};

use super::{HandlerContext, HandlerError, HandlerFuture};

/// Guards the handler with `breaker`; share one breaker among the stacks calling one
/// downstream.
#[derive(Debug, Clone)]
pub struct BreakerLayer {
    breaker: Arc<CircuitBreaker>,
}

impl BreakerLayer {
    /// `Invalid` when the breaker stays open for no time: it would put deliveries off for
    /// none, and each would come straight back, spending a delivery per round trip.
    pub fn new(breaker: Arc<CircuitBreaker>) -> Result<BreakerLayer> {
        if breaker.config().open_for.is_zero() {
            return Err(Error::invalid(
                "breaker open_for",
                "must be longer than zero",
            ));
        }
        Ok(BreakerLayer { breaker })
    }
}

impl<S> Layer<S> for BreakerLayer {
    type Service = Breaker<S>;
    fn layer(&self, inner: S) -> Breaker<S> {
        Breaker {
            inner,
            breaker: self.breaker.clone(),
        }
    }
}

/// See [`BreakerLayer`].
#[derive(Debug, Clone)]
pub struct Breaker<S> {
    inner: S,
    breaker: Arc<CircuitBreaker>,
}

impl<S> Service<HandlerContext> for Breaker<S>
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
        let breaker = self.breaker.clone();
        Box::pin(async move {
            if !breaker.allow() {
                return Err(HandlerError::deferred(
                    "circuit breaker open",
                    put_off_for(&breaker),
                ));
            }
            let mut report = Report {
                breaker: &breaker,
                done: false,
            };
            let result = inner.oneshot(ctx).await;
            match &result {
                Err(HandlerError::Transient { .. }) => breaker.record_failure(),
                Ok(()) | Err(HandlerError::Permanent { .. } | HandlerError::Deferred { .. }) => {
                    breaker.record_success()
                }
            }
            report.done = true;
            result
        })
    }
}

/// How long a refused delivery waits: what is left of the open time, or — while a
/// half-open trial is under way and its end is unknown — one open period.
fn put_off_for(breaker: &CircuitBreaker) -> Duration {
    match breaker.state() {
        BreakerState::Open { .. } => breaker.wait().max(Duration::from_millis(1)),
        BreakerState::HalfOpen | BreakerState::Closed => breaker.config().open_for,
    }
}

/// Counts a call dropped before it answered (the worker stopped, an outer timeout) as a
/// failure: a half-open breaker whose trial never reports would refuse calls forever.
struct Report<'a> {
    breaker: &'a CircuitBreaker,
    done: bool,
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.breaker.record_failure();
        }
    }
}
