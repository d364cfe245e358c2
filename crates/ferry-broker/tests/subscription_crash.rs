//! Crash test of subscriptions and consumer groups with a real SIGKILL.
//!
//! The parent test re-executes this test binary with `FERRY_SUB_CRASH_CHILD_DIR` set, which
//! turns `subscription_crash_child_broker_under_load` into a broker process: it opens a
//! [`Broker`] on that directory (real clock, background timers, small segments), creates if
//! missing a `Durability::Fsync` topic `events` of three partitions and three subscriptions
//! of it, all from the earliest record:
//!
//! - `fan`: shared, every message;
//! - `keyed`: key-shared, the messages whose subject is `a.*`;
//! - `solo`: exclusive (one active consumer, one message at a time, in publish order), the
//!   messages whose subject is `b.*`.
//!
//! Then it runs producers (`publish_to_topic`, batches of one to four, most messages keyed
//! by one of six keys, a few delayed by up to 250 ms), two consumers per subscription that
//! receive, ack most messages and nack some (with a short delay), and one static member of
//! the consumer group `audit` that polls every partition and commits each partition's next
//! offset after each poll (most of the time: what it leaves uncommitted must be polled
//! again). Housekeeping runs every 50 ms with small journals and segments, and a task forces
//! checkpoints now and then, so kills also land in checkpoints, saves of the
//! subscriptions' cursors and deletions of settled segments.
//!
//! Everything about a message derives from its [`Id`], so both sides can check what they
//! read. The child says each step on stdout *after* the call returned (one write per line):
//! `PUB <partition> <offset> <id>`, `RECV <sub> <id>`, `ACK <sub> <id>`, `COMMIT <p> <o>`;
//! and *before* a call whose effect may be durable without its answer being seen:
//! `ACKING <sub> <id>`, `COMMITTING <p> <o>`. `GSTART <p> <o>` is the first record the
//! group member of this child polled from partition `p`: where the group resumed.
//!
//! The child checks on its own that every delivery is a message the test published, that a
//! subscription only delivers what its filter takes, that a key of `keyed` and the whole of
//! `solo` never have two unexpired leases at once, that `solo` does not fail over while its
//! active consumer keeps asking, and that the group's records of a partition follow each
//! other without a gap.
//!
//! The parent SIGKILLs the child at a random moment (round plan and timing shared with the
//! other crash tests; `FERRY_SUB_CRASH_PASSES` passes over it, 2 by default) and, after the
//! rounds that verify, reopens the broker with a manual clock and checks:
//!
//! - every acknowledged publish is in the topic at its position, no message twice, and what
//!   an earlier look saw is unchanged;
//! - a message acked (`ACK`) on a subscription is never delivered there again, in this
//!   round or any later one;
//! - the group's committed offsets never go backwards: a child resumes each partition at
//!   the last acknowledged commit or at one under way at the kill, never before (records
//!   not committed are polled again) and never after;
//! - per key on `keyed`, per partition on `solo`, messages are acked in publish order (the
//!   order the acks were made, which is the order the broker settled them in).
//!
//! At the end it reopens each directory an hour later (every lease expired, every retry
//! due), drains every subscription and the group, and checks that each subscription
//! delivered every message of the topic its filter takes exactly once counting acks (none
//! lost, none acked twice), and that the group reads each partition from its committed
//! offset to its end.
//!
//! Replay the random choices of a run with `FERRY_SUB_CRASH_SEED=<seed it printed>`
//! (thread timing still varies).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_broker::{
    Acked, Broker, BrokerConfig, BrokerError, DeadLetter, Durability, Filter, GroupJoin, Limits,
    MessageId, OrderingMode, OutgoingMessage, Position, QueueSpec, ReceivedMessage, RetryPolicy,
    SubscriptionSpec, SubscriptionStart, TopicRecord, TopicRetention, TopicSpec,
};
use ferry_storage::ManualClock;

#[path = "support/killed_child.rs"]
mod killed_child;

use killed_child::{
    Kill, Killed, ROUNDS, fail, kill_for, now_ms, run_and_kill, say, seed_from_env, splitmix,
};

const CHILD_DIR_ENV: &str = "FERRY_SUB_CRASH_CHILD_DIR";
const CHILD_ROUND_ENV: &str = "FERRY_SUB_CRASH_ROUND";
const CHILD_SEED_ENV: &str = "FERRY_SUB_CRASH_CHILD_SEED";
const SEED_ENV: &str = "FERRY_SUB_CRASH_SEED";
const PASSES_ENV: &str = "FERRY_SUB_CRASH_PASSES";
const CHILD_TEST_NAME: &str = "subscription_crash_child_broker_under_load";
/// A child that is never killed stops by itself after this long.
const CHILD_MAX_RUN: Duration = Duration::from_secs(15);

const TOPIC: &str = "events";
const PARTITIONS: u32 = 3;
const PRODUCERS: u32 = 2;
const KEYS: u32 = 6;
const ID_HEADER: &str = "crash-id";
const SUBJECTS: [&str; 3] = ["a.one", "a.two", "b.one"];
const GROUP: &str = "audit";
const GROUP_INSTANCE: &str = "audit-static";
/// Short, so that the leases of a killed child's deliveries run out a round or two later and
/// their messages are delivered again.
const LEASE: Duration = Duration::from_secs(1);

/// A subscription of the test: name, ordering, filter.
struct Sub {
    name: &'static str,
    ordering: OrderingMode,
    filter: &'static str,
}

const SUBS: [Sub; 3] = [
    Sub {
        name: "fan",
        ordering: OrderingMode::Shared,
        filter: "",
    },
    Sub {
        name: "keyed",
        ordering: OrderingMode::KeyShared,
        filter: "subject ~ a.*",
    },
    Sub {
        name: "solo",
        ordering: OrderingMode::Exclusive,
        filter: "subject ~ b.*",
    },
];

impl Sub {
    fn takes(&self, subject: &str) -> bool {
        match self.ordering {
            OrderingMode::Shared => true,
            OrderingMode::KeyShared => subject.starts_with("a."),
            OrderingMode::Exclusive => subject.starts_with("b."),
        }
    }
}

/// Message `n` of producer `producer` of round `round`: everything about it derives from
/// this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Id {
    round: u32,
    producer: u32,
    n: u64,
}

impl Id {
    fn message_id(&self) -> MessageId {
        let random = (1u128 << 78)
            | ((self.round as u128) << 64)
            | ((self.producer as u128) << 48)
            | self.n as u128;
        MessageId::from_ulid(ulid::Ulid::from_parts(1_600_000_000_000, random))
    }

