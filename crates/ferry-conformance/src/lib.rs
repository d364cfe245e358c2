//! The conformance suite: what every transport of the SDK must do, run against the real
//! engine. Each check is skipped only when the transport's capability table says it lacks
//! the feature (or the harness cannot restart the engine), and the report says so.
//!
//! ```no_run
//! # async fn run() {
//! let report = ferry_conformance::run(&ferry_conformance::Target::new("embedded", "embedded:/tmp/x")).await;
//! report.print();
//! report.assert_passed();
//! # }
//! ```

mod checks;
mod report;
pub mod service;
mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

pub use report::{Outcome, Report};

/// Restarts the engine behind a target, for the check that restarts it mid-stream.
pub type RestartHook = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How the suite reaches one transport.
#[derive(Clone)]
pub struct Target {
    pub name: String,
    pub url: String,
    /// How to restart the engine, if the harness can. The SDK connection is closed before
    /// and opened again after.
    pub restart: Restart,
    /// The longest one check may take.
    pub check_timeout: Duration,
    /// Checks not run on this engine, each with why: for an engine nobody here wrote (a
    /// mock) whose own limits make a check meaningless there. Pinned like any skip.
    pub not_run: Vec<(&'static str, &'static str)>,
}

#[derive(Clone)]
pub enum Restart {
    /// Closing the connection stops the engine (it lives in this process); reconnecting
    /// starts it again from its files.
    Reconnect,
    /// Runs the hook between closing and reconnecting.
    Hook(RestartHook),
    /// The harness cannot restart this engine; the check is skipped with this reason.
    Cannot(&'static str),
}

impl Target {
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Target {
        Target {
            name: name.into(),
            url: url.into(),
            restart: Restart::Cannot("the harness cannot restart this engine"),
            check_timeout: Duration::from_secs(90),
            not_run: Vec::new(),
        }
    }

    pub fn restart(mut self, restart: Restart) -> Target {
        self.restart = restart;
        self
    }

    /// Skips the check named `check` on this target, reporting `why`. The run panics if no
    /// check has that name, so a renamed check cannot leave a stale skip behind.
    pub fn not_run(mut self, check: &'static str, why: &'static str) -> Target {
        self.not_run.push((check, why));
        self
    }
}

/// Runs every check against `target`, one after the other, each on fresh names.
pub async fn run(target: &Target) -> Report {
    checks::run_all(target).await
}
