//! What the front end keeps about queues that the broker's `QueueSpec` cannot hold:
//! attributes as SQS names them (DelaySeconds, ReceiveMessageWaitTimeSeconds, Policy,
//! RedriveAllowPolicy…), tags, timestamps, the last purge and the queue's message-move
//! tasks. One JSON file,
//! `sqs-queues.json` in the front end's directory, rewritten whole on each change.
//!
//! **Durability.** A change is written to `sqs-queues.json.tmp`, synced, renamed over the
//! file and the directory synced, so a crash leaves the old file or the new one, never a
//! torn one. The broker is the authority on which queues exist: CreateQueue writes the
//! record before creating the queue and DeleteQueue deletes the queue before the record,
//! so a crash between the two leaves a record without a queue, never a queue missing what
//! was asked of it at creation; [`Store::open`] drops records of queues that do not
//! exist.
//!
//! **Message-move tasks** are kept in their source queue's record (the last
//! [`MAX_MOVE_TASKS`]), and go with it. A task is run by the front end, not the broker: a
//! task still `RUNNING` or `CANCELLING` when the endpoint stopped stays so in the record,
//! and the endpoint resumes it when it serves again ([`Store::active_move_tasks`], see
//! `actions/move_tasks.rs`), from the count of moved messages saved after its last batch.
//! Nothing is lost; a batch the stop cut off after the broker moved it and before its count
//! was saved is counted again, so the task may move up to one batch more than it set out
//! to (a redrive is at-least-once anyway).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

const FILE: &str = "sqs-queues.json";

/// How many message-move tasks a queue keeps: as many as ListMessageMoveTasks can list.
pub const MAX_MOVE_TASKS: usize = 10;

/// Where a message-move task is, as SQS names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MoveTaskStatus {
    Running,
    Completed,
    Cancelling,
    Cancelled,
    Failed,
}

impl MoveTaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MoveTaskStatus::Running => "RUNNING",
            MoveTaskStatus::Completed => "COMPLETED",
            MoveTaskStatus::Cancelling => "CANCELLING",
            MoveTaskStatus::Cancelled => "CANCELLED",
            MoveTaskStatus::Failed => "FAILED",
        }
    }

    /// Still moving messages, or about to stop: one such task per source queue at a time.
    pub fn is_active(self) -> bool {
        matches!(self, MoveTaskStatus::Running | MoveTaskStatus::Cancelling)
    }
}

/// One message-move task out of the queue whose record holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveTask {
    pub id: String,
    pub status: MoveTaskStatus,
    /// The queue messages go to; `None`: each back to the queue it was dead-lettered from.
    pub destination: Option<String>,
    /// Messages a second; `None`: as fast as the broker moves them.
    pub rate: Option<u32>,
    pub moved: u64,
    /// The source's messages when the task started: the most it moves.
    pub to_move: u64,
    pub failure: Option<String>,
    /// ms since the Unix epoch.
    pub started_ms: i64,
}
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
    /// When the last purge was, ms since the Unix epoch.
    #[serde(default)]
    pub purged_at_ms: Option<i64>,
    /// Message-move tasks out of this queue, oldest first.
    #[serde(default)]
    pub move_tasks: Vec<MoveTask>,
}

/// The records, shared: a message-move task running in the background writes its progress
/// through a clone.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

#[derive(Debug)]
struct StoreInner {
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
        let changed = queues.len() != before;
        let store = Store {
            inner: Arc::new(StoreInner {
                path,
                queues: Mutex::new(queues),
            }),
        };
        if changed {
            store.write(&store.lock())?;
        }
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, QueueRecord>> {
        self.inner.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The message-move tasks still running or cancelling, with their source queues: those
    /// the endpoint resumes when it serves.
    pub fn active_move_tasks(&self) -> Vec<(String, MoveTask)> {
        self.lock()
            .iter()
            .flat_map(|(queue, record)| {
                record
                    .move_tasks
                    .iter()
                    .filter(|t| t.status.is_active())
                    .map(move |t| (queue.clone(), t.clone()))
            })
            .collect()
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

    /// Changes `queue`'s record with `change`, durably, if it has one; `None` (writing
    /// nothing) if not — the queue was deleted.
    pub fn update_existing<T>(
        &self,
        queue: &str,
        change: impl FnOnce(&mut QueueRecord) -> T,
    ) -> std::io::Result<Option<T>> {
        let mut queues = self.lock();
        let mut next = queues.clone();
        let Some(record) = next.get_mut(queue) else {
            return Ok(None);
        };
        let out = change(record);
        self.write(&next)?;
        *queues = next;
        Ok(Some(out))
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
        crate::durable_file::replace(
            &self.inner.path,
            &bytes,
            crate::durable_file::Access::Default,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, status: MoveTaskStatus) -> MoveTask {
        MoveTask {
            id: id.into(),
            status,
            destination: None,
            rate: Some(5),
            moved: 3,
            to_move: 9,
            failure: None,
            started_ms: 1,
        }
    }

    #[test]
    fn a_reopen_keeps_the_active_tasks_for_the_endpoint_to_resume() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_| true).unwrap();
        store
            .update("dlq", |r| {
                r.move_tasks = vec![
                    task("done", MoveTaskStatus::Completed),
                    task("stopping", MoveTaskStatus::Cancelling),
                    task("going", MoveTaskStatus::Running),
                ]
            })
            .unwrap();
        let again = Store::open(dir.path(), |_| true).unwrap();
        let active: Vec<(String, String, u64)> = again
            .active_move_tasks()
            .into_iter()
            .map(|(q, t)| (q, t.id, t.moved))
            .collect();
        assert_eq!(
            active,
            [
                ("dlq".to_owned(), "stopping".to_owned(), 3),
                ("dlq".to_owned(), "going".to_owned(), 3)
            ]
        );
    }

    #[test]
    fn an_update_of_a_queue_without_a_record_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_| true).unwrap();
        assert_eq!(
            store.update_existing("gone", |r| r.created = 1).unwrap(),
            None
        );
        assert_eq!(store.get("gone"), None);
    }

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
