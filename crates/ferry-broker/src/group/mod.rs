//! Kafka-style consumer groups over one partitioned topic: the pure coordination state of
//! one group — members, their partitions, fetch positions and committed offsets.
//!
//! Like [`QueueState`](crate::QueueState) it never reads a clock or does I/O: every call
//! takes `now_ms`, and the engine persists committed offsets and serves reads.
//!
//! **Membership.** A member joins (getting a member id) and must heartbeat within the
//! group's session timeout, or [`expire`](GroupState::expire) removes it. Leaving removes it
//! at once. A *static* member names an instance id: joining again with that id while its
//! session lives returns the same member and partitions with no rebalance — a restarted
//! process picks up where it was.
//!
//! **Assignment.** Every change of membership (or of the partition count) rebalances with
//! [`assign::sticky`]: balanced, and only partitions that must move do. The group's
//! generation counts rebalances. Reassignment is immediate: a member that lost a partition
//! learns it at its next heartbeat, and its commits for it are refused from then on.
//!
//! **Positions and offsets.** Each assigned partition has a fetch position, which reads
//! advance; it starts at the committed offset when the partition is assigned, so records a
//! previous owner read but did not commit are delivered again to the next owner. A commit
//! (the offset of the next record to read, as in Kafka) is accepted only from the current
//! owner and only forward; an admin [`reset`](GroupState::reset) may move it anywhere.

pub mod assign;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use crate::error::{BrokerError, Result};
use crate::message::millis;

pub use assign::Assignment;

/// What a member holds after a join or heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    pub member_id: String,
    pub generation: u64,
    pub partitions: BTreeSet<u32>,
}

/// How a member joins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Join {
    /// A member id handed out before, to rejoin as that member while its session lives.
    pub member_id: Option<String>,
    /// Static membership: a stable name for this consumer instance.
    pub instance_id: Option<String>,
}

#[derive(Debug, Clone)]
struct Member {
    instance_id: Option<String>,
    last_seen_ms: i64,
}

/// The coordination state of one group; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct GroupState {
    name: String,
    session_timeout_ms: i64,
    partitions: u32,
    generation: u64,
    members: BTreeMap<String, Member>,
    by_instance: HashMap<String, String>,
    assignment: Assignment<String>,
    /// Next offset to read per partition, for assigned partitions the engine has read from.
    positions: BTreeMap<u32, u64>,
    committed: BTreeMap<u32, u64>,
}

impl GroupState {
    pub const MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(100);
    pub const MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(3600);

    /// A group with no members over `partitions`, with the offsets committed before.
    pub fn new(
        name: impl Into<String>,
        partitions: u32,
        session_timeout: Duration,
        committed: BTreeMap<u32, u64>,
    ) -> Result<GroupState> {
        if session_timeout < Self::MIN_SESSION_TIMEOUT
            || session_timeout > Self::MAX_SESSION_TIMEOUT
        {
            return Err(BrokerError::InvalidSetting {
                setting: "session_timeout",
                problem: format!("must be between 100 ms and 1 hour, got {session_timeout:?}"),
            });
        }
        Ok(GroupState {
            name: name.into(),
            session_timeout_ms: millis(session_timeout),
            partitions,
            generation: 0,
            members: BTreeMap::new(),
            by_instance: HashMap::new(),
            assignment: Assignment::new(),
            positions: BTreeMap::new(),
            committed,
        })
    }

    /// Joins (or rejoins) the group. `new_id` makes the id of a new member. A rejoin by a
    /// live member id, or by a live static member's instance id, changes nothing but its
    /// session; anything else adds a member and rebalances.
    pub fn join(&mut self, join: Join, new_id: impl FnOnce() -> String, now_ms: i64) -> Membership {
        let existing = join
            .instance_id
            .as_ref()
            .and_then(|instance| self.by_instance.get(instance).cloned())
            .or_else(|| join.member_id.filter(|id| self.members.contains_key(id)));
        if let Some(member_id) = existing {
            self.members
                .get_mut(&member_id)
                .expect("indexed members exist")
                .last_seen_ms = now_ms;
            return self.membership(&member_id);
        }
        let member_id = new_id();
        if let Some(instance) = &join.instance_id {
            self.by_instance.insert(instance.clone(), member_id.clone());
        }
        let member = Member {
            instance_id: join.instance_id,
            last_seen_ms: now_ms,
        };
        self.members.insert(member_id.clone(), member);
        self.rebalance();
        self.membership(&member_id)
    }

    /// Keeps a member's session alive and tells it what it holds now.
    pub fn heartbeat(&mut self, member_id: &str, now_ms: i64) -> Result<Membership> {
        match self.members.get_mut(member_id) {
            Some(member) => member.last_seen_ms = now_ms,
            None => return Err(self.unknown(member_id)),
        }
        Ok(self.membership(member_id))
    }