    fn parse(s: &str) -> Option<Id> {
        let parts: Vec<&str> = s.strip_prefix('m')?.split('.').collect();
        let [a, b, c] = parts[..] else {
            return None;
        };
        Some(Id {
            round: a.parse().ok()?,
            producer: b.parse().ok()?,
            n: c.parse().ok()?,
        })
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "m{}.{}.{}", self.round, self.producer, self.n)
    }
}

/// What a message carries besides its id.
struct Shape {
    subject: &'static str,
    key: Option<String>,
    payload: Vec<u8>,
    delay: Option<Duration>,
}

fn shape(id: Id) -> Shape {
    let seed = ((id.round as u64) << 48) ^ ((id.producer as u64) << 40) ^ id.n;
    let mut rng = fastrand::Rng::with_seed(splitmix(seed));
    let size = 1 + rng.usize(..200);
    Shape {
        subject: SUBJECTS[rng.usize(..SUBJECTS.len())],
        key: (rng.u8(..5) != 0).then(|| format!("k{}", rng.u32(..KEYS))),
        payload: std::iter::repeat_with(|| rng.u8(..)).take(size).collect(),
        delay: (rng.u8(..25) == 0).then(|| Duration::from_millis(50 + rng.u64(..200))),
    }
}

fn derive(id: Id) -> OutgoingMessage {
    let Shape {
        subject,
        key,
        payload,
        delay,
    } = shape(id);
    let mut message = OutgoingMessage::new(payload)
        .with_id(id.message_id())
        .with_header(ID_HEADER, id.to_string())
        .with_header("subject", subject);
    if let Some(key) = key {
        message = message.with_key(key);
    }
    if let Some(delay) = delay {
        message = message.with_delay(delay);
    }
    message
}

/// The id of a message, if it is one the test published, unchanged.
fn identify(
    id_header: Option<&String>,
    message_id: MessageId,
    payload: &[u8],
    key: Option<&[u8]>,
) -> Result<Id, String> {
    let Some(id) = id_header.and_then(|s| Id::parse(s)) else {
        return Err(format!("no or a garbled {ID_HEADER} header: {id_header:?}"));
    };
    let want = shape(id);
    if message_id != id.message_id() {
        return Err(format!(
            "{id}: message id {message_id} is not the producer's"
        ));
    }
    if payload != want.payload {
        return Err(format!("{id}: payload differs"));
    }
    if key != want.key.as_deref().map(str::as_bytes) {
        return Err(format!("{id}: key {key:?}, want {:?}", want.key));
    }
    Ok(id)
}

fn identify_record(record: &TopicRecord) -> Result<Id, String> {
    let m = &record.message;
    let id = identify(m.headers.get(ID_HEADER), m.id, &m.payload, m.key.as_deref())?;
    if m.headers.get("subject").map(String::as_str) != Some(shape(id).subject) {
        return Err(format!(
            "{id}: subject header {:?}",
            m.headers.get("subject")
        ));
    }
    Ok(id)
}

fn identify_delivery(sub: &Sub, m: &ReceivedMessage) -> Result<Id, String> {
    let id = identify(m.headers.get(ID_HEADER), m.id, &m.payload, m.key.as_deref())?;
    let subject = shape(id).subject;
    if m.headers.get("subject").map(String::as_str) != Some(subject) {
        return Err(format!(
            "{id}: subject header {:?}",
            m.headers.get("subject")
        ));
    }
    if !sub.takes(subject) {
        return Err(format!(
            "{id} with subject {subject} delivered, the filter {:?} does not take it",
            sub.filter
        ));
    }
    Ok(id)
}

fn topic_spec() -> TopicSpec {
    TopicSpec {
        partitions: PARTITIONS,
        durability: Durability::Fsync,
        // Nothing may leave: the final drain counts every record.
        retention: TopicRetention {
            max_age: None,
            max_bytes: None,
            ..TopicRetention::default()
        },
        ..TopicSpec::default()
    }
}

fn subscription_spec(sub: &Sub) -> SubscriptionSpec {
    let mut spec = SubscriptionSpec::new(ferry_broker::Name::new(TOPIC).unwrap());
    spec.filter = Filter::parse(sub.filter).unwrap();
    spec.start = SubscriptionStart::Earliest;
    spec.delivery = QueueSpec {
        ordering: sub.ordering,
        lease: LEASE,
        durability: Durability::Fsync,
        // Nacks and killed leases never use a message up: every one must be delivered.
        retry: RetryPolicy {
            max_deliveries: RetryPolicy::MAX_DELIVERIES,
            ..RetryPolicy::default()
        },
        dead_letter: DeadLetter::Disabled,
        ..spec.delivery
    };
    spec
}

/// Small segments and journals checkpointed often, housekeeping (subscriptions' catch-up
/// and saved cursors, checkpoints, retention of settled references) every 50 ms: kills land
/// around segment rolls, checkpoints and cursor saves too.
fn config(seed: u64) -> BrokerConfig {
    BrokerConfig {
        seed: Some(seed),
        limits: Limits {
            max_payload_bytes: 1024,
            ..Limits::default()
        },
        message_segment_bytes: 1,
        journal_segment_bytes: 16 << 10,
        checkpoint_journal_bytes: 8 << 10,
        housekeeping_interval: Duration::from_millis(50),
        ..BrokerConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// The child.

fn env_u64(name: &str) -> u64 {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is set for the child"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a number"))
}

async fn produce(broker: Broker, round: u32, producer: u32, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut n = 0u64;
    loop {
        let count = 1 + rng.u64(..4);
        let ids: Vec<Id> = (n..n + count).map(|n| Id { round, producer, n }).collect();
        let messages: Vec<OutgoingMessage> = ids.iter().map(|&id| derive(id)).collect();
        match broker.publish_to_topic(TOPIC, messages).await {
            Ok(got) if got.len() == ids.len() => {
                for (id, at) in ids.iter().zip(&got) {
                    say(&format!("PUB {} {} {id}\n", at.partition, at.offset));
                }
            }
            Ok(got) => fail(&format!("publish of {ids:?} returned {got:?}")),
            Err(e) => fail(&format!("publish of {ids:?}: {e}")),
        }
        n += count;
        tokio::time::sleep(Duration::from_millis(rng.u64(..4))).await;
    }
}

/// Deliveries that must not overlap: (subscription, key or none for the whole of it).
type Slot = (usize, Option<Vec<u8>>);

/// What the consumers of one child share: the deliveries that must not overlap (per key of
/// `keyed`, the whole of `solo`) and when each consumer last asked to receive.
#[derive(Default)]
struct Held {
    /// (subscription, key or none) → (id, lease end, consumer).
    leases: HashMap<Slot, (Id, i64, String)>,
    /// The consumer `solo` delivered to last in this child.
    solo_active: Option<String>,
    asked_ms: HashMap<String, i64>,
}

