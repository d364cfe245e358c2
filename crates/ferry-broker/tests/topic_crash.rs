//! Crash test of partitioned topics with a real SIGKILL.
//!
//! The parent test re-executes this test binary with `FERRY_TOPIC_CRASH_CHILD_DIR` set,
//! which turns `topic_crash_child_broker_under_load` into a broker process: it opens a
//! [`Broker`] on that directory (real clock, background timers, small segments so that
//! kills also land around segment rolls), creates two `Durability::Fsync` topics if missing
//! (`sticky`: 4 partitions, keyless messages placed by [`KeylessPlacement::StickyBatch`];
//! `spread`: 3 partitions, [`KeylessPlacement::RoundRobin`]) and runs producer tasks:
//!
//! - plain producers publish single messages and batches with `publish_to_topic` (a batch
//!   without keys sometimes with `publish_to_partition`), keyed (one of eight keys) or not;
//! - idempotent producers (`idem-0`, `idem-1`, `idem-2`, the same three on every round)
//!   publish batches with `publish_idempotent` to a partition of their topic, numbering
//!   each partition's messages `0, 1, 2, …`. Some batches are sent as two racing copies,
//!   and some earlier batches (or part of one) are retried on purpose; a retry must
//!   answer the positions the first answer gave, and write nothing.
//!
//! Everything about a message — topic, message id, payload, key, header, producer stamp —
//! derives from its [`Id`], so the parent can check what it reads. The child prints
//! `PUB <topic> <partition> <offset> <id>` for every message once its publish returned
//! `Ok` (one write and flush per line), `TRY <slot> <partition> <first> <count>` before an
//! idempotent batch's first attempt, and `DUP …` after an on-purpose retry checked out.
//!
//! **Idempotent producers across restarts.** Each round continues every idempotent
//! producer's sequences from where the parent says it stopped (it does not get fresh
//! producer ids): the parent tracks, per producer and partition, the sequence after the
//! last batch whose every `PUB` line it saw, and the batch under way at the kill (a `TRY`
//! without all its `PUB` lines). The next child first resends that batch, exactly as a
//! producer that lost an answer would: the broker must answer the original positions if
//! the batch was written before the kill (rebuilding what it knows of the producer from the
//! records), or write it now if it was not — never both, never an error.
//!
//! The parent SIGKILLs the child at a random moment, then (in some rounds only after a
//! second child has recovered the directory and been killed too, possibly while still
//! recovering) reopens the broker with a manual clock, reads every partition from the
//! earliest offset and checks:
//!
//! - offsets run from 0 to the partition's end without a hole (recovery cuts a torn tail,
//!   it never leaves a gap), and what an earlier look saw is still there, unchanged;
//! - every record is a message the test published, identical to what its id says, in its
//!   id's topic, with the producer stamp its id says (none for plain producers);
//! - every acknowledged message is at the acknowledged (partition, offset);
//! - no id appears twice (idempotent retries, racing copies and resends after a restart
//!   are written once);
//! - a keyed message is in its key's partition (Kafka's placement, so all of a key's
//!   messages are in one partition), and each producer's messages of one partition — so
//!   those of each key — are in publish order (by the id's counter);
//! - each idempotent producer's sequences in a partition run `0..n` with no gap, and `n` is
//!   where its last acknowledged batch ended, or where the batch under way at the kill would
//!   end (written whole or not at all).
//!
//! Unacknowledged messages (published when the kill came) may be present or absent. The
//! parent then reopens once more and checks the partitions' ends did not move.
//!
//! Replay the random choices of a run with `FERRY_TOPIC_CRASH_SEED=<seed it printed>`
//! (thread timing still varies).
//!
//! The child-process plumbing (start, read lines, kill; `say`, `fail`, `splitmix`) is
//! shared with `tests/crash.rs` through `tests/support/killed_child.rs`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_broker::topic::partitioner::partition_for_key;
use ferry_broker::{
    Broker, BrokerConfig, Durability, KeylessPlacement, Limits, MessageId, OutgoingMessage,
    Position, ProducerStamp, TopicPosition, TopicRecord, TopicRetention, TopicSpec,
};
use ferry_storage::ManualClock;

#[path = "support/killed_child.rs"]
mod killed_child;

use killed_child::{
    Kill, Killed, ROUNDS, fail, kill_for, now_ms, run_and_kill, say, seed_from_env, splitmix,
};

const CHILD_DIR_ENV: &str = "FERRY_TOPIC_CRASH_CHILD_DIR";
const CHILD_ROUND_ENV: &str = "FERRY_TOPIC_CRASH_ROUND";
const CHILD_SEED_ENV: &str = "FERRY_TOPIC_CRASH_CHILD_SEED";
const CHILD_PRODUCERS_ENV: &str = "FERRY_TOPIC_CRASH_PRODUCERS";
const CHILD_IDEMPOTENT_FILE_ENV: &str = "FERRY_TOPIC_CRASH_IDEMPOTENT_FILE";
const SEED_ENV: &str = "FERRY_TOPIC_CRASH_SEED";
const CHILD_TEST_NAME: &str = "topic_crash_child_broker_under_load";
/// A child that is never killed stops by itself after this long.
const CHILD_MAX_RUN: Duration = Duration::from_secs(15);

