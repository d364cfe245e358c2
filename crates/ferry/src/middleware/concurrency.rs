//! A bound on handler calls in flight at once, to protect a downstream (a database pool,
//! an API): across all the worker's deliveries, and across workers sharing one stack.
//!
//! This is tower's own [`ConcurrencyLimitLayer`]: its clones share one semaphore, which is
//! what the worker's clone-per-delivery needs, and it takes its permit in `poll_ready`,
//! which the layers outside call per attempt (so a retry's backoff sleep holds no permit).
//! It keeps the inner error type, so transient and permanent failures pass through.

pub use tower::limit::{ConcurrencyLimit, ConcurrencyLimitLayer};
