//! Ferry's chaos harness: proof, against the real `ferry serve` binary, that an
//! acknowledged publish is never lost, an acked message never comes back, per-key order
//! holds, dead letters match what consumers did, and deduplication survives restarts.
//!
//! A run ([`harness`]) starts the server (fsync durability, its test clock on), a TCP
//! [`proxy`] in front of it, and producer and consumer processes ([`workers`], each a
//! `ferry chaos worker`) that talk to the server through the proxy and record what they
//! saw in [`history`] files. A seeded [`schedule`] then kills and restarts the server
//! (SIGKILL), kills consumers, pauses the server for longer than a lease (SIGSTOP), drops,
//! resets and delays connections, and jumps the server's clock forward. After the last
//! fault, traffic goes on for a while; then the producers stop, the consumers drain the
//! queues, the dead-letter queues are read, and the [`checker`] goes through every
//! history. A failing run keeps its histories and seed: `ferry chaos check DIR` checks
//! them again, `ferry chaos run --seed N` replays the schedule.

pub mod broker_clock;
pub mod checker;
pub mod cli;
mod consumer;
pub mod error;
pub mod harness;
pub mod history;
mod producer;
pub mod proxy;
pub mod report;
pub mod scenario;
pub mod schedule;
pub mod server;
pub mod worker;
pub mod workers;

#[cfg(test)]
mod checker_tests;

pub use checker::{Findings, check};
pub use error::{ChaosError, Result};
pub use report::Report;
pub use scenario::Scenario;