/// The two topics: name, partitions, keyless placement.
const TOPICS: [(&str, u32, KeylessPlacement); 2] = [
    ("sticky", 4, KeylessPlacement::StickyBatch),
    ("spread", 3, KeylessPlacement::RoundRobin),
];
/// Idempotent producers, the same on every round: slot `s` is producer id `idem-<s>`.
const IDEMPOTENT_PRODUCERS: u32 = 3;
const KEYS: u32 = 8;
const ID_HEADER: &str = "crash-id";
const MAX_PAYLOAD: usize = 600;

/// Who published a message: everything about it derives from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Id {
    /// Message `n` of plain producer `producer` of round `round`.
    Plain { round: u32, producer: u32, n: u64 },
    /// Sequence `seq` of idempotent producer `idem-<slot>` in `partition`.
    Idempotent { slot: u32, partition: u32, seq: u64 },
}

/// Whose messages must keep their publish order within a partition, and the counter that
/// says that order.
type Publisher = (bool, u32, u32);

impl Id {
    fn topic(&self) -> usize {
        match *self {
            Id::Plain { producer, .. } => producer as usize % TOPICS.len(),
            Id::Idempotent { slot, .. } => slot as usize % TOPICS.len(),
        }
    }

    fn publisher(&self) -> (Publisher, u64) {
        match *self {
            Id::Plain { round, producer, n } => ((false, round, producer), n),
            Id::Idempotent {
                slot,
                partition,
                seq,
            } => ((true, slot, partition), seq),
        }
    }

    /// The producer-chosen message id: distinct for every `Id`, never nil.
    fn message_id(&self) -> MessageId {
        let random = match *self {
            Id::Plain { round, producer, n } => {
                (1u128 << 78) | ((round as u128) << 64) | ((producer as u128) << 48) | n as u128
            }
            Id::Idempotent {
                slot,
                partition,
                seq,
            } => (2u128 << 78) | ((slot as u128) << 64) | ((partition as u128) << 48) | seq as u128,
        };
        MessageId::from_ulid(ulid::Ulid::from_parts(1_600_000_000_000, random))
    }

    fn stamp(&self) -> Option<ProducerStamp> {
        match *self {
            Id::Plain { .. } => None,
            Id::Idempotent { slot, seq, .. } => Some(ProducerStamp {
                producer_id: producer_id(slot),
                sequence: seq,
            }),
        }
    }

    fn parse(s: &str) -> Option<Id> {
        let (kind, rest) = s.split_at_checked(1)?;
        let parts: Vec<&str> = rest.split('.').collect();
        let [a, b, c] = parts[..] else {
            return None;
        };
        let (a, b, c) = (a.parse().ok()?, b.parse().ok()?, c.parse().ok()?);
        match kind {
            "p" => Some(Id::Plain {
                round: a,
                producer: b,
                n: c,
            }),
            "i" => Some(Id::Idempotent {
                slot: a,
                partition: b,
                seq: c,
            }),
            _ => None,
        }
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Id::Plain { round, producer, n } => write!(f, "p{round}.{producer}.{n}"),
            Id::Idempotent {
                slot,
                partition,
                seq,
            } => write!(f, "i{slot}.{partition}.{seq}"),
        }
    }
}

fn producer_id(slot: u32) -> String {
    format!("idem-{slot}")
}

fn key(k: u32) -> String {
    format!("k{k}")
}

/// The message published for `id`: 1..=600 payload bytes, the id header, and a key — one
/// of eight for a plain producer's message, most of the time; for an idempotent producer's,
/// one of those that Kafka's placement puts in the partition it publishes to, when there is
/// one, so that keyed messages are in their key's partition whoever published them.
fn derive(id: Id) -> OutgoingMessage {
    let seed = match id {
        Id::Plain { round, producer, n } => ((round as u64) << 48) ^ ((producer as u64) << 40) ^ n,
        Id::Idempotent {
            slot,
            partition,
            seq,
        } => (1 << 63) ^ ((slot as u64) << 48) ^ ((partition as u64) << 40) ^ seq,
    };
    let mut rng = fastrand::Rng::with_seed(splitmix(seed));
    let size = 1 + rng.usize(..MAX_PAYLOAD);
    let payload: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(size).collect();
    let mut message = OutgoingMessage::new(payload)
        .with_id(id.message_id())
        .with_header(ID_HEADER, id.to_string());
    let chosen = match id {
        Id::Plain { .. } => (rng.u8(..8) < 5).then(|| rng.u32(..KEYS)),
        Id::Idempotent { partition, .. } => {
            let partitions = TOPICS[id.topic()].1;
            let keys: Vec<u32> = (0..KEYS)
                .filter(|&k| partition_for_key(key(k).as_bytes(), partitions) == partition)
                .collect();
            (!keys.is_empty() && rng.bool()).then(|| keys[rng.usize(..keys.len())])
        }
    };
    if let Some(k) = chosen {
        message = message.with_key(key(k));
    }
    message
}