async fn consume(broker: Broker, sub: usize, consumer: String, held: Arc<Mutex<Held>>, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let s = &SUBS[sub];
    loop {
        held.lock()
            .unwrap()
            .asked_ms
            .insert(consumer.clone(), now_ms());
        let max = 1 + rng.usize(..8);
        let got = match broker
            .receive(
                s.name,
                &consumer,
                max,
                None,
                Some(Duration::from_millis(100)),
            )
            .await
        {
            Ok(got) => got,
            Err(e) => fail(&format!("{consumer} receive from {}: {e}", s.name)),
        };
        let mut ids = Vec::with_capacity(got.len());
        for m in &got {
            let id = identify_delivery(s, m)
                .unwrap_or_else(|problem| fail(&format!("{} delivered {problem}", s.name)));
            say(&format!("RECV {} {id}\n", s.name));
            check_exclusive(s, sub, &consumer, id, m, &held);
            ids.push(id);
        }
        for (m, id) in got.iter().zip(ids) {
            // The broker may hand out the next message of the slot as soon as it settles
            // this one, before the settlement is durable and the call returns.
            if let Some(slot) = slot_of(s, m) {
                let mut held = held.lock().unwrap();
                if held.leases.get(&(sub, slot.clone())).map(|h| h.0) == Some(id) {
                    held.leases.remove(&(sub, slot));
                }
            }
            if rng.u8(..10) == 0 {
                let delay = Duration::from_millis(rng.u64(..30));
                match broker
                    .nack(s.name, m.seq, m.token, Some(delay), Some("crash test"))
                    .await
                {
                    Ok(_) | Err(BrokerError::StaleLease { .. }) => {}
                    Err(e) => fail(&format!("{consumer} nack {id} on {}: {e}", s.name)),
                }
            } else {
                say(&format!("ACKING {} {id}\n", s.name));
                match broker.ack(s.name, m.seq, m.token).await {
                    Ok(Acked::Settled) => say(&format!("ACK {} {id}\n", s.name)),
                    Ok(Acked::AlreadySettled) => fail(&format!(
                        "{consumer}'s ack of {id} on {} (delivery {}) says it was settled \
                         before",
                        s.name, m.delivery
                    )),
                    Err(BrokerError::StaleLease { .. }) => say(&format!("STALE {} {id}\n", s.name)),
                    Err(e) => fail(&format!("{consumer} ack {id} on {}: {e}", s.name)),
                }
            }
        }
    }
}

/// Which deliveries of subscription `s` must not overlap with `m`: those of its key on a
/// key-shared subscription, all on an exclusive one.
fn slot_of(s: &Sub, m: &ReceivedMessage) -> Option<Option<Vec<u8>>> {
    match s.ordering {
        OrderingMode::Shared => None,
        OrderingMode::KeyShared => m.key.as_ref().map(|k| Some(k.to_vec())),
        OrderingMode::Exclusive => Some(None),
    }
}

fn check_exclusive(
    s: &Sub,
    sub: usize,
    consumer: &str,
    id: Id,
    m: &ReceivedMessage,
    held: &Mutex<Held>,
) {
    let Some(slot) = slot_of(s, m) else {
        return;
    };
    let now = now_ms();
    let mut held = held.lock().unwrap();
    if let Some((other, until, by)) = held.leases.get(&(sub, slot.clone()))
        && *until > now
    {
        fail(&format!(
            "BROKER BUG: {} delivered {id} to {consumer} while {other} is leased to {by} for \
             {} ms more ({})",
            s.name,
            until - now,
            match &slot {
                Some(key) => format!("key {:?}", String::from_utf8_lossy(key)),
                None => "exclusive".to_owned(),
            }
        ));
    }
    held.leases
        .insert((sub, slot), (id, m.lease_until_ms, consumer.to_owned()));
    if s.ordering == OrderingMode::Exclusive {
        if let Some(active) = held.solo_active.clone()
            && active != consumer
        {
            let asked = held.asked_ms.get(&active).copied().unwrap_or(0);
            // The active consumer asks at least every 100 ms unless it is settling: it
            // holds a lease then, which also keeps it active.
            if now - asked < LEASE.as_millis() as i64 / 2 {
                fail(&format!(
                    "BROKER BUG: {} failed over from {active} (asked {} ms ago) to {consumer}",
                    s.name,
                    now - asked
                ));
            }
        }
        held.solo_active = Some(consumer.to_owned());
    }
}

async fn audit(broker: Broker, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let join = GroupJoin {
        instance_id: Some(GROUP_INSTANCE.to_owned()),
        session_timeout: Duration::from_secs(30),
        ..GroupJoin::default()
    };
    let member = match broker.join_group(TOPIC, GROUP, join).await {
        Ok(membership) => membership.member_id,
        Err(e) => fail(&format!("join {GROUP}: {e}")),
    };
    let mut next: HashMap<u32, u64> = HashMap::new();
    loop {
        let records = match broker.poll_group(TOPIC, GROUP, &member, 1 + rng.usize(..32)) {
            Ok(records) => records,
            Err(e) => fail(&format!("poll {GROUP}: {e}")),
        };
        let mut touched = BTreeSet::new();
        for record in &records {
            let p = record.partition;
            if let Err(problem) = identify_record(record) {
                fail(&format!("{GROUP} polled {p}/{}: {problem}", record.offset));
            }
            match next.get(&p) {
                None => say(&format!("GSTART {p} {}\n", record.offset)),
                Some(&want) if want != record.offset => fail(&format!(
                    "BROKER BUG: {GROUP} polled {p}/{} after {p}/{}",
                    record.offset,
                    want - 1
                )),
                Some(_) => {}
            }
            next.insert(p, record.offset + 1);
            touched.insert(p);
        }
        for p in touched {
            let offset = next[&p];
            if rng.u8(..4) == 0 {
                // Left uncommitted for now: polled again after a kill.
                continue;
            }
            say(&format!("COMMITTING {p} {offset}\n"));
            if let Err(e) = broker.commit_offset(TOPIC, GROUP, &member, p, offset) {
                fail(&format!("commit {p}/{offset}: {e}"));
            }
            say(&format!("COMMIT {p} {offset}\n"));
        }
        tokio::time::sleep(Duration::from_millis(5 + rng.u64(..20))).await;
    }
}

