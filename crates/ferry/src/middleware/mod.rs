//! Handler middleware: a message handler is a [`tower::Service`] over a
//! [`HandlerContext`], and the usual cross-cutting concerns are [`tower::Layer`]s around it.
//!
//! The [`Worker`] pulls deliveries from a [`Consumer`](crate::Consumer), calls the stack for
//! each (up to a concurrency bound), and settles each delivery exactly once from the
//! stack's answer:
//!
//! | the stack answers                  | the delivery is                                    |
//! |------------------------------------|----------------------------------------------------|
//! | `Ok(())`                           | acked                                              |
//! | [`HandlerError::Transient`]        | nacked (its delay, or the transport's backoff), the error kept as last error |
//! | [`HandlerError::Permanent`]        | rejected: to the dead-letter queue now, the reason as last error |
//! | [`HandlerError::Deferred`]         | nacked after its delay; not a failure of the handler |
//!
//! The delivery itself stays with the worker, so no layer can settle it twice or forget
//! it; layers only see the message.
//!
//! [`stack()`] assembles the layers in this order, outermost first — the order matters:
//!
//! 1. [`trace`]: a span per message, continuing the producer's W3C `traceparent`;
//! 2. [`metrics`]: counts the outcome the worker will apply, times the whole stack;
//! 3. [`poison`]: a permanent failure, or a transient one on the last allowed delivery
//!    (the source's declared `max_deliveries`, or a limit given), becomes a reject (dead
//!    letter). It sits *outside* retry: retries run first, and poison decides only once
//!    they are used up;
//! 4. [`dedup`]: a message already processed is acked without calling the handler; the
//!    claim spans all in-process retries;
//! 5. [`breaker`]: while the downstream is known dead, messages are put off, not failed;
//!    it sees one result per delivery (after retries);
//! 6. [`retry`]: in-process retries with backoff and jitter, for transports without
//!    native backoff;
//! 7. [`concurrency`] and [`rate_limit`]: each attempt takes a slot, so they protect the
//!    downstream whatever the retries do, and a backoff sleep holds no slot;
//! 8. [`timeout`]: per attempt;
//! 9. [`panic`](mod@panic): a panicking handler becomes a transient failure with the panic text.

mod context;
mod handler;
mod outcome;
mod stack;
mod worker;

pub mod breaker;
pub mod concurrency;
pub mod dedup;
pub mod metrics;
pub mod panic;
pub mod poison;
pub mod rate_limit;
pub mod retry;
pub mod timeout;
pub mod trace;

pub use context::{HandlerContext, source_label};
pub use handler::{HandlerFn, HandlerFuture, handler_fn};
pub use outcome::HandlerError;
pub use stack::{BoxHandler, StackBuilder, stack};
pub use worker::{Worker, run};

// Every layer, and what their constructors take, so that a worker's imports come from this
// one module.
pub use breaker::BreakerLayer;
pub use concurrency::ConcurrencyLimitLayer;
pub use dedup::DedupLayer;
pub use metrics::MetricsLayer;
pub use panic::CatchPanicLayer;
pub use poison::PoisonLayer;
pub use rate_limit::RateLimitLayer;
pub use retry::RetryLayer;
pub use timeout::TimeoutLayer;
pub use trace::{TraceContext, TraceLayer};

pub use crate::breaker::{BreakerConfig, CircuitBreaker};
#[cfg(feature = "redis")]
pub use crate::inbox::RedisDedupStore;
pub use crate::inbox::{DedupStore, DedupWindow, MemoryDedupStore};
pub use crate::spec::Backoff;