/// Why `got` is not a message the test published to `topic`, if it is not; else its id.
fn identify(got: &TopicRecord, topic: usize) -> Result<Id, String> {
    let Some(id) = got
        .message
        .headers
        .get(ID_HEADER)
        .and_then(|s| Id::parse(s))
    else {
        return Err(format!(
            "no or a garbled {ID_HEADER} header: {:?}",
            got.message.headers
        ));
    };
    let want = derive(id);
    if got.message.id != id.message_id() {
        return Err(format!(
            "{id}: message id {} is not the producer's",
            got.message.id
        ));
    }
    if got.message.payload != want.payload {
        return Err(format!("{id}: payload differs"));
    }
    if got.message.key != want.key || got.message.headers != want.headers {
        return Err(format!(
            "{id}: key/headers {:?}/{:?}, want {:?}/{:?}",
            got.message.key, got.message.headers, want.key, want.headers
        ));
    }
    if got.producer != id.stamp() {
        return Err(format!(
            "{id}: producer stamp {:?}, want {:?}",
            got.producer,
            id.stamp()
        ));
    }
    if id.topic() != topic {
        return Err(format!(
            "{id}: published to {}, found in {}",
            TOPICS[id.topic()].0,
            TOPICS[topic].0
        ));
    }
    if let Id::Idempotent { partition, .. } = id
        && partition != got.partition
    {
        return Err(format!(
            "{id}: published to partition {partition}, found in {}",
            got.partition
        ));
    }
    if let Some(key) = &got.message.key {
        let partitions = TOPICS[topic].1;
        let want = partition_for_key(key, partitions);
        if want != got.partition {
            return Err(format!(
                "{id}: key {key:?} belongs in partition {want}, found in {}",
                got.partition
            ));
        }
    }
    Ok(id)
}

fn spec(partitions: u32, keyless: KeylessPlacement) -> TopicSpec {
    TopicSpec {
        partitions,
        keyless,
        durability: Durability::Fsync,
        // Nothing may leave but a torn tail: offsets must run from 0.
        retention: TopicRetention {
            max_age: None,
            max_bytes: None,
            ..TopicRetention::default()
        },
        ..TopicSpec::default()
    }
}

/// The child's and the parent's broker settings: limits small enough that a partition's
/// segments are about 38 KB (see `engine/topic.rs`), so a child rolls segments many times
/// a second and kills land in and around segment rolls too.
fn config(seed: u64) -> BrokerConfig {
    BrokerConfig {
        seed: Some(seed),
        limits: Limits {
            max_payload_bytes: 1024,
            max_headers: 4,
            max_header_name_bytes: 64,
            max_header_value_bytes: 256,
            max_key_bytes: 256,
            max_dedup_id_bytes: 64,
            ..Limits::default()
        },
        message_segment_bytes: 1,
        ..BrokerConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// What the parent tells a child about the idempotent producers.

/// One idempotent producer, as the parent knows it.
#[derive(Debug, Clone, Default)]
struct IdempotentState {
    /// Per partition, the sequence after the last batch acknowledged in full.
    next: BTreeMap<u32, u64>,
    /// The batch under way at a kill, not acknowledged in full: (partition, first, count).
    pending: Option<(u32, u64, u64)>,
}

fn write_idempotent_states(states: &[IdempotentState], path: &Path) {
    let mut text = String::new();
    for (slot, state) in states.iter().enumerate() {
        for (partition, next) in &state.next {
            text.push_str(&format!("NEXT {slot} {partition} {next}\n"));
        }
        if let Some((partition, first, count)) = state.pending {
            text.push_str(&format!("PENDING {slot} {partition} {first} {count}\n"));
        }
    }
    std::fs::write(path, text).unwrap();
}

fn read_idempotent_states(path: &Path) -> Vec<IdempotentState> {
    let mut states = vec![IdempotentState::default(); IDEMPOTENT_PRODUCERS as usize];
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| -> u64 {
            words
                .get(i)
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| panic!("garbled idempotent state line {line:?}"))
        };
        let state = &mut states[n(1) as usize];
        match words[0] {
            "NEXT" => {
                state.next.insert(n(2) as u32, n(3));
            }
            "PENDING" => state.pending = Some((n(2) as u32, n(3), n(4))),
            _ => panic!("garbled idempotent state line {line:?}"),
        }
    }
    states
}

