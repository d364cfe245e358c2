//! Zero-filled space ahead of the active segment's end, prepared by a background thread.
//!
//! Why: on ext4 (and most journaling file systems) an `fdatasync` after a write that extends
//! the file must also commit the new size and block allocation to the journal; one after a
//! write into blocks that already exist and hold data does not. Measured here that is about
//! twice the fdatasyncs per second, and with group commit the fdatasync rate is the
//! throughput limit for small records. `fallocate` is not enough: it leaves "unwritten"
//! extents whose conversion is again a journal commit. So the space is really written, with
//! zeros, and synced, by a thread of its own so the writer never waits for it (PostgreSQL
//! pre-zeroes its WAL segments for the same reason).
//!
//! Invariants:
//! - the region `[data_end, zeroed_end)` holds only zeros (recovery treats an all-zero tail
//!   as the clean end of the log, not as a torn write);
//! - the preallocator only writes at or beyond `max(zeroed_end, data_end)`, and the writer
//!   never writes beyond `zeroed_end` while a fill is in progress, so they never write the
//!   same bytes.

use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::segment::Segment;

/// How long to wait before trying again after a fill failed (a full disk, most likely).
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Whether zero-filling pays for itself at the current group size. Zeros cost a second write
/// of every byte; they save a journal commit per fdatasync. Measured on ext4 here: a clear
/// gain up to groups of ~64 KiB (the fdatasync rate nearly doubles), a loss from ~128 KiB
/// (the disk's bandwidth, not its fdatasync rate, is then the limit).
pub fn worth_it(average_group_bytes: u64) -> bool {
    average_group_bytes < 96 * 1024
}

#[derive(Debug, Default)]
struct State {
    segment: Option<Arc<Segment>>,
    /// Bytes below this are data or synced zeros.
    zeroed_end: u64,
    /// The writer's end, set before it writes.
    data_end: u64,
    /// Keep zeros up to here.
    wanted_end: u64,
    filling: bool,
    failed_at: Option<Instant>,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug)]
pub(crate) struct Preallocator {
    shared: Arc<Shared>,
    chunk: u64,
    thread: Option<JoinHandle<()>>,
}

impl Preallocator {
    pub fn start(segment: Arc<Segment>, data_end: u64, chunk: u64) -> std::io::Result<Self> {
        let zeroed_end = data_end;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                segment: Some(segment),
                zeroed_end,
                data_end,
                wanted_end: data_end + 2 * chunk,
                ..State::default()
            }),
            changed: Condvar::new(),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("ferry-log-prealloc".into())
                .spawn(move || fill_loop(&shared, chunk))?
        };
        Ok(Preallocator {
            shared,
            chunk,
            thread: Some(thread),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().expect("preallocation lock")
    }

    /// Waits until no fill is running; the guard keeps it so.
    fn idle(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        while state.filling {
            state = self.shared.changed.wait(state).expect("preallocation lock");
        }
        state
    }

    /// Called before the writer writes up to `end`. Returns at once when `end` lies in
    /// zeroed space or no fill is running; otherwise waits for the running fill (the writer
    /// has caught up with the preallocator, which only happens when the disk is saturated).
    /// `wanted` says whether more zeros are worth their bandwidth (see `worth_it`).
    pub fn before_write(&self, end: u64, wanted: bool) {
        let mut state = self.lock();
        while state.filling && end > state.zeroed_end {
            state = self.shared.changed.wait(state).expect("preallocation lock");
        }
        state.data_end = state.data_end.max(end);
        if wanted && state.zeroed_end < end + self.chunk {
            state.wanted_end = end + 2 * self.chunk;
            self.shared.changed.notify_all();
        }
    }

    /// Cuts the file back to `end` (after a failed write, or to drop the zero tail) with no
    /// fill running, so a fill cannot re-extend it behind the writer's back.
    pub fn truncate(&self, file: &std::fs::File, end: u64) -> std::io::Result<()> {
        let mut state = self.idle();
        file.set_len(end)?;
        state.data_end = end;
        state.zeroed_end = state.zeroed_end.min(end);
        Ok(())
    }

    /// Stops filling the current segment and starts on `segment`, whose data ends at
    /// `data_end`.
    pub fn switch_to(&self, segment: Arc<Segment>, data_end: u64) {
        let mut state = self.idle();
        state.segment = Some(segment);
        state.zeroed_end = data_end;
        state.data_end = data_end;
        state.wanted_end = data_end + 2 * self.chunk;
        state.failed_at = None;
        self.shared.changed.notify_all();
    }
}

