//! How a [`Message`] is laid out in a storage record, and read back.
//!
//! The record's own fields carry what storage already models: the key, the payload (value)
//! and `published_at` (timestamp, so reads by time and retention by age work unchanged).
//! Everything else the broker needs goes into headers named `ferry-…`, a namespace user
//! headers may not enter, written before the user headers:
//!
//! | header             | value                           | written when     |
//! |--------------------|---------------------------------|------------------|
//! | `ferry-id`         | the ULID, 26 characters         | always           |
//! | `ferry-priority`   | decimal `u8`                    | priority > 0     |
//! | `ferry-deliver-at` | decimal ms since the Unix epoch | delayed          |
//! | `ferry-expires-at` | decimal ms since the Unix epoch | TTL set          |
//! | `ferry-dedup-id`   | the dedup id                    | dedup id set     |
//! | `ferry-id-chosen`  | `1`                             | the producer chose the id |
//! | `ferry-batch`      | batch id, first id of the run, run length | first record of a publish call with a batch id |
//!
//! A dead letter (a message the broker moved into a dead-letter queue) also carries
//! [`DeadLetterInfo`], all in decimal or plain text:
//!
//! | header                             | value                                   |
//! |------------------------------------|-----------------------------------------|
//! | `ferry-dlq-reason`                 | `max_deliveries`, `rejected`, `expired`, `overflow` |
//! | `ferry-dlq-deliveries`             | deliveries made before it died          |
//! | `ferry-dlq-origin-queue`           | the queue it died in                    |
//! | `ferry-dlq-origin-seq`             | its seq there                           |
//! | `ferry-dlq-origin-published-at`    | when it was published there (ms)        |
//! | `ferry-dlq-error`                  | last error, ≤ 1 KiB (optional)          |
//! | `ferry-dlq-first-failure-at`       | ms (optional)                           |
//! | `ferry-dlq-last-failure-at`        | ms (optional)                           |
//! | `ferry-dlq-consumer`               | last consumer (optional)                |
//!
//! A message moved out of a dead-letter queue by a redrive carries two more, which unlike
//! the others are kept in the message's [`Headers`] (consumers see them among the headers,
//! and they travel with the message if it dies and is redriven again):
//!
//! | header                | value                                                   |
//! |-----------------------|---------------------------------------------------------|
//! | `ferry-redrive-count` | decimal `u32`: how many times it has been redriven      |
//! | `ferry-redrive-from`  | the dead-letter queue of its latest redrive             |
//!
//! A message delivered through a link that attaches a queue to a topic (see
//! [`crate::link`]) carries three more, added when its reference is read and kept in the
//! [`Headers`] like the redrive ones: a consumer (a front end) knows where it came from,
//! and a copy the message becomes (a dead letter) keeps knowing it.
//!
//! | header             | value                                         |
//! |--------------------|-----------------------------------------------|
//! | `ferry-link`       | the link's name                               |
//! | `ferry-link-topic` | the topic it references                       |
//! | `ferry-link-label` | the label given when the queue was attached   |
//!
//! A record an idempotent producer wrote to a topic carries its [`ProducerStamp`], from
//! which a partition rebuilds what it remembers of its producers (see
//! `topic/producer.rs`). Queues never write them, and refuse to read them:
//!
//! | header               | value                                             |
//! |----------------------|---------------------------------------------------|
//! | `ferry-producer-id`  | the producer's id, ≤ 256 bytes of printable text  |
//! | `ferry-producer-seq` | decimal `u64`: the message's sequence number      |
//!
//! A producer's own creation time, [`header::CREATED_AT`] (`ferry-created-at`, decimal ms),
//! and the schema id a payload was written with, [`header::SCHEMA_ID`] (`ferry-schema-id`,
//! decimal), are the reserved headers a publisher may set; like the redrive headers they
//! are kept in the message's [`Headers`]. Records written before they existed lack them.
//!
//! Text rather than binary values: a log can be inspected with any tool, and the bytes
//! saved (about ten per message) are small next to the header framing itself. Absent
//! optional fields cost nothing.
//!
//! Reading is strict: an unknown `ferry-` header, a repeated header, a missing id or a value
//! that does not parse is an error naming the record's offset, never silently dropped — an
//! unknown reserved header means a newer writer whose meaning this reader cannot honour.

