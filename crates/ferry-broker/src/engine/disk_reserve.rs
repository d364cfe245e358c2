//! Free space kept back on the data directory's disk, so that a full disk stops the
//! publishers and not the consumers.
//!
//! **Why.** Settling a message is a write too: every receive journals `Leased`, every ack
//! `Acked`, housekeeping writes checkpoints and rolls segments, and a nack that runs out of
//! deliveries stores a dead letter. If publishes could take the last byte, the next ack
//! would fail for lack of space — and a failed journal append poisons its queue (its state
//! in memory is ahead of its disk), so consumers could not drain the backlog that filled
//! the disk, and nothing frees space but a restart. So new data (queue and topic publishes,
//! redrives) is admitted only while the file system keeps at least
//! [`BrokerConfig::disk_reserve_bytes`](super::BrokerConfig::disk_reserve_bytes) free after
//! it; everything that settles or maintains existing data writes into that reserve
//! unchecked. This is RabbitMQ's `disk_free_limit` alarm, applied per publish.
//!
//! A refused publish is [`BrokerError::DiskFull`] and stores nothing. Publishing resumes by
//! itself once space is back (an operator deleted files, retention or acks let segments go):
//! a refused publish always looks at the disk again.
//!
//! **Cost.** One `statvfs` per check. While the last look showed plenty of room, publishes
//! are admitted against it without another call until half of the headroom it showed may
//! be used up, or [`RECHECK_AFTER`] has passed (other programs write to the disk too).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Broker;
use crate::error::{BrokerError, Result};

/// The longest a look at the free space is trusted.
const RECHECK_AFTER: Duration = Duration::from_millis(100);

/// What storage adds to a message's payload, key and headers on disk (record and batch
/// framing, the broker's own headers), counted generously: the reserve absorbs the error.
pub(crate) const RECORD_OVERHEAD_BYTES: u64 = 128;

pub(crate) struct DiskReserve {
    dir: PathBuf,
    reserve: u64,
    seen: Mutex<Option<Seen>>,
    /// Writes refused for lack of space since the broker opened.
    refused: AtomicU64,
}

/// The last look at the disk.
struct Seen {
    at: Instant,
    available: u64,
    /// Bytes admitted since, against that look.
    admitted: u64,
}

impl DiskReserve {
    /// Keeps `reserve` bytes free on the file system holding `dir`; 0 admits everything (a
    /// full disk then fails the write itself, with the storage's `DiskFull`).
    pub fn new(dir: &Path, reserve: u64) -> DiskReserve {
        DiskReserve {
            dir: dir.to_path_buf(),
            reserve,
            seen: Mutex::new(None),
            refused: AtomicU64::new(0),
        }
    }

    /// Admits a write of about `bytes`, or refuses it with [`BrokerError::DiskFull`] when it
    /// would leave less than the reserve free.
    pub fn admit(&self, bytes: u64) -> Result<()> {
        if self.reserve == 0 {
            return Ok(());
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = seen.as_mut() {
            let headroom = last.available.saturating_sub(self.reserve);
            if last.at.elapsed() < RECHECK_AFTER && last.admitted + bytes <= headroom / 2 {
                last.admitted += bytes;
                return Ok(());
            }
        }
        let available = self.available()?;
        if available < self.reserve.saturating_add(bytes) {
            *seen = None;
            return Err(self.full(available));
        }
        *seen = Some(Seen {
            at: Instant::now(),
            available,
            admitted: bytes,
        });
        Ok(())
    }

    /// The refusal for a write that failed with the storage's `DiskFull` (space another
    /// program took since the last look, or a reserve of 0): the same error as a refusal
    /// before the write, which storage guarantees left its log unchanged.
    pub fn refusal(&self, error: BrokerError) -> BrokerError {
        match error {
            BrokerError::Storage(e) if e.is_resource_exhausted() => {
                *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = None;
                self.full(self.available().unwrap_or(0))
            }
            other => other,
        }
    }

    /// Free bytes on the disk now.
    fn available(&self) -> Result<u64> {
        Ok(ferry_storage::fs_util::available_bytes(&self.dir)?)
    }

    fn full(&self, available: u64) -> BrokerError {
        self.refused.fetch_add(1, Ordering::Relaxed);
        BrokerError::DiskFull {
            path: self.dir.clone(),
            available,
            reserve: self.reserve,
        }
    }
}

/// The data directory's disk as publishes see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    /// Bytes free for the broker to write.
    pub available: u64,
    /// Bytes publishes leave free ([`BrokerConfig::disk_reserve_bytes`](super::BrokerConfig::disk_reserve_bytes)):
    /// a publish is refused when it would leave less.
    pub reserve: u64,
    /// Publishes (and redrives) refused with [`BrokerError::DiskFull`] since the broker
    /// opened.
    pub refused: u64,
}

impl Broker {
    /// Free space on the data directory's disk, looked at now, and the reserve kept there.
    pub fn disk_space(&self) -> Result<DiskSpace> {
        let disk = &self.inner.disk;
        Ok(DiskSpace {
            available: disk.available()?,
            reserve: disk.reserve,
            refused: disk.refused.load(Ordering::Relaxed),
        })
    }
}