/// Housekeeping on top of the timer task's, sometimes forced: checkpoints of every queue.
async fn maintain(broker: Broker, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    loop {
        tokio::time::sleep(Duration::from_millis(20 + rng.u64(..80))).await;
        match broker.maintain_now(rng.bool()).await {
            Ok(report) => say(&format!(
                "MAINT {} {}\n",
                report.checkpoints, report.deleted_segments
            )),
            Err(e) => fail(&format!("housekeeping: {e}")),
        }
    }
}

/// The child side: does nothing unless the parent started this binary to be crashed.
#[tokio::test]
async fn subscription_crash_child_broker_under_load() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let round = env_u64(CHILD_ROUND_ENV) as u32;
    let seed = env_u64(CHILD_SEED_ENV);
    let broker = match Broker::open(&dir, config(splitmix(seed))).await {
        Ok(broker) => broker,
        Err(e) => fail(&format!("open: {e}")),
    };
    if !broker.list_topics().iter().any(|n| n.as_str() == TOPIC)
        && let Err(e) = broker.create_topic(TOPIC, topic_spec()).await
    {
        fail(&format!("create {TOPIC}: {e}"));
    }
    let queues = broker.list_queues();
    for sub in &SUBS {
        if queues.iter().any(|n| n.as_str() == sub.name) {
            // A kill in the middle of create_subscription must not leave a plain queue.
            if let Err(e) = broker.describe_subscription(sub.name) {
                fail(&format!(
                    "BROKER BUG: {} exists as a queue but not as a subscription: {e}",
                    sub.name
                ));
            }
        } else if let Err(e) = broker
            .create_subscription(sub.name, subscription_spec(sub))
            .await
        {
            fail(&format!("create subscription {}: {e}", sub.name));
        }
    }
    // libtest has printed "test subscription_crash_child_broker_under_load ... " without a
    // newline.
    say("\nREADY\n");
    for producer in 0..PRODUCERS {
        let seed = splitmix(seed ^ (1 << 32) ^ producer as u64);
        tokio::spawn(produce(broker.clone(), round, producer, seed));
    }
    let held = Arc::new(Mutex::new(Held::default()));
    for (sub, s) in SUBS.iter().enumerate() {
        for c in 0..2 {
            let seed = splitmix(seed ^ (2 << 32) ^ ((sub as u64) << 8) ^ c);
            let consumer = format!("{}-{c}", s.name);
            tokio::spawn(consume(
                broker.clone(),
                sub,
                consumer,
                Arc::clone(&held),
                seed,
            ));
        }
    }
    tokio::spawn(audit(broker.clone(), splitmix(seed ^ (3 << 32))));
    tokio::spawn(maintain(broker.clone(), splitmix(seed ^ (4 << 32))));
    tokio::time::sleep(CHILD_MAX_RUN).await;
    // Only reached when the parent never killed us.
    std::process::exit(4);
}

// ---------------------------------------------------------------------------------------
// The parent.

/// What the parent knows about one subscription on one directory.
#[derive(Default)]
struct SubState {
    /// Messages whose ack was acknowledged.
    acked: HashSet<Id>,
    /// Messages whose ack was under way at a kill: settled or not.
    acking: HashSet<Id>,
    /// Acknowledged acks in the order they were made (their `ACKING` line), across rounds:
    /// the order the broker settled them in. Not the order of their `ACK` lines: the broker
    /// hands out a key's next message once the previous one is settled, before that ack is
    /// durable and its call returns, so the next message's ack may run concurrently with it
    /// and return first (its journal entry still comes after, so it is durable after).
    ack_order: Vec<Id>,
    deliveries: usize,
    /// What happened to each message here: (round, line of the round's output, event), for
    /// the messages of a failure.
    history: HashMap<Id, Vec<(u32, usize, &'static str)>>,
}

/// What the parent knows about one directory.
struct DirState {
    /// Every message ever acknowledged on the directory, and where: (partition, offset).
    published: HashMap<Id, (u32, u64)>,
    rounds: Vec<u32>,
    subs: Vec<SubState>,
    /// Per partition, the group's last acknowledged commit.
    committed: BTreeMap<u32, u64>,
    /// Per partition, commits said to be under way and not acknowledged: durable or not.
    committing: BTreeMap<u32, BTreeSet<u64>>,
    /// Per partition, the ids read at the last verification, in offset order.
    logs: BTreeMap<u32, Vec<Id>>,
    /// Times a child resumed a partition of the group.
    resumes: usize,
}

impl DirState {
    fn new() -> DirState {
        DirState {
            published: HashMap::new(),
            rounds: Vec::new(),
            subs: SUBS.iter().map(|_| SubState::default()).collect(),
            committed: BTreeMap::new(),
            committing: BTreeMap::new(),
            logs: BTreeMap::new(),
            resumes: 0,
        }
    }

    /// Deliveries to the parent's probe after a reopen (never settled: their leases end).
    fn note_probe(&mut self, sub: usize, got: &[ReceivedMessage]) {
        let round = self.rounds.last().copied().unwrap_or(0);
        for m in got {
            if let Ok(id) = identify_delivery(&SUBS[sub], m) {
                self.subs[sub]
                    .history
                    .entry(id)
                    .or_default()
                    .push((round, 0, "PROBE"));
            }
        }
    }

    /// The group's offset for `p` may be any of these after a kill.
    fn possible_commits(&self, p: u32) -> BTreeSet<u64> {
        let mut possible = self.committing.get(&p).cloned().unwrap_or_default();
        possible.insert(self.committed.get(&p).copied().unwrap_or(0));
        possible
    }

    /// The group's offset for `p` is `offset`, as a reopen found it.
    fn resolve_commit(&mut self, p: u32, offset: u64, label: &str) {
        let possible = self.possible_commits(p);
        assert!(
            possible.contains(&offset),
            "{label}: BROKER BUG: group {GROUP} resumes partition {p} at {offset}; its last \
             acknowledged commit is {:?} and commits under way at the kill were {:?}",
            self.committed.get(&p),
            self.committing.get(&p)
        );
        self.committed.insert(p, offset);
        self.committing.remove(&p);
    }