use bytes::Bytes;
use ferry_storage::{NewRecord, Record};

use crate::error::{BrokerError, Result};
use crate::header;
use crate::message::{Headers, Message};
use crate::message_id::MessageId;
use crate::queue::batch_window::BatchMark;

pub const ID: &str = "ferry-id";
pub const PRIORITY: &str = "ferry-priority";
pub const DELIVER_AT: &str = "ferry-deliver-at";
pub const EXPIRES_AT: &str = "ferry-expires-at";
pub const DEDUP_ID: &str = "ferry-dedup-id";
/// Present (value `1`) when the producer chose the id: only such ids are dedup keys.
pub const ID_CHOSEN: &str = "ferry-id-chosen";
/// On the first record of a publish call that carried a batch id: `<batch id> <first id>
/// <count>`, the [`BatchMark`] that rebuilds the call's entry in the batch window on reopen.
pub const BATCH: &str = "ferry-batch";
pub const DLQ_REASON: &str = "ferry-dlq-reason";
pub const DLQ_DELIVERIES: &str = "ferry-dlq-deliveries";
pub const DLQ_ORIGIN_QUEUE: &str = "ferry-dlq-origin-queue";
pub const DLQ_ORIGIN_SEQ: &str = "ferry-dlq-origin-seq";
pub const DLQ_ORIGIN_PUBLISHED_AT: &str = "ferry-dlq-origin-published-at";
pub const DLQ_ERROR: &str = "ferry-dlq-error";
pub const DLQ_FIRST_FAILURE_AT: &str = "ferry-dlq-first-failure-at";
pub const DLQ_LAST_FAILURE_AT: &str = "ferry-dlq-last-failure-at";
pub const DLQ_CONSUMER: &str = "ferry-dlq-consumer";
/// Kept in [`Message::headers`]; written by redrive only (publishers may not set it).
pub const REDRIVE_COUNT: &str = "ferry-redrive-count";
/// Kept in [`Message::headers`]; written by redrive only (publishers may not set it).
pub const REDRIVE_FROM: &str = "ferry-redrive-from";
/// The link a message was delivered through (see the module doc).
pub const LINK: &str = "ferry-link";
pub const LINK_TOPIC: &str = "ferry-link-topic";
pub const LINK_LABEL: &str = "ferry-link-label";

/// Topic records only: written by idempotent producers.
pub const PRODUCER_ID: &str = "ferry-producer-id";
/// Topic records only: written by idempotent producers.
pub const PRODUCER_SEQ: &str = "ferry-producer-seq";

/// Which idempotent producer wrote a topic record, and its sequence number there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProducerStamp {
    pub producer_id: String,
    pub sequence: u64,
}

/// Why and from where a dead letter came; see the module docs for its headers. The reason
/// is kept as text so a reader of an older broker can still show a newer reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterInfo {
    pub reason: String,
    pub deliveries: u32,
    pub origin_queue: String,
    pub origin_seq: u64,
    pub origin_published_at: i64,
    pub last_error: Option<String>,
    pub first_failure_ms: Option<i64>,
    pub last_failure_ms: Option<i64>,
    pub consumer: Option<String>,
}

#[derive(Default)]
struct DeadLetterSlots {
    reason: Option<String>,
    deliveries: Option<u32>,
    origin_queue: Option<String>,
    origin_seq: Option<u64>,
    origin_published_at: Option<i64>,
    last_error: Option<String>,
    first_failure_ms: Option<i64>,
    last_failure_ms: Option<i64>,
    consumer: Option<String>,
}

impl DeadLetterSlots {
    fn any(&self) -> bool {
        self.reason.is_some()
            || self.deliveries.is_some()
            || self.origin_queue.is_some()
            || self.origin_seq.is_some()
            || self.origin_published_at.is_some()
            || self.last_error.is_some()
            || self.first_failure_ms.is_some()
            || self.last_failure_ms.is_some()
            || self.consumer.is_some()
    }

