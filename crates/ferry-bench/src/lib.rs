//! Ferry's benchmarks.
//!
//! The workload harness (the `ferry-bench` binary, feature `harness`), modelled on the
//! OpenMessaging Benchmark: workload files (`bench/workloads/*.toml`) run with identical
//! client logic against every target — the embedded broker, a Ferry server, NATS JetStream,
//! Redis Streams, PostgreSQL, RabbitMQ — through the SDK, and reported as JSON, a markdown
//! table with ratios to a baseline target, and SVG charts.
//!
//! The suites behind `ferry bench …` ([`suites`]): the storage engine against the device it
//! runs on, the broker in process, fan-out, the server over loopback and every transport side
//! by side, each checked against its targets. They need none of the harness's dependencies,
//! so the `ferry` command builds this crate without them.

pub mod figures;
pub mod host;
pub mod suites;

#[cfg(feature = "harness")]
pub mod charts;
#[cfg(feature = "harness")]
pub mod driver;
#[cfg(feature = "harness")]
pub mod kafka;
#[cfg(feature = "harness")]
pub mod machine;
#[cfg(feature = "harness")]
pub mod pacing;
#[cfg(feature = "harness")]
mod plan;
#[cfg(feature = "harness")]
pub mod process;
#[cfg(feature = "harness")]
pub mod report;
#[cfg(feature = "harness")]
pub mod soak;
#[cfg(feature = "sqs")]
pub mod sqs;
#[cfg(feature = "harness")]
pub mod stats;
#[cfg(feature = "harness")]
pub mod workload;

#[cfg(feature = "harness")]
pub use plan::{Plan, Results, Target, TargetResult, WorkloadResult, run};
