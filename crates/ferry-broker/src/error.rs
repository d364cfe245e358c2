//! The broker's one error type. Variants are what a caller can act on — a publisher refused
//! for size maps to one gRPC/HTTP status, a bad queue spec to another — and every message
//! says what was wrong and what to do about it.

use std::time::Duration;

pub use ferry_error_kind::ErrorKind;

use crate::message_id::MessageId;
use crate::name::{Name, describe_character};

pub type Result<T, E = BrokerError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    // Names.
    #[error("a name must not be empty; use 1 to 200 ASCII letters, digits, '.', '_' or '-'")]
    EmptyName,
    #[error("name starting {prefix:?} is {len} bytes long; names may be at most {max} bytes")]
    NameTooLong {
        prefix: String,
        len: usize,
        max: usize,
    },
    #[error(
        "name {name:?} has {} at position {position}; names may use only ASCII letters, \
         digits, '.', '_' and '-'",
        describe_character(.character)
    )]
    InvalidNameCharacter {
        name: String,
        character: char,
        position: usize,
    },
    #[error("name {name:?} starts with {first:?}; a name must not start with '.' or '-'")]
    NameStartsWithDotOrDash { name: String, first: char },
    #[error("name {name:?} has \"..\" at position {position}; use a single '.' between parts")]
    NameHasDoubleDot { name: String, position: usize },
    #[error("name {name:?} ends with '.'; remove the trailing dot")]
    NameEndsWithDot { name: String },
    #[error(
        "queue {queue} is too long for a derived dead-letter queue name: \"<name>.dlq\" must \
         fit in 200 bytes, so the queue name may be at most {max} bytes; shorten the name or \
         name its dead-letter queue explicitly"
    )]
    DeadLetterNameTooLong { queue: Name, max: usize },

    // Settings of queues and retry policies.
    #[error("{setting} {problem}")]
    InvalidSetting {
        setting: &'static str,
        problem: String,
    },
    #[error("queue {queue}: {error}")]
    InvalidQueueSpec {
        queue: Name,
        error: Box<BrokerError>,
    },
    #[error(
        "queue {queue} ends in \".dlq\", which is reserved for dead-letter queues, and cannot \
         get a derived dead-letter queue of its own; set its dead_letter to Disabled or Named"
    )]
    DeadLetterQueueNeedsExplicitTarget { queue: Name },
    #[error("queue {name} is declared twice; give each queue one spec")]
    DuplicateQueue { name: Name },
    #[error(
        "queue {queue} dead-letters to {target}, which does not exist; create {target} first \
         or use the default dead-letter queue"
    )]
    DeadLetterTargetMissing { queue: Name, target: Name },
    #[error(
        "queue {queue} dead-letters to topic {topic}, which does not exist; create topic \
         {topic} first or choose another dead-letter target"
    )]
    DeadLetterTopicMissing { queue: Name, topic: Name },
    #[error(
        "dead-letter queues form a cycle: {} -> {}; dead letters would circulate forever — \
         point one of these queues elsewhere or set its dead_letter to Disabled",
        join(.cycle), .cycle[0]
    )]
    DeadLetterCycle { cycle: Vec<Name> },

    // Messages at publish.
    #[error("message id {input:?} is not a ULID ({problem}); use 26 Crockford base32 characters")]
    InvalidMessageId { input: String, problem: String },
    #[error("the message id is the nil ULID (all zeros); set a real id or leave it unset")]
    NilMessageId,
    #[error(
        "payload is {size} bytes, over the limit of {max}; store large data elsewhere and \
         send a reference"
    )]
    PayloadTooLarge { size: usize, max: usize },
    #[error("message has {count} headers, over the limit of {max}; move data into the payload")]
    TooManyHeaders { count: usize, max: usize },
    #[error("a header name is empty; give every header a name")]
    EmptyHeaderName,
    #[error("header name starting {prefix:?} is {len} bytes, over the limit of {max}")]
    HeaderNameTooLong {
        prefix: String,
        len: usize,
        max: usize,
    },
    #[error(
        "header name {name:?} has a control character at position {position}; header names \
         must be printable"
    )]
    HeaderNameHasControlCharacter { name: String, position: usize },
    #[error(
        "header {name:?} is in the \"ferry-\" namespace, which the broker reserves for its own \
         metadata; rename the header"
    )]
    ReservedHeaderName { name: String },
    #[error(
        "the value of header {name:?} is {len} bytes, over the limit of {max}; move it into \
         the payload"
    )]
    HeaderValueTooLong {
        name: String,
        len: usize,
        max: usize,
    },
    #[error("the key is {size} bytes, over the limit of {max}; use a shorter key or a hash of it")]
    KeyTooLarge { size: usize, max: usize },
    #[error("the dedup id is empty; set a real id or leave it unset")]
    EmptyDedupId,
    #[error("the dedup id is {len} bytes, over the limit of {max}; use a hash of it")]
    DedupIdTooLong { len: usize, max: usize },
    #[error(
        "queue {queue} was declared without a dedup window, so a dedup id would do nothing \
         there; publish without one, or declare the queue with a dedup window"
    )]
    DedupIdWithoutWindow { queue: Name },
    #[error(
        "queue {queue} already stored a publish call with batch id {batch}, with {stored} \
         messages without a dedup key, and this call has {sent}; a retry must carry the same \
         messages — give a new call a new batch id"
    )]
    BatchIdReused {
        queue: Name,
        batch: MessageId,
        stored: u32,
        sent: u32,
    },
    #[error(
        "the delivery time is {} away, beyond the longest delay of {}; schedule it closer \
         or hold it in your own scheduler",
        human(.delay), human(.max)
    )]
    DelayTooLong { delay: Duration, max: Duration },
    #[error("a TTL of {ttl:?} rounds down to 0 ms; use at least 1 ms, or no TTL")]
    TtlTooShort { ttl: Duration },
    #[error(
        "a TTL of {} is longer than the limit of {}; shorten it or set no TTL",
        human(.ttl), human(.max)
    )]
    TtlTooLong { ttl: Duration, max: Duration },
    #[error(
        "the message would expire (TTL {}, counted from publish) before its delivery time \
         ({} away); lengthen the TTL or shorten the delay",
        human(.ttl), human(.delay)
    )]
    ExpiresBeforeDelivery { delay: Duration, ttl: Duration },
    #[error(
        "priority {priority} is above the top level of queue {queue}, which has {levels} \
         priority level(s), 0 to {}; publish with a priority from 0 to {}, or declare the \
         queue with more levels",
        .levels - 1, .levels - 1
    )]
    PriorityAboveLevels {
        queue: Name,
        priority: u8,
        levels: u8,
    },

    // Reading stored messages.
    #[error("record at offset {offset} is not a readable broker message: {problem}")]
    MalformedRecord { offset: u64, problem: String },

    // Delivery outcomes.
    #[error(
        "lease token {token} is not the current lease of message {seq}: that delivery already \
         ended (lease expired, nacked, rejected, settled or dead-lettered) and the message may \
         have been delivered to another consumer; stop working on it — if it still needs \
         work it will be delivered again"
    )]
    StaleLease { seq: u64, token: u64 },

    #[error(
        "queue {queue} has no message {seq}: its seqs so far are below {next_seq}; settle \
         with the seq and token of a delivery from this queue"
    )]
    MessageNotPublished {
        queue: Name,
        seq: u64,
        next_seq: u64,
    },

    // Subscription filters.
    #[error("filter {filter:?} at byte {position}: {problem}")]
    InvalidFilter {
        filter: String,
        position: usize,
        problem: String,
    },

    // Subscriptions.
    #[error("queue {queue} is not a subscription")]
    NotASubscription { queue: Name },
    #[error("topic {topic} has subscription {subscription}; delete its subscriptions first")]
    TopicHasSubscriptions { topic: Name, subscription: Name },
    #[error(
        "topic {topic} is the dead-letter topic of {origin}; delete {origin} first or point \
         its dead_letter elsewhere"
    )]
    TopicIsDeadLetterTarget { topic: Name, origin: Name },

    // Snapshots of subscriptions, and seeks.
    #[error(
        "snapshot {snapshot:?} does not exist or has expired; create it first \
         (list_snapshots shows what exists)"
    )]
    SnapshotNotFound { snapshot: String },
    #[error("snapshot {snapshot} already exists; delete it first or use another name")]
    SnapshotExists { snapshot: Name },
    #[error(
        "snapshot {snapshot} is of topic {topic}, but subscription {subscription} is of topic \
         {subscription_topic}; seek to a snapshot of {subscription_topic}"
    )]
    SnapshotOfAnotherTopic {
        snapshot: Name,
        topic: Name,
        subscription: Name,
        subscription_topic: Name,
    },
    #[error(
        "a snapshot of subscription {subscription} would expire within an hour: its oldest \
         unacknowledged message is {oldest_age_ms} ms old (a snapshot lives 7 days from it); \
         acknowledge or seek past the oldest messages first"
    )]
    SnapshotWouldExpire {
        subscription: Name,
        oldest_age_ms: i64,
    },
    #[error(
        "the stored snapshot {snapshot:?} is unreadable: {problem}; the metadata was written \
         by another Ferry version or damaged"
    )]
    MalformedSnapshot { snapshot: String, problem: String },

    // Links (queues attached to topics).
    #[error("queue {queue} has no link {link}; list its links to see which it has")]
    LinkNotFound { queue: Name, link: Name },
    #[error("queue {queue} already has a link {link}; detach it first or choose another name")]
    LinkExists { queue: Name, link: Name },
    #[error(
        "no filter evaluator of kind {kind:?} is registered; register it in \
         BrokerConfig::filter_evaluators (a front end defines it) before opening or attaching"
    )]
    UnknownFilterEvaluator { kind: String },
    #[error(
        "queue {queue} has a message of topic {topic} in flight through link {link}; retry \
         deleting the topic once it is settled"
    )]
    TopicReferencedInFlight {
        topic: Name,
        queue: Name,
        link: Name,
    },
    #[error("the {kind:?} filter policy is invalid: {problem}")]
    InvalidFilterPolicy { kind: String, problem: String },
    #[error(
        "link record {key} is unreadable: {problem}; it was written by a newer Ferry or damaged"
    )]
    MalformedLink { key: String, problem: String },

    // Consumer groups.
    #[error("group {group:?} of topic {topic:?} has no members yet; join it first")]
    GroupNotFound { topic: String, group: String },
    #[error(
        "group {group:?} of topic {topic:?} still has {members} member(s); they must leave (or \
         their sessions end) before it can be deleted"
    )]
    GroupNotEmpty {
        topic: String,
        group: String,
        members: usize,
    },
    #[error(
        "group {group:?} of topic {topic:?} has {members} member(s) joined through Ferry's \
         own API; its offsets are theirs to commit — use another group name"
    )]
    GroupCoordinatedByBroker {
        topic: String,
        group: String,
        members: usize,
    },
    #[error("offset metadata of {size} bytes is over the {max}-byte limit; shorten it")]
    OffsetMetadataTooLarge { size: usize, max: usize },
    #[error(
        "group {group}: member {member:?} is not in the group (its session ended, or it \
         left); join again"
    )]
    UnknownMember { group: String, member: String },
    #[error(
        "group {group}: member {member:?} does not own partition {partition} (it moved in a \
         rebalance); heartbeat to learn the current assignment"
    )]
    NotPartitionOwner {
        group: String,
        member: String,
        partition: u32,
    },
    #[error(
        "group {group}: partition {partition} has offset {committed} committed; a commit \
         may only move forward (got {offset}); an admin reset moves it back"
    )]
    OffsetRegression {
        group: String,
        partition: u32,
        committed: u64,
        offset: u64,
    },

    // The engine.
    #[error("the consumer name is empty; name the consumer, e.g. \"billing-worker-1\"")]
    EmptyConsumerName,
    #[error(
        "consumer name starting {prefix:?} is {len} bytes, over the limit of {max}; use a \
         shorter name"
    )]
    ConsumerNameTooLong {
        prefix: String,
        len: usize,
        max: usize,
    },
    #[error("queue {queue:?} does not exist; create it first (list_queues shows what exists)")]
    QueueNotFound { queue: String },
    #[error(
        "queue {queue} is a temporary queue of another consumer; only its owner may \
         receive from it"
    )]
    NotQueueOwner { queue: Name },
    #[error("queue {queue} already exists; delete it first or use another name")]
    QueueExists { queue: Name },
    #[error(
        "queue {queue} is the dead-letter queue of {origin}; delete {origin} first or point \
         its dead_letter elsewhere"
    )]
    QueueIsDeadLetterTarget { queue: Name, origin: Name },
    #[error(
        "the stored spec of queue {queue:?} is unreadable: {problem}; the metadata was \
         written by another Ferry version or damaged"
    )]
    MalformedSpec { queue: String, problem: String },
    #[error(
        "journal record {offset} of queue {queue} is unreadable: {problem}; it was written by \
         a newer Ferry or damaged"
    )]
    MalformedJournal {
        queue: Name,
        offset: u64,
        problem: String,
    },
    #[error(
        "queue {queue} is full ({}) and its overflow policy refuses publishes; consume or \
         delete messages, raise the limit, or choose a DropHead / DeadLetterHead policy",
        describe_limit(.limit)
    )]
    QueueFull {
        queue: Name,
        limit: crate::spec::LengthLimit,
    },
    #[error(
        "queue {queue}: {setting} cannot change after the queue is created ({why}); create \
         another queue with the {setting} you need and move the messages there"
    )]
    QueueSettingFixed {
        queue: Name,
        setting: &'static str,
        why: &'static str,
    },
    #[error("queue {queue}'s settings cannot be changed: {why}")]
    QueueNotUpdatable { queue: Name, why: &'static str },
    #[error(
        "queue {queue} is not a dead-letter queue (no queue dead-letters into it and its name \
         does not end in \".dlq\"); redrive moves messages out of dead-letter queues only"
    )]
    NotADeadLetterQueue { queue: Name },
    #[error(
        "queue {queue} orders its messages {ordering}, not by key: only a key-shared queue \
         parks a key; create the queue (or subscription) with ordering key-shared to park keys"
    )]
    NotKeyShared {
        queue: Name,
        /// The queue's ordering, as its spec names it (`shared`, `exclusive`).
        ordering: &'static str,
    },
    #[error(
        "queue {queue} is poisoned: a write to its logs failed ({cause}), so its state in \
         memory may disagree with its disk; fix the storage problem and reopen the broker, \
         which rebuilds the queue from its logs (other queues keep working)"
    )]
    QueuePoisoned { queue: Name, cause: String },

    // Topics.
    #[error("topic {topic:?} does not exist; create it first (list_topics shows what exists)")]
    TopicNotFound { topic: String },
    #[error("topic {topic} already exists; delete it first or use another name")]
    TopicExists { topic: Name },
    #[error(
        "the stored spec of topic {topic:?} is unreadable: {problem}; the metadata was \
         written by another Ferry version or damaged"
    )]
    MalformedTopicSpec { topic: String, problem: String },
    #[error(
        "topic {topic} has no partition {partition}; its partitions are 0 to {}",
        .partitions - 1
    )]
    PartitionNotFound {
        topic: Name,
        partition: u32,
        partitions: u32,
    },
    #[error(
        "topic {topic}: {setting} cannot change after the topic is created ({why}); create \
         another topic with the {setting} you need"
    )]
    TopicSettingFixed {
        topic: Name,
        setting: &'static str,
        why: &'static str,
    },
    #[error(
        "records of partition {partition} of topic {topic} before offset {offset} cannot be \
         deleted: subscription {subscription} still needs offset {needed}; let it settle \
         them first, or set the topic's retention to override subscriptions"
    )]
    RecordsHeldBySubscription {
        topic: Name,
        partition: u32,
        offset: u64,
        subscription: Name,
        needed: u64,
    },
    #[error(
        "topic {topic} has {current} partitions and cannot go to {requested}: partitions can \
         only be added (removing one would lose its records and move its keys)"
    )]
    PartitionsCanOnlyGrow {
        topic: Name,
        current: u32,
        requested: u32,
    },
    #[error(
        "offset {offset} is outside partition {partition} of topic {topic}, which holds \
         offsets {start} to {end} (the end: nothing there yet); older records were removed by \
         retention — read from Earliest, or from a time"
    )]
    OffsetOutOfRange {
        topic: Name,
        partition: u32,
        offset: u64,
        start: u64,
        end: u64,
    },
    #[error(
        "the messages for partition {partition} of topic {topic} take {size} bytes together, \
         over the limit of {max} for one publish; publish them in smaller batches"
    )]
    BatchTooLarge {
        topic: Name,
        partition: u32,
        size: usize,
        max: usize,
    },
    #[error(
        "topic {topic} is compacted by key, so every message needs a key, and one for \
         partition {partition} has none; give it a key, or publish it to a topic without \
         compaction"
    )]
    KeyRequired { topic: Name, partition: u32 },
    #[error("producer id {producer:?} {problem}")]
    InvalidProducerId { producer: String, problem: String },
    #[error(
        "producer {producer} on partition {partition} of topic {topic}: expected sequence \
         {expected}, got {got}; a batch in between is missing — resend from {expected}"
    )]
    OutOfOrderSequence {
        topic: Name,
        partition: u32,
        producer: String,
        expected: u64,
        got: u64,
    },
    #[error(
        "producer {producer} on partition {partition} of topic {topic}: the batch starting at \
         sequence {got} overlaps what was written (up to {last_written}) without repeating a \
         written batch; resend new messages from {}", .last_written + 1
    )]
    SequenceOverlap {
        topic: Name,
        partition: u32,
        producer: String,
        got: u64,
        last_written: u64,
    },
    #[error(
        "producer {producer} on partition {partition} of topic {topic}: sequence {got} was \
         written long ago, before the batches the broker remembers (from {oldest_remembered}); \
         it is not written again, but its positions are no longer known"
    )]
    SequenceTooOld {
        topic: Name,
        partition: u32,
        producer: String,
        got: u64,
        oldest_remembered: u64,
    },

    // The disk.
    #[error(
        "the disk is full: the file system holding {} has {available} bytes free, and \
         {reserve} are kept for acks and housekeeping; publishes are refused (and store \
         nothing) until space is freed, while consumers can keep receiving and acking — \
         free space, consume the backlog, or shorten retention",
        .path.display()
    )]
    DiskFull {
        path: std::path::PathBuf,
        available: u64,
        reserve: u64,
    },

    // Schema requirements (see `schema_requirement.rs`).
    #[error(
        "the message does not match schema subject {subject:?}: {}{reason}; \
         publish a payload written with a registered schema of the subject",
        if .field.is_empty() { String::new() } else { format!("field `{}`: ", .field) }
    )]
    SchemaViolation {
        subject: String,
        /// The path to the first field that fails; empty when the payload as a whole does.
        field: String,
        reason: String,
    },
    #[error(
        "publishes here must match schema subject {subject:?}, but this broker was opened \
         without a payload validator, so nothing can be checked and nothing is stored; open \
         it with one (ferry serve opens its schema registry) or remove the requirement"
    )]
    NoPayloadValidator { subject: String },

    #[error("storage: {0}")]
    Storage(#[from] ferry_storage::StorageError),
}