    fn finish(self, missing: impl Fn(&str) -> BrokerError) -> Result<Option<DeadLetterInfo>> {
        if !self.any() {
            return Ok(None);
        }
        Ok(Some(DeadLetterInfo {
            reason: self.reason.ok_or_else(|| missing(DLQ_REASON))?,
            deliveries: self.deliveries.ok_or_else(|| missing(DLQ_DELIVERIES))?,
            origin_queue: self.origin_queue.ok_or_else(|| missing(DLQ_ORIGIN_QUEUE))?,
            origin_seq: self.origin_seq.ok_or_else(|| missing(DLQ_ORIGIN_SEQ))?,
            origin_published_at: self
                .origin_published_at
                .ok_or_else(|| missing(DLQ_ORIGIN_PUBLISHED_AT))?,
            last_error: self.last_error,
            first_failure_ms: self.first_failure_ms,
            last_failure_ms: self.last_failure_ms,
            consumer: self.consumer,
        }))
    }
}

impl Message {
    /// The storage record for this message. Assumes a message that passed publish
    /// validation: a user header in the `ferry-` namespace would not read back.
    pub(crate) fn to_record(&self) -> NewRecord {
        let mut headers = Vec::with_capacity(self.headers.len() + 5);
        let mut put = |name: &'static str, value: String| {
            headers.push((Bytes::from_static(name.as_bytes()), Bytes::from(value)));
        };
        put(ID, self.id.to_string());
        if self.priority > 0 {
            put(PRIORITY, self.priority.to_string());
        }
        if let Some(at) = self.deliver_at {
            put(DELIVER_AT, at.to_string());
        }
        if let Some(at) = self.expires_at {
            put(EXPIRES_AT, at.to_string());
        }
        if let Some(dedup_id) = &self.dedup_id {
            put(DEDUP_ID, dedup_id.clone());
        }
        if self.id_chosen {
            put(ID_CHOSEN, "1".to_owned());
        }
        if let Some(dl) = &self.dead_letter {
            put(DLQ_REASON, dl.reason.clone());
            put(DLQ_DELIVERIES, dl.deliveries.to_string());
            put(DLQ_ORIGIN_QUEUE, dl.origin_queue.clone());
            put(DLQ_ORIGIN_SEQ, dl.origin_seq.to_string());
            put(DLQ_ORIGIN_PUBLISHED_AT, dl.origin_published_at.to_string());
            if let Some(error) = &dl.last_error {
                put(DLQ_ERROR, error.clone());
            }
            if let Some(at) = dl.first_failure_ms {
                put(DLQ_FIRST_FAILURE_AT, at.to_string());
            }
            if let Some(at) = dl.last_failure_ms {
                put(DLQ_LAST_FAILURE_AT, at.to_string());
            }
            if let Some(consumer) = &dl.consumer {
                put(DLQ_CONSUMER, consumer.clone());
            }
        }
        headers.extend(
            self.headers
                .iter()
                .map(|(n, v)| (Bytes::from(n.clone()), Bytes::from(v.clone()))),
        );
        NewRecord {
            timestamp: Some(self.published_at),
            key: self.key.clone(),
            headers,
            value: self.payload.clone(),
        }
    }

    /// The storage record for this message in a topic: [`to_record`](Self::to_record)'s,
    /// with the producer's stamp when an idempotent producer publishes it.
    pub(crate) fn to_topic_record(&self, stamp: Option<&ProducerStamp>) -> NewRecord {
        let mut record = self.to_record();
        if let Some(stamp) = stamp {
            let put = [
                (PRODUCER_ID, stamp.producer_id.clone()),
                (PRODUCER_SEQ, stamp.sequence.to_string()),
            ];
            for (i, (name, value)) in put.into_iter().enumerate() {
                record.headers.insert(
                    1 + i,
                    (Bytes::from_static(name.as_bytes()), Bytes::from(value)),
                );
            }
        }
        record
    }

    /// The message stored in a topic's `record`, and the stamp of the idempotent producer
    /// that wrote it, if one did. As strict as [`from_record`](Self::from_record).
    pub(crate) fn from_topic_record(
        mut record: Record,
    ) -> Result<(Message, Option<ProducerStamp>)> {
        let stamp = producer_stamp(&record)?;
        if stamp.is_some() {
            record.headers.retain(|(name, _)| {
                name != PRODUCER_ID.as_bytes() && name != PRODUCER_SEQ.as_bytes()
            });
        }
        Ok((Message::from_record(record)?, stamp))
    }

    /// The message stored in `record`. Key and payload share the record's buffers.
    pub(crate) fn from_record(record: Record) -> Result<Message> {
        let offset = record.offset;
        let bad = |problem: String| BrokerError::MalformedRecord { offset, problem };
        let mut id = None;
        let mut priority = None;
        let mut deliver_at = None;
        let mut expires_at = None;
        let mut dedup_id = None;
        let mut id_chosen = None;
        let mut batch_seen = None;
        let mut dl = DeadLetterSlots::default();
        let mut headers = Headers::new();
        for (name, value) in record.headers {
            let name = String::from_utf8(name.to_vec())
                .map_err(|_| bad("a header name is not UTF-8".into()))?;
            let value = String::from_utf8(value.to_vec())
                .map_err(|_| bad(format!("the value of header {name:?} is not UTF-8")))?;
            let repeated = || bad(format!("header {name:?} appears more than once"));
            let unparsable = || {
                bad(format!(
                    "header {name:?} has the unreadable value {value:?}"
                ))
            };
            if name == REDRIVE_COUNT {
                value.parse::<u32>().map_err(|_| unparsable())?;
            }
            if name == header::CREATED_AT && header::parse_created_at(&value).is_none() {
                return Err(unparsable());
            }
            if name == header::SCHEMA_ID && header::parse_schema_id(&value).is_none() {
                return Err(unparsable());
            }
            if !header::is_reserved(&name)
                || [
                    REDRIVE_COUNT,
                    REDRIVE_FROM,
                    LINK,
                    LINK_TOPIC,
                    LINK_LABEL,
                    header::CREATED_AT,
                    header::SCHEMA_ID,
                ]
                .contains(&name.as_str())
            {
                if headers.contains_key(&name) {
                    return Err(repeated());
                }
                headers.insert(name, value);
                continue;
            }
            let slot_was_empty = match name.as_str() {
                ID => id
                    .replace(MessageId::parse(&value).map_err(|_| unparsable())?)
                    .is_none(),
                PRIORITY => priority
                    .replace(value.parse::<u8>().map_err(|_| unparsable())?)
                    .is_none(),
                DELIVER_AT => deliver_at
                    .replace(value.parse::<i64>().map_err(|_| unparsable())?)
                    .is_none(),
                EXPIRES_AT => expires_at
                    .replace(value.parse::<i64>().map_err(|_| unparsable())?)
                    .is_none(),
                DEDUP_ID => dedup_id.replace(value.clone()).is_none(),
                ID_CHOSEN if value == "1" => id_chosen.replace(true).is_none(),
                ID_CHOSEN => return Err(unparsable()),
                // Read where it is used (`batch_mark`): only checked here.
                BATCH => {
                    parse_batch_mark(&value).ok_or_else(unparsable)?;
                    batch_seen.replace(()).is_none()
                }
                DLQ_REASON => dl.reason.replace(value.clone()).is_none(),
                DLQ_DELIVERIES => dl
                    .deliveries
                    .replace(value.parse::<u32>().map_err(|_| unparsable())?)
                    .is_none(),
                DLQ_ORIGIN_QUEUE => dl.origin_queue.replace(value.clone()).is_none(),
                DLQ_ORIGIN_SEQ => dl
                    .origin_seq
                    .replace(value.parse::<u64>().map_err(|_| unparsable())?)
                    .is_none(),
                DLQ_ORIGIN_PUBLISHED_AT => dl
                    .origin_published_at
                    .replace(value.parse::<i64>().map_err(|_| unparsable())?)
                    .is_none(),
                DLQ_ERROR => dl.last_error.replace(value.clone()).is_none(),
                DLQ_FIRST_FAILURE_AT => dl
                    .first_failure_ms
                    .replace(value.parse::<i64>().map_err(|_| unparsable())?)
                    .is_none(),
                DLQ_LAST_FAILURE_AT => dl
                    .last_failure_ms
                    .replace(value.parse::<i64>().map_err(|_| unparsable())?)
                    .is_none(),
                DLQ_CONSUMER => dl.consumer.replace(value.clone()).is_none(),
                _ => {
                    return Err(bad(format!(
                        "unknown broker header {name:?}; it was probably written by a newer \
                         Ferry — upgrade this one to read it"
                    )));
                }
            };
            if !slot_was_empty {
                return Err(repeated());
            }
        }
        let dead_letter = dl.finish(|name| bad(format!("the {name} header is missing")))?;
        Ok(Message {
            id: id.ok_or_else(|| bad(format!("the {ID} header is missing")))?,
            key: record.key,
            headers,
            payload: record.value,
            published_at: record.timestamp,
            priority: priority.unwrap_or(0),
            deliver_at,
            expires_at,
            dedup_id,
            id_chosen: id_chosen.unwrap_or(false),
            dead_letter,
        })
    }
}