// ---------------------------------------------------------------------------------------
// The child.

fn env_u64(name: &str) -> u64 {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is set for the child"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a number"))
}

fn say_published(topic: usize, ids: &[Id], positions: &[TopicPosition]) {
    for (id, at) in ids.iter().zip(positions) {
        say(&format!(
            "PUB {} {} {} {id}\n",
            TOPICS[topic].0, at.partition, at.offset
        ));
    }
}

/// Checks the positions one publish call returned: one per message; a keyed message in its
/// key's partition; a partition's messages of the call at consecutive offsets, in call
/// order (one append per partition); a sticky topic's keyless messages of a call in one
/// partition.
fn check_positions(topic: usize, ids: &[Id], sent: &[OutgoingMessage], got: &[TopicPosition]) {
    let what = || format!("publish of {ids:?} to {}", TOPICS[topic].0);
    if got.len() != ids.len() {
        fail(&format!(
            "{} returned {} positions: {got:?}",
            what(),
            got.len()
        ));
    }
    let (_, partitions, keyless) = TOPICS[topic];
    let mut last: HashMap<u32, u64> = HashMap::new();
    let mut keyless_partitions: Vec<u32> = Vec::new();
    for (m, at) in sent.iter().zip(got) {
        match &m.key {
            Some(key) if partition_for_key(key, partitions) != at.partition => {
                fail(&format!("{} put key {key:?} in {at:?}: {got:?}", what()))
            }
            Some(_) => {}
            None => keyless_partitions.push(at.partition),
        }
        if let Some(prev) = last.insert(at.partition, at.offset)
            && at.offset != prev + 1
        {
            fail(&format!(
                "{} returned non-consecutive offsets in one partition: {got:?}",
                what()
            ));
        }
    }
    keyless_partitions.dedup();
    if keyless == KeylessPlacement::StickyBatch && keyless_partitions.len() > 1 {
        fail(&format!(
            "{} spread keyless messages of one call over partitions: {got:?}",
            what()
        ));
    }
}

async fn produce(broker: Broker, round: u32, producer: u32, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let topic = Id::Plain {
        round,
        producer,
        n: 0,
    }
    .topic();
    let (name, partitions, _) = TOPICS[topic];
    let mut n = 0u64;
    loop {
        let count = 1 + rng.u64(..4);
        let ids: Vec<Id> = (n..n + count)
            .map(|n| Id::Plain { round, producer, n })
            .collect();
        let messages: Vec<OutgoingMessage> = ids.iter().map(|&id| derive(id)).collect();
        let result = if messages.iter().all(|m| m.key.is_none()) && rng.u8(..4) == 0 {
            let partition = rng.u32(..partitions);
            broker
                .publish_to_partition(name, partition, messages.clone())
                .await
                .inspect(|got| {
                    if got.iter().any(|at| at.partition != partition) {
                        fail(&format!(
                            "publish of {ids:?} to partition {partition} of {name} returned \
                             {got:?}"
                        ));
                    }
                })
        } else {
            broker.publish_to_topic(name, messages.clone()).await
        };
        match result {
            Ok(got) => {
                check_positions(topic, &ids, &messages, &got);
                say_published(topic, &ids, &got);
            }
            Err(e) => fail(&format!("publish of {ids:?} to {name}: {e}")),
        }
        n += count;
        // Spreads the producers' calls over time rather than in lockstep behind the fsyncs.
        tokio::time::sleep(Duration::from_millis(rng.u64(..3))).await;
    }
}

/// An idempotent producer's batch and where it was written.
#[derive(Debug, Clone)]
struct Written {
    first: u64,
    positions: Vec<TopicPosition>,
}

async fn publish_idempotent(
    broker: &Broker,
    slot: u32,
    partition: u32,
    first: u64,
    count: u64,
) -> (Vec<Id>, Vec<OutgoingMessage>, Vec<TopicPosition>) {
    let topic = slot as usize % TOPICS.len();
    let name = TOPICS[topic].0;
    let ids: Vec<Id> = (first..first + count)
        .map(|seq| Id::Idempotent {
            slot,
            partition,
            seq,
        })
        .collect();
    let messages: Vec<OutgoingMessage> = ids.iter().map(|&id| derive(id)).collect();
    let producer = producer_id(slot);
    match broker
        .publish_idempotent(name, partition, &producer, first, messages.clone())
        .await
    {
        Ok(got) => (ids, messages, got),
        Err(e) => fail(&format!(
            "idempotent publish of {producer} sequences {first}..{} to {name}/{partition}: {e}",
            first + count
        )),
    }
}

