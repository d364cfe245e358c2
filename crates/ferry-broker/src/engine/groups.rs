//! Consumer groups served over topics: Kafka-style streaming consumption, where a group's
//! members share a topic's partitions and each partition's progress is a committed offset.
//!
//! A group is named per topic and comes into being at its first join. Its coordination
//! ([`GroupState`]: sessions, static members, sticky assignment, positions, commit rules) is
//! in memory — members join again after a broker restart, as Kafka consumers do after a
//! coordinator change — while **committed offsets are durable**, in the metadata store under
//! `group/<topic>/<group>/<partition>`, written before a commit returns.
//!
//! **Reading.** [`Broker::poll_group`] reads the member's partitions from their positions
//! (the committed offset, or the group's start — earliest or latest — when nothing is
//! committed), round-robin across partitions, and advances the positions. A position below
//! a partition's start (retention deleted what the group had not read) moves to the start
//! and the skipped count is reported by [`Broker::describe_group`]: never silent.
//!
//! **Lag** per partition, in records (end − committed) and in time: the age of the oldest
//! record not yet committed — seed rule 10, count-based lag means nothing without
//! throughput.
//!
//! [`Broker::list_groups`] and [`Broker::group_lag`] serve monitoring: they read committed
//! offsets from the metadata store, so a group shows (and lags) after a restart before any
//! member rejoins — the time it matters most — and they touch no session.
//!
//! Groups coordinated elsewhere (Kafka's consumer groups, run by the Kafka front end)
//! commit, read and delete offsets under the same keys through `groups/external.rs`.
//!
//! Sessions end at the first operation on the group after their timeout (join, heartbeat,
//! poll, commit, describe) and at every housekeeping pass.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use ferry_storage::MetaBatch;

use super::Broker;
use super::topic::{Partition, Topic};
use crate::error::{BrokerError, Result};
use crate::group::{GroupState, Join, Membership};
use crate::message_id::MessageId;
use crate::name::Name;
use crate::read_limit::{Budget, ReadLimit};
use crate::topic::{Position, TopicRecord};

mod external;

pub use external::{CommittedOffset, MAX_OFFSET_METADATA, OffsetCommit};

const GROUP_PREFIX: &str = "group/";

/// Where a group starts reading a partition it has no committed offset for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartAt {
    #[default]
    Earliest,
    Latest,
}

/// How a member joins a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupJoin {
    /// Rejoin as this member while its session lives.
    pub member_id: Option<String>,
    /// Static membership: a stable name for this consumer instance.
    pub instance_id: Option<String>,
    /// Used when this join creates the group; later joins keep the group's.
    pub session_timeout: Duration,
    /// Used when this join creates the group.
    pub start: StartAt,
}

impl Default for GroupJoin {
    fn default() -> Self {
        GroupJoin {
            member_id: None,
            instance_id: None,
            session_timeout: Duration::from_secs(45),
            start: StartAt::Earliest,
        }
    }
}

/// One partition of a group, as [`Broker::describe_group`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPartition {
    pub partition: u32,
    pub owner: Option<String>,
    pub committed: Option<u64>,
    pub end_offset: u64,
    /// Records after the committed offset (after the partition's start if none).
    pub lag_records: u64,
    /// How long ago the oldest uncommitted record was published; 0 with no lag.
    pub lag_ms: i64,
    /// Records retention deleted before the group read them.
    pub skipped: u64,
}

/// A group's lag on one partition, as [`Broker::group_lag`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    pub partition: u32,
    pub committed: Option<u64>,
    pub end_offset: u64,
    /// Records after the committed offset (after the partition's start if none).
    pub lag_records: u64,
    /// How long ago the oldest uncommitted record was published; 0 with no lag.
    pub lag_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    pub topic: Name,
    pub group: Name,
    pub generation: u64,
    pub members: BTreeMap<String, Vec<u32>>,
    pub partitions: Vec<GroupPartition>,
}

/// One group over one topic: its coordination state and what the engine adds.
pub(crate) struct Group {
    state: GroupState,
    start: StartAt,
    skipped: HashMap<u32, u64>,
}

