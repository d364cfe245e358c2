//! [`stack()`]: the usual layers around a handler, in the documented order (see the
//! module's page), each optional.
//!
//! The builder takes layers already built, so it cannot fail: each layer's constructor
//! refuses its own bad settings (a zero timeout, a concurrency limit of zero) with
//! [`Error::Invalid`](crate::Error::Invalid), where the mistake is made.

use tower::Layer;
use tower::util::BoxCloneService;

use super::breaker::BreakerLayer;
use super::concurrency::ConcurrencyLimitLayer;
use super::dedup::DedupLayer;
use super::metrics::MetricsLayer;
use super::panic::CatchPanicLayer;
use super::poison::PoisonLayer;
use super::rate_limit::RateLimitLayer;
use super::retry::RetryLayer;
use super::timeout::TimeoutLayer;
use super::trace::TraceLayer;
use super::{HandlerContext, HandlerError};

/// A built stack: any handler with any layers, as one type.
pub type BoxHandler = BoxCloneService<HandlerContext, (), HandlerError>;

/// A stack with tracing, metrics and panic catching on, everything else off.
pub fn stack() -> StackBuilder {
    StackBuilder::default()
}

/// Chooses the layers; [`build`](Self::build) puts them in the documented order whatever
/// order they were chosen in.
#[derive(Debug, Clone)]
pub struct StackBuilder {
    trace: bool,
    metrics: bool,
    poison: Option<PoisonLayer>,
    dedup: Option<DedupLayer>,
    breaker: Option<BreakerLayer>,
    retry: Option<RetryLayer>,
    concurrency: Option<ConcurrencyLimitLayer>,
    rate: Option<RateLimitLayer>,
    timeout: Option<TimeoutLayer>,
    catch_panics: bool,
}

impl Default for StackBuilder {
    fn default() -> Self {
        StackBuilder {
            trace: true,
            metrics: true,
            poison: None,
            dedup: None,
            breaker: None,
            retry: None,
            concurrency: None,
            rate: None,
            timeout: None,
            catch_panics: true,
        }
    }
}

impl StackBuilder {
    pub fn without_tracing(mut self) -> Self {
        self.trace = false;
        self
    }
    pub fn without_metrics(mut self) -> Self {
        self.metrics = false;
        self
    }
    /// Lets a panic unwind the handler's task: its delivery then comes back only when its
    /// lease ends.
    pub fn without_panic_catching(mut self) -> Self {
        self.catch_panics = false;
        self
    }
    /// Dead-letters poison messages (see [`PoisonLayer`]).
    pub fn poison(mut self, layer: PoisonLayer) -> Self {
        self.poison = Some(layer);
        self
    }
    pub fn dedup(mut self, layer: DedupLayer) -> Self {
        self.dedup = Some(layer);
        self
    }
    pub fn breaker(mut self, layer: BreakerLayer) -> Self {
        self.breaker = Some(layer);
        self
    }
    pub fn retry(mut self, layer: RetryLayer) -> Self {
        self.retry = Some(layer);
        self
    }
    /// At most `layer.calls()` handler calls at once across every clone of the built
    /// stack.
    pub fn concurrency_limit(mut self, layer: ConcurrencyLimitLayer) -> Self {
        self.concurrency = Some(layer);
        self
    }
    pub fn rate_limit(mut self, layer: RateLimitLayer) -> Self {
        self.rate = Some(layer);
        self
    }
    pub fn timeout(mut self, layer: TimeoutLayer) -> Self {
        self.timeout = Some(layer);
        self
    }

    /// The stack around `handler`, innermost first: panic, timeout, rate limit,
    /// concurrency limit, retry, breaker, dedup, poison, metrics, trace.
    pub fn build<S>(self, handler: S) -> BoxHandler
    where
        S: tower::Service<HandlerContext, Response = (), Error = HandlerError>
            + Clone
            + Send
            + 'static,
        S::Future: Send + 'static,
    {
        let mut svc = BoxCloneService::new(handler);
        if self.catch_panics {
            svc = BoxCloneService::new(CatchPanicLayer.layer(svc));
        }
        if let Some(layer) = self.timeout {
            svc = BoxCloneService::new(layer.layer(svc));
        }
        if let Some(layer) = self.rate {
            svc = BoxCloneService::new(layer.layer(svc));
        }
        if let Some(layer) = self.concurrency {
            svc = BoxCloneService::new(layer.layer(svc));
        }
        if let Some(layer) = self.retry {
            svc = BoxCloneService::new(layer.layer(svc));
        }
        if let Some(layer) = self.breaker {
            svc = BoxCloneService::new(layer.layer(svc));
        }
        if let Some(layer) = self.dedup {
            svc = BoxCloneService::new(layer.layer(svc));
        }
        if let Some(layer) = self.poison {
            svc = BoxCloneService::new(layer.layer(svc));
        }
        if self.metrics {
            svc = BoxCloneService::new(MetricsLayer.layer(svc));
        }
        if self.trace {
            svc = BoxCloneService::new(TraceLayer.layer(svc));
        }
        svc
    }
}