    /// Takes in what a child said, in order.
    fn absorb(&mut self, round: u32, lines: &[String], label: &str) -> Said {
        self.rounds.push(round);
        let mut said = Said::default();
        // Acks under way in this child: one whose answer was not seen may be durable.
        let mut acking: Vec<HashSet<Id>> = SUBS.iter().map(|_| HashSet::new()).collect();
        // Where each ack of this child was made (its `ACKING` line), and the acknowledged
        // ones by that line: the child is single-threaded and settles an ack right after
        // saying `ACKING`, so this is the order the broker settled (and journaled) them in.
        let mut acking_line: Vec<HashMap<Id, usize>> =
            SUBS.iter().map(|_| HashMap::new()).collect();
        let mut acked_here: Vec<Vec<(usize, Id)>> = SUBS.iter().map(|_| Vec::new()).collect();
        for (line_no, line) in lines.iter().enumerate() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let garbled = || -> ! { panic!("{label}: child said a garbled line {line:?}") };
            let n = |i: usize| -> u64 {
                words
                    .get(i)
                    .and_then(|w| w.parse().ok())
                    .unwrap_or_else(|| garbled())
            };
            let id = |i: usize| -> Id {
                words
                    .get(i)
                    .and_then(|w| Id::parse(w))
                    .unwrap_or_else(|| garbled())
            };
            let sub = || -> usize {
                words
                    .get(1)
                    .and_then(|w| SUBS.iter().position(|s| s.name == *w))
                    .unwrap_or_else(|| garbled())
            };
            if let Some(&word) = words.first()
                && let Some(event) = ["RECV", "ACKING", "ACK", "STALE"]
                    .into_iter()
                    .find(|&e| e == word)
            {
                self.subs[sub()]
                    .history
                    .entry(id(2))
                    .or_default()
                    .push((round, line_no, event));
            }
            match words.first().copied() {
                Some("READY") => said.ready = true,
                Some("FAIL") => said.failed = Some(line.clone()),
                Some("PUB") => {
                    self.published.insert(id(3), (n(1) as u32, n(2)));
                    said.published += 1;
                }
                Some("RECV") => {
                    let (s, id) = (sub(), id(2));
                    assert!(
                        !self.subs[s].acked.contains(&id),
                        "{label}: BROKER BUG: {} delivered {id} again after its ack was \
                         acknowledged",
                        SUBS[s].name
                    );
                    self.subs[s].deliveries += 1;
                    said.deliveries += 1;
                }
                Some("ACKING") => {
                    acking[sub()].insert(id(2));
                    acking_line[sub()].insert(id(2), line_no);
                }
                Some("ACK") => {
                    let (s, id) = (sub(), id(2));
                    acking[s].remove(&id);
                    let made = acking_line[s].get(&id).copied().unwrap_or(line_no);
                    acked_here[s].push((made, id));
                    let state = &mut self.subs[s];
                    assert!(
                        state.acked.insert(id),
                        "{label}: BROKER BUG: {} settled {id} twice",
                        SUBS[s].name
                    );
                    state.acking.remove(&id);
                    said.acks += 1;
                }
                Some("STALE") => {
                    acking[sub()].remove(&id(2));
                }
                Some("COMMITTING") => {
                    self.committing.entry(n(1) as u32).or_default().insert(n(2));
                }
                Some("COMMIT") => {
                    let (p, offset) = (n(1) as u32, n(2));
                    self.committed.insert(p, offset);
                    // Earlier commits under way are behind this one now.
                    if let Some(under_way) = self.committing.get_mut(&p) {
                        under_way.retain(|&o| o > offset);
                    }
                    said.commits += 1;
                }
                Some("MAINT") => {
                    said.checkpoints += n(1) as usize;
                    said.deleted_segments += n(2) as usize;
                }
                Some("GSTART") => {
                    self.resolve_commit(n(1) as u32, n(2), label);
                    self.resumes += 1;
                }
                _ => {}
            }
        }
        for (s, under_way) in acking.into_iter().enumerate() {
            self.subs[s].acking.extend(under_way);
        }
        for (s, mut acked) in acked_here.into_iter().enumerate() {
            acked.sort_unstable_by_key(|&(line, _)| line);
            self.subs[s]
                .ack_order
                .extend(acked.into_iter().map(|(_, id)| id));
        }
        said
    }
}

#[derive(Debug, Default)]
struct Said {
    ready: bool,
    failed: Option<String>,
    published: usize,
    deliveries: usize,
    acks: usize,
    commits: usize,
    checkpoints: usize,
    deleted_segments: usize,
}

/// Runs one child on `dir` until the kill and takes in what it said.
fn run_child(dir: &Path, round: u32, seed: u64, kill: Kill, state: &mut DirState) -> Said {
    let envs = [
        (CHILD_DIR_ENV, dir.display().to_string()),
        (CHILD_ROUND_ENV, round.to_string()),
        (CHILD_SEED_ENV, seed.to_string()),
    ];
    let Killed {
        lines,
        stderr,
        status,
        ..
    } = run_and_kill(CHILD_TEST_NAME, &envs, kill);
    let label = format!("round {round} ({kill:?})");
    let said = state.absorb(round, &lines, &label);
    if let Some(failed) = &said.failed {
        panic!("{label}: child failed: {failed}\nstderr: {stderr}");
    }
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "{label}: child exited on its own ({status:?}) before the kill\nstderr: {stderr}"
    );
    if let Kill::AfterReady(_) = kill {
        assert!(
            said.ready,
            "{label}: child never got ready\nstdout: {lines:?}\nstderr: {stderr}"
        );
    }
    said
}

async fn open_at(dir: &Path, at_ms: i64, label: &str) -> Broker {
    let config = BrokerConfig {
        clock: Arc::new(ManualClock::new(at_ms)),
        background_timers: false,
        ..config(1)
    };
    Broker::open(dir, config)
        .await
        .unwrap_or_else(|e| panic!("{label}: reopen after SIGKILL failed: {e}"))
}

/// Every record of the topic, per partition in offset order, checked against what the
/// children said; `None` if the child never created the topic.
fn read_topic(broker: &Broker, state: &mut DirState, label: &str) -> Option<Vec<Vec<Id>>> {
    if !broker.list_topics().iter().any(|n| n.as_str() == TOPIC) {
        assert!(
            state.published.is_empty(),
            "{label}: BROKER BUG: {TOPIC} is missing, with {} acknowledged publishes",
            state.published.len()
        );
        return None;
    }
    let mut found: HashMap<Id, (u32, u64)> = HashMap::new();
    let mut partitions = Vec::new();
    for p in 0..PARTITIONS {
        let records = broker
            .read_topic(TOPIC, p, Position::Earliest, usize::MAX)
            .unwrap_or_else(|e| panic!("{label}: read {TOPIC}/{p}: {e}"));
        let mut ids = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            assert_eq!(
                record.offset, i as u64,
                "{label}: BROKER BUG: {TOPIC}/{p} has a hole"
            );
            let id = identify_record(record).unwrap_or_else(|problem| {
                panic!(
                    "{label}: BROKER BUG: bad record at {TOPIC}/{p}/{}: {problem}",
                    record.offset
                )
            });
            assert!(
                state.rounds.contains(&id.round),
                "{label}: {TOPIC}/{p} holds {id}, from a round not run on this directory"
            );
            if let Some(first) = found.insert(id, (p, record.offset)) {
                panic!(
                    "{label}: BROKER BUG: {id} written twice: at {first:?} and {:?}",
                    (p, record.offset)
                );
            }
            ids.push(id);
        }
        if let Some(before) = state.logs.get(&p) {
            assert!(
                before.len() <= ids.len() && ids[..before.len()] == before[..],
                "{label}: BROKER BUG: {TOPIC}/{p} changed below its old end"
            );
        }
        state.logs.insert(p, ids.clone());
        partitions.push(ids);
    }
    let mut missing: Vec<_> = state
        .published
        .iter()
        .filter(|&(id, at)| found.get(id) != Some(at))
        .map(|(id, at)| (*id, *at, found.get(id).copied()))
        .collect();
    missing.sort_unstable();
    assert!(
        missing.is_empty(),
        "{label}: BROKER BUG: {} acknowledged publishes are not where they were acknowledged \
         (id, acknowledged at, found at), e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    Some(partitions)
}