impl BrokerError {
    /// This error's kind. Every variant is named here — no catch-all — so adding a variant
    /// does not compile until it is classified.
    pub fn kind(&self) -> ErrorKind {
        use BrokerError as E;
        use ErrorKind as K;
        match self {
            E::QueueNotFound { .. }
            | E::TopicNotFound { .. }
            | E::GroupNotFound { .. }
            | E::PartitionNotFound { .. }
            | E::MessageNotPublished { .. }
            | E::LinkNotFound { .. }
            | E::SnapshotNotFound { .. } => K::NotFound,
            E::DuplicateQueue { .. }
            | E::QueueExists { .. }
            | E::TopicExists { .. }
            | E::LinkExists { .. }
            | E::SnapshotExists { .. } => K::AlreadyExists,
            E::QueueIsDeadLetterTarget { .. }
            | E::TopicHasSubscriptions { .. }
            | E::TopicIsDeadLetterTarget { .. }
            | E::TopicReferencedInFlight { .. }
            | E::GroupNotEmpty { .. }
            | E::GroupCoordinatedByBroker { .. }
            | E::NotASubscription { .. }
            | E::SnapshotOfAnotherTopic { .. }
            | E::SnapshotWouldExpire { .. }
            | E::NotADeadLetterQueue { .. }
            | E::NotKeyShared { .. }
            | E::NotQueueOwner { .. }
            | E::QueueNotUpdatable { .. }
            | E::PartitionsCanOnlyGrow { .. }
            | E::RecordsHeldBySubscription { .. } => K::Conflict,
            E::StaleLease { .. } => K::StaleLease,
            E::UnknownMember { .. }
            | E::NotPartitionOwner { .. }
            | E::OffsetRegression { .. }
            | E::OutOfOrderSequence { .. }
            | E::SequenceOverlap { .. }
            | E::SequenceTooOld { .. } => K::Fenced,
            E::OffsetOutOfRange { .. } => K::OutOfRange,
            E::PayloadTooLarge { .. }
            | E::BatchTooLarge { .. }
            | E::OffsetMetadataTooLarge { .. } => K::TooLarge,
            E::QueueFull { .. } => K::Full,
            E::DiskFull { .. } => K::DiskFull,
            E::SchemaViolation { .. } => K::SchemaViolation,
            E::NoPayloadValidator { .. } => K::Unavailable,
            E::Storage(e) if e.is_resource_exhausted() => K::DiskFull,
            E::Storage(_)
            | E::QueuePoisoned { .. }
            | E::MalformedRecord { .. }
            | E::MalformedJournal { .. }
            | E::MalformedSpec { .. }
            | E::MalformedTopicSpec { .. }
            | E::MalformedLink { .. }
            | E::MalformedSnapshot { .. } => K::Unavailable,
            E::EmptyName
            | E::NameTooLong { .. }
            | E::InvalidNameCharacter { .. }
            | E::NameStartsWithDotOrDash { .. }
            | E::NameHasDoubleDot { .. }
            | E::NameEndsWithDot { .. }
            | E::DeadLetterNameTooLong { .. }
            | E::InvalidSetting { .. }
            | E::InvalidQueueSpec { .. }
            | E::QueueSettingFixed { .. }
            | E::TopicSettingFixed { .. }
            | E::DeadLetterQueueNeedsExplicitTarget { .. }
            | E::DeadLetterTargetMissing { .. }
            | E::DeadLetterTopicMissing { .. }
            | E::DeadLetterCycle { .. }
            | E::InvalidMessageId { .. }
            | E::NilMessageId
            | E::TooManyHeaders { .. }
            | E::EmptyHeaderName
            | E::HeaderNameTooLong { .. }
            | E::HeaderNameHasControlCharacter { .. }
            | E::ReservedHeaderName { .. }
            | E::HeaderValueTooLong { .. }
            | E::KeyTooLarge { .. }
            | E::EmptyDedupId
            | E::DedupIdTooLong { .. }
            | E::DedupIdWithoutWindow { .. }
            | E::BatchIdReused { .. }
            | E::DelayTooLong { .. }
            | E::TtlTooShort { .. }
            | E::TtlTooLong { .. }
            | E::ExpiresBeforeDelivery { .. }
            | E::PriorityAboveLevels { .. }
            | E::InvalidFilter { .. }
            | E::EmptyConsumerName
            | E::ConsumerNameTooLong { .. }
            | E::KeyRequired { .. }
            | E::InvalidProducerId { .. }
            | E::UnknownFilterEvaluator { .. }
            | E::InvalidFilterPolicy { .. } => K::Invalid,
        }
    }
}

