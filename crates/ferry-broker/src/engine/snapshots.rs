//! Snapshots: a subscription's acknowledgement state kept under a name, to seek a
//! subscription of the same topic back to (see `engine/subscriptions/seek.rs`) — Pub/Sub's
//! snapshots.
//!
//! A snapshot keeps a [`Backlog`]: the references its subscription had not settled when it
//! was taken, and every record of the topic from the subscription's durable cursor on (the
//! ones published after, and the ones not taken in yet). It is stored in the metadata store
//! under `snapshot/<name>` in one commit, and outlives its subscription (Pub/Sub keeps
//! them too); deleting its topic deletes it.
//!
//! **Retention.** A snapshot holds its topic's records the way a subscription does: per
//! partition, nothing from its oldest unacknowledged offset on is deleted by the topic's
//! retention — unless the topic's retention overrides subscriptions, which it overrides
//! too. That hold lasts until the snapshot expires, as Pub/Sub's does: 7 days minus the age
//! of the oldest unacknowledged message it captured (7 days from creation when there is
//! none); creating one that would expire within an hour is refused
//! ([`BrokerError::SnapshotWouldExpire`]). An expired snapshot is gone for every call at
//! once (not found) and its metadata is deleted by the next housekeeping pass.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::Broker;
use super::subscriptions::subscription_link;
use crate::error::{BrokerError, Result};
use crate::message::millis;
use crate::name::Name;
use crate::subscription::{Backlog, TopicRef};

pub(super) const SNAPSHOT_PREFIX: &str = "snapshot/";
/// The longest a snapshot lives: from the publish of the oldest message it holds.
pub const SNAPSHOT_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// The shortest lifetime a new snapshot may have.
pub const SNAPSHOT_MIN_LIFETIME: Duration = Duration::from_secs(3600);

/// A snapshot as [`Broker::describe_snapshot`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub name: Name,
    /// The topic whose records it holds; only its subscriptions can seek to it.
    pub topic: Name,
    /// The subscription it was taken from (which may have been deleted since).
    pub subscription: Name,
    pub created_at_ms: i64,
    /// When it stops existing: see the module docs.
    pub expires_at_ms: i64,
}

/// A snapshot, with the state it keeps.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Snapshot {
    pub info: SnapshotInfo,
    pub backlog: Backlog,
}

impl Snapshot {
    fn is_expired(&self, now_ms: i64) -> bool {
        self.info.expires_at_ms <= now_ms
    }

    /// `ferry-snapshot 1`, `topic=`, `subscription=`, `created=` and `expires=` lines,
    /// then the backlog's stored form.
    fn encode(&self) -> Vec<u8> {
        let info = &self.info;
        let mut out = format!(
            "ferry-snapshot 1\ntopic={}\nsubscription={}\ncreated={}\nexpires={}\n",
            info.topic, info.subscription, info.created_at_ms, info.expires_at_ms
        )
        .into_bytes();
        out.extend(self.backlog.encode());
        out
    }

    fn decode(name: Name, bytes: &[u8]) -> std::result::Result<Snapshot, String> {
        let mut parts = bytes.splitn(6, |&b| b == b'\n');
        let mut line = |field: &str| -> std::result::Result<String, String> {
            let line = parts.next().ok_or_else(|| format!("{field} is missing"))?;
            let line = std::str::from_utf8(line).map_err(|_| format!("{field} is not UTF-8"))?;
            if field.is_empty() {
                return Ok(line.to_owned());
            }
            line.strip_prefix(&format!("{field}="))
                .map(str::to_owned)
                .ok_or_else(|| format!("expected {field}=, found {line:?}"))
        };
        if line("")? != "ferry-snapshot 1" {
            return Err("not a snapshot record of a known version".into());
        }
        let name_field = |text: String| Name::new(text).map_err(|e| e.to_string());
        let number = |text: String| {
            text.parse::<i64>()
                .map_err(|_| format!("{text:?} is not a time"))
        };
        let topic = name_field(line("topic")?)?;
        let subscription = name_field(line("subscription")?)?;
        let created_at_ms = number(line("created")?)?;
        let expires_at_ms = number(line("expires")?)?;
        let backlog = Backlog::decode(parts.next().ok_or("its backlog is missing")?)?;
        Ok(Snapshot {
            info: SnapshotInfo {
                name,
                topic,
                subscription,
                created_at_ms,
                expires_at_ms,
            },
            backlog,
        })
    }
}

