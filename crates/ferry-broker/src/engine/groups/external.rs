//! Committed offsets of groups coordinated outside the broker — Kafka's consumer groups,
//! whose membership and assignment the Kafka front end runs. Their offsets are the
//! broker's own: the same keys (`group/<topic>/<group>/<partition>`) as the broker's
//! groups, so `ferry group`, [`Broker::list_groups`] and [`Broker::group_lag`] see them,
//! and they survive a restart.
//!
//! One group name has one kind of coordinator: while a group of the same name on the same
//! topic has members joined through the broker ([`Broker::join_group`]), an external
//! commit or delete is refused ([`BrokerError::GroupCoordinatedByBroker`]), so two
//! coordinators never move one offset. Reading is always allowed.
//!
//! **Value layout.** The offset as 8 little-endian bytes, then the commit's metadata
//! string as UTF-8 (nothing for the broker's own commits, which have none). Readers take
//! the first 8 bytes, so a value written by either kind reads as an offset.
//!
//! **Crash window.** A commit's partitions go to the metadata store as one batch, durable
//! (fdatasync'd) before the call returns; a crash before that leaves none of them, after
//! it all of them. The in-memory copy of a broker-side group (one with no live members)
//! is updated only after the batch is durable.

use std::collections::BTreeMap;

use ferry_storage::MetaBatch;

use super::{GROUP_PREFIX, offset_key};
use crate::engine::Broker;
use crate::error::{BrokerError, Result};
use crate::name::Name;

/// Kafka's `offset.metadata.max.bytes`: the longest metadata string a commit keeps.
pub const MAX_OFFSET_METADATA: usize = 4096;

/// A committed offset and the metadata string its committer attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next record the group reads.
    pub offset: u64,
    pub metadata: String,
}

/// One partition's offset to commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommit {
    pub partition: u32,
    pub offset: u64,
    pub metadata: String,
}

/// Decodes a stored offset value: the offset, then the metadata (if any).
pub(super) fn decode_value(value: &[u8]) -> Option<CommittedOffset> {
    let offset = u64::from_le_bytes(value.get(..8)?.try_into().ok()?);
    let metadata = String::from_utf8_lossy(&value[8..]).into_owned();
    Some(CommittedOffset { offset, metadata })
}

fn encode_value(offset: u64, metadata: &str) -> Vec<u8> {
    let mut value = offset.to_le_bytes().to_vec();
    value.extend_from_slice(metadata.as_bytes());
    value
}

impl Broker {
    /// Commits offsets of a group coordinated outside the broker. Each partition is checked
    /// on its own — it exists, the metadata is within [`MAX_OFFSET_METADATA`] bytes — and
    /// its result is in the answer, in
    /// order; the partitions that pass are committed together, durably, before this
    /// returns. Refused as a whole when the topic does not exist, the group name is bad,
    /// or broker-side members hold the group.
    pub fn commit_group_offsets(
        &self,
        topic: &str,
        group: &str,
        commits: &[OffsetCommit],
    ) -> Result<Vec<Result<()>>> {
        let topic = self.topic(topic)?;
        let group = Name::new(group)?;
        let checked: Vec<Result<()>> = commits
            .iter()
            .map(|c| {
                // Any offset is kept, past the partition's end too, as Kafka keeps what a
                // group commits: a reader from it waits for the records to get there (the
                // broker's own members), or is told the offset is out of range and applies
                // its reset policy (Kafka consumers); lag counts nothing below it.
                topic.partition(c.partition)?;
                if c.metadata.len() > MAX_OFFSET_METADATA {
                    return Err(BrokerError::OffsetMetadataTooLarge {
                        size: c.metadata.len(),
                        max: MAX_OFFSET_METADATA,
                    });
                }
                Ok(())
            })
            .collect();
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        self.refuse_if_coordinated(&topic.name, &group)?;
        let mut batch = MetaBatch::new();
        for (c, ok) in commits.iter().zip(&checked) {
            if ok.is_ok() {
                batch.put(
                    offset_key(&topic.name, &group, c.partition),
                    encode_value(c.offset, &c.metadata),
                );
            }
        }
        meta.commit(batch)?;
        if let Some(g) = self.groups().get_mut(&(topic.name.clone(), group.clone())) {
            for (c, ok) in commits.iter().zip(&checked) {
                if ok.is_ok() {
                    g.state.reset(c.partition, c.offset);
                }
            }
        }
        Ok(checked)
    }

    /// The committed offsets of `group` on `topic`, by partition, with their metadata;
    /// empty when it has none. Whoever coordinates the group, reading is allowed.
    pub fn group_offsets(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<BTreeMap<u32, CommittedOffset>> {
        let topic = self.topic(topic)?;
        let group = Name::new(group)?;
        let prefix = format!("{GROUP_PREFIX}{}/{group}/", topic.name);
        let meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        Ok(meta
            .scan_prefix(&prefix)
            .into_iter()
            .filter_map(|(key, value)| {
                let partition = key[prefix.len()..].parse().ok()?;
                Some((partition, decode_value(&value)?))
            })
            .collect())
    }

    /// Deletes the committed offsets of `partitions` of an externally coordinated group
    /// (a partition with none is left as it is); durable before it returns. Refused when
    /// broker-side members hold the group.
    pub fn delete_group_offsets(&self, topic: &str, group: &str, partitions: &[u32]) -> Result<()> {
        let topic = self.topic(topic)?;
        let group = Name::new(group)?;
        for &p in partitions {
            topic.partition(p)?;
        }
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        self.refuse_if_coordinated(&topic.name, &group)?;
        let mut batch = MetaBatch::new();
        for &p in partitions {
            batch.delete(offset_key(&topic.name, &group, p));
        }
        meta.commit(batch)?;
        if let Some(g) = self.groups().get_mut(&(topic.name.clone(), group.clone())) {
            for &p in partitions {
                g.state.forget_commit(p);
            }
        }
        Ok(())
    }

    /// Refuses when members joined through the broker hold (topic, group) — after ending
    /// the sessions that timed out, so a crashed broker-side consumer does not block the
    /// name forever.
    fn refuse_if_coordinated(&self, topic: &Name, group: &Name) -> Result<()> {
        let now_ms = self.now_ms();
        let mut groups = self.groups();
        if let Some(g) = groups.get_mut(&(topic.clone(), group.clone())) {
            g.state.expire(now_ms);
            let members = g.state.assignment().len();
            if members > 0 {
                return Err(BrokerError::GroupCoordinatedByBroker {
                    topic: topic.to_string(),
                    group: group.to_string(),
                    members,
                });
            }
        }
        Ok(())
    }
}