async fn produce_idempotent(broker: Broker, slot: u32, state: IdempotentState, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let topic = slot as usize % TOPICS.len();
    let (name, partitions, _) = TOPICS[topic];
    let producer = producer_id(slot);
    let mut next = state.next;
    // The latest batches per partition (the broker remembers at least five).
    let mut recent: HashMap<u32, VecDeque<Written>> = HashMap::new();
    let mut pending = state.pending;
    loop {
        // The batch the previous process was killed in the middle of goes first: it may or
        // may not have been written, and must be written once either way.
        let (partition, first, count) = pending.take().unwrap_or_else(|| {
            let partition = rng.u32(..partitions);
            let first = next.get(&partition).copied().unwrap_or(0);
            (partition, first, 1 + rng.u64(..4))
        });
        if first != next.get(&partition).copied().unwrap_or(0) {
            fail(&format!(
                "{producer}: the parent's state resends {first} in partition {partition}, \
                 but the next sequence there is {:?}",
                next.get(&partition)
            ));
        }
        say(&format!("TRY {slot} {partition} {first} {count}\n"));
        let (ids, messages, got) = if rng.u8(..6) == 0 {
            // Two copies race: one writes, the other must be answered as its retry.
            let (one, two) = tokio::join!(
                publish_idempotent(&broker, slot, partition, first, count),
                publish_idempotent(&broker, slot, partition, first, count),
            );
            if one.2 != two.2 {
                fail(&format!(
                    "{producer}: two racing copies of sequences {first}..{} in {name}/{partition} \
                     got different positions: {:?} and {:?}",
                    first + count,
                    one.2,
                    two.2
                ));
            }
            one
        } else {
            publish_idempotent(&broker, slot, partition, first, count).await
        };
        check_positions(topic, &ids, &messages, &got);
        if got.iter().any(|at| at.partition != partition) {
            fail(&format!(
                "{producer}: batch to partition {partition} of {name} returned {got:?}"
            ));
        }
        say_published(topic, &ids, &got);
        next.insert(partition, first + count);
        let batches = recent.entry(partition).or_default();
        batches.push_back(Written {
            first,
            positions: got,
        });
        if batches.len() > 5 {
            batches.pop_front();
        }
        if rng.u8(..3) == 0 {
            // Retry on purpose one of the latest batches, or a part of it, as a producer
            // that lost the answer would: same positions, nothing written.
            let batch = &batches[rng.usize(..batches.len())];
            let len = batch.positions.len();
            let from = rng.usize(..len);
            let to = from + 1 + rng.usize(..len - from);
            let retry_first = batch.first + from as u64;
            let (_, _, again) =
                publish_idempotent(&broker, slot, partition, retry_first, (to - from) as u64).await;
            if again[..] != batch.positions[from..to] {
                fail(&format!(
                    "{producer}: retry of sequences {retry_first}..{} in {name}/{partition} \
                     answered {again:?}, first answered {:?}",
                    retry_first + (to - from) as u64,
                    &batch.positions[from..to]
                ));
            }
            say(&format!(
                "DUP {slot} {partition} {retry_first} {}\n",
                to - from
            ));
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(..3))).await;
    }
}

/// The child side: does nothing unless the parent started this binary to be crashed.
#[tokio::test]
async fn topic_crash_child_broker_under_load() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let round = env_u64(CHILD_ROUND_ENV) as u32;
    let seed = env_u64(CHILD_SEED_ENV);
    let producers = env_u64(CHILD_PRODUCERS_ENV) as u32;
    let idempotent_file = std::env::var_os(CHILD_IDEMPOTENT_FILE_ENV).expect("state file set");
    let idempotent = read_idempotent_states(Path::new(&idempotent_file));
    let broker = match Broker::open(&dir, config(splitmix(seed))).await {
        Ok(broker) => broker,
        Err(e) => fail(&format!("open: {e}")),
    };
    let existing = broker.list_topics();
    for (name, partitions, keyless) in TOPICS {
        if !existing.iter().any(|n| n.as_str() == name)
            && let Err(e) = broker.create_topic(name, spec(partitions, keyless)).await
        {
            fail(&format!("create {name}: {e}"));
        }
    }
    // libtest has printed "test topic_crash_child_broker_under_load ... " without a newline.
    say("\nREADY\n");
    for producer in 0..producers {
        let seed = splitmix(seed ^ (1 << 32) ^ producer as u64);
        tokio::spawn(produce(broker.clone(), round, producer, seed));
    }
    for (slot, state) in idempotent.into_iter().enumerate() {
        let seed = splitmix(seed ^ (2 << 32) ^ slot as u64);
        tokio::spawn(produce_idempotent(broker.clone(), slot as u32, state, seed));
    }
    tokio::time::sleep(CHILD_MAX_RUN).await;
    // Only reached when the parent never killed us.
    std::process::exit(4);
}

// ---------------------------------------------------------------------------------------
// The parent.

struct ChildRun {
    round: u32,
    seed: u64,
    producers: u32,
    kill: Kill,
}

/// Where a message is: (topic, partition, offset).
type Located = (usize, u32, u64);

