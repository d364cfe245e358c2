//! Poison messages to the dead-letter queue: a message that can never succeed must not be
//! redelivered forever, burning retries and blocking what is behind it.
//!
//! A permanent failure is rejected at once; a transient one is rejected once the delivery
//! was the last allowed (`Received::attempt` ≥ `max_deliveries`). The reject carries the
//! error as the dead letter's last error (the transport writes the `ferry-dlq-*` headers).
//!
//! Put it *outside* the [retry layer](super::retry): retries run first and the poison layer
//! decides only on what they could not cure.

use std::task::{Context, Poll};

use tower::{Layer, Service, ServiceExt};

use crate::error::{Error, Result};

use super::{HandlerContext, HandlerError, HandlerFuture};

#[derive(Debug, Clone, Copy)]
pub struct PoisonLayer {
    max_deliveries: u32,
}

impl PoisonLayer {
    /// Dead-letters a message failing on delivery `max_deliveries` (the queue's own
    /// setting, or lower to give up sooner than the transport would). Deliveries spent on
    /// deferrals (breaker open, claimed elsewhere) count too: below the queue's limit, a
    /// message put off that often is dead-lettered without being tried.
    pub fn new(max_deliveries: u32) -> Result<PoisonLayer> {
        if max_deliveries == 0 {
            return Err(Error::invalid(
                "poison max_deliveries",
                "must be at least 1",
            ));
        }
        Ok(PoisonLayer { max_deliveries })
    }
}

impl<S> Layer<S> for PoisonLayer {
    type Service = Poison<S>;
    fn layer(&self, inner: S) -> Poison<S> {
        Poison {
            inner,
            layer: *self,
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
        let max = self.layer.max_deliveries;
        Box::pin(async move {
            let attempt = ctx.attempt;
            // Delivered more often than allowed, so earlier deliveries were never settled
            // (the handler crashed the process or outlived its lease — the classic poison
            // message) or were put off by a deferral. Do not hand it to the handler again.
            if attempt > max {
                let reason = format!(
                    "delivered {attempt} times, more than the {max} allowed; \
                     earlier deliveries were never settled (a crash or an expired lease) \
                     or were put off"
                );
                tracing::warn!(message.id = %ctx.id, %reason, "dead-lettering a poison message");
                return Err(HandlerError::Permanent { reason });
            }
            match inner.oneshot(ctx.clone()).await {
                Err(HandlerError::Transient { error, .. }) if attempt >= max => {
                    let reason = format!("failed on delivery {attempt} of {max}: {error}");
                    tracing::warn!(message.id = %ctx.id, %reason, "dead-lettering after the last delivery");
                    Err(HandlerError::Permanent { reason })
                }
                Err(HandlerError::Permanent { reason }) => {
                    tracing::warn!(message.id = %ctx.id, %reason, "dead-lettering a permanent failure");
                    Err(HandlerError::Permanent { reason })
                }
                other => other,
            }
        })
    }
}
