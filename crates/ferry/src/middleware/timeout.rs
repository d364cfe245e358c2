//! A time limit per handler call: a handler that exceeds it is cancelled (its future
//! dropped) and the attempt counts as a transient failure.
//!
//! Our own rather than `tower::timeout`: that one turns every error into a `BoxError`,
//! which would lose the transient/permanent distinction the worker settles by.

use std::task::{Context, Poll};
use std::time::Duration;

use tower::{Layer, Service, ServiceExt};

use crate::error::{Error, Result};

use super::{HandlerContext, HandlerError, HandlerFuture};

#[derive(Debug, Clone, Copy)]
pub struct TimeoutLayer {
    limit: Duration,
}

impl TimeoutLayer {
    pub fn new(limit: Duration) -> Result<TimeoutLayer> {
        if limit.is_zero() {
            return Err(Error::invalid(
                "handler timeout",
                "must be longer than zero",
            ));
        }
        Ok(TimeoutLayer { limit })
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;
    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout {
            inner,
            limit: self.limit,
        }
    }
}

/// See [`TimeoutLayer`].
#[derive(Debug, Clone)]
pub struct Timeout<S> {
    inner: S,
    limit: Duration,
}

impl<S> Service<HandlerContext> for Timeout<S>
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
        let limit = self.limit;
        Box::pin(async move {
            // Placed inside the concurrency and rate limits (see `stack`), so a wait for
            // a slot is not charged to the handler.
            match tokio::time::timeout(limit, inner.oneshot(ctx)).await {
                Ok(result) => result,
                Err(_) => Err(HandlerError::transient(format!(
                    "the handler took longer than its {limit:?} timeout"
                ))),
            }
        })
    }
}
