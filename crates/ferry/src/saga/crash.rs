//! Crash injection: a hook the orchestrator asks at each point where dying would leave work
//! half done. When it answers `true` the orchestrator dies there, as if killed: it stops
//! every task at once, settles nothing, and refuses further calls with `Error::Closed`. A
//! new orchestrator on the same store and broker must then finish every saga correctly.

use std::sync::Arc;

use super::command::Kind;

/// Where in handling a saga the orchestrator is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Point {
    /// A reply was read; nothing was persisted and the reply is not acked. Its step and kind.
    Received,
    /// A transition was committed (a new saga, a step moved, a compensation begun, a
    /// re-send stamped); its command is not sent. The command's step and kind.
    Persisted,
    /// The command was sent; the reply that caused it is not acked.
    Sent,
    /// A terminal state was committed; the reply that caused it is not acked. Its step and
    /// kind.
    Finished,
}

/// A crash site: a point, and the step and kind of the command or reply at hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CrashSite {
    pub point: Point,
    pub step: usize,
    pub kind: Kind,
}

/// Asked at every [`CrashSite`]; `true` kills the orchestrator there. For tests.
pub type CrashHook = Arc<dyn Fn(&CrashSite) -> bool + Send + Sync>;