#[derive(Debug, Default)]
struct Said {
    ready: bool,
    /// Acknowledged messages and where the child was told they are, in the order said.
    published: Vec<(Id, Located)>,
    /// `TRY` and `PUB` lines, in the order said: what became of each idempotent batch.
    lines: Vec<Line>,
    retries: usize,
}

#[derive(Debug)]
enum Line {
    /// An idempotent batch's first attempt: slot, partition, first sequence, count.
    Try(u32, u32, u64, u64),
    Published(Id),
}

fn topic_index(name: &str) -> Option<usize> {
    TOPICS.iter().position(|(n, _, _)| *n == name)
}

/// Runs one child on `dir` until the kill; returns what it said.
fn run_child(dir: &Path, idempotent_file: &Path, run: &ChildRun) -> Said {
    let envs = [
        (CHILD_DIR_ENV, dir.display().to_string()),
        (CHILD_ROUND_ENV, run.round.to_string()),
        (CHILD_SEED_ENV, run.seed.to_string()),
        (CHILD_PRODUCERS_ENV, run.producers.to_string()),
        (
            CHILD_IDEMPOTENT_FILE_ENV,
            idempotent_file.display().to_string(),
        ),
    ];
    let Killed {
        lines,
        stderr,
        status,
        ..
    } = run_and_kill(CHILD_TEST_NAME, &envs, run.kill);
    let mut said = Said::default();
    for line in &lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        let garbled = || -> ! { panic!("child said a garbled line {line:?}") };
        let n = |i: usize| -> u64 {
            words
                .get(i)
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| garbled())
        };
        match words.first().copied() {
            Some("READY") => said.ready = true,
            Some("PUB") => {
                let topic = words
                    .get(1)
                    .and_then(|t| topic_index(t))
                    .unwrap_or_else(|| garbled());
                let id = words
                    .get(4)
                    .and_then(|w| Id::parse(w))
                    .unwrap_or_else(|| garbled());
                said.published.push((id, (topic, n(2) as u32, n(3))));
                said.lines.push(Line::Published(id));
            }
            Some("TRY") => said
                .lines
                .push(Line::Try(n(1) as u32, n(2) as u32, n(3), n(4))),
            Some("DUP") => said.retries += 1,
            Some("FAIL") => panic!("round {} child failed: {line}\nstderr: {stderr}", run.round),
            _ => {}
        }
    }
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "round {} child exited on its own ({status:?}) before the kill\nstdout: {lines:?}\n\
         stderr: {stderr}",
        run.round
    );
    if let Kill::AfterReady(_) = run.kill {
        assert!(
            said.ready,
            "round {} child never got ready\nstdout: {lines:?}\nstderr: {stderr}",
            run.round
        );
    }
    said
}

/// What the parent knows about one directory.
struct DirState {
    /// Every message ever acknowledged on the directory, and where.
    acked: HashMap<Id, Located>,
    idempotent: Vec<IdempotentState>,
    /// Rounds run on the directory.
    rounds: Vec<u32>,
    /// Per topic and partition, the ids read at the last verification, in offset order:
    /// a later look must find them again, at the same offsets.
    logs: HashMap<(usize, u32), Vec<Id>>,
}

impl DirState {
    fn new() -> DirState {
        DirState {
            acked: HashMap::new(),
            idempotent: vec![IdempotentState::default(); IDEMPOTENT_PRODUCERS as usize],
            rounds: Vec::new(),
            logs: HashMap::new(),
        }
    }

