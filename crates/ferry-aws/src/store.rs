//! What the front end keeps about queues that the broker's `QueueSpec` cannot hold:
//! attributes as SQS names them (DelaySeconds, ReceiveMessageWaitTimeSeconds, Policy,
//! RedriveAllowPolicy…), tags, timestamps and the last purge. One JSON file,
//! `sqs-queues.json` in the front end's directory, rewritten whole on each change.
//!
//! **Durability.** A change is written to `sqs-queues.json.tmp`, synced, renamed over the
//! file and the directory synced, so a crash leaves the old file or the new one, never a
//! torn one. The broker is the authority on which queues exist: CreateQueue writes the
//! record before creating the queue and DeleteQueue deletes the queue before the record,
//! so a crash between the two leaves a record without a queue, never a queue missing what
//! was asked of it at creation; [`Store::open`] drops records of queues that do not
//! exist.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

const FILE: &str = "sqs-queues.json";

/// One queue's front-end state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueRecord {
    /// Attributes as set by CreateQueue or SetQueueAttributes, normalized.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Seconds since the Unix epoch.
    #[serde(default)]
    pub created: i64,
    #[serde(default)]
    pub last_modified: i64,
    /// Messages with a seq below this were purged: a receive deletes them instead of
    /// handing them out (those in flight or delayed at the purge surface later).
    #[serde(default)]
    pub purged_below: Option<u64>,
    /// When the last purge was, ms since the Unix epoch.
    #[serde(default)]
    pub purged_at_ms: Option<i64>,
}

#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    queues: Mutex<BTreeMap<String, QueueRecord>>,
}

impl Store {
    /// Opens the store in `dir`, keeping only records of queues `exists` says exist.
    pub fn open(dir: &Path, exists: impl Fn(&str) -> bool) -> std::io::Result<Store> {
        let path = dir.join(FILE);
        let queues: BTreeMap<String, QueueRecord> = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::other(format!("{} is not valid: {e}", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e),
        };
        let before = queues.len();
        let queues: BTreeMap<_, _> = queues.into_iter().filter(|(n, _)| exists(n)).collect();
        let store = Store {
            path,
            queues: Mutex::new(queues),
        };
        if store.lock().len() != before {
            store.write(&store.lock())?;
        }
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, QueueRecord>> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, queue: &str) -> Option<QueueRecord> {
        self.lock().get(queue).cloned()
    }

    /// Changes (or makes) `queue`'s record with `change`, durably. On a failed write the
    /// record is left as it was.
    pub fn update<T>(
        &self,
        queue: &str,
        change: impl FnOnce(&mut QueueRecord) -> T,
    ) -> std::io::Result<T> {
        let mut queues = self.lock();
        let mut next = queues.clone();
        let out = change(next.entry(queue.to_owned()).or_default());
        self.write(&next)?;
        *queues = next;
        Ok(out)
    }

    /// Sets `queue`'s record to `record` (or removes it with `None`), durably.
    pub fn set(&self, queue: &str, record: Option<QueueRecord>) -> std::io::Result<()> {
        let mut queues = self.lock();
        let mut next = queues.clone();
        match record {
            Some(r) => next.insert(queue.to_owned(), r),
            None => next.remove(queue),
        };
        self.write(&next)?;
        *queues = next;
        Ok(())
    }

    /// Keeps only the records of queues `keep` names, durably.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) -> std::io::Result<()> {
        let mut queues = self.lock();
        let next: BTreeMap<_, _> = queues
            .iter()
            .filter(|(n, _)| keep(n))
            .map(|(n, r)| (n.clone(), r.clone()))
            .collect();
        self.write(&next)?;
        *queues = next;
        Ok(())
    }

    fn write(&self, queues: &BTreeMap<String, QueueRecord>) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(queues).map_err(std::io::Error::other)?;
        crate::durable_file::replace(&self.path, &bytes, crate::durable_file::Access::Default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_a_reopen_and_those_of_vanished_queues_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_| true).unwrap();
        store
            .update("a", |r| r.tags.insert("k".into(), "v".into()))
            .unwrap();
        store.update("b", |r| r.created = 5).unwrap();
        let again = Store::open(dir.path(), |n| n == "a").unwrap();
        assert_eq!(again.get("a").unwrap().tags["k"], "v");
        assert_eq!(again.get("b"), None);
        assert_eq!(Store::open(dir.path(), |_| true).unwrap().get("b"), None);
    }
}