/// The broker's groups, by (topic, group).
pub(crate) type Groups = Mutex<HashMap<(Name, Name), Group>>;

fn offset_key(topic: &Name, group: &Name, partition: u32) -> String {
    format!("{GROUP_PREFIX}{topic}/{group}/{partition}")
}

impl Broker {
    fn groups(&self) -> std::sync::MutexGuard<'_, HashMap<(Name, Name), Group>> {
        self.inner.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the group after ending the sessions that timed out.
    fn with_group<T>(
        &self,
        topic: &Name,
        group: &Name,
        f: impl FnOnce(&mut Group, i64) -> Result<T>,
    ) -> Result<T> {
        let now_ms = self.now_ms();
        let mut groups = self.groups();
        let entry = groups
            .get_mut(&(topic.clone(), group.clone()))
            .ok_or_else(|| BrokerError::GroupNotFound {
                topic: topic.to_string(),
                group: group.to_string(),
            })?;
        entry.state.expire(now_ms);
        f(entry, now_ms)
    }

    /// Joins `group` on `topic`, creating the group (with the join's session timeout and
    /// start) if it does not exist; see `group/mod.rs` for membership.
    pub async fn join_group(
        &self,
        topic: &str,
        group: &str,
        join: GroupJoin,
    ) -> Result<Membership> {
        let topic = self.topic(topic)?;
        let group = Name::new(group)?;
        if let Some(id) = join.instance_id.as_deref().or(join.member_id.as_deref()) {
            super::check_consumer(id)?;
        }
        let partitions = topic.shape().spec.partitions;
        let now_ms = self.now_ms();
        let key = (topic.name.clone(), group.clone());
        // Read before taking the groups' lock: the metadata store's lock is always taken
        // first (commits hold it while they update a group).
        let committed =
            (!self.groups().contains_key(&key)).then(|| self.load_offsets(&topic.name, &group));
        let mut groups = self.groups();
        if !groups.contains_key(&key) {
            // (Existing at the check and gone since: only a topic deletion does that.)
            let committed = committed.unwrap_or_default();
            let state =
                GroupState::new(group.as_str(), partitions, join.session_timeout, committed)?;
            let entry = Group {
                state,
                start: join.start,
                skipped: HashMap::new(),
            };
            groups.insert(key.clone(), entry);
        }
        let entry = groups.get_mut(&key).expect("inserted above");
        if entry.state.partitions() != partitions {
            entry.state.set_partitions(partitions);
        }
        entry.state.expire(now_ms);
        let id = {
            let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
            MessageId::generate(now_ms, &mut *rng)
        };
        let request = Join {
            member_id: join.member_id,
            instance_id: join.instance_id,
        };
        Ok(entry.state.join(request, || format!("m-{id}"), now_ms))
    }

    pub fn heartbeat(&self, topic: &str, group: &str, member: &str) -> Result<Membership> {
        let (topic, group) = (Name::new(topic)?, Name::new(group)?);
        self.with_group(&topic, &group, |g, now_ms| {
            g.state.heartbeat(member, now_ms)
        })
    }

    pub fn leave_group(&self, topic: &str, group: &str, member: &str) -> Result<()> {
        let (topic, group) = (Name::new(topic)?, Name::new(group)?);
        self.with_group(&topic, &group, |g, _| g.state.leave(member))
    }

    /// Up to `max_records` records from the member's partitions, from their positions,
    /// taking turns across partitions; the positions advance. Also a heartbeat.
    pub fn poll_group(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        max_records: usize,
    ) -> Result<Vec<TopicRecord>> {
        self.poll_group_within(topic, group, member, ReadLimit::messages(max_records))
    }

