//! A Ferry message as a Kafka record and back. The payload and key are the record's; the
//! application's headers are record headers, and what Ferry keeps about a message rides in
//! `x-ferry-*` headers (its id, when it was first published, the attempt and, for a retry
//! or a delayed publish, when it is due). Dead letters carry the `ferry-dlq-*` headers
//! every transport writes.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rdkafka::message::{BorrowedMessage, Header, Headers, Message as _, OwnedHeaders};

use crate::message::{DeadLetterInfo, Received};

pub(super) const ID: &str = "x-ferry-id";
pub(super) const PUBLISHED_AT: &str = "x-ferry-published-at";
pub(super) const ATTEMPT: &str = "x-ferry-attempt";
pub(super) const DUE: &str = "x-ferry-due";
pub(super) const FIRST_FAILURE: &str = "x-ferry-first-failure-at";
pub(super) const LAST_ERROR: &str = "x-ferry-last-error";
/// Dead-letter metadata travels as `x-ferry-dlq-*` headers, read back as the `ferry-dlq-*`
/// ones every transport hands out: Ferry's own Kafka listener reserves `ferry-*` headers
/// for itself, as Ferry's broker does.
const WIRE_DLQ: &str = "x-ferry-dlq-";
const DLQ: &str = "ferry-dlq-";

/// One record as this transport read it, with everything needed to send it again.
#[derive(Debug, Clone)]
pub(super) struct Record {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Bytes>,
    pub payload: Bytes,
    /// Every header, Ferry's own included.
    pub headers: BTreeMap<String, String>,
    pub timestamp_ms: Option<i64>,
}

impl Record {
    pub fn of(m: &BorrowedMessage<'_>) -> Record {
        let mut headers = BTreeMap::new();
        if let Some(hs) = m.headers() {
            for h in hs.iter() {
                let value = String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned();
                headers.insert(h.key.to_owned(), value);
            }
        }
        Record {
            topic: m.topic().to_owned(),
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(Bytes::copy_from_slice),
            payload: Bytes::copy_from_slice(m.payload().unwrap_or_default()),
            headers,
            timestamp_ms: m.timestamp().to_millis(),
        }
    }

    fn int(&self, name: &str) -> Option<i64> {
        self.headers.get(name).and_then(|v| v.parse().ok())
    }

    /// When a delayed record may be handed out, in ms since the epoch.
    pub fn due_ms(&self) -> Option<i64> {
        self.int(DUE)
    }

    pub fn attempt(&self) -> u32 {
        self.int(ATTEMPT)
            .map_or(1, |a| a.clamp(1, i64::from(u32::MAX)) as u32)
    }

    pub fn first_failure_ms(&self) -> Option<i64> {
        self.int(FIRST_FAILURE)
    }

    /// The message id: Ferry's, or where another client wrote the record, its position.
    pub fn id(&self) -> String {
        self.headers
            .get(ID)
            .cloned()
            .unwrap_or_else(|| format!("{}-{}-{}", self.topic, self.partition, self.offset))
    }

    /// The delivery of this record with `attempt`.
    pub fn received(&self, attempt: u32, dead_letters: bool) -> Received {
        let published_at_ms = self
            .int(PUBLISHED_AT)
            .or(self.timestamp_ms)
            .unwrap_or_else(now_ms);
        let headers: BTreeMap<String, String> = self
            .headers
            .iter()
            .filter_map(|(k, v)| match k.strip_prefix(WIRE_DLQ) {
                Some(rest) if dead_letters => Some((format!("{DLQ}{rest}"), v.clone())),
                _ if k.starts_with("x-ferry-") => None,
                _ => Some((k.clone(), v.clone())),
            })
            .collect();
        let dead_letter = if dead_letters {
            DeadLetterInfo::from_headers(&headers)
        } else {
            None
        };
        Received {
            id: self.id(),
            key: self.key.clone(),
            headers,
            payload: self.payload.clone(),
            priority: 0,
            published_at_ms,
            attempt,
            dead_letter,
        }
    }

    /// The headers of this record sent again as delivery `attempt`, due at `due_ms`.
    pub fn retry_headers(
        &self,
        attempt: u32,
        due_ms: Option<i64>,
        error: Option<&str>,
    ) -> BTreeMap<String, String> {
        let mut headers = self.kept_headers();
        headers.insert(ATTEMPT.into(), attempt.to_string());
        if let Some(due) = due_ms {
            headers.insert(DUE.into(), due.to_string());
        }
        let first = self.first_failure_ms().unwrap_or_else(now_ms);
        headers.insert(FIRST_FAILURE.into(), first.to_string());
        if let Some(error) = error {
            headers.insert(LAST_ERROR.into(), crate::message::truncate_error(error));
        }
        headers
    }

    /// The headers of this record as a dead letter.
    pub fn dead_letter_headers(
        &self,
        reason: &str,
        deliveries: u32,
        origin: &str,
        error: Option<&str>,
        consumer: &str,
    ) -> BTreeMap<String, String> {
        let mut headers = self.kept_headers();
        let now = now_ms();
        let info = DeadLetterInfo {
            reason: reason.to_owned(),
            deliveries,
            origin: origin.to_owned(),
            last_error: error
                .map(str::to_owned)
                .or_else(|| self.headers.get(LAST_ERROR).cloned()),
            first_failure_ms: Some(self.first_failure_ms().unwrap_or(now)),
            last_failure_ms: Some(now),
            consumer: Some(consumer.to_owned()),
        };
        let mut metadata = BTreeMap::new();
        info.write_headers(&mut metadata);
        for (name, value) in metadata {
            let wire = name
                .strip_prefix(DLQ)
                .map_or(name.clone(), |rest| format!("{WIRE_DLQ}{rest}"));
            headers.insert(wire, value);
        }
        headers
    }

    /// The application's headers with the message's id and first publish time: what every
    /// copy of the message keeps.
    fn kept_headers(&self) -> BTreeMap<String, String> {
        let mut headers: BTreeMap<String, String> = self
            .headers
            .iter()
            .filter(|(k, _)| !k.starts_with("x-ferry-") && !k.starts_with(DLQ))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        headers.insert(ID.into(), self.id());
        let published = self.int(PUBLISHED_AT).or(self.timestamp_ms);
        if let Some(at) = published {
            headers.insert(PUBLISHED_AT.into(), at.to_string());
        }
        if let Some(at) = self.first_failure_ms() {
            headers.insert(FIRST_FAILURE.into(), at.to_string());
        }
        if let Some(error) = self.headers.get(LAST_ERROR) {
            headers.insert(LAST_ERROR.into(), error.clone());
        }
        headers
    }
}

pub(super) fn owned(headers: &BTreeMap<String, String>) -> OwnedHeaders {
    headers.iter().fold(
        OwnedHeaders::new_with_capacity(headers.len()),
        |hs, (k, v)| {
            hs.insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            })
        },
    )
}

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The headers of a message published now: its own, and Ferry's.
pub(super) fn publish_headers(
    message: &crate::message::Message,
    id: &str,
    due_ms: Option<i64>,
) -> BTreeMap<String, String> {
    let mut headers = message.headers.clone();
    headers.insert(ID.into(), id.to_owned());
    headers.insert(PUBLISHED_AT.into(), now_ms().to_string());
    if let Some(due) = due_ms {
        headers.insert(DUE.into(), due.to_string());
    }
    headers
}

/// Whether `name` is a header the application may not set: this transport's own.
pub(super) fn reserved(name: &str) -> bool {
    name.starts_with("x-ferry-")
}