fn describe_limit(limit: &crate::spec::LengthLimit) -> String {
    match (limit.max_messages, limit.max_bytes) {
        (Some(m), Some(b)) => format!("at most {m} messages and {b} bytes"),
        (Some(m), None) => format!("at most {m} messages"),
        (None, Some(b)) => format!("at most {b} bytes"),
        (None, None) => "no limit".to_owned(),
    }
}

fn join(names: &[Name]) -> String {
    names
        .iter()
        .map(Name::as_str)
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// A duration as a person would write it in a config file: `90 days`, `5 min`, `1500 ms`.
/// Falls back to the `Debug` form for fractions of a millisecond.
pub(crate) fn human(d: &Duration) -> String {
    const UNITS: [(u128, &str, &str); 5] = [
        (86_400_000, "day", "days"),
        (3_600_000, "h", "h"),
        (60_000, "min", "min"),
        (1_000, "s", "s"),
        (1, "ms", "ms"),
    ];
    let ms = d.as_millis();
    if !d.subsec_nanos().is_multiple_of(1_000_000) || ms == 0 {
        return format!("{d:?}");
    }
    let (unit, one, many) = UNITS
        .into_iter()
        .find(|(unit, _, _)| ms.is_multiple_of(*unit))
        .expect("every whole number of ms is a multiple of 1 ms");
    let n = ms / unit;
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_failure_are_classified_once() {
        let name = Name::new("q").unwrap();
        let cases = [
            (
                BrokerError::QueueNotFound { queue: "q".into() },
                ErrorKind::NotFound,
            ),
            (
                BrokerError::QueueExists {
                    queue: name.clone(),
                },
                ErrorKind::AlreadyExists,
            ),
            (
                BrokerError::TopicHasSubscriptions {
                    topic: name.clone(),
                    subscription: name.clone(),
                },
                ErrorKind::Conflict,
            ),
            (
                BrokerError::StaleLease { seq: 1, token: 2 },
                ErrorKind::StaleLease,
            ),
            (
                BrokerError::UnknownMember {
                    group: "g".into(),
                    member: "m".into(),
                },
                ErrorKind::Fenced,
            ),
            (BrokerError::EmptyName, ErrorKind::Invalid),
            (
                BrokerError::PayloadTooLarge { size: 2, max: 1 },
                ErrorKind::TooLarge,
            ),
            (
                BrokerError::QueueFull {
                    queue: name.clone(),
                    limit: crate::spec::LengthLimit::default(),
                },
                ErrorKind::Full,
            ),
            (
                BrokerError::Storage(ferry_storage::StorageError::DiskFull {
                    path: "/data".into(),
                }),
                ErrorKind::DiskFull,
            ),
            (
                BrokerError::Storage(ferry_storage::StorageError::Closed),
                ErrorKind::Unavailable,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error}");
        }
        assert!(ErrorKind::Full.is_transient() && !ErrorKind::StaleLease.is_transient());
    }

    #[test]
    fn durations_in_messages_use_the_largest_whole_unit() {
        let cases = [
            (Duration::from_secs(90 * 86_400), "90 days"),
            (Duration::from_secs(86_400), "1 day"),
            (Duration::from_secs(12 * 3600), "12 h"),
            (Duration::from_secs(300), "5 min"),
            (Duration::from_secs(61), "61 s"),
            (Duration::from_millis(1500), "1500 ms"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::ZERO, "0ns"),
        ];
        for (d, text) in cases {
            assert_eq!(human(&d), text);
        }
    }
}