/// Per subscription, the topic records it has not yet considered (taken in or passed over).
fn not_yet_considered(broker: &Broker) -> Vec<u64> {
    SUBS.iter()
        .filter_map(|s| broker.describe_subscription(s.name).ok())
        .map(|info| info.not_yet_considered)
        .collect()
}

/// The group's committed offsets as a reopened broker has them.
async fn committed_offsets(broker: &Broker, label: &str) -> BTreeMap<u32, u64> {
    // Groups live in memory: joining loads the committed offsets.
    let join = GroupJoin {
        instance_id: Some(GROUP_INSTANCE.to_owned()),
        session_timeout: Duration::from_secs(30),
        ..GroupJoin::default()
    };
    broker
        .join_group(TOPIC, GROUP, join)
        .await
        .unwrap_or_else(|e| panic!("{label}: join {GROUP}: {e}"));
    let info = broker
        .describe_group(TOPIC, GROUP)
        .unwrap_or_else(|e| panic!("{label}: describe {GROUP}: {e}"));
    info.partitions
        .iter()
        .map(|p| (p.partition, p.committed.unwrap_or(0)))
        .collect()
}

/// Reopens the directory after a kill and checks the topic and the group's offsets.
fn verify(dir: &Path, state: &mut DirState, label: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let broker = open_at(dir, now_ms(), label).await;
        let behind = not_yet_considered(&broker);
        // What a receive finds at once on a subscription still behind, and again once it
        // caught up (the clock stands still, so only the catch-up can make more ready). The
        // probe's leases end a second later, as a killed child's would.
        let mut probed: Vec<(usize, usize, usize)> = Vec::new();
        for (sub, s) in SUBS.iter().enumerate() {
            if behind.get(sub).is_some_and(|&n| n > 0) {
                let got = broker
                    .receive(s.name, "probe", 10_000, None, None)
                    .await
                    .unwrap_or_else(|e| panic!("{label}: probe {}: {e}", s.name));
                state.note_probe(sub, &got);
                probed.push((sub, got.len(), 0));
            }
        }
        // Whether the subscriptions catch up by themselves after the reopen returned (the
        // broker runs no timers here): observed, not required.
        let opened = Instant::now();
        let mut caught_up = None;
        while behind.iter().any(|&n| n > 0) && opened.elapsed() < Duration::from_secs(1) {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if not_yet_considered(&broker).iter().all(|&n| n == 0) {
                caught_up = Some(opened.elapsed());
                break;
            }
        }
        for (sub, _, later) in &mut probed {
            let got = broker
                .receive(SUBS[*sub].name, "probe", 10_000, None, None)
                .await
                .unwrap_or_else(|e| panic!("{label}: probe {}: {e}", SUBS[*sub].name));
            state.note_probe(*sub, &got);
            *later = got.len();
        }
        let probes: Vec<String> = probed
            .iter()
            .map(|(sub, at_once, later)| {
                format!(
                    "{} received {at_once} at once, {later} more after",
                    SUBS[*sub].name
                )
            })
            .collect();
        let catch_up = match (behind.iter().any(|&n| n > 0), caught_up) {
            (false, _) => String::new(),
            (true, Some(after)) => format!(" (caught up {after:?} later; {})", probes.join(", ")),
            (true, None) => format!(
                " (still {:?} after 1 s; {})",
                not_yet_considered(&broker),
                probes.join(", ")
            ),
        };
        let Some(partitions) = read_topic(&broker, state, label) else {
            return "no topic yet".to_owned();
        };
        for (p, offset) in committed_offsets(&broker, label).await {
            state.resolve_commit(p, offset, label);
        }
        let counts: Vec<String> = partitions.iter().map(|p| p.len().to_string()).collect();
        format!(
            "topic [{}], group committed {:?}, subscriptions not yet considered at the reopen \
             {behind:?}{catch_up}",
            counts.join(" "),
            state.committed
        )
    })
}

