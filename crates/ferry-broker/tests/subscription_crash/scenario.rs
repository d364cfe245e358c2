//! The scenario both sides share: the topic, its three subscriptions and the group, and
//! messages derived from their [`Id`], so that either side can check what it reads.

use std::time::Duration;

use ferry_broker::{
    BrokerConfig, DeadLetter, Durability, Filter, Limits, MessageId, OrderingMode, OutgoingMessage,
    QueueSpec, ReceivedMessage, RetryPolicy, SubscriptionSpec, SubscriptionStart, TopicRecord,
    TopicRetention, TopicSpec,
};
use ferry_testkit::killed_child::splitmix;

pub const TOPIC: &str = "events";
pub const PARTITIONS: u32 = 3;
pub const PRODUCERS: u32 = 2;
pub const KEYS: u32 = 6;
pub const ID_HEADER: &str = "crash-id";
pub const SUBJECTS: [&str; 3] = ["a.one", "a.two", "b.one"];
pub const GROUP: &str = "audit";
pub const GROUP_INSTANCE: &str = "audit-static";
/// Short, so that the leases of a killed child's deliveries run out a round or two later and
/// their messages are delivered again.
pub const LEASE: Duration = Duration::from_secs(1);

/// A subscription of the test: name, ordering, filter.
pub struct Sub {
    pub name: &'static str,
    pub ordering: OrderingMode,
    pub filter: &'static str,
}

pub const SUBS: [Sub; 3] = [
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
    pub fn takes(&self, subject: &str) -> bool {
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
pub struct Id {
    pub round: u32,
    pub producer: u32,
    pub n: u64,
}

impl Id {
    pub fn message_id(&self) -> MessageId {
        let random = (1u128 << 78)
            | ((self.round as u128) << 64)
            | ((self.producer as u128) << 48)
            | self.n as u128;
        MessageId::from_ulid(ulid::Ulid::from_parts(1_600_000_000_000, random))
    }

    pub fn parse(s: &str) -> Option<Id> {
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
pub struct Shape {
    pub subject: &'static str,
    pub key: Option<String>,
    pub payload: Vec<u8>,
    pub delay: Option<Duration>,
}

pub fn shape(id: Id) -> Shape {
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

pub fn derive(id: Id) -> OutgoingMessage {
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
pub fn identify(
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

pub fn identify_record(record: &TopicRecord) -> Result<Id, String> {
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

pub fn identify_delivery(sub: &Sub, m: &ReceivedMessage) -> Result<Id, String> {
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

pub fn topic_spec() -> TopicSpec {
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

pub fn subscription_spec(sub: &Sub) -> SubscriptionSpec {
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
pub fn config(seed: u64) -> BrokerConfig {
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
