//! Skips messages already processed, over a [`DedupStore`]: for handlers whose effects are
//! not in one database transaction with a processed-record (an email, an API call).
//!
//! Per delivery: [`DedupStore::begin`] on the key — `Done`: acked without calling the
//! handler; `InProgress` (another consumer holds it): put off; `Fresh`: the handler runs,
//! then success → [`complete`](DedupStore::complete), failure →
//! [`abandon`](DedupStore::abandon) so a retry may run.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::{Layer, Service, ServiceExt};

use crate::error::{Error, Result};
use crate::inbox::{Claim, DedupStore, DedupWindow};

use super::{HandlerContext, HandlerError, HandlerFuture};

/// The dedup key of a message.
pub type KeyFn = Arc<dyn Fn(&HandlerContext) -> String + Send + Sync>;

#[derive(Clone)]
pub struct DedupLayer {
    store: Arc<dyn DedupStore>,
    key: KeyFn,
    hold: Duration,
    window: Duration,
    retry_in_progress_after: Duration,
}

impl std::fmt::Debug for DedupLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DedupLayer")
            .field("hold", &self.hold)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl DedupLayer {
    /// Keys by source and message id (see [`default_key`]); claims held 5 minutes,
    /// records kept 24 hours, a message claimed elsewhere put off for 5 seconds.
    pub fn new(store: Arc<dyn DedupStore>) -> DedupLayer {
        DedupLayer {
            store,
            key: Arc::new(default_key),
            hold: Duration::from_secs(5 * 60),
            window: DedupWindow::default().duration(),
            retry_in_progress_after: Duration::from_secs(5),
        }
    }

    /// Keys by a business key instead (an order number, an idempotency key the producer
    /// set): duplicates published under different ids are caught too.
    pub fn key(mut self, key: impl Fn(&HandlerContext) -> String + Send + Sync + 'static) -> Self {
        self.key = Arc::new(key);
        self
    }

    /// How long a claim lasts if the handler never reports (a crash): longer than the
    /// handler (with its in-process retries) can take, or a redelivery runs it twice.
    /// `Invalid` when zero: the claim would lapse at once and guard nothing.
    pub fn hold(mut self, hold: Duration) -> Result<Self> {
        if hold.is_zero() {
            return Err(Error::invalid("dedup hold", "must be longer than zero"));
        }
        self.hold = hold;
        Ok(self)
    }

    /// How long a processed message is remembered: a [`DedupWindow`], so it is either
    /// checked against the queue's delivery policy ([`DedupWindow::checked`]) or vouched
    /// for and non-zero ([`DedupWindow::fixed`]) — never a bare duration shorter than the
    /// redeliveries it must outlive.
    pub fn window(mut self, window: DedupWindow) -> Self {
        self.window = window.duration();
        self
    }

    /// How long a message claimed by another consumer is put off. `Invalid` when zero: the
    /// message would come straight back, spending a delivery on each round trip.
    pub fn retry_in_progress_after(mut self, delay: Duration) -> Result<Self> {
        if delay.is_zero() {
            return Err(Error::invalid(
                "dedup retry_in_progress_after",
                "must be longer than zero",
            ));
        }
        self.retry_in_progress_after = delay;
        Ok(self)
    }
}

/// `source:id` — the source is part of the key because every subscription of a topic gets
/// the same message id, and each must process it once.
pub fn default_key(ctx: &HandlerContext) -> String {
    format!("{}:{}", ctx.source(), ctx.id)
}

impl<S> Layer<S> for DedupLayer {
    type Service = Dedup<S>;
    fn layer(&self, inner: S) -> Dedup<S> {
        Dedup {
            inner,
            layer: self.clone(),
        }
    }
}

/// See [`DedupLayer`].
#[derive(Clone)]
pub struct Dedup<S> {
    inner: S,
    layer: DedupLayer,
}

impl<S> Service<HandlerContext> for Dedup<S>
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
        let layer = self.layer.clone();
        Box::pin(async move {
            let key = (layer.key)(&ctx);
            let claim = layer.store.begin(&key, layer.hold).await.map_err(|e| {
                HandlerError::transient(format!("the dedup store did not answer: {e}"))
            })?;
            match claim {
                Claim::Done => {
                    tracing::debug!(%key, "already processed; acked without handling");
                    return Ok(());
                }
                Claim::InProgress => {
                    return Err(HandlerError::deferred(
                        format!("`{key}` is being processed by another consumer"),
                        layer.retry_in_progress_after,
                    ));
                }
                Claim::Fresh => {}
            }
            let result = inner.oneshot(ctx).await;
            if result.is_ok() {
                // The effect happened: ack even if the record cannot be written. The
                // message is consumed either way; only a later duplicate could slip
                // through, whereas a nack would surely repeat the effect.
                if let Err(e) = layer.store.complete(&key, layer.window).await {
                    tracing::warn!(%key, error = %e, "processed, but the dedup record was not written");
                }
            } else if let Err(e) = layer.store.abandon(&key).await {
                // The claim lapses after `hold`; until then a redelivery is put off.
                tracing::warn!(%key, error = %e, "could not drop the dedup claim");
            }
            result
        })
    }
}