impl Drop for Preallocator {
    fn drop(&mut self) {
        self.lock().stop = true;
        self.shared.changed.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Zeros are an optimisation and must never take the last of the disk: a fill that runs
/// the file system out of space fails the appends of every other log on it meanwhile (the
/// space comes back only when the fill gives up), and those may be writes that must not
/// fail on a nearly full disk, such as a queue's acks. So a fill starts only while at least
/// as much as it takes would stay free after it.
fn has_room_for(path: &std::path::Path, chunk: u64) -> std::io::Result<()> {
    let available =
        crate::fs_util::available_bytes(path).map_err(|e| std::io::Error::other(e.to_string()))?;
    if available < chunk.saturating_mul(2) {
        return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
    }
    Ok(())
}

fn fill_loop(shared: &Shared, chunk: u64) {
    // Written in pieces: a write holds the file's inode lock for its whole length, and one
    // 8 MiB write would stall the writer's next group write behind it for milliseconds.
    const PIECE: u64 = 128 * 1024;
    let zeros = vec![0u8; PIECE.min(chunk) as usize];
    let mut state = shared.state.lock().expect("preallocation lock");
    loop {
        if state.stop {
            return;
        }
        let retry_wait = state
            .failed_at
            .map(|at| RETRY_AFTER.saturating_sub(at.elapsed()));
        let due = state.zeroed_end < state.wanted_end && retry_wait.is_none_or(|w| w.is_zero());
        let Some(segment) = state.segment.clone().filter(|_| due) else {
            state = match retry_wait {
                Some(wait) if !wait.is_zero() => {
                    shared
                        .changed
                        .wait_timeout(state, wait)
                        .expect("preallocation lock")
                        .0
                }
                _ => shared.changed.wait(state).expect("preallocation lock"),
            };
            continue;
        };
        let from = state.zeroed_end.max(state.data_end);
        state.filling = true;
        drop(state);

        let result = has_room_for(&segment.log_path, chunk)
            .and_then(|()| fill(&segment, from, chunk, &zeros));

        state = shared.state.lock().expect("preallocation lock");
        state.filling = false;
        match result {
            Ok(()) => {
                state.zeroed_end = from + chunk;
                state.failed_at = None;
            }
            Err(_) => {
                state.zeroed_end = from;
                state.failed_at = Some(Instant::now());
            }
        }
        shared.changed.notify_all();
    }
}

/// Writes `chunk` bytes of zeros at `from` and syncs them; on failure gives the space back.
fn fill(segment: &Segment, from: u64, chunk: u64, zeros: &[u8]) -> std::io::Result<()> {
    let file = segment
        .file()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let result = (0..chunk.div_ceil(zeros.len() as u64))
        .try_for_each(|i| {
            let at = i * zeros.len() as u64;
            let n = (chunk - at).min(zeros.len() as u64) as usize;
            file.write_all_at(&zeros[..n], from + at)
        })
        .and_then(|()| file.sync_data());
    if let Err(e) = &result {
        // Give the space back: the writer needs it more than we do.
        let _ = file.set_len(from);
        tracing::debug!(segment = %segment.log_path.display(), error = %e, "preallocation failed; retrying later");
    }
    result
}
