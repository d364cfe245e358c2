//! The scenario both sides share: the two queues and their dead-letter queues, and
//! messages derived from their [`Id`], so that either side can check what it reads.

use std::time::Duration;

use ferry_broker::{
    Backoff, Durability, MessageId, OrderingMode, OutgoingMessage, QueueSpec, ReceivedMessage,
    RetryPolicy,
};
use ferry_testkit::killed_child::splitmix;

pub const QUEUES: [&str; 2] = ["shared", "keyed"];
pub const DEAD_LETTER_QUEUES: [&str; 2] = ["shared.dlq", "keyed.dlq"];
pub const ID_HEADER: &str = "crash-id";
pub const LEASE: Duration = Duration::from_millis(150);
pub const MAX_DELIVERIES: u32 = 3;
pub const MAX_DELAY_MS: u64 = 300;
/// How far past the kill the parent's clock is set: beyond every lease (150 ms), retry
/// backoff (at most 100 ms) and delay (at most 300 ms) the child can have started.
pub const PAST_EVERY_DEADLINE_MS: i64 = 1_000;

/// Who published a message: everything about it derives from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id {
    pub round: u32,
    pub producer: u32,
    pub n: u64,
}

impl Id {
    pub fn queue(&self) -> &'static str {
        QUEUES[self.producer as usize % QUEUES.len()]
    }

    /// The producer-chosen message id: distinct for every `Id`, never nil.
    pub fn message_id(&self) -> MessageId {
        let random =
            ((self.round as u128) << 64) | ((self.producer as u128) << 48) | self.n as u128;
        MessageId::from_ulid(ulid::Ulid::from_parts(1_600_000_000_000, random))
    }

    /// Every tenth message fails every delivery.
    pub fn is_poison(&self) -> bool {
        splitmix(((self.round as u64) << 32) ^ ((self.producer as u64) << 24) ^ self.n)
            .is_multiple_of(10)
    }

    pub fn parse(s: &str) -> Option<Id> {
        let mut parts = s.split('.');
        let id = Id {
            round: parts.next()?.parse().ok()?,
            producer: parts.next()?.parse().ok()?,
            n: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(id)
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.round, self.producer, self.n)
    }
}

/// The message a producer publishes for `id`: 1..1500 payload bytes, a key on `keyed`
/// (one of five) and sometimes on `shared`, the id header, sometimes a delay.
pub fn derive(id: Id) -> OutgoingMessage {
    let mut rng = fastrand::Rng::with_seed(splitmix(
        ((id.round as u64) << 48) ^ ((id.producer as u64) << 40) ^ id.n,
    ));
    let size = 1 + rng.usize(..1500);
    let payload: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(size).collect();
    let mut message = OutgoingMessage::new(payload)
        .with_id(id.message_id())
        .with_header(ID_HEADER, id.to_string());
    if id.queue() == "keyed" || rng.bool() {
        message = message.with_key(format!("k{}", rng.u8(..5)));
    }
    if rng.u8(..8) == 0 {
        message = message.with_delay(Duration::from_millis(1 + rng.u64(..MAX_DELAY_MS)));
    }
    message
}

/// Why `got` is not the message published for its id, if it is not.
pub fn mismatch(got: &ReceivedMessage, queue: &str) -> Option<String> {
    let Some(id) = got.headers.get(ID_HEADER).and_then(|s| Id::parse(s)) else {
        return Some(format!(
            "no or a garbled {ID_HEADER} header: {:?}",
            got.headers
        ));
    };
    let want = derive(id);
    if got.id != id.message_id() {
        return Some(format!("{id}: message id {} is not the producer's", got.id));
    }
    if got.payload != want.payload {
        return Some(format!("{id}: payload differs"));
    }
    if got.key != want.key || got.headers != want.headers {
        return Some(format!(
            "{id}: key/headers {:?}/{:?}, want {:?}/{:?}",
            got.key, got.headers, want.key, want.headers
        ));
    }
    let origin = match queue.strip_suffix(".dlq") {
        Some(origin) => {
            if got.dead_letter.as_ref().map(|d| d.origin_queue.as_str()) != Some(origin) {
                return Some(format!("{id}: dead letter info {:?}", got.dead_letter));
            }
            origin
        }
        None => queue,
    };
    if origin != id.queue() {
        return Some(format!(
            "{id}: published to {}, got from {queue}",
            id.queue()
        ));
    }
    None
}

pub fn spec(ordering: OrderingMode) -> QueueSpec {
    QueueSpec {
        retry: RetryPolicy {
            max_deliveries: MAX_DELIVERIES,
            backoff: Backoff {
                base: Duration::from_millis(20),
                cap: Duration::from_millis(100),
                multiplier: 2.0,
                jitter: 0.2,
            },
        },
        lease: LEASE,
        ordering,
        durability: Durability::Fsync,
        ..QueueSpec::default()
    }
}