    fn absorb(&mut self, round: u32, said: &Said, label: &str) {
        self.rounds.push(round);
        for &(id, at) in &said.published {
            if let Some(before) = self.acked.insert(id, at) {
                // BROKER BUG if it fires: a resent idempotent batch must be answered with
                // the positions its first (partly announced) answer gave.
                assert_eq!(
                    before, at,
                    "{label}: BROKER BUG: {id} acknowledged at {before:?}, then at {at:?}"
                );
            }
        }
        for line in &said.lines {
            match *line {
                Line::Try(slot, partition, first, count) => {
                    let state = &mut self.idempotent[slot as usize];
                    let next = state.next.get(&partition).copied().unwrap_or(0);
                    assert_eq!(
                        first, next,
                        "{label}: test bug: idem-{slot} tried {first} in partition \
                         {partition}, its next sequence is {next}"
                    );
                    state.pending = Some((partition, first, count));
                }
                Line::Published(Id::Idempotent {
                    slot,
                    partition,
                    seq,
                }) => {
                    let state = &mut self.idempotent[slot as usize];
                    // The batch is acknowledged once its last message is (they are said in
                    // order, after the call returned).
                    if let Some((p, first, count)) = state.pending
                        && p == partition
                        && seq == first + count - 1
                    {
                        state.next.insert(partition, first + count);
                        state.pending = None;
                    }
                }
                Line::Published(Id::Plain { .. }) => {}
            }
        }
    }
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

/// The partitions' end offsets, per topic present.
fn ends(broker: &Broker, label: &str) -> Vec<(String, Vec<u64>)> {
    broker
        .list_topics()
        .iter()
        .map(|name| {
            let info = broker
                .describe_topic(name.as_str())
                .unwrap_or_else(|e| panic!("{label}: describe {name}: {e}"));
            let ends = info.partitions.iter().map(|p| p.end_offset).collect();
            (name.to_string(), ends)
        })
        .collect()
}

/// Reopens the broker after the kill and checks it against everything the children said.
fn verify(dir: &Path, state: &mut DirState, label: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let broker = open_at(dir, now_ms(), label).await;
        let existing: Vec<String> = broker.list_topics().iter().map(|n| n.to_string()).collect();
        let mut found: HashMap<Id, Located> = HashMap::new();
        let mut per_topic = Vec::new();
        for (topic, &(name, partitions, keyless)) in TOPICS.iter().enumerate() {
            if !existing.iter().any(|n| n == name) {
                // The child was killed before it created the topic: it published nothing.
                let acked = state.acked.keys().filter(|id| id.topic() == topic).count();
                assert_eq!(
                    acked, 0,
                    "{label}: topic {name} is missing, with {acked} acknowledged messages"
                );
                per_topic.push(format!("{name} missing"));
                continue;
            }
            let info = broker
                .describe_topic(name)
                .unwrap_or_else(|e| panic!("{label}: describe {name}: {e}"));
            assert_eq!(info.spec, spec(partitions, keyless), "{label}: {name} spec");
            let mut counts = Vec::new();
            for p in &info.partitions {
                let partition = p.partition;
                let records = broker
                    .read_topic(name, partition, Position::Earliest, usize::MAX)
                    .unwrap_or_else(|e| panic!("{label}: read {name}/{partition}: {e}"));
                let offsets: Vec<u64> = records.iter().map(|r| r.offset).collect();
                assert!(
                    p.start_offset == 0
                        && offsets.iter().copied().eq(0..p.end_offset)
                        && offsets.len() as u64 == p.end_offset,
                    "{label}: BROKER BUG: {name}/{partition} ({}..{}) has a hole or does not \
                     start at 0; offsets read: {} from {:?} to {:?}",
                    p.start_offset,
                    p.end_offset,
                    offsets.len(),
                    offsets.first(),
                    offsets.last()
                );
                // Per publisher (a plain producer of one round, or an idempotent producer
                // in this partition), the last counter seen: publish order within the
                // partition, and so within each key (a key has one partition).
                let mut last: HashMap<Publisher, (u64, u64)> = HashMap::new();
                let mut ids = Vec::with_capacity(records.len());
                for record in &records {
                    let id = identify(record, topic).unwrap_or_else(|problem| {
                        panic!(
                            "{label}: BROKER BUG: bad record at {name}/{partition} offset {}: \
                             {problem}",
                            record.offset
                        )
                    });
                    if let Id::Plain { round, .. } = id {
                        assert!(
                            state.rounds.contains(&round),
                            "{label}: {name}/{partition} holds {id}, from a round not run on \
                             this directory"
                        );
                    }
                    let at = (topic, partition, record.offset);
                    if let Some(first) = found.insert(id, at) {
                        panic!("{label}: BROKER BUG: {id} written twice: at {first:?} and {at:?}");
                    }
                    let (publisher, counter) = id.publisher();
                    if let Some((before, before_offset)) =
                        last.insert(publisher, (counter, record.offset))
                        && before >= counter
                    {
                        panic!(
                            "{label}: BROKER BUG: out of publish order in {name}/{partition}: \
                             counter {before} at offset {before_offset}, then {id} at offset {}",
                            record.offset
                        );
                    }
                    ids.push(id);
                }
                if let Some(before) = state.logs.get(&(topic, partition)) {
                    let kept = before.len() <= ids.len() && ids[..before.len()] == before[..];
                    assert!(
                        kept,
                        "{label}: BROKER BUG: {name}/{partition} changed below its old end: \
                         {} records read at the last look, {} now; first difference at offset \
                         {:?}",
                        before.len(),
                        ids.len(),
                        before.iter().zip(&ids).position(|(a, b)| a != b)
                    );
                }
                counts.push(ids.len().to_string());
                state.logs.insert((topic, partition), ids);
            }
            per_topic.push(format!("{name} [{}]", counts.join(" ")));
        }
        let mut missing: Vec<(Id, Located, Option<Located>)> = state
            .acked
            .iter()
            .filter(|&(id, at)| found.get(id) != Some(at))
            .map(|(&id, &at)| (id, at, found.get(&id).copied()))
            .collect();
        missing.sort_unstable();
        assert!(
            missing.is_empty(),
            "{label}: BROKER BUG: {} acknowledged messages are not where they were \
             acknowledged (id, acknowledged at, found at), e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        );
        // Each idempotent producer's sequences per partition: 0..n, n at a batch boundary.
        let mut sequences: HashMap<(u32, u32), Vec<u64>> = HashMap::new();
        for id in found.keys() {
            if let Id::Idempotent {
                slot,
                partition,
                seq,
            } = *id
            {
                sequences.entry((slot, partition)).or_default().push(seq);
            }
        }
        let (mut pending_written, mut pending_absent) = (0, 0);
        for (slot, idempotent) in state.idempotent.iter().enumerate() {
            let slot = slot as u32;
            let (_, partitions, _) = TOPICS[slot as usize % TOPICS.len()];
            for partition in 0..partitions {
                let mut seqs = sequences.remove(&(slot, partition)).unwrap_or_default();
                seqs.sort_unstable();
                let n = seqs.len() as u64;
                assert!(
                    seqs.iter().copied().eq(0..n),
                    "{label}: BROKER BUG: idem-{slot} in partition {partition} has a gap: \
                     {seqs:?}"
                );
                let next = idempotent.next.get(&partition).copied().unwrap_or(0);
                let pending = idempotent
                    .pending
                    .filter(|&(p, _, _)| p == partition)
                    .map(|(_, first, count)| first + count);
                if n == next {
                    pending_absent += usize::from(pending.is_some());
                } else if Some(n) == pending {
                    pending_written += 1;
                } else {
                    panic!(
                        "{label}: BROKER BUG: idem-{slot} in partition {partition} has \
                         sequences 0..{n}; its last acknowledged batch ended at {next}, the \
                         batch under way at the kill would end at {pending:?}"
                    );
                }
            }
        }
        assert!(
            sequences.is_empty(),
            "{label}: idempotent messages of unknown producers or partitions: {:?}",
            sequences.keys().collect::<Vec<_>>()
        );
        let unacknowledged = found
            .keys()
            .filter(|id| !state.acked.contains_key(id))
            .count();
        // Recovery is done: a second reopen finds exactly the same ends.
        let first_ends = ends(&broker, label);
        drop(broker);
        let broker = open_at(dir, now_ms(), label).await;
        assert_eq!(
            ends(&broker, label),
            first_ends,
            "{label}: BROKER BUG: a second reopen moved the partitions' ends"
        );
        drop(broker);
        format!(
            "read {} ({}), {unacknowledged} present without a PUB line, idempotent batches \
             under way at a kill: {pending_written} written, {pending_absent} not",
            found.len(),
            per_topic.join(", ")
        )
    })
}

