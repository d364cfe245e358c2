//! One Kafka consumer group's coordination, as Kafka's classic group protocol has it: a
//! pure state machine over explicit times (`now` in ms), without sockets or tasks, so
//! that every rebalance path is tested with a clock the test holds.
//!
//! **States.** `Empty` (no members) → `PreparingRebalance` (a member joined, left, died
//! or changed its protocols: every member must join again) → `CompletingRebalance` (the
//! round is over: a new generation, a protocol, a leader that got every member's
//! metadata; waiting for the leader's assignment) → `Stable` (the leader's SyncGroup
//! handed every member its assignment). A round ends when every member has joined again
//! or at the rebalance deadline (the largest rebalance timeout of the members), when the
//! members that did not join are removed. The first round of an empty group is held open
//! for `group.initial.rebalance.delay.ms` instead (see [`InitialDelay`]), so that members
//! starting together share its generation.
//!
//! **Waiting answers.** JoinGroup and SyncGroup answers wait for the round: a call that
//! must wait returns `Wait`, and the answers the state machine decides later (for that
//! call or for other members') are queued in an outbox that the caller delivers
//! ([`Group::take_replies`]).
//!
//! **Liveness.** A member is heard from by its joins, syncs, heartbeats and commits; one
//! silent for its session timeout is removed ([`Group::tick`]), except while its JoinGroup
//! waits for the round (the rebalance deadline bounds that wait instead). A member id
//! handed out with MEMBER_ID_REQUIRED (v4+) is held for a session timeout for the client
//! to join with it.
//!
//! **Static members** (`group.instance.id`, v5+) keep their place across restarts: one
//! that joins again with a new member id takes over its old id's place — and its
//! assignment, without a rebalance, when the group is stable and its protocols are
//! unchanged — and the old id is fenced (FENCED_INSTANCE_ID).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use super::calls::{
    JoinReply, JoinRequest, JoinedMember, Reply, Step, SyncReply, SyncRequest, Synced,
};

/// A group's state, named as Kafka's DescribeGroups and ListGroups name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
        }
    }
}

/// Why the coordinator refused a call: Kafka's group error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("the member id is not in the group (its session ended, or it left); join again")]
    UnknownMemberId,
    #[error("the generation is not the group's current one; join again")]
    IllegalGeneration,
    #[error("the group is rebalancing; join again")]
    RebalanceInProgress,
    #[error("the protocol type or protocols do not match the group's members")]
    InconsistentGroupProtocol,
    #[error("another member took this static instance id")]
    FencedInstanceId,
    #[error("join again with the member id in this answer")]
    MemberIdRequired,
    #[error("the group is full")]
    GroupMaxSizeReached,
    #[error("the session timeout is outside the coordinator's range")]
    InvalidSessionTimeout,
    #[error("the group has members; they must leave first")]
    NonEmptyGroup,
}

/// The coordinator's bounds on what members ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Kafka's `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// Kafka's `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// Kafka's `group.max.size`.
    pub max_size: usize,
    /// Kafka's `group.initial.rebalance.delay.ms`: how long the first round of an empty
    /// group waits for more members (see [`InitialDelay`]); 0 ends it as soon as everyone
    /// known has joined, like any other round.
    pub initial_rebalance_delay_ms: i32,
}

impl Default for Limits {
    fn default() -> Self {
        // Kafka's defaults.
        Limits {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            max_size: i32::MAX as usize,
            initial_rebalance_delay_ms: 3_000,
        }
    }
}

/// A member of the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned it in the current generation.
    pub assignment: Bytes,
    awaiting_join: bool,
    awaiting_sync: bool,
    last_heard_ms: i64,
    /// Join order: the first member to join leads when there is no leader to keep.
    joined: u64,
}

impl Member {
    /// Its metadata for `protocol`, empty if it has none.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }
}

