//! A bound on handler calls per unit of time, to protect a downstream with a quota: calls
//! are spaced evenly, `per / count` apart.
//!
//! Our own rather than `tower::limit::RateLimit`: tower's keeps its budget in each clone,
//! so the worker's clone-per-delivery would hand every delivery a fresh budget and limit
//! nothing. Here the clones share one schedule.

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

use crate::error::{Error, Result};

use super::{HandlerContext, HandlerError, HandlerFuture};

/// `count` calls per `per`, evenly spaced; every stack built from one layer (and its
/// clones) shares the schedule.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    interval: Duration,
    next_slot: Arc<Mutex<Option<Instant>>>,
}

impl RateLimitLayer {
    pub fn new(count: u32, per: Duration) -> Result<RateLimitLayer> {
        if count == 0 || per.is_zero() {
            return Err(Error::invalid(
                "rate limit",
                "needs at least one call per period longer than zero",
            ));
        }
        Ok(RateLimitLayer {
            interval: per / count,
            next_slot: Arc::new(Mutex::new(None)),
        })
    }

    /// Books the next free slot: the time this call may start.
    fn book(&self) -> Instant {
        let now = Instant::now();
        let mut next = self
            .next_slot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A slot left unused in the past is not banked: no bursts after a quiet spell.
        let slot = next.map_or(now, |next| next.max(now));
        *next = Some(slot + self.interval);
        slot
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            layer: self.clone(),
        }
    }
}

/// See [`RateLimitLayer`].
#[derive(Debug, Clone)]
pub struct RateLimit<S> {
    inner: S,
    layer: RateLimitLayer,
}

impl<S> Service<HandlerContext> for RateLimit<S>
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
        let slot = self.layer.book();
        Box::pin(async move {
            tokio::time::sleep_until(slot).await;
            inner.oneshot(ctx).await
        })
    }
}
