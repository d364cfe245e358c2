//! The saga orchestrator: a business operation spanning services as ordered steps, each a
//! command to a participant over a queue, with compensations run in reverse when a step
//! fails or the saga's deadline passes.
//!
//! - [`SagaDefinition`] and [`Step`]: the saga type;
//! - [`Orchestrator`]: `start`, `status`, `wait`, and `run` (replies, sweeper, recovery);
//! - [`Command`], [`Outcome`] and [`reply_to`]: what a participant reads and answers;
//! - [`SagaStore`]: the state table, on PostgreSQL (`PostgresSagaStore`, feature
//!   `postgres`) or SQLite (`SqliteSagaStore`, feature `sqlite`);
//! - [`Clock`] and [`CrashHook`]: time and crashes, as tests control them.
//!
//! The guarantees, and what participants must do, are in `docs/patterns.md` ("Saga
//! orchestrator"); the crash windows are documented in the orchestrator's source.
//!
//! Metrics: `ferry_saga_started_total`, `ferry_saga_completed_total`,
//! `ferry_saga_failed_total` and `ferry_saga_timeouts_total` (`kind` = `deadline` or
//! `step`), each labelled with the saga type.

mod clock;
mod command;
mod crash;
mod definition;
mod orchestrator;
mod state;
mod store;

pub use clock::{Clock, SystemClock};
pub use command::{Command, Kind, Outcome, command_id, header, reply_to};
pub use crash::{CrashHook, CrashSite, Point};
pub use definition::{SagaDefinition, Step};
pub use orchestrator::{Orchestrator, Running, SagaOptions};
pub use state::{SagaState, Status};
#[cfg(feature = "postgres")]
pub use store::PostgresSagaStore;
pub use store::SagaStore;
#[cfg(feature = "sqlite")]
pub use store::SqliteSagaStore;
