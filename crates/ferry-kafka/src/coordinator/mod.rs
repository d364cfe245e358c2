//! The group coordinator: Kafka's classic consumer groups, coordinated by this front end.
//! `group.rs` decides (a pure state machine per group) over the calls and answers of
//! `calls.rs`; this module holds the groups, gives each JoinGroup or SyncGroup that must
//! wait a channel for its answer, delivers the answers the state machines decide, and
//! ticks them (session and rebalance timeouts) from a task the server runs.
//!
//! A waiting call holds no lock: other requests, on this connection's peers and on the
//! group, go on while it waits. Membership lives in memory only — after a restart, members
//! join again, as Kafka consumers do after a coordinator moves — while committed offsets
//! are the broker's and durable (see `api/group_offsets.rs`).

pub mod calls;
pub mod group;

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::oneshot;

pub use calls::{JoinReply, JoinRequest, Reply, Step, SyncReply, SyncRequest};
pub use group::{Group, GroupError, Limits, Member, State};

/// How often the timeouts are checked: the precision of session and rebalance timeouts.
pub const TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// Every group this front end coordinates, by group id.
pub struct Coordinator {
    limits: Limits,
    groups: Mutex<HashMap<String, Entry>>,
    /// Makes member ids unique within a millisecond.
    ids: std::sync::atomic::AtomicU64,
}

struct Entry {
    group: Group,
    joins: HashMap<String, oneshot::Sender<JoinReply>>,
    syncs: HashMap<String, oneshot::Sender<SyncReply>>,
}

impl Entry {
    /// Hands the state machine's decided answers to the calls waiting for them. A call
    /// whose connection is gone is simply not answered.
    fn deliver(&mut self) {
        for reply in self.group.take_replies() {
            match reply {
                Reply::Join(id, answer) => {
                    if let Some(waiting) = self.joins.remove(&id) {
                        let _ = waiting.send(answer);
                    }
                }
                Reply::Sync(id, answer) => {
                    if let Some(waiting) = self.syncs.remove(&id) {
                        let _ = waiting.send(answer);
                    }
                }
            }
        }
    }
}

/// An answer decided at once, or one to wait for (outside the groups' lock).
enum Answer<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

/// A snapshot of one group for DescribeGroups and ListGroups.
#[derive(Debug, Clone)]
pub struct GroupView {
    pub state: State,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub members: Vec<Member>,
}

impl Coordinator {
    pub fn new(limits: Limits) -> Coordinator {
        Coordinator {
            limits,
            groups: Mutex::new(HashMap::new()),
            ids: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the group (created if `create`), then delivers what it decided and
    /// drops a group that holds nothing.
    fn with<T>(&self, group_id: &str, create: bool, f: impl FnOnce(&mut Entry) -> T) -> Option<T> {
        let mut groups = self.groups();
        if create && !groups.contains_key(group_id) {
            let entry = Entry {
                group: Group::new(self.limits),
                joins: HashMap::new(),
                syncs: HashMap::new(),
            };
            groups.insert(group_id.to_owned(), entry);
        }
        let entry = groups.get_mut(group_id)?;
        let out = f(entry);
        entry.deliver();
        if entry.group.is_unused() {
            groups.remove(group_id);
        }
        Some(out)
    }

    /// A JoinGroup: answers when the round it is part of ends.
    pub async fn join(&self, group_id: &str, request: JoinRequest, now: i64) -> JoinReply {
        let member_id = request.member_id.clone();
        let suffix = self.ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Unique across restarts too: the time comes first, then a counter.
        let new_id = |prefix: &str| format!("{prefix}-{now:x}-{suffix}");
        let step = self.with(group_id, true, |entry| {
            match entry.group.join(request, now, new_id) {
                Step::Answer(answer) => Answer::Now(answer),
                Step::Wait { member_id } => {
                    let (tx, rx) = oneshot::channel();
                    // A member joining again while an earlier join waits: the newer call
                    // gets the answer, the older one's channel closes.
                    entry.joins.insert(member_id, tx);
                    Answer::Later(rx)
                }
            }
        });
        match step.expect("created") {
            Answer::Now(answer) => answer,
            Answer::Later(rx) => rx.await.unwrap_or_else(|_| {
                JoinReply::refused(GroupError::RebalanceInProgress, &member_id)
            }),
        }
    }

    /// A SyncGroup: a follower's answer waits for the leader's assignment.
    pub async fn sync(&self, group_id: &str, request: SyncRequest, now: i64) -> SyncReply {
        let step = self.with(group_id, false, |entry| {
            match entry.group.sync(request, now) {
                Step::Answer(answer) => Answer::Now(answer),
                Step::Wait { member_id } => {
                    let (tx, rx) = oneshot::channel();
                    entry.syncs.insert(member_id, tx);
                    Answer::Later(rx)
                }
            }
        });
        match step {
            None => Err(GroupError::UnknownMemberId),
            Some(Answer::Now(answer)) => answer,
            Some(Answer::Later(rx)) => rx.await.unwrap_or(Err(GroupError::RebalanceInProgress)),
        }
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<(), GroupError> {
        self.with(group_id, false, |entry| {
            entry
                .group
                .heartbeat(member_id, instance_id, generation, now)
        })
        .unwrap_or(Err(GroupError::UnknownMemberId))
    }

    pub fn leave(
        &self,
        group_id: &str,
        leaving: &[(String, Option<String>)],
        now: i64,
    ) -> Vec<Result<(), GroupError>> {
        self.with(group_id, false, |entry| entry.group.leave(leaving, now))
            .unwrap_or_else(|| vec![Err(GroupError::UnknownMemberId); leaving.len()])
    }

    /// Whether a commit for `generation` is allowed. A group this coordinator does not
    /// know takes commits of generation -1 (simple consumers, admin tools) only: a
    /// member's generation from before a restart is stale.
    pub fn check_commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<(), GroupError> {
        self.with(group_id, false, |entry| {
            entry
                .group
                .check_commit(member_id, instance_id, generation, now)
        })
        .unwrap_or(if generation < 0 {
            Ok(())
        } else {
            Err(GroupError::IllegalGeneration)
        })
    }

    /// The group's state, `None` when this coordinator does not know it.
    pub fn view(&self, group_id: &str) -> Option<GroupView> {
        let groups = self.groups();
        let group = &groups.get(group_id)?.group;
        Some(GroupView {
            state: group.state(),
            protocol_type: group.protocol_type().map(str::to_owned),
            protocol: group.protocol().map(str::to_owned),
            members: group.members().cloned().collect(),
        })
    }

    /// The ids of every group this coordinator knows.
    pub fn group_ids(&self) -> Vec<String> {
        self.groups().keys().cloned().collect()
    }

    /// Forgets a group with no members (DeleteGroups); NON_EMPTY_GROUP otherwise. `Ok` for
    /// a group it does not know.
    pub fn delete(&self, group_id: &str) -> Result<(), GroupError> {
        let mut groups = self.groups();
        if let Some(entry) = groups.get(group_id) {
            entry.group.check_deletable()?;
            groups.remove(group_id);
        }
        Ok(())
    }

    /// Checks every group's timeouts and delivers what that decides.
    pub fn tick(&self, now: i64) {
        let mut groups = self.groups();
        for entry in groups.values_mut() {
            entry.group.tick(now);
            entry.deliver();
        }
        groups.retain(|_, entry| !entry.group.is_unused());
    }
}

#[cfg(test)]
mod tests;