/// Every stored snapshot, expired or not (housekeeping deletes the expired).
pub(super) fn load(meta: &ferry_storage::MetaStore) -> Result<BTreeMap<Name, Arc<Snapshot>>> {
    let mut snapshots = BTreeMap::new();
    for (key, value) in meta.scan_prefix(SNAPSHOT_PREFIX) {
        let raw = &key[SNAPSHOT_PREFIX.len()..];
        let bad = |problem: String| BrokerError::MalformedSnapshot {
            snapshot: raw.to_owned(),
            problem,
        };
        let name = Name::new(raw).map_err(|e| bad(e.to_string()))?;
        let snapshot = Snapshot::decode(name.clone(), &value).map_err(bad)?;
        snapshots.insert(name, Arc::new(snapshot));
    }
    Ok(snapshots)
}

impl Broker {
    /// Takes a snapshot named `snapshot` of subscription `subscription`'s acknowledgement
    /// state (see `engine/snapshots.rs`). A snapshot of that name that has not expired is
    /// [`BrokerError::SnapshotExists`]; a queue that is not a subscription is
    /// [`BrokerError::NotASubscription`].
    pub async fn create_snapshot(
        &self,
        snapshot: &str,
        subscription: &str,
    ) -> Result<SnapshotInfo> {
        let name = Name::new(snapshot)?;
        let queue = self.queue(subscription)?;
        let link = subscription_link(&queue)?;
        // Not in the middle of a seek, whose cursors are the target's, not yet its state.
        let _seeking = link.seek_lock().await;
        // The metadata lock first, as every snapshot change takes it: two creations of one
        // name cannot both find it free.
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        // Its topic may have been deleted (with the subscription) while this waited for the
        // seek lock: a topic created later under its name holds other records at the
        // captured offsets. Deletion commits under the metadata lock, held from here on.
        let same_topic = self
            .topic(link.topic.name.as_str())
            .is_ok_and(|topic| Arc::ptr_eq(&topic, &link.topic));
        if !same_topic {
            return Err(BrokerError::TopicNotFound {
                topic: link.topic.name.to_string(),
            });
        }
        // Held from the capture until the snapshot is listed: retention reads the
        // subscriptions' holds, then the snapshots', so it never misses both (an ack
        // between a capture and the listing would otherwise let it delete what the
        // snapshot still counts unacknowledged).
        let mut snapshots = self.snapshots();
        let now_ms = self.now_ms();
        if snapshots.get(&name).is_some_and(|s| !s.is_expired(now_ms)) {
            return Err(BrokerError::SnapshotExists { snapshot: name });
        }
        let backlog = link.backlog();
        let oldest_ms = link
            .oldest_unsettled()
            .into_iter()
            .filter_map(|(partition, offset)| {
                let at = TopicRef {
                    link: link.id,
                    partition,
                    offset,
                    size: 0,
                };
                // A record retention took (overriding subscriptions) is not held.
                link.deref(at).ok().map(|m| m.published_at)
            })
            .min();
        let oldest_ms = oldest_ms.map_or(now_ms, |o| o.min(now_ms));
        let expires_at_ms = oldest_ms.saturating_add(millis(SNAPSHOT_LIFETIME));
        if expires_at_ms - now_ms < millis(SNAPSHOT_MIN_LIFETIME) {
            return Err(BrokerError::SnapshotWouldExpire {
                subscription: queue.name.clone(),
                oldest_age_ms: now_ms - oldest_ms,
            });
        }
        let snapshot = Snapshot {
            info: SnapshotInfo {
                name: name.clone(),
                topic: link.topic.name.clone(),
                subscription: queue.name.clone(),
                created_at_ms: now_ms,
                expires_at_ms,
            },
            backlog,
        };
        let info = snapshot.info.clone();
        meta.put(format!("{SNAPSHOT_PREFIX}{name}"), snapshot.encode())?;
        snapshots.insert(name, Arc::new(snapshot));
        Ok(info)
    }

