//! The scenario both sides share: the two topics, their producers and keys, and messages
//! derived from their [`Id`], so that either side can check what it reads.

use ferry_broker::{
    BrokerConfig, Durability, KeylessPlacement, Limits, MessageId, OutgoingMessage, ProducerStamp,
    TopicRecord, TopicRetention, TopicSpec, partition_for_key,
};
use ferry_testkit::killed_child::splitmix;

/// The two topics: name, partitions, keyless placement.
pub const TOPICS: [(&str, u32, KeylessPlacement); 2] = [
    ("sticky", 4, KeylessPlacement::StickyBatch),
    ("spread", 3, KeylessPlacement::RoundRobin),
];
/// Idempotent producers, the same on every round: slot `s` is producer id `idem-<s>`.
pub const IDEMPOTENT_PRODUCERS: u32 = 3;
pub const KEYS: u32 = 8;
pub const ID_HEADER: &str = "crash-id";
pub const MAX_PAYLOAD: usize = 600;

/// Who published a message: everything about it derives from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Id {
    /// Message `n` of plain producer `producer` of round `round`.
    Plain { round: u32, producer: u32, n: u64 },
    /// Sequence `seq` of idempotent producer `idem-<slot>` in `partition`.
    Idempotent { slot: u32, partition: u32, seq: u64 },
}

/// Whose messages must keep their publish order within a partition, and the counter that
/// says that order.
pub type Publisher = (bool, u32, u32);

impl Id {
    pub fn topic(&self) -> usize {
        match *self {
            Id::Plain { producer, .. } => producer as usize % TOPICS.len(),
            Id::Idempotent { slot, .. } => slot as usize % TOPICS.len(),
        }
    }

    pub fn publisher(&self) -> (Publisher, u64) {
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
    pub fn message_id(&self) -> MessageId {
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

    pub fn stamp(&self) -> Option<ProducerStamp> {
        match *self {
            Id::Plain { .. } => None,
            Id::Idempotent { slot, seq, .. } => Some(ProducerStamp {
                producer_id: producer_id(slot),
                sequence: seq,
            }),
        }
    }

    pub fn parse(s: &str) -> Option<Id> {
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

pub fn producer_id(slot: u32) -> String {
    format!("idem-{slot}")
}

pub fn key(k: u32) -> String {
    format!("k{k}")
}

/// The message published for `id`: 1..=600 payload bytes, the id header, and a key — one
/// of eight for a plain producer's message, most of the time; for an idempotent producer's,
/// one of those that Kafka's placement puts in the partition it publishes to, when there is
/// one, so that keyed messages are in their key's partition whoever published them.
pub fn derive(id: Id) -> OutgoingMessage {
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
pub fn identify(got: &TopicRecord, topic: usize) -> Result<Id, String> {
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

pub fn spec(partitions: u32, keyless: KeylessPlacement) -> TopicSpec {
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
pub fn config(seed: u64) -> BrokerConfig {
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
