//! A test-only clock for `ferry serve --test-clock FILE` (a hidden flag): the system clock
//! plus an offset in milliseconds read from FILE at start and again on each SIGUSR1, so a
//! chaos test can move a running server's clock forward (past leases, delays and backoffs)
//! and check that nothing is lost or delivered twice. Off unless the flag is given; a
//! SIGUSR1 to a server without it is refused with a line on stdout and changes nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use anyhow::Context;
use ferry_broker::Broker;
use ferry_storage::{Clock, SystemClock};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The system clock moved by an offset that can change while the server runs.
#[derive(Debug, Clone, Default)]
pub struct OffsetClock {
    offset_ms: Arc<AtomicI64>,
}

impl OffsetClock {
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
    }
}

impl Clock for OffsetClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms() + self.offset_ms.load(Ordering::SeqCst)
    }
}

/// The offset FILE holds: one integer, in milliseconds.
pub fn read_offset(path: &Path) -> anyhow::Result<i64> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the test clock file {}", path.display()))?;
    text.trim().parse().with_context(|| {
        format!(
            "the test clock file {} must hold one integer (milliseconds), not {:?}",
            path.display(),
            text.trim()
        )
    })
}

/// The SIGUSR1 handler, installed before the server says it listens: a signal sent once
/// it has said so must not meet the default action (which ends the process).
pub fn usr1() -> anyhow::Result<Signal> {
    signal(SignalKind::user_defined1()).context("installing the SIGUSR1 handler")
}

/// Until the process ends: on each SIGUSR1, reads FILE again, moves the clock, runs the
/// broker's timers at once (a lease or delay the jump has passed ends now, not when the
/// timer task would next have woken), and prints `ferry: test clock offset N ms`.
pub async fn follow(mut usr1: Signal, file: PathBuf, clock: OffsetClock, broker: Broker) {
    while usr1.recv().await.is_some() {
        match read_offset(&file) {
            Ok(offset) => {
                clock.set_offset_ms(offset);
                if let Err(e) = broker.tick_now().await {
                    eprintln!("ferry: test clock: running timers after the jump: {e}");
                }
                println!("ferry: test clock offset {offset} ms");
            }
            Err(e) => println!("ferry: test clock unchanged: {e:#}"),
        }
    }
}

/// Without `--test-clock`, SIGUSR1 is refused (and does not end the server).
pub async fn refuse(mut usr1: Signal) {
    while usr1.recv().await.is_some() {
        println!("ferry: SIGUSR1 ignored: the test clock is off (it is a test-only option)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_moves_the_clock_and_bad_files_are_refused() {
        let clock = OffsetClock::default();
        let before = clock.now_ms();
        clock.set_offset_ms(60_000);
        assert!(clock.now_ms() >= before + 60_000);

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("offset");
        std::fs::write(&file, "1500\n").unwrap();
        assert_eq!(read_offset(&file).unwrap(), 1500);
        std::fs::write(&file, "soon").unwrap();
        assert!(read_offset(&file).is_err());
        assert!(read_offset(&dir.path().join("missing")).is_err());
    }
}