/// Per key on `keyed`, per partition on `solo`: the offsets of `order` must increase.
fn check_order(
    sub: usize,
    order: &[Id],
    at: &HashMap<Id, (u32, u64)>,
    history: &HashMap<Id, Vec<(u32, usize, &'static str)>>,
    label: &str,
) {
    let s = &SUBS[sub];
    let mut last: HashMap<Vec<u8>, (Id, u64)> = HashMap::new();
    for &id in order {
        let (partition, offset) = at[&id];
        let group = match s.ordering {
            OrderingMode::Shared => continue,
            OrderingMode::KeyShared => match shape(id).key {
                Some(key) => key.into_bytes(),
                None => continue,
            },
            OrderingMode::Exclusive => partition.to_le_bytes().to_vec(),
        };
        if let Some((before, before_offset)) = last.insert(group.clone(), (id, offset)) {
            assert!(
                before_offset < offset,
                "{label}: BROKER BUG: {} settled {id} (offset {offset} of partition \
                 {partition}) after {before} (offset {before_offset}): out of publish order \
                 for {}; (round, line, event) of {before}: {:?}, of {id}: {:?}",
                s.name,
                match s.ordering {
                    OrderingMode::KeyShared => format!("key {}", String::from_utf8_lossy(&group)),
                    _ => format!("partition {partition}"),
                },
                history.get(&before),
                history.get(&id)
            );
        }
    }
}

/// What the final drain of one directory found.
struct Drained {
    per_sub: Vec<(usize, usize, usize)>,
    empty_polls_before_first: Vec<usize>,
    /// Per subscription, the topic records it had not yet considered (taken in or passed
    /// over) when the reopen returned.
    behind_at_open: Vec<u64>,
    group_records: usize,
}

/// Reopens an hour later, drains every subscription and the group, and checks that nothing
/// was lost, nothing acked came back, and order held.
fn drain_and_check(dir: &Path, state: &mut DirState, label: &str) -> Drained {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let broker = open_at(dir, now_ms() + 3_600_000, label).await;
        let behind_at_open = not_yet_considered(&broker);
        let Some(partitions) = read_topic(&broker, state, label) else {
            return Drained {
                per_sub: Vec::new(),
                empty_polls_before_first: Vec::new(),
                behind_at_open: Vec::new(),
                group_records: 0,
            };
        };
        let at: HashMap<Id, (u32, u64)> = partitions
            .iter()
            .enumerate()
            .flat_map(|(p, ids)| {
                ids.iter()
                    .enumerate()
                    .map(move |(o, &id)| (id, (p as u32, o as u64)))
            })
            .collect();
        broker.tick_now().await.unwrap();
        let mut drained = Drained {
            per_sub: Vec::new(),
            empty_polls_before_first: Vec::new(),
            behind_at_open,
            group_records: 0,
        };
        for (sub, s) in SUBS.iter().enumerate() {
            let matching: HashSet<Id> = at
                .keys()
                .copied()
                .filter(|&id| s.takes(shape(id).subject))
                .collect();
            let st = &state.subs[sub];
            let mut got: Vec<Id> = Vec::new();
            let mut seen: HashSet<Id> = HashSet::new();
            let mut empty_before_first = 0;
            let accounted = |seen: &HashSet<Id>| {
                matching
                    .iter()
                    .all(|id| seen.contains(id) || st.acked.contains(id) || st.acking.contains(id))
            };
            // Receives may find nothing for a while after a reopen (catch-up is under way):
            // poll until everything is accounted for, or nothing comes for a few seconds.
            let mut quiet_since = Instant::now();
            let mut extra_look = true;
            loop {
                if accounted(&seen) {
                    if !extra_look {
                        break;
                    }
                    // One more look: anything delivered now is delivered twice.
                    extra_look = false;
                }
                if quiet_since.elapsed() > Duration::from_secs(5) {
                    break;
                }
                broker.tick_now().await.unwrap();
                // The first look does not wait: whether what the reopen found is ready at once.
                let wait = (!got.is_empty() || empty_before_first > 0)
                    .then_some(Duration::from_millis(100));
                let batch = broker
                    .receive(s.name, "drain", 64, None, wait)
                    .await
                    .unwrap_or_else(|e| panic!("{label}: drain {}: {e}", s.name));
                if batch.is_empty() {
                    if got.is_empty() {
                        empty_before_first += 1;
                    }
                    continue;
                }
                quiet_since = Instant::now();
                for m in &batch {
                    let id = identify_delivery(s, m).unwrap_or_else(|problem| {
                        panic!("{label}: BROKER BUG: {} delivered {problem}", s.name)
                    });
                    assert!(
                        !st.acked.contains(&id),
                        "{label}: BROKER BUG: {} delivered {id} again after its ack was \
                         acknowledged",
                        s.name
                    );
                    assert!(
                        seen.insert(id),
                        "{label}: BROKER BUG: {} delivered {id} again after it was acked in \
                         the drain",
                        s.name
                    );
                    got.push(id);
                    let acked = broker
                        .ack(s.name, m.seq, m.token)
                        .await
                        .unwrap_or_else(|e| panic!("{label}: drain ack {id}: {e}"));
                    assert_eq!(acked, Acked::Settled, "{label}: drain ack of {id}");
                }
            }
            let mut lost: Vec<Id> = matching
                .iter()
                .copied()
                .filter(|id| {
                    !seen.contains(id) && !st.acked.contains(id) && !st.acking.contains(id)
                })
                .collect();
            lost.sort_unstable();
            assert!(
                lost.is_empty(),
                "{label}: BROKER BUG: {} never delivered {} of the {} messages its filter \
                 takes (none acked, none delivered in a drain of {}), e.g. {:?}",
                s.name,
                lost.len(),
                matching.len(),
                got.len(),
                &lost[..lost.len().min(10)]
            );
            // Acks under way at a kill that were durable make up the difference.
            let acking_settled = st.acking.iter().filter(|id| !seen.contains(id)).count();
            assert_eq!(
                st.acked.len() + got.len() + acking_settled,
                matching.len(),
                "{label}: {} acked {} + drained {} + acks under way at a kill {} != {} \
                 matching records",
                s.name,
                st.acked.len(),
                got.len(),
                acking_settled,
                matching.len()
            );
            let mut order = st.ack_order.clone();
            order.extend(&got);
            check_order(
                sub,
                &order,
                &at,
                &st.history,
                &format!("{label}: {}", s.name),
            );
            drained
                .per_sub
                .push((st.acked.len(), got.len(), matching.len()));
            drained.empty_polls_before_first.push(empty_before_first);
        }
        // The group reads each partition from its committed offset to the end, once.
        let committed = committed_offsets(&broker, label).await;
        for (&p, &offset) in &committed {
            state.resolve_commit(p, offset, label);
        }
        let info = broker.describe_group(TOPIC, GROUP).unwrap();
        let member = info.members.keys().next().cloned().expect("one member");
        let mut next: BTreeMap<u32, u64> = committed.clone();
        loop {
            let records = broker
                .poll_group(TOPIC, GROUP, &member, 256)
                .unwrap_or_else(|e| panic!("{label}: poll {GROUP}: {e}"));
            if records.is_empty() {
                break;
            }
            for record in &records {
                let want = next.get(&record.partition).copied().unwrap_or(0);
                assert_eq!(
                    record.offset, want,
                    "{label}: BROKER BUG: {GROUP} polled {}/{} where {want} was next (committed \
                     {committed:?})",
                    record.partition, record.offset
                );
                next.insert(record.partition, want + 1);
                drained.group_records += 1;
            }
        }
        for (p, ids) in partitions.iter().enumerate() {
            assert_eq!(
                next.get(&(p as u32)).copied().unwrap_or(0),
                ids.len() as u64,
                "{label}: {GROUP} did not read partition {p} to its end"
            );
        }
        drained
    })
}