    /// As [`Broker::poll_group`], within `limit`: at most `limit.messages` records and
    /// `limit.bytes` bytes of them (always at least one record when there is one). The
    /// positions advance past what is returned only, so what did not fit comes next poll.
    pub fn poll_group_within(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        limit: ReadLimit,
    ) -> Result<Vec<TopicRecord>> {
        let max_records = limit.messages;
        let mut budget = Budget::new(limit);
        let topic = self.topic(topic)?;
        let group = Name::new(group)?;
        let shape = topic.shape();
        self.with_group(&topic.name, &group, |g, now_ms| {
            if g.state.partitions() != shape.spec.partitions {
                g.state.set_partitions(shape.spec.partitions);
            }
            let held = g.state.heartbeat(member, now_ms)?.partitions;
            let mut out = Vec::new();
            let mut exhausted = Vec::new();
            // Take turns: a slice per partition each round, until full or all are read.
            let slice = (max_records / held.len().max(1)).max(1);
            while !budget.is_spent() && exhausted.len() < held.len() {
                for &p in &held {
                    if budget.is_spent() || exhausted.contains(&p) {
                        continue;
                    }
                    let partition = &shape.partitions[p as usize];
                    let (start, end) = (partition.start_offset(), partition.log.end_offset());
                    let mut from = match g.state.position(member, p)? {
                        Some(offset) => offset,
                        None => match g.start {
                            StartAt::Earliest => start,
                            StartAt::Latest => end,
                        },
                    };
                    if from < start {
                        *g.skipped.entry(p).or_default() += start - from;
                        from = start;
                    }
                    let want = slice.min(budget.messages_left());
                    // Fewer than wanted: the partition's end, or the bytes ran out (and
                    // then the budget ends this poll, or a smaller record elsewhere fits).
                    let records = if from >= end {
                        Vec::new()
                    } else {
                        partition.read_within(
                            &topic.name,
                            Position::Offset(from),
                            want,
                            &mut budget,
                        )?
                    };
                    let next = records.last().map_or(from, |r| r.offset + 1);
                    g.state.advance(member, p, next)?;
                    if records.len() < want {
                        exhausted.push(p);
                    }
                    out.extend(records);
                }
            }
            Ok(out)
        })
    }

    /// Commits `offset` — the next record to read — for `partition`; durable before it
    /// returns. Only the partition's owner may commit, and only forward.
    pub fn commit_offset(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        partition: u32,
        offset: u64,
    ) -> Result<()> {
        let topic = self.topic(topic)?;
        let group = Name::new(group)?;
        let end = topic.partition(partition)?.log.end_offset();
        if offset > end {
            return Err(BrokerError::OffsetOutOfRange {
                topic: topic.name.clone(),
                partition,
                offset,
                start: topic.partition(partition)?.start_offset(),
                end,
            });
        }
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        self.with_group(&topic.name, &group, |g, _| {
            let before = g.state.committed().get(&partition).copied();
            g.state.commit(member, partition, offset)?;
            let key = offset_key(&topic.name, &group, partition);
            if let Err(error) = meta.put(key, offset.to_le_bytes().to_vec()) {
                // Not durable: take it back, so memory does not claim what disk does not.
                match before {
                    Some(before) => g.state.reset(partition, before),
                    None => g.state.forget_commit(partition),
                }
                return Err(error.into());
            }
            Ok(())
        })
    }

    /// An admin moves the group's committed offsets — of one partition, or of all — to a
    /// position; the owners read from there. Durable before it returns.
    pub fn reset_group_offsets(
        &self,
        topic: &str,
        group: &str,
        partition: Option<u32>,
        to: Position,
    ) -> Result<()> {
        let topic = self.topic(topic)?;
        let group = Name::new(group)?;
        let shape = topic.shape();
        let partitions: Vec<u32> = match partition {
            Some(p) => {
                topic.partition(p)?;
                vec![p]
            }
            None => (0..shape.spec.partitions).collect(),
        };
        let mut targets = Vec::new();
        for p in partitions {
            let partition = &shape.partitions[p as usize];
            let (start, end) = (partition.start_offset(), partition.log.end_offset());
            let offset = match to {
                Position::Earliest => start,
                Position::Latest => end,
                Position::Offset(o) if (start..=end).contains(&o) => o,
                Position::Offset(o) => {
                    return Err(BrokerError::OffsetOutOfRange {
                        topic: topic.name.clone(),
                        partition: p,
                        offset: o,
                        start,
                        end,
                    });
                }
                Position::Timestamp(ms) => partition
                    .log
                    .offset_for_timestamp(ms)?
                    .map_or(end, |offset| offset.max(start)),
            };
            targets.push((p, offset));
        }
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let mut batch = MetaBatch::new();
        for &(p, offset) in &targets {
            batch.put(
                offset_key(&topic.name, &group, p),
                offset.to_le_bytes().to_vec(),
            );
        }
        meta.commit(batch)?;
        let mut groups = self.groups();
        if let Some(g) = groups.get_mut(&(topic.name.clone(), group.clone())) {
            for (p, offset) in targets {
                g.state.reset(p, offset);
            }
        }
        Ok(())
    }

