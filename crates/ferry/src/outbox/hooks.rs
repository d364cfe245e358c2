//! [`RelayHooks`]: fault injection at the relay's crash windows.
//!
//! The outbox's promise is about crashes, so the tests must be able to crash the relay at
//! exactly the two places that matter, with no `cfg(test)` code paths that production does
//! not run. A hook that answers [`Fault::Die`] makes the relay stop on the spot, as if its
//! process were killed: nothing more is written for the claimed rows (they stay claimed
//! until their lease runs out) and the relay's task ends with [`Error::Closed`](crate::Error).

/// The crash windows of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultPoint {
    /// The row is claimed; it has not been published.
    Claimed,
    /// The row is published; it has not been marked published. A restart publishes it
    /// again (with the same message id and dedup id).
    Published,
}

/// What the relay does at a fault point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Continue,
    /// Stop as if killed.
    Die,
}

/// Consulted at each [`FaultPoint`] of each row.
pub trait RelayHooks: Send + Sync {
    fn at(&self, point: FaultPoint, row_id: &str) -> Fault;
}
