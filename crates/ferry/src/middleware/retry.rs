//! In-process retries with exponential backoff and jitter, for transports without native
//! backoff (or to ride out a blip without a round trip through the broker). After the
//! attempts are used up the last failure is passed on — to the poison layer, then to the
//! worker, which nacks it so the transport's own retry policy takes over.

use std::task::{Context, Poll};

use tower::{Layer, Service, ServiceExt};

use crate::error::{Error, Result};
use crate::spec::{Backoff, DeliveryPolicy};

use super::{HandlerContext, HandlerError, HandlerFuture};

/// Where the jitter comes from: a value in `[0, 1)`. Tests pin it.
pub type JitterSource = fn() -> f64;

/// Retries transient failures up to `attempts` calls in all, sleeping
/// [`Backoff::delay`] between them.
#[derive(Debug, Clone)]
pub struct RetryLayer {
    attempts: u32,
    backoff: Backoff,
    jitter: JitterSource,
}

impl RetryLayer {
    /// `attempts` calls in all (1 = no retry), `backoff` between them.
    pub fn new(attempts: u32, backoff: Backoff) -> Result<RetryLayer> {
        if attempts == 0 {
            return Err(Error::invalid("retry attempts", "must be at least 1"));
        }
        // The transports' rule for a backoff, so a retry layer and a queue accept the same
        // ones; only the name in the error says which was refused.
        DeliveryPolicy {
            backoff,
            ..DeliveryPolicy::default()
        }
        .validate()
        .map_err(|e| match e {
            Error::Invalid { what, problem } => Error::invalid(format!("retry {what}"), problem),
            other => other,
        })?;
        Ok(RetryLayer {
            attempts,
            backoff,
            jitter: fastrand::f64,
        })
    }

    /// Draws jitter from `source` instead of a random number generator.
    pub fn jitter_source(mut self, source: JitterSource) -> Self {
        self.jitter = source;
        self
    }

    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;
    fn layer(&self, inner: S) -> Retry<S> {
        Retry {
            inner,
            layer: self.clone(),
        }
    }
}

/// See [`RetryLayer`].
#[derive(Debug, Clone)]
pub struct Retry<S> {
    inner: S,
    layer: RetryLayer,
}

impl<S> Service<HandlerContext> for Retry<S>
where
    S: Service<HandlerContext, Response = (), Error = HandlerError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = ();
    type Error = HandlerError;
    type Future = HandlerFuture;

    // Readiness is awaited per attempt inside the call: an inner limit must not be held
    // across the backoff sleep.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), HandlerError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, ctx: HandlerContext) -> HandlerFuture {
        let inner = self.inner.clone();
        let RetryLayer {
            attempts,
            backoff,
            jitter,
        } = self.layer.clone();
        Box::pin(async move {
            let mut attempt = 1;
            loop {
                match inner.clone().oneshot(ctx.clone()).await {
                    // A delay the handler chose is the broker's to keep, not ours to sleep.
                    Err(HandlerError::Transient { error, delay: None }) if attempt < attempts => {
                        let wait = backoff.delay(attempt, jitter());
                        tracing::debug!(attempt, ?wait, %error, "retrying in process");
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                    }
                    other => return other,
                }
            }
        })
    }
}