/// Writes `mark` into `record` (the first record of its publish call).
pub(crate) fn put_batch_mark(record: &mut NewRecord, mark: &BatchMark) {
    let value = format!("{} {} {}", mark.batch, mark.first, mark.count);
    record
        .headers
        .push((Bytes::from_static(BATCH.as_bytes()), Bytes::from(value)));
}

/// The batch mark of a queue record, if it has one, without decoding the rest.
pub(crate) fn batch_mark(record: &Record) -> Result<Option<BatchMark>> {
    let Some((_, value)) = record
        .headers
        .iter()
        .find(|(name, _)| name == BATCH.as_bytes())
    else {
        return Ok(None);
    };
    std::str::from_utf8(value)
        .ok()
        .and_then(parse_batch_mark)
        .map(Some)
        .ok_or_else(|| BrokerError::MalformedRecord {
            offset: record.offset,
            problem: format!("header {BATCH:?} has the unreadable value {value:?}"),
        })
}

fn parse_batch_mark(value: &str) -> Option<BatchMark> {
    let mut parts = value.split(' ');
    let batch = MessageId::parse(parts.next()?).ok()?;
    let first = MessageId::parse(parts.next()?).ok()?;
    let count = parts.next()?.parse::<u32>().ok()?;
    parts.next().is_none().then_some(BatchMark {
        batch,
        first,
        count,
    })
}

