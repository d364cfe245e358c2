//! Waiting for a state a test cannot await: a counter another task bumps after the event the
//! test saw, a background loop's effect. Looking again every few milliseconds against a
//! generous deadline keeps such a check right on a loaded machine, where a fixed sleep
//! before one look is either too short (a flaky test) or too long (a slow one).

use std::time::Duration;

/// How long [`eventually`] keeps looking: long enough for a machine whose cores are all
/// busy with something else, since it only ever costs that much when the test fails.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Waits until `done` holds, looking every 10 ms; fails naming `what` after [`PATIENCE`].
pub async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {PATIENCE:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