    /// The group's members, assignment, committed offsets and lag per partition. A group
    /// no member has joined since the broker opened — one only a front end's clients
    /// commit for, such as a Kafka consumer group, or one whose members are gone since a
    /// restart — is described by its committed offsets, with no members and generation 0,
    /// as Kafka describes an empty group; [`BrokerError::GroupNotFound`] when it has
    /// neither.
    pub fn describe_group(&self, topic: &str, group: &str) -> Result<GroupInfo> {
        let topic = self.topic(topic)?;
        let group = Name::new(group)?;
        let shape = topic.shape();
        let joined = self.with_group(&topic.name, &group, |g, _| {
            let members: BTreeMap<String, Vec<u32>> = g
                .state
                .assignment()
                .iter()
                .map(|(m, ps)| (m.clone(), ps.iter().copied().collect()))
                .collect();
            Ok((
                g.state.generation(),
                members,
                g.state.committed().clone(),
                g.skipped.clone(),
            ))
        });
        let (generation, members, committed, skipped) = match joined {
            Err(BrokerError::GroupNotFound { .. }) => {
                let committed = self.load_offsets(&topic.name, &group);
                if committed.is_empty() {
                    return Err(BrokerError::GroupNotFound {
                        topic: topic.name.to_string(),
                        group: group.to_string(),
                    });
                }
                (0, BTreeMap::new(), committed, HashMap::new())
            }
            other => other?,
        };
        let now_ms = self.now_ms();
        let mut partitions = Vec::new();
        for (p, partition) in shape.partitions.iter().enumerate() {
            let p = p as u32;
            let lag = partition_lag(&topic, partition, committed.get(&p).copied(), now_ms)?;
            let owner = members
                .iter()
                .find(|(_, ps)| ps.contains(&p))
                .map(|(m, _)| m.clone());
            partitions.push(GroupPartition {
                partition: p,
                owner,
                committed: lag.committed,
                end_offset: lag.end_offset,
                lag_records: lag.lag_records,
                lag_ms: lag.lag_ms,
                skipped: skipped.get(&p).copied().unwrap_or(0),
            });
        }
        Ok(GroupInfo {
            topic: topic.name.clone(),
            group,
            generation,
            members,
            partitions,
        })
    }

    /// Deletes a consumer group: its committed offsets and its state. Refused while it has
    /// members whose sessions live ([`BrokerError::GroupNotEmpty`]), as Kafka refuses to
    /// delete a group that is not empty; [`BrokerError::GroupNotFound`] when the broker
    /// knows no such group.
    pub fn delete_group(&self, topic: &str, group: &str) -> Result<()> {
        let topic = self.topic(topic)?;
        let group = Name::new(group)?;
        let key = (topic.name.clone(), group.clone());
        let mut groups = self.groups();
        if let Some(g) = groups.get_mut(&key) {
            g.state.expire(self.now_ms());
            let members = g.state.assignment().len();
            if members > 0 {
                return Err(BrokerError::GroupNotEmpty {
                    topic: topic.name.to_string(),
                    group: group.to_string(),
                    members,
                });
            }
        }
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let prefix = format!("{GROUP_PREFIX}{}/{}/", topic.name, group);
        let committed = meta.scan_prefix(&prefix);
        if committed.is_empty() && !groups.contains_key(&key) {
            return Err(BrokerError::GroupNotFound {
                topic: topic.name.to_string(),
                group: group.to_string(),
            });
        }
        let mut batch = MetaBatch::new();
        for (k, _) in &committed {
            batch.delete(k.clone());
        }
        meta.commit(batch)?;
        groups.remove(&key);
        Ok(())
    }