/// The producer stamp of a topic record, without decoding the rest: both headers or
/// neither, each once, the sequence a decimal `u64`.
pub fn producer_stamp(record: &Record) -> Result<Option<ProducerStamp>> {
    let offset = record.offset;
    let bad = |problem: String| BrokerError::MalformedRecord { offset, problem };
    let mut id = None;
    let mut sequence = None;
    for (name, value) in &record.headers {
        let slot_was_empty = if name == PRODUCER_ID.as_bytes() {
            let value = std::str::from_utf8(value)
                .map_err(|_| bad(format!("the value of header {PRODUCER_ID:?} is not UTF-8")))?;
            id.replace(value.to_owned()).is_none()
        } else if name == PRODUCER_SEQ.as_bytes() {
            let value = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<u64>().ok());
            let value = value.ok_or_else(|| {
                bad(format!(
                    "header {PRODUCER_SEQ:?} is not a decimal sequence number"
                ))
            })?;
            sequence.replace(value).is_none()
        } else {
            true
        };
        if !slot_was_empty {
            return Err(bad(format!(
                "header {:?} appears more than once",
                String::from_utf8_lossy(name)
            )));
        }
    }
    match (id, sequence) {
        (None, None) => Ok(None),
        (Some(producer_id), Some(sequence)) => Ok(Some(ProducerStamp {
            producer_id,
            sequence,
        })),
        (Some(_), None) => Err(bad(format!("the {PRODUCER_SEQ} header is missing"))),
        (None, Some(_)) => Err(bad(format!("the {PRODUCER_ID} header is missing"))),
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
