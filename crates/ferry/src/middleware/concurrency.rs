//! A bound on handler calls in flight at once, to protect a downstream (a database pool,
//! an API): across all the worker's deliveries, and across workers sharing one stack.
//!
//! The service is tower's own [`ConcurrencyLimit`]: its clones share one semaphore, which
//! is what the worker's clone-per-delivery needs, and it takes its permit in `poll_ready`,
//! which the layers outside call per attempt (so a retry's backoff sleep holds no permit).
//! It keeps the inner error type, so transient and permanent failures pass through. The
//! layer is ours only to refuse a bound of zero, under which no handler would ever run.

use tower::Layer;

pub use tower::limit::ConcurrencyLimit;

use crate::error::{Error, Result};

/// At most `calls` handler calls at once across every clone of the service it wraps.
#[derive(Debug, Clone, Copy)]
pub struct ConcurrencyLimitLayer {
    calls: usize,
}

impl ConcurrencyLimitLayer {
    /// `Invalid` when zero: no call would ever be let through.
    pub fn new(calls: usize) -> Result<ConcurrencyLimitLayer> {
        if calls == 0 {
            return Err(Error::invalid("concurrency limit", "must be at least 1"));
        }
        Ok(ConcurrencyLimitLayer { calls })
    }

    pub fn calls(&self) -> usize {
        self.calls
    }
}

impl<S> Layer<S> for ConcurrencyLimitLayer {
    type Service = ConcurrencyLimit<S>;
    fn layer(&self, inner: S) -> ConcurrencyLimit<S> {
        ConcurrencyLimit::new(inner, self.calls)
    }
}