    /// Every consumer group: those joined since the broker opened, and those with a
    /// committed offset on disk (whose members may not have rejoined since a restart), as
    /// (topic, group) in order.
    pub fn list_groups(&self) -> Vec<(Name, Name)> {
        let committed = {
            let meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
            meta.scan_prefix(GROUP_PREFIX)
        };
        let mut all: std::collections::BTreeSet<(Name, Name)> = committed
            .iter()
            .filter_map(|(key, _)| {
                let mut parts = key[GROUP_PREFIX.len()..].split('/');
                let topic = Name::new(parts.next()?).ok()?;
                let group = Name::new(parts.next()?).ok()?;
                Some((topic, group))
            })
            .collect();
        all.extend(self.groups().keys().cloned());
        all.into_iter().collect()
    }

    /// The group's lag on each partition of the topic, from its committed offsets. Unlike
    /// [`Broker::describe_group`] it needs no member to have joined since the broker
    /// opened (a group known only by its committed offsets has lag too), and it ends no
    /// session. Reads one record of each lagging partition, for its publish time.
    pub fn group_lag(&self, topic: &str, group: &str) -> Result<Vec<PartitionLag>> {
        let topic = self.topic(topic)?;
        let group = Name::new(group)?;
        let committed = self.load_offsets(&topic.name, &group);
        let joined = self
            .groups()
            .contains_key(&(topic.name.clone(), group.clone()));
        if committed.is_empty() && !joined {
            return Err(BrokerError::GroupNotFound {
                topic: topic.name.to_string(),
                group: group.to_string(),
            });
        }
        let now_ms = self.now_ms();
        let shape = topic.shape();
        shape
            .partitions
            .iter()
            .map(|partition| {
                let p = partition.index;
                partition_lag(&topic, partition, committed.get(&p).copied(), now_ms)
            })
            .collect()
    }

    /// Ends timed-out sessions of every group (housekeeping), and follows topics that
    /// gained partitions.
    pub(super) fn maintain_groups(&self) {
        let now_ms = self.now_ms();
        let counts: HashMap<Name, u32> = self
            .topic_list()
            .iter()
            .map(|t| (t.name.clone(), t.shape().spec.partitions))
            .collect();
        let mut groups = self.groups();
        groups.retain(|(topic, _), _| counts.contains_key(topic));
        for ((topic, _), g) in groups.iter_mut() {
            if counts[topic] != g.state.partitions() {
                g.state.set_partitions(counts[topic]);
            }
            g.state.expire(now_ms);
        }
    }

    fn load_offsets(&self, topic: &Name, group: &Name) -> BTreeMap<u32, u64> {
        let prefix = format!("{GROUP_PREFIX}{topic}/{group}/");
        let meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        meta.scan_prefix(&prefix)
            .into_iter()
            .filter_map(|(key, value)| {
                let partition = key[prefix.len()..].parse().ok()?;
                // The first 8 bytes: an external commit's metadata follows them.
                let offset = external::decode_value(&value)?.offset;
                Some((partition, offset))
            })
            .collect()
    }
}

/// Lag of one partition from `committed` (the next offset the group will read; the
/// partition's start when nothing is committed, or when retention deleted past it).
fn partition_lag(
    topic: &Topic,
    partition: &Partition,
    committed: Option<u64>,
    now_ms: i64,
) -> Result<PartitionLag> {
    let (start, end) = (partition.start_offset(), partition.log.end_offset());
    let from = committed.unwrap_or(start).max(start);
    let lag_records = end.saturating_sub(from);
    let lag_ms = if lag_records == 0 {
        0
    } else {
        partition
            .read(&topic.name, Position::Offset(from), 1)?
            .first()
            .map_or(0, |r| now_ms.saturating_sub(r.message.published_at).max(0))
    };
    Ok(PartitionLag {
        partition: partition.index,
        committed,
        end_offset: end,
        lag_records,
        lag_ms,
    })
}