#[test]
fn sigkill_while_consuming_subscriptions_and_groups_loses_nothing_and_redelivers_no_ack() {
    let seed = seed_from_env(SEED_ENV);
    let passes: usize = std::env::var(PASSES_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    println!(
        "subscription crash test seed {seed} (replay with {SEED_ENV}={seed}), {passes} passes"
    );
    let mut rng = fastrand::Rng::with_seed(seed);
    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3)
        .map(|i| root.path().join(format!("broker-{i}")))
        .collect();
    let mut states: Vec<DirState> = (0..dirs.len()).map(|_| DirState::new()).collect();
    let started = Instant::now();
    let (mut published, mut acks, mut commits) = (0, 0, 0);
    let plan = ROUNDS.iter().cycle().take(ROUNDS.len() * passes);
    for (round, &(d, verify_after, early)) in plan.enumerate() {
        let round = round as u32;
        let kill = kill_for(&mut rng, early);
        let said = run_child(&dirs[d], round, rng.u64(..), kill, &mut states[d]);
        let label = format!(
            "seed {seed} round {round} dir {d} (kill {kill:?}, ready {})",
            said.ready
        );
        published += said.published;
        acks += said.acks;
        commits += said.commits;
        let counts = format!(
            "{} published, {} delivered, {} acked, {} commits, {} checkpoints, {} segments \
             deleted",
            said.published,
            said.deliveries,
            said.acks,
            said.commits,
            said.checkpoints,
            said.deleted_segments
        );
        if verify_after {
            let summary = verify(&dirs[d], &mut states[d], &label);
            println!("{label}: {counts}; {summary}");
        } else {
            println!("{label}: {counts}; not verified yet");
        }
    }
    for (d, dir) in dirs.iter().enumerate() {
        let label = format!("seed {seed} final drain of dir {d}");
        let drained = drain_and_check(dir, &mut states[d], &label);
        let per_sub: Vec<String> = drained
            .per_sub
            .iter()
            .zip(&SUBS)
            .map(|((acked, got, matching), s)| {
                format!("{} {acked} acked + {got} drained of {matching}", s.name)
            })
            .collect();
        println!(
            "{label}: {}; group read {} uncommitted records, resumed {} times; not yet \
             considered at the reopen {:?}, empty receives before the first delivery {:?}",
            per_sub.join(", "),
            drained.group_records,
            states[d].resumes,
            drained.behind_at_open,
            drained.empty_polls_before_first
        );
    }
    println!(
        "{} rounds, {published} published, {acks} acked, {commits} commits, {:?}",
        ROUNDS.len() * passes,
        started.elapsed()
    );
    assert!(
        published > 0 && acks > 0 && commits > 0,
        "no child got as far as an acknowledged publish, ack and commit"
    );
}

// ---------------------------------------------------------------------------------------
// A kill while a subscription is being created.

const CREATE_DIR_ENV: &str = "FERRY_SUB_CRASH_CREATE_DIR";
const CREATE_TEST_NAME: &str = "subscription_crash_child_creating_a_subscription";

/// The child side: creates subscription `fan` of the existing topic, saying `READY` just
/// before and `CREATED <µs it took>` after.
#[tokio::test]
async fn subscription_crash_child_creating_a_subscription() {
    let Some(dir) = std::env::var_os(CREATE_DIR_ENV) else {
        return;
    };
    let broker = match Broker::open(&dir, config(1)).await {
        Ok(broker) => broker,
        Err(e) => fail(&format!("open: {e}")),
    };
    say("\nREADY\n");
    let started = Instant::now();
    if let Err(e) = broker
        .create_subscription(SUBS[0].name, subscription_spec(&SUBS[0]))
        .await
    {
        fail(&format!("create subscription: {e}"));
    }
    say(&format!("CREATED {}\n", started.elapsed().as_micros()));
    tokio::time::sleep(CHILD_MAX_RUN).await;
    std::process::exit(4);
}

/// A SIGKILL at a random moment of `create_subscription` leaves the whole subscription or
/// nothing: never a plain queue under the subscription's name (which would not be a
/// subscription after the reopen, receive nothing from the topic, and refuse a second
/// create with `QueueExists`). The queue and what makes it a subscription are one metadata
/// commit; when they were two, a kill landed between them within the first twenty attempts
/// in every run. `FERRY_SUB_CRASH_CREATE_ATTEMPTS` sets how many kills, 60 by default.
#[test]
fn sigkill_while_creating_a_subscription_leaves_it_whole_or_absent() {
    let seed = seed_from_env(SEED_ENV);
    let attempts: usize = std::env::var("FERRY_SUB_CRASH_CREATE_ATTEMPTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    println!("seed {seed} (replay with {SEED_ENV}={seed}), {attempts} attempts");
    let mut rng = fastrand::Rng::with_seed(seed);
    let root = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    // How long a creation takes, from the children that finished one.
    let mut took_us: Vec<u64> = Vec::new();
    let (mut absent, mut whole) = (0, 0);
    for attempt in 0..attempts {
        let dir = root.path().join(format!("broker-{attempt}"));
        rt.block_on(async {
            let broker = open_at(&dir, now_ms(), "setup").await;
            broker.create_topic(TOPIC, topic_spec()).await.unwrap();
        });
        // Spread the kills over the creation as the children so far timed it.
        let span = took_us.iter().copied().max().unwrap_or(40_000).max(200);
        let kill = Kill::AfterReady(Duration::from_micros(rng.u64(..span * 3 / 2)));
        let Killed { lines, stderr, .. } = run_and_kill(
            CREATE_TEST_NAME,
            &[(CREATE_DIR_ENV, dir.display().to_string())],
            kill,
        );
        if let Some(failed) = lines.iter().find(|l| l.starts_with("FAIL")) {
            panic!("attempt {attempt}: child failed: {failed}\nstderr: {stderr}");
        }
        let created = lines.iter().find_map(|l| l.strip_prefix("CREATED "));
        took_us.extend(created.and_then(|us| us.parse::<u64>().ok()));
        let label = format!("seed {seed} attempt {attempt} ({kill:?}, created: {created:?})");
        rt.block_on(async {
            let broker = open_at(&dir, now_ms(), &label).await;
            let exists = broker
                .list_queues()
                .iter()
                .any(|n| n.as_str() == SUBS[0].name);
            if !exists {
                assert!(
                    created.is_none(),
                    "{label}: BROKER BUG: the acknowledged subscription is gone"
                );
                absent += 1;
                return;
            }
            match broker.describe_subscription(SUBS[0].name) {
                Ok(_) => whole += 1,
                Err(e) => {
                    let again = broker
                        .create_subscription(SUBS[0].name, subscription_spec(&SUBS[0]))
                        .await;
                    panic!(
                        "{label}: BROKER BUG: {} is a queue but not a subscription after the \
                         kill: {e}; creating it again: {again:?}",
                        SUBS[0].name
                    )
                }
            }
        });
    }
    println!(
        "{attempts} attempts: {absent} left no subscription, {whole} a whole one; creation took \
         {:?} µs",
        took_us
    );
}
