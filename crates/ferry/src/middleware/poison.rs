//! Poison messages to the dead-letter queue: a message that can never succeed must not be
//! redelivered forever, burning retries and blocking what is behind it.
//!
//! A permanent failure is rejected at once; a transient one is rejected once the delivery
//! was the last allowed (`Received::attempt` ≥ `max_deliveries`). The reject carries the
//! error as the dead letter's last error (the transport writes the `ferry-dlq-*` headers).
//!
//! The limit is the source's own, as declared ([`PoisonLayer::from_declaration`]), or one
//! given ([`PoisonLayer::new`]). Where no limit is known (reading dead letters, which have
//! none, or a context built by hand) only permanent failures are decided here, and the
//! transport dead-letters a message failing on its last delivery (reason
//! `max_deliveries`, the handler's error as last error).
//!
//! Put it *outside* the [retry layer](super::retry): retries run first and the poison layer
//! decides only on what they could not cure.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::task::{Context, Poll};

use tower::{Layer, Service, ServiceExt};

use crate::error::{Error, Result};

use super::{HandlerContext, HandlerError, HandlerFuture};

#[derive(Debug, Clone)]
pub struct PoisonLayer {
    /// `None`: the source's declared limit, carried by each delivery's context.
    max_deliveries: Option<u32>,
    /// Whether the missing limit was logged: once per layer, not per message.
    warned: Arc<AtomicBool>,
}

impl PoisonLayer {
    /// Dead-letters on the last delivery the source allows, as it was declared. The
    /// [`Worker`](super::Worker) passes the limit on from
    /// [`Consumer::max_deliveries`](crate::Consumer::max_deliveries): the declaration made
    /// through the same [`Ferry`](crate::Ferry) handle, or as the engine keeps it. Without
    /// one (dead letters have no limit) only permanent failures are rejected here, a
    /// warning says so once, and the transport dead-letters at its own limit; give the
    /// limit with [`new`](Self::new) to decide here.
    pub fn from_declaration() -> PoisonLayer {
        PoisonLayer {
            max_deliveries: None,
            warned: Arc::default(),
        }
    }

    /// Dead-letters a message failing on delivery `max_deliveries`, whatever the
    /// declaration says: the queue's own setting when it was declared elsewhere, or lower
    /// to give up sooner than the transport would. Deliveries spent on deferrals (breaker
    /// open, claimed elsewhere) count too: below the queue's limit, a message put off that
    /// often is dead-lettered without being tried. `Invalid` when zero.
    pub fn new(max_deliveries: u32) -> Result<PoisonLayer> {
        if max_deliveries == 0 {
            return Err(Error::invalid(
                "poison max_deliveries",
                "must be at least 1",
            ));
        }
        Ok(PoisonLayer {
            max_deliveries: Some(max_deliveries),
            warned: Arc::default(),
        })
    }

    /// The limit for `ctx`: the one given, else the source's declared one.
    fn limit(&self, ctx: &HandlerContext) -> Option<u32> {
        let limit = self.max_deliveries.or(ctx.max_deliveries());
        if limit.is_none() && !self.warned.swap(true, AtomicOrdering::Relaxed) {
            tracing::warn!(
                source = ctx.source(),
                "the poison layer does not know this source's max_deliveries (dead letters \
                 have none): only permanent failures are \
                 dead-lettered here, and the transport dead-letters at its own limit; \
                 give the limit with PoisonLayer::new to decide here"
            );
        }
        limit
    }
}

impl<S> Layer<S> for PoisonLayer {
    type Service = Poison<S>;
    fn layer(&self, inner: S) -> Poison<S> {
        Poison {
            inner,
            layer: self.clone(),
        }
    }
}

/// See [`PoisonLayer`].
#[derive(Debug, Clone)]
pub struct Poison<S> {
    inner: S,
    layer: PoisonLayer,
}

impl<S> Service<HandlerContext> for Poison<S>
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
        let max = self.layer.limit(&ctx);
        Box::pin(async move {
            let attempt = ctx.attempt;
            // Delivered more often than allowed, so earlier deliveries were never settled
            // (the handler crashed the process or outlived its lease — the classic poison
            // message) or were put off by a deferral. Do not hand it to the handler again.
            if let Some(max) = max
                && attempt > max
            {
                let reason = format!(
                    "delivered {attempt} times, more than the {max} allowed; \
                     earlier deliveries were never settled (a crash or an expired lease) \
                     or were put off"
                );
                tracing::warn!(message.id = %ctx.id, %reason, "dead-lettering a poison message");
                return Err(HandlerError::Permanent { reason });
            }
            let last = max.filter(|&max| attempt >= max);
            match (inner.oneshot(ctx.clone()).await, last) {
                (Err(HandlerError::Transient { error, .. }), Some(max)) => {
                    let reason = format!("failed on delivery {attempt} of {max}: {error}");
                    tracing::warn!(message.id = %ctx.id, %reason, "dead-lettering after the last delivery");
                    Err(HandlerError::Permanent { reason })
                }
                (Err(HandlerError::Permanent { reason }), _) => {
                    tracing::warn!(message.id = %ctx.id, %reason, "dead-lettering a permanent failure");
                    Err(HandlerError::Permanent { reason })
                }
                (other, _) => other,
            }
        })
    }
}