#[test]
fn sigkill_while_publishing_to_topics_loses_no_acknowledged_message_and_duplicates_none() {
    let seed = seed_from_env(SEED_ENV);
    println!("topic crash test seed {seed} (replay with {SEED_ENV}={seed})");
    let mut rng = fastrand::Rng::with_seed(seed);
    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3)
        .map(|i| root.path().join(format!("broker-{i}")))
        .collect();
    let idempotent_files: Vec<PathBuf> = (0..3)
        .map(|i| root.path().join(format!("idempotent-{i}.txt")))
        .collect();
    let mut states: Vec<DirState> = (0..dirs.len()).map(|_| DirState::new()).collect();
    let started = Instant::now();
    let (mut total_published, mut total_retries) = (0, 0);
    for (round, &(d, verify_after, early)) in ROUNDS.iter().enumerate() {
        let round = round as u32;
        let kill = kill_for(&mut rng, early);
        let run = ChildRun {
            round,
            seed: rng.u64(..),
            producers: 2 + rng.u32(..3),
            kill,
        };
        write_idempotent_states(&states[d].idempotent, &idempotent_files[d]);
        let said = run_child(&dirs[d], &idempotent_files[d], &run);
        let label = format!(
            "seed {seed} round {round} dir {d} ({} plain + {IDEMPOTENT_PRODUCERS} idempotent \
             producers, kill {:?}, ready {})",
            run.producers, run.kill, said.ready
        );
        states[d].absorb(round, &said, &label);
        total_published += said.published.len();
        total_retries += said.retries;
        let idempotent = said
            .published
            .iter()
            .filter(|(id, _)| matches!(id, Id::Idempotent { .. }))
            .count();
        let counts = format!(
            "{} published ({idempotent} idempotent), {} on-purpose retries answered alike",
            said.published.len(),
            said.retries
        );
        if verify_after {
            let summary = verify(&dirs[d], &mut states[d], &label);
            println!("{label}: {counts}; {summary}");
        } else {
            println!("{label}: {counts}; not verified yet");
        }
    }
    println!(
        "{} rounds, {total_published} published, {total_retries} retries, {:?}",
        ROUNDS.len(),
        started.elapsed()
    );
    assert!(
        total_published > 0 && total_retries > 0,
        "no child got as far as an acknowledged publish and a retried idempotent batch"
    );
}