    /// Removes a member at once (a static one too) and rebalances.
    pub fn leave(&mut self, member_id: &str) -> Result<()> {
        let member = self
            .members
            .remove(member_id)
            .ok_or_else(|| self.unknown(member_id))?;
        if let Some(instance) = member.instance_id {
            self.by_instance.remove(&instance);
        }
        self.rebalance();
        Ok(())
    }

    /// Removes every member whose session ended (no heartbeat for the session timeout) and
    /// rebalances if any went; returns their ids.
    pub fn expire(&mut self, now_ms: i64) -> Vec<String> {
        let timeout = self.session_timeout_ms;
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| m.last_seen_ms.saturating_add(timeout) <= now_ms)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            if let Some(instance) = self.members.remove(id).and_then(|m| m.instance_id) {
                self.by_instance.remove(&instance);
            }
        }
        if !gone.is_empty() {
            self.rebalance();
        }
        gone
    }

    /// When the next session ends, if nothing heartbeats before.
    #[cfg(test)]
    pub fn next_expiry(&self) -> Option<i64> {
        self.members
            .values()
            .map(|m| m.last_seen_ms.saturating_add(self.session_timeout_ms))
            .min()
    }

    /// The topic gained partitions: rebalance over the new count.
    pub fn set_partitions(&mut self, partitions: u32) {
        self.partitions = partitions;
        self.rebalance();
    }

    /// Where `member_id` reads `partition` next: its fetch position, else the committed
    /// offset, else `None` (the engine applies the group's start: earliest or latest).
    pub fn position(&self, member_id: &str, partition: u32) -> Result<Option<u64>> {
        self.check_owner(member_id, partition)?;
        Ok(self
            .positions
            .get(&partition)
            .or_else(|| self.committed.get(&partition))
            .copied())
    }

    /// Records that `member_id` has read `partition` up to (not including) `next`.
    pub fn advance(&mut self, member_id: &str, partition: u32, next: u64) -> Result<()> {
        self.check_owner(member_id, partition)?;
        self.positions.insert(partition, next);
        Ok(())
    }

    /// Commits `offset` (the next record to read) for `partition`: only its owner may, and
    /// only forward (committing the same offset again is fine).
    pub fn commit(&mut self, member_id: &str, partition: u32, offset: u64) -> Result<()> {
        self.check_owner(member_id, partition)?;
        if let Some(&committed) = self.committed.get(&partition)
            && offset < committed
        {
            return Err(BrokerError::OffsetRegression {
                group: self.name.clone(),
                partition,
                committed,
                offset,
            });
        }
        self.committed.insert(partition, offset);
        Ok(())
    }

    /// An admin moves a partition's committed offset anywhere; its owner reads from there.
    pub fn reset(&mut self, partition: u32, offset: u64) {
        self.committed.insert(partition, offset);
        self.positions.remove(&partition);
    }

    /// Takes back a commit that could not be made durable, for a partition that had none.
    pub fn forget_commit(&mut self, partition: u32) {
        self.committed.remove(&partition);
    }

    pub fn committed(&self) -> &BTreeMap<u32, u64> {
        &self.committed
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Members and what each holds.
    pub fn assignment(&self) -> &Assignment<String> {
        &self.assignment
    }

    fn membership(&self, member_id: &str) -> Membership {
        Membership {
            member_id: member_id.to_owned(),
            generation: self.generation,
            partitions: self.assignment.get(member_id).cloned().unwrap_or_default(),
        }
    }

    fn rebalance(&mut self) {
        let members: BTreeSet<String> = self.members.keys().cloned().collect();
        let next = assign::sticky(&members, self.partitions, &self.assignment);
        // A partition that changed hands restarts from its committed offset.
        for (member, held) in &next {
            for p in held {
                let before = self.assignment.get(member).is_some_and(|h| h.contains(p));
                if !before {
                    self.positions.remove(p);
                }
            }
        }
        self.positions.retain(|p, _| *p < self.partitions);
        self.assignment = next;
        self.generation += 1;
    }

    fn check_owner(&self, member_id: &str, partition: u32) -> Result<()> {
        if !self.members.contains_key(member_id) {
            return Err(self.unknown(member_id));
        }
        if self
            .assignment
            .get(member_id)
            .is_some_and(|held| held.contains(&partition))
        {
            return Ok(());
        }
        Err(BrokerError::NotPartitionOwner {
            group: self.name.clone(),
            member: member_id.to_owned(),
            partition,
        })
    }

    fn unknown(&self, member_id: &str) -> BrokerError {
        BrokerError::UnknownMember {
            group: self.name.clone(),
            member: member_id.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests;