/// The first round of an empty group, held open as Kafka's `InitialDelayedJoin` holds it:
/// consumers started together usually send their JoinGroups a little apart, and ending
/// the round at the first one's would give it a generation of its own, then a rebalance
/// per late member. The round ends only when the delay expires; if a member joined
/// meanwhile, it waits once more — another delay, or what remains of the first member's
/// rebalance timeout if less — until that timeout is used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InitialDelay {
    expires_ms: i64,
    delay_ms: i64,
    /// What is left of the rebalance timeout after this delay (Kafka's `remainingMs`).
    remaining_ms: i64,
    member_added: bool,
}

/// One consumer group.
#[derive(Debug)]
pub struct Group {
    limits: Limits,
    state: State,
    generation: i32,
    protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Ids handed out with MEMBER_ID_REQUIRED, until when they are held.
    pending: BTreeMap<String, i64>,
    /// Static instance id → its current member id.
    instances: HashMap<String, String>,
    rebalance_deadline_ms: Option<i64>,
    /// Set while the first round of an empty group is held open.
    initial_delay: Option<InitialDelay>,
    joins: u64,
    outbox: Vec<Reply>,
}

impl Group {
    pub fn new(limits: Limits) -> Group {
        Group {
            limits,
            state: State::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            instances: HashMap::new(),
            rebalance_deadline_ms: None,
            initial_delay: None,
            joins: 0,
            outbox: Vec::new(),
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    #[cfg(test)]
    pub fn generation(&self) -> i32 {
        self.generation
    }

    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    /// Nothing to keep: no members, no ids handed out, never a generation.
    pub fn is_unused(&self) -> bool {
        self.members.is_empty() && self.pending.is_empty() && self.generation == 0
    }

    /// The answers decided since the last call, for the waiting calls to be given.
    pub fn take_replies(&mut self) -> Vec<Reply> {
        std::mem::take(&mut self.outbox)
    }

    /// A JoinGroup from `request`; `new_id` makes a member id for a first join.
    pub fn join(
        &mut self,
        request: JoinRequest,
        now: i64,
        new_id: impl FnOnce(&str) -> String,
    ) -> Step<JoinReply> {
        let refuse = |e| Step::Answer(JoinReply::refused(e, &request.member_id));
        let timeout = request.session_timeout_ms;
        if timeout < self.limits.min_session_timeout_ms
            || timeout > self.limits.max_session_timeout_ms
        {
            return refuse(GroupError::InvalidSessionTimeout);
        }
        if request.protocol_type.is_empty()
            || request.protocols.is_empty()
            || !self.accepts(&request)
        {
            return refuse(GroupError::InconsistentGroupProtocol);
        }
        if request.member_id.is_empty() {
            self.join_new(request, now, new_id)
        } else {
            self.join_known(request, now)
        }
    }

    /// Whether a member with `request`'s protocols may be in the group: the same protocol
    /// type, and a protocol every member (this one included) supports.
    fn accepts(&self, request: &JoinRequest) -> bool {
        let others: Vec<&Member> = self
            .members
            .values()
            .filter(|m| m.id != request.member_id)
            .collect();
        if others.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(request.protocol_type.as_str()) {
            return false;
        }
        request.protocols.iter().any(|(name, _)| {
            others
                .iter()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    fn join_new(
        &mut self,
        request: JoinRequest,
        now: i64,
        new_id: impl FnOnce(&str) -> String,
    ) -> Step<JoinReply> {
        let id = new_id(
            request
                .instance_id
                .as_deref()
                .unwrap_or(request.client_id.as_str()),
        );
        if let Some(instance) = &request.instance_id
            && let Some(old) = self.instances.get(instance).cloned()
            && self.members.contains_key(&old)
        {
            return self.replace_static(&old, id, request, now);
        }
        if self.members.len() + self.pending.len() >= self.limits.max_size {
            return Step::Answer(JoinReply::refused(GroupError::GroupMaxSizeReached, ""));
        }
        // A static member is known by its instance id, so it needs no second round trip.
        if request.require_known_member_id && request.instance_id.is_none() {
            let held_until = now + i64::from(request.session_timeout_ms);
            self.pending.insert(id.clone(), held_until);
            return Step::Answer(JoinReply::refused(GroupError::MemberIdRequired, &id));
        }
        self.add_member(id, request, now)
    }

    fn join_known(&mut self, request: JoinRequest, now: i64) -> Step<JoinReply> {
        let id = request.member_id.clone();
        if self.pending.remove(&id).is_some() {
            return self.add_member(id, request, now);
        }
        if let Err(e) = self.check_member(&id, request.instance_id.as_deref()) {
            return Step::Answer(JoinReply::refused(e, &id));
        }
        let unchanged = self.members[&id].protocols == request.protocols;
        let leads = self.leader.as_deref() == Some(id.as_str());
        let member = self.members.get_mut(&id).expect("checked above");
        member.last_heard_ms = now;
        match self.state {
            State::PreparingRebalance => {
                update(member, request);
                member.awaiting_join = true;
                self.maybe_complete_join(now);
                Step::Wait { member_id: id }
            }
            // The same metadata again (it missed the answer, or a follower with nothing
            // new): the current generation, without a new round. A leader joining again
            // in a stable group wants to assign again, so it starts a round.
            State::CompletingRebalance if unchanged => Step::Answer(self.current(&id)),
            State::Stable if unchanged && !leads => Step::Answer(self.current(&id)),
            State::CompletingRebalance | State::Stable => {
                update(member, request);
                member.awaiting_join = true;
                self.prepare_rebalance(now);
                Step::Wait { member_id: id }
            }
            State::Empty => unreachable!("an empty group has no members"),
        }
    }

    /// A static member joined again with a new member id: the new id takes the old one's
    /// place (and its assignment), and the old id is fenced.
    fn replace_static(
        &mut self,
        old: &str,
        id: String,
        request: JoinRequest,
        now: i64,
    ) -> Step<JoinReply> {
        let mut member = self.members.remove(old).expect("checked by the caller");
        if member.awaiting_join {
            let fenced = JoinReply::refused(GroupError::FencedInstanceId, old);
            self.outbox.push(Reply::Join(old.to_owned(), fenced));
        }
        if member.awaiting_sync {
            let fenced = Err(GroupError::FencedInstanceId);
            self.outbox.push(Reply::Sync(old.to_owned(), fenced));
        }
        let unchanged = member.protocols == request.protocols;
        member.id = id.clone();
        member.awaiting_sync = false;
        member.last_heard_ms = now;
        if self.leader.as_deref() == Some(old) {
            self.leader = Some(id.clone());
        }
        if let Some(instance) = &member.instance_id {
            self.instances.insert(instance.clone(), id.clone());
        }
        update(&mut member, request);
        self.members.insert(id.clone(), member);
        match self.state {
            State::Stable if unchanged => {
                self.members.get_mut(&id).expect("inserted").awaiting_join = false;
                Step::Answer(self.current(&id))
            }
            _ => {
                self.members.get_mut(&id).expect("inserted").awaiting_join = true;
                if self.state == State::PreparingRebalance {
                    self.maybe_complete_join(now);
                } else {
                    self.prepare_rebalance(now);
                }
                Step::Wait { member_id: id }
            }
        }
    }

    fn add_member(&mut self, id: String, request: JoinRequest, now: i64) -> Step<JoinReply> {
        self.joins += 1;
        if self.members.is_empty() {
            self.protocol_type = Some(request.protocol_type.clone());
        }
        if let Some(instance) = &request.instance_id {
            self.instances.insert(instance.clone(), id.clone());
        }
        let member = Member {
            id: id.clone(),
            instance_id: request.instance_id,
            client_id: request.client_id,
            client_host: request.client_host,
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            protocols: request.protocols,
            assignment: Bytes::new(),
            awaiting_join: true,
            awaiting_sync: false,
            last_heard_ms: now,
            joined: self.joins,
        };
        self.members.insert(id.clone(), member);
        if self.state == State::PreparingRebalance {
            if let Some(delay) = &mut self.initial_delay {
                delay.member_added = true;
            }
            self.maybe_complete_join(now);
        } else {
            self.prepare_rebalance(now);
        }
        Step::Wait { member_id: id }
    }

    /// Starts a round: every member must join again by the deadline. A member waiting for
    /// its SyncGroup answer learns of the round from it.
    fn prepare_rebalance(&mut self, now: i64) {
        for member in self.members.values_mut() {
            if member.awaiting_sync {
                member.awaiting_sync = false;
                let reply = Err(GroupError::RebalanceInProgress);
                self.outbox.push(Reply::Sync(member.id.clone(), reply));
            }
        }
        let longest = self
            .members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0);
        let configured = i64::from(self.limits.initial_rebalance_delay_ms);
        if self.state == State::Empty && configured > 0 {
            self.state = State::PreparingRebalance;
            self.rebalance_deadline_ms = None;
            self.initial_delay = Some(InitialDelay {
                expires_ms: now + configured,
                delay_ms: configured,
                remaining_ms: (longest - configured).max(0),
                member_added: false,
            });
            return;
        }
        self.state = State::PreparingRebalance;
        self.rebalance_deadline_ms = Some(now + longest);
        self.maybe_complete_join(now);
    }

    fn maybe_complete_join(&mut self, now: i64) {
        if self.state != State::PreparingRebalance {
            return;
        }
        if let Some(delay) = self.initial_delay {
            // Only the delay's expiry ends the first round, however many have joined.
            if now < delay.expires_ms {
                return;
            }
            if delay.member_added && delay.remaining_ms > 0 {
                let configured = i64::from(self.limits.initial_rebalance_delay_ms);
                let next = configured.min(delay.remaining_ms);
                self.initial_delay = Some(InitialDelay {
                    expires_ms: now + next,
                    delay_ms: next,
                    // As Kafka computes it: less the delay that just ended.
                    remaining_ms: (delay.remaining_ms - delay.delay_ms).max(0),
                    member_added: false,
                });
                return;
            }
            self.initial_delay = None;
            self.complete_join(now);
            return;
        }
        let everyone = self.pending.is_empty() && self.members.values().all(|m| m.awaiting_join);
        let late = self.rebalance_deadline_ms.is_some_and(|d| now >= d);
        if everyone || late {
            self.complete_join(now);
        }
    }

    /// Ends a round: the members that did not join are removed, and the rest get a new
    /// generation — or the group is empty.
    fn complete_join(&mut self, now: i64) {
        let absent: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join)
            .map(|m| m.id.clone())
            .collect();
        for id in absent {
            self.forget(&id);
        }
        self.rebalance_deadline_ms = None;
        self.generation += 1;
        if self.members.is_empty() {
            self.state = State::Empty;
            self.protocol = None;
            self.leader = None;
            return;
        }
        self.protocol = Some(self.select_protocol());
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self
                .members
                .values()
                .min_by_key(|m| m.joined)
                .map(|m| m.id.clone());
        }
        self.state = State::CompletingRebalance;
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let member = self.members.get_mut(&id).expect("listed above");
            member.awaiting_join = false;
            member.last_heard_ms = now;
            member.assignment = Bytes::new();
            let reply = self.current(&id);
            self.outbox.push(Reply::Join(id, reply));
        }
    }

    /// The protocol most members prefer among those every member supports (as Kafka
    /// chooses: each member votes for its first such protocol; a tie goes to the leader's
    /// or the first member's order of preference).
    fn select_protocol(&self) -> String {
        let first = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .or_else(|| self.members.values().min_by_key(|m| m.joined))
            .expect("called with members");
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(name, _)| name)
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == *name))
            })
            .collect();
        let votes = |name: &String| {
            self.members
                .values()
                .filter(|m| {
                    m.protocols
                        .iter()
                        .map(|(n, _)| n)
                        .find(|n| candidates.contains(n))
                        == Some(name)
                })
                .count()
        };
        // Joins are refused unless a common protocol remains, so there is a candidate.
        let best = candidates.iter().map(|c| votes(c)).max().unwrap_or(0);
        candidates
            .iter()
            .find(|c| votes(c) == best)
            .map(|c| (*c).clone())
            .unwrap_or_default()
    }

    /// The current generation as `id` is told it.
    fn current(&self, id: &str) -> JoinReply {
        let leader = self.leader.clone().unwrap_or_default();
        let protocol = self.protocol.clone().unwrap_or_default();
        let members = if leader == id {
            self.members
                .values()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    metadata: m.metadata(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinReply {
            error: None,
            member_id: id.to_owned(),
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader,
            members,
        }
    }

    /// A SyncGroup: a follower waits for the leader's assignment, the leader's ends the
    /// round; in a stable group, the member's assignment at once.
    pub fn sync(&mut self, request: SyncRequest, now: i64) -> Step<SyncReply> {
        let id = request.member_id.clone();
        if let Err(e) =
            self.check_generation(&id, request.instance_id.as_deref(), request.generation)
        {
            return Step::Answer(Err(e));
        }
        let protocol_type_differs = request
            .protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != self.protocol_type.as_ref());
        let protocol_differs = request
            .protocol
            .as_ref()
            .is_some_and(|p| Some(p) != self.protocol.as_ref());
        if protocol_type_differs || protocol_differs {
            return Step::Answer(Err(GroupError::InconsistentGroupProtocol));
        }
        self.members
            .get_mut(&id)
            .expect("checked above")
            .last_heard_ms = now;
        match self.state {
            State::PreparingRebalance => Step::Answer(Err(GroupError::RebalanceInProgress)),
            State::Stable => Step::Answer(Ok(self.synced(&id))),
            State::CompletingRebalance => {
                self.members
                    .get_mut(&id)
                    .expect("checked above")
                    .awaiting_sync = true;
                if self.leader.as_deref() == Some(id.as_str()) {
                    let assignments: HashMap<String, Bytes> =
                        request.assignments.into_iter().collect();
                    for member in self.members.values_mut() {
                        member.assignment =
                            assignments.get(&member.id).cloned().unwrap_or_default();
                    }
                    self.state = State::Stable;
                    let waiting: Vec<String> = self
                        .members
                        .values()
                        .filter(|m| m.awaiting_sync)
                        .map(|m| m.id.clone())
                        .collect();
                    for id in waiting {
                        let member = self.members.get_mut(&id).expect("listed above");
                        member.awaiting_sync = false;
                        member.last_heard_ms = now;
                        let reply = Ok(self.synced(&id));
                        self.outbox.push(Reply::Sync(id, reply));
                    }
                }
                Step::Wait { member_id: id }
            }
            State::Empty => Step::Answer(Err(GroupError::UnknownMemberId)),
        }
    }

    fn synced(&self, id: &str) -> Synced {
        Synced {
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            assignment: self.members[id].assignment.clone(),
        }
    }

    /// A Heartbeat: REBALANCE_IN_PROGRESS tells the member to join again.
    pub fn heartbeat(
        &mut self,
        id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<(), GroupError> {
        self.check_generation(id, instance_id, generation)?;
        self.members.get_mut(id).expect("checked").last_heard_ms = now;
        match self.state {
            State::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// Whether a member may commit offsets for `generation`. A commit with generation -1
    /// and no member id (a simple consumer, an admin tool) is allowed while the group is
    /// empty; a member's commit counts as hearing from it.
    pub fn check_commit(
        &mut self,
        id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<(), GroupError> {
        if generation < 0 && id.is_empty() && self.state == State::Empty {
            return Ok(());
        }
        self.check_generation(id, instance_id, generation)?;
        self.members.get_mut(id).expect("checked").last_heard_ms = now;
        match self.state {
            State::CompletingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// LeaveGroup for each (member id, instance id); a member id may be empty when the
    /// instance id names the member (v3+).
    pub fn leave(
        &mut self,
        leaving: &[(String, Option<String>)],
        now: i64,
    ) -> Vec<Result<(), GroupError>> {
        leaving
            .iter()
            .map(|(id, instance)| {
                let id = match (id.is_empty(), instance) {
                    (true, Some(instance)) => self
                        .instances
                        .get(instance)
                        .cloned()
                        .ok_or(GroupError::UnknownMemberId)?,
                    _ => id.clone(),
                };
                if self.pending.remove(&id).is_some() {
                    return Ok(());
                }
                self.check_member(&id, instance.as_deref())?;
                self.remove_member(&id, now);
                Ok(())
            })
            .collect()
    }

    /// Ends the sessions that timed out, the member ids held too long, and a round past
    /// its deadline.
    pub fn tick(&mut self, now: i64) {
        self.pending.retain(|_, until| *until > now);
        let silent: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                !m.awaiting_join && now - m.last_heard_ms >= i64::from(m.session_timeout_ms)
            })
            .map(|m| m.id.clone())
            .collect();
        for id in silent {
            self.remove_member(&id, now);
        }
        self.maybe_complete_join(now);
    }

    /// Whether the group can be deleted: no members.
    pub fn check_deletable(&self) -> Result<(), GroupError> {
        if self.members.is_empty() {
            Ok(())
        } else {
            Err(GroupError::NonEmptyGroup)
        }
    }

    fn remove_member(&mut self, id: &str, now: i64) {
        let Some(member) = self.forget(id) else {
            return;
        };
        if member.awaiting_join {
            let reply = JoinReply::refused(GroupError::UnknownMemberId, id);
            self.outbox.push(Reply::Join(id.to_owned(), reply));
        }
        if member.awaiting_sync {
            let reply = Err(GroupError::UnknownMemberId);
            self.outbox.push(Reply::Sync(id.to_owned(), reply));
        }
        match self.state {
            State::Stable | State::CompletingRebalance => self.prepare_rebalance(now),
            State::PreparingRebalance => self.maybe_complete_join(now),
            State::Empty => {}
        }
    }

    /// Takes a member out of the group's maps (its waiting calls are the caller's).
    fn forget(&mut self, id: &str) -> Option<Member> {
        let member = self.members.remove(id)?;
        if let Some(instance) = &member.instance_id
            && self.instances.get(instance).map(String::as_str) == Some(id)
        {
            self.instances.remove(instance);
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
        Some(member)
    }

    /// The member exists and, when an instance id is given, is that instance's current
    /// member (else FENCED_INSTANCE_ID: another process took the instance over).
    fn check_member(&self, id: &str, instance_id: Option<&str>) -> Result<(), GroupError> {
        if let Some(instance) = instance_id
            && let Some(current) = self.instances.get(instance)
            && current != id
        {
            return Err(GroupError::FencedInstanceId);
        }
        if self.members.contains_key(id) {
            Ok(())
        } else {
            Err(GroupError::UnknownMemberId)
        }
    }

    fn check_generation(
        &self,
        id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), GroupError> {
        self.check_member(id, instance_id)?;
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        Ok(())
    }
}

/// A member's JoinGroup replaces what it said before.
fn update(member: &mut Member, request: JoinRequest) {
    member.client_id = request.client_id;
    member.client_host = request.client_host;
    member.session_timeout_ms = request.session_timeout_ms;
    member.rebalance_timeout_ms = request.rebalance_timeout_ms;
    member.protocols = request.protocols;
}
