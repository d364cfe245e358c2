//! What the front end keeps about subscriptions and topics that the broker's specs cannot
//! hold: Pub/Sub's own settings, such as exactly-once delivery, which changes what
//! Acknowledge and ModifyAckDeadline answer but nothing the broker does, or a topic's
//! schema settings, which the front end enforces at Publish. One JSON file per kind,
//! `subscriptions.json` and `topics.json` in the front end's directory, each rewritten
//! whole on each change (a handful of bytes per record).
//!
//! **Durability.** A change is written to `subscriptions.json.tmp`, synced, renamed over
//! the file and the directory synced, so a crash leaves the old file or the new one. The
//! broker is the authority on which subscriptions exist: CreateSubscription writes the
//! record before creating the subscription and DeleteSubscription deletes the
//! subscription before the record, so a crash between the two leaves a record without a
//! subscription, never a subscription missing what was asked at creation; [`Store::open`]
//! drops records of subscriptions that do not exist. Topics' records follow the same
//! order (CreateTopic, DeleteTopic).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

const FILE: &str = "subscriptions.json";
const TOPICS_FILE: &str = "topics.json";

/// A subscription's Pub/Sub settings beyond the broker's spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionRecord {
    /// `enable_exactly_once_delivery`: acks and deadline changes report, per ack id,
    /// whether they took effect.
    #[serde(default)]
    pub exactly_once: bool,
    /// `retain_acked_messages`: the topic keeps acknowledged messages for the
    /// subscription's retention (see `retained_acks.rs`).
    #[serde(default)]
    pub retain_acked: bool,
    /// `expiration_policy.ttl`: deleted when unused this long (see `expiration.rs`).
    #[serde(default)]
    pub expiration_ttl_ms: Option<i64>,
    /// The latest use written down (ms since the epoch); the creation time at first.
    #[serde(default)]
    pub last_used_ms: i64,
    /// `labels`, as given (checked by `labels.rs`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// A topic's Pub/Sub settings beyond the broker's spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// `schema_settings`: every Publish is validated against the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<TopicSchema>,
    /// Deleted through Pub/Sub while it had subscriptions: hidden until they are gone (see
    /// `deleted_topics.rs`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// A topic's `schema_settings`, as given (names and revision ids as Pub/Sub spells them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicSchema {
    /// `projects/P/schemas/S`.
    pub schema: String,
    /// `JSON` or `BINARY`.
    pub encoding: String,
    #[serde(default)]
    pub first_revision_id: String,
    #[serde(default)]
    pub last_revision_id: String,
}

/// The subscriptions' records.
pub type Store = Records<SubscriptionRecord>;
/// The topics' records.
pub type TopicStore = Records<TopicRecord>;

/// Records by broker name, durable in one JSON file.
pub struct Records<R> {
    path: PathBuf,
    records: Mutex<BTreeMap<String, R>>,
}

impl Records<SubscriptionRecord> {
    /// Opens (or starts) the store in `dir`, keeping the records of subscriptions for which
    /// `exists` holds.
    pub fn open(dir: &Path, exists: impl Fn(&str) -> bool) -> std::io::Result<Store> {
        Records::open_file(dir, FILE, exists)
    }
}

impl Records<TopicRecord> {
    /// Opens (or starts) the topics' store in `dir`, keeping the records of topics for
    /// which `exists` holds.
    pub fn open(dir: &Path, exists: impl Fn(&str) -> bool) -> std::io::Result<TopicStore> {
        Records::open_file(dir, TOPICS_FILE, exists)
    }
}

impl<R> Records<R>
where
    R: Clone + Default + PartialEq + Serialize + DeserializeOwned,
{
    fn open_file(
        dir: &Path,
        file: &str,
        exists: impl Fn(&str) -> bool,
    ) -> std::io::Result<Records<R>> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(file);
        let mut records: BTreeMap<String, R> = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e),
        };
        let before = records.len();
        records.retain(|name, _| exists(name));
        let store = Records {
            path,
            records: Mutex::new(records),
        };
        if store.lock().len() != before {
            store.write(&store.lock())?;
        }
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, R>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The record of `subscription` (the broker's name); the defaults when it has none.
    pub fn get(&self, subscription: &str) -> R {
        self.lock().get(subscription).cloned().unwrap_or_default()
    }

    /// Every record, by name.
    pub fn all(&self) -> Vec<(String, R)> {
        self.lock()
            .iter()
            .map(|(name, record)| (name.clone(), record.clone()))
            .collect()
    }

    /// Sets (or with `None`, or the defaults, removes) the record of `subscription`,
    /// durably before it returns.
    pub fn set(&self, subscription: &str, record: Option<R>) -> std::io::Result<()> {
        let mut records = self.lock();
        let record = record.filter(|r| *r != R::default());
        if records.get(subscription) == record.as_ref() {
            return Ok(());
        }
        let mut changed = records.clone();
        match record {
            Some(r) => changed.insert(subscription.to_owned(), r),
            None => changed.remove(subscription),
        };
        self.write(&changed)?;
        *records = changed;
        Ok(())
    }

    fn write(&self, records: &BTreeMap<String, R>) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(records).map_err(std::io::Error::other)?;
        let tmp = self.path.with_extension("json.tmp");
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_a_reopen_and_those_of_gone_subscriptions_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), |_| true).unwrap();
        let eod = SubscriptionRecord {
            exactly_once: true,
            ..SubscriptionRecord::default()
        };
        store.set("p.a", Some(eod.clone())).unwrap();
        store.set("p.b", Some(eod.clone())).unwrap();
        store
            .set("p.c", Some(SubscriptionRecord::default()))
            .unwrap();
        drop(store);
        let store = Store::open(dir.path(), |name| name != "p.b").unwrap();
        assert_eq!(store.get("p.a"), eod);
        assert_eq!(store.get("p.b"), SubscriptionRecord::default());
        store.set("p.a", None).unwrap();
        drop(store);
        let store = Store::open(dir.path(), |_| true).unwrap();
        assert_eq!(store.get("p.a"), SubscriptionRecord::default());
        assert_eq!(
            store.get("p.b"),
            SubscriptionRecord::default(),
            "dropped for good"
        );
    }

    #[test]
    fn topic_records_are_kept_beside_the_subscriptions() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicStore::open(dir.path(), |_| true).unwrap();
        let subscriptions = Store::open(dir.path(), |_| true).unwrap();
        let record = TopicRecord {
            schema: Some(TopicSchema {
                schema: "projects/p/schemas/s".into(),
                encoding: "JSON".into(),
                ..Default::default()
            }),
            deleted: true,
        };
        topics.set("p.t", Some(record.clone())).unwrap();
        subscriptions
            .set(
                "p.t",
                Some(SubscriptionRecord {
                    exactly_once: true,
                    ..SubscriptionRecord::default()
                }),
            )
            .unwrap();
        drop(topics);
        let topics = TopicStore::open(dir.path(), |_| true).unwrap();
        assert_eq!(topics.get("p.t"), record);
        drop(topics);
        let topics = TopicStore::open(dir.path(), |_| false).unwrap();
        assert_eq!(topics.get("p.t"), TopicRecord::default());
    }

    #[test]
    fn a_corrupt_file_is_an_error_not_an_empty_store() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        assert!(Store::open(dir.path(), |_| true).is_err());
    }
}
