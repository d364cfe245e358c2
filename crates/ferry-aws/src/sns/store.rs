//! What the SNS front end keeps that Ferry's topic specs cannot hold: topic attributes and
//! tags, and the subscriptions (protocol, endpoint, attributes such as FilterPolicy and
//! RawMessageDelivery). One JSON file, `sns.json` in the front end's directory, rewritten
//! whole on each change.
//!
//! **Durability.** As `sqs-queues.json`: written to `sns.json.tmp`, synced, renamed over
//! the file, the directory synced; a crash leaves the old file or the new one. The broker
//! is the authority on which topics exist: CreateTopic writes the record before creating
//! the topic and DeleteTopic deletes the topic before the record, so a crash between the
//! two leaves a record without a topic, which [`Store::open`] drops with its
//! subscriptions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

const FILE: &str = "sns.json";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// Attributes as set by CreateTopic or SetTopicAttributes.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionRecord {
    /// The topic's name.
    pub topic: String,
    pub protocol: String,
    /// As given to Subscribe (an SQS queue's ARN).
    pub endpoint: String,
    /// Attributes as set by Subscribe or SetSubscriptionAttributes.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    #[serde(default)]
    pub topics: BTreeMap<String, TopicRecord>,
    /// By subscription id (the last part of its ARN).
    #[serde(default)]
    pub subscriptions: BTreeMap<String, SubscriptionRecord>,
}

#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    state: Mutex<State>,
}

impl Store {
    /// Opens the store in `dir`, keeping only topics `exists` says exist (and their
    /// subscriptions).
    pub fn open(dir: &Path, exists: impl Fn(&str) -> bool) -> std::io::Result<Store> {
        let path = dir.join(FILE);
        let mut state: State = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::other(format!("{} is not valid: {e}", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(e),
        };
        let before = state.clone();
        state.topics.retain(|name, _| exists(name));
        let topics = state.topics.clone();
        state
            .subscriptions
            .retain(|_, s| topics.contains_key(&s.topic));
        let store = Store {
            path,
            state: Mutex::new(before.clone()),
        };
        if state != before {
            store.write(&state)?;
        }
        *store.lock() = state;
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn read<T>(&self, look: impl FnOnce(&State) -> T) -> T {
        look(&self.lock())
    }

    /// Changes the state with `change`, durably, if it succeeds; on its error or a failed
    /// write the state is left as it was. `Ok(Err(e))` is the change's refusal.
    pub fn update<T, E>(
        &self,
        change: impl FnOnce(&mut State) -> Result<T, E>,
    ) -> std::io::Result<Result<T, E>> {
        let mut state = self.lock();
        let mut next = state.clone();
        let out = match change(&mut next) {
            Ok(out) => out,
            Err(e) => return Ok(Err(e)),
        };
        if next != *state {
            self.write(&next)?;
            *state = next;
        }
        Ok(Ok(out))
    }

    fn write(&self, state: &State) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?;
        crate::durable_file::replace(&self.path, &bytes, crate::durable_file::Access::Default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_a_reopen_and_those_of_vanished_topics_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_| true).unwrap();
        store
            .update(|s| {
                s.topics.insert("a".into(), TopicRecord::default());
                s.topics.insert("b".into(), TopicRecord::default());
                s.subscriptions.insert(
                    "1".into(),
                    SubscriptionRecord {
                        topic: "b".into(),
                        ..Default::default()
                    },
                );
                Ok::<_, ()>(())
            })
            .unwrap()
            .unwrap();
        let refused = store.update(|s| {
            s.topics.clear();
            Err::<(), _>("no")
        });
        assert_eq!(refused.unwrap(), Err("no"));
        let again = Store::open(dir.path(), |n| n == "a").unwrap();
        again.read(|s| {
            assert!(s.topics.contains_key("a"));
            assert!(!s.topics.contains_key("b"));
            assert!(s.subscriptions.is_empty());
        });
        let third = Store::open(dir.path(), |_| true).unwrap();
        third.read(|s| assert_eq!(s.topics.len(), 1));
    }
}
