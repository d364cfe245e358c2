//! What the front end keeps about subscriptions that the broker's `SubscriptionSpec`
//! cannot hold: Pub/Sub's own settings, such as exactly-once delivery, which changes what
//! Acknowledge and ModifyAckDeadline answer but nothing the broker does. One JSON file,
//! `subscriptions.json` in the front end's directory, rewritten whole on each change (a
//! handful of bytes per subscription).
//!
//! **Durability.** A change is written to `subscriptions.json.tmp`, synced, renamed over
//! the file and the directory synced, so a crash leaves the old file or the new one. The
//! broker is the authority on which subscriptions exist: CreateSubscription writes the
//! record before creating the subscription and DeleteSubscription deletes the
//! subscription before the record, so a crash between the two leaves a record without a
//! subscription, never a subscription missing what was asked at creation; [`Store::open`]
//! drops records of subscriptions that do not exist.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

const FILE: &str = "subscriptions.json";

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

pub struct Store {
    path: PathBuf,
    records: Mutex<BTreeMap<String, SubscriptionRecord>>,
}

impl Store {
    /// Opens (or starts) the store in `dir`, keeping the records of subscriptions for which
    /// `exists` holds.
    pub fn open(dir: &Path, exists: impl Fn(&str) -> bool) -> std::io::Result<Store> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE);
        let mut records: BTreeMap<String, SubscriptionRecord> = match std::fs::read(&path) {
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
        let store = Store {
            path,
            records: Mutex::new(records),
        };
        if store.lock().len() != before {
            store.write(&store.lock())?;
        }
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, SubscriptionRecord>> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The record of `subscription` (the broker's name); the defaults when it has none.
    pub fn get(&self, subscription: &str) -> SubscriptionRecord {
        self.lock().get(subscription).cloned().unwrap_or_default()
    }

    /// Every record, by subscription.
    pub fn all(&self) -> Vec<(String, SubscriptionRecord)> {
        self.lock()
            .iter()
            .map(|(name, record)| (name.clone(), record.clone()))
            .collect()
    }

    /// Sets (or with `None`, or the defaults, removes) the record of `subscription`,
    /// durably before it returns.
    pub fn set(
        &self,
        subscription: &str,
        record: Option<SubscriptionRecord>,
    ) -> std::io::Result<()> {
        let mut records = self.lock();
        let record = record.filter(|r| *r != SubscriptionRecord::default());
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

    fn write(&self, records: &BTreeMap<String, SubscriptionRecord>) -> std::io::Result<()> {
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
    fn a_corrupt_file_is_an_error_not_an_empty_store() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        assert!(Store::open(dir.path(), |_| true).is_err());
    }
}