    /// Deletes snapshot `snapshot`, durably; one that does not exist (or has expired) is
    /// [`BrokerError::SnapshotNotFound`].
    pub fn delete_snapshot(&self, snapshot: &str) -> Result<()> {
        // Looked up under the metadata lock: a snapshot created under its name meanwhile
        // (this one having expired) is not the one deleted.
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let found = self.snapshot(snapshot)?;
        meta.delete(format!("{SNAPSHOT_PREFIX}{}", found.info.name))?;
        self.snapshots().remove(&found.info.name);
        Ok(())
    }

    /// Every snapshot that has not expired, by name.
    pub fn list_snapshots(&self) -> Vec<SnapshotInfo> {
        let now_ms = self.now_ms();
        self.snapshots()
            .values()
            .filter(|s| !s.is_expired(now_ms))
            .map(|s| s.info.clone())
            .collect()
    }

    pub fn describe_snapshot(&self, snapshot: &str) -> Result<SnapshotInfo> {
        Ok(self.snapshot(snapshot)?.info.clone())
    }

    /// Snapshot `name`, unless it does not exist or has expired.
    pub(super) fn snapshot(&self, name: &str) -> Result<Arc<Snapshot>> {
        let name = Name::new(name)?;
        let now_ms = self.now_ms();
        self.snapshots()
            .get(&name)
            .filter(|s| !s.is_expired(now_ms))
            .cloned()
            .ok_or_else(|| BrokerError::SnapshotNotFound {
                snapshot: name.to_string(),
            })
    }

    /// The lowest offset of `topic`'s `partition` a snapshot that has not expired holds.
    pub(super) fn snapshot_hold(&self, topic: &Name, partition: u32) -> Option<u64> {
        let now_ms = self.now_ms();
        self.snapshots()
            .values()
            .filter(|s| &s.info.topic == topic && !s.is_expired(now_ms))
            .map(|s| s.backlog.hold(partition))
            .min()
    }

    /// Deletes the metadata of expired snapshots (housekeeping).
    pub(super) fn delete_expired_snapshots(&self) -> Result<()> {
        let now_ms = self.now_ms();
        self.delete_snapshots_where(|s| s.is_expired(now_ms))
    }

    /// The snapshots of `topic`, for deleting them with it (in its metadata commit, then
    /// [`forget_snapshots`](Self::forget_snapshots)).
    pub(super) fn snapshots_of(&self, topic: &Name) -> Vec<Name> {
        self.snapshots()
            .values()
            .filter(|s| &s.info.topic == topic)
            .map(|s| s.info.name.clone())
            .collect()
    }

    pub(super) fn forget_snapshots(&self, names: &[Name]) {
        let mut snapshots = self.snapshots();
        for name in names {
            snapshots.remove(name);
        }
    }

    fn delete_snapshots_where(&self, doomed: impl Fn(&Snapshot) -> bool) -> Result<()> {
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let names: Vec<Name> = self
            .snapshots()
            .values()
            .filter(|s| doomed(s))
            .map(|s| s.info.name.clone())
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        let mut batch = ferry_storage::MetaBatch::new();
        for name in &names {
            batch.delete(format!("{SNAPSHOT_PREFIX}{name}"));
        }
        meta.commit(batch)?;
        self.forget_snapshots(&names);
        Ok(())
    }

    fn snapshots(&self) -> std::sync::MutexGuard<'_, BTreeMap<Name, Arc<Snapshot>>> {
        self.inner
            .snapshots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_form_round_trips_and_refuses_what_it_does_not_know() {
        let name = Name::new("before-deploy").unwrap();
        let snapshot = Snapshot {
            info: SnapshotInfo {
                name: name.clone(),
                topic: Name::new("orders").unwrap(),
                subscription: Name::new("billing").unwrap(),
                created_at_ms: 1_000,
                expires_at_ms: 2_000,
            },
            backlog: Backlog::from_offsets(&[10, 0, 7]),
        };
        let bytes = snapshot.encode();
        assert_eq!(Snapshot::decode(name.clone(), &bytes).unwrap(), snapshot);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        for bad in [
            text.replace("ferry-snapshot 1", "ferry-snapshot 2"),
            text.replace("topic=orders", "topic=a/b"),
            text.replace("created=1000", "created=soon"),
            text.replace("expires=2000\n", "expires=2000"),
        ] {
            assert!(
                Snapshot::decode(name.clone(), bad.as_bytes()).is_err(),
                "{bad:?}"
            );
        }
    }
}
