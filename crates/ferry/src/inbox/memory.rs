//! A [`DedupStore`] in this process's memory: for one process and for tests.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::{Claim, DedupStore};
use crate::error::Result;

/// Claims and records in a map, each with its expiry. Forgets everything when the process
/// ends, so it deduplicates only redeliveries to this process within its lifetime — use
/// `RedisDedupStore` or a SQL inbox across processes or restarts.
///
/// Time is tokio's clock, so tests with tokio's `test-util` may pause and advance it.
#[derive(Debug, Default)]
pub struct MemoryDedupStore {
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<String, Entry>,
    /// Map size after the last sweep of expired entries; the next sweep runs when the map
    /// has doubled, so sweeping costs O(1) per call amortised.
    swept_at: usize,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    done: bool,
    until: Instant,
}

impl MemoryDedupStore {
    pub fn new() -> MemoryDedupStore {
        MemoryDedupStore::default()
    }

    /// Claims and records not yet expired.
    pub fn len(&self) -> usize {
        let now = Instant::now();
        self.lock().map.values().filter(|e| e.until > now).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `now + d`, or about a century on when that overflows: `Instant + Duration` panics
/// past its range, and a caller meaning "remember forever" (`Duration::MAX`) must not
/// bring the handler down.
fn expiry(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

#[async_trait::async_trait]
impl DedupStore for MemoryDedupStore {
    async fn begin(&self, key: &str, hold: Duration) -> Result<Claim> {
        let now = Instant::now();
        let mut entries = self.lock();
        if entries.map.len() > 2 * entries.swept_at.max(512) {
            entries.map.retain(|_, e| e.until > now);
            entries.swept_at = entries.map.len();
        }
        match entries.map.get(key) {
            Some(e) if e.until > now && e.done => Ok(Claim::Done),
            Some(e) if e.until > now => Ok(Claim::InProgress),
            _ => {
                let until = expiry(now, hold);
                entries
                    .map
                    .insert(key.to_owned(), Entry { done: false, until });
                Ok(Claim::Fresh)
            }
        }
    }

    async fn complete(&self, key: &str, window: Duration) -> Result<()> {
        let until = expiry(Instant::now(), window);
        self.lock()
            .map
            .insert(key.to_owned(), Entry { done: true, until });
        Ok(())
    }

    async fn abandon(&self, key: &str) -> Result<()> {
        let mut entries = self.lock();
        // A record of a finished run stays: abandoning is for unfinished claims only.
        if entries.map.get(key).is_some_and(|e| !e.done) {
            entries.map.remove(key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unbounded_hold_or_window_is_kept_rather_than_a_panic() {
        let store = MemoryDedupStore::new();
        assert_eq!(
            store.begin("m1", Duration::MAX).await.unwrap(),
            Claim::Fresh
        );
        assert_eq!(
            store.begin("m1", Duration::MAX).await.unwrap(),
            Claim::InProgress
        );
        store.complete("m1", Duration::MAX).await.unwrap();
        assert_eq!(store.begin("m1", Duration::MAX).await.unwrap(), Claim::Done);
    }

    #[tokio::test]
    async fn a_claim_lapses_after_its_hold_and_a_record_after_its_window() {
        let store = MemoryDedupStore::new();
        let (hold, window) = (Duration::from_millis(50), Duration::from_millis(100));
        assert_eq!(store.begin("m1", hold).await.unwrap(), Claim::Fresh);
        assert_eq!(store.begin("m1", hold).await.unwrap(), Claim::InProgress);
        tokio::time::sleep(hold * 2).await;
        assert_eq!(store.begin("m1", hold).await.unwrap(), Claim::Fresh);
        store.complete("m1", window).await.unwrap();
        store.abandon("m1").await.unwrap();
        assert_eq!(store.begin("m1", hold).await.unwrap(), Claim::Done);
        tokio::time::sleep(window * 2).await;
        assert_eq!(store.begin("m1", hold).await.unwrap(), Claim::Fresh);
        store.abandon("m1").await.unwrap();
        assert_eq!(store.begin("m1", hold).await.unwrap(), Claim::Fresh);
        assert_eq!(store.len(), 1);
    }
}
