//! Messages as the SDK speaks of them, whatever the transport: what a producer sends
//! ([`Message`]) and what a consumer receives ([`Received`]).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

/// Header names the SDK gives meaning to. Transports without a native place for a field
/// carry it in these headers, so a message looks the same on every engine.
pub mod header {
    /// Dead-letter metadata, as the Ferry broker writes it.
    pub const DLQ_REASON: &str = "ferry-dlq-reason";
    pub const DLQ_DELIVERIES: &str = "ferry-dlq-deliveries";
    pub const DLQ_ORIGIN: &str = "ferry-dlq-origin-queue";
    pub const DLQ_ORIGIN_PUBLISHED_AT: &str = "ferry-dlq-origin-published-at";
    pub const DLQ_ERROR: &str = "ferry-dlq-error";
    pub const DLQ_FIRST_FAILURE_AT: &str = "ferry-dlq-first-failure-at";
    pub const DLQ_LAST_FAILURE_AT: &str = "ferry-dlq-last-failure-at";
    pub const DLQ_CONSUMER: &str = "ferry-dlq-consumer";
    /// Envelope attributes (see [`crate::Envelope`]).
    pub const TYPE: &str = "type";
    pub const VERSION: &str = "version";
    pub const SOURCE: &str = "source";
    pub const TIME: &str = "time";
    pub const CORRELATION_ID: &str = "correlation-id";
    pub const CONTENT_TYPE: &str = "content-type";
}

/// Dead-letter reasons, as the Ferry broker names them.
pub mod reason {
    pub const MAX_DELIVERIES: &str = "max_deliveries";
    pub const REJECTED: &str = "rejected";
    pub const EXPIRED: &str = "expired";
}

/// The longest last-error text kept with a dead letter.
pub const MAX_ERROR_LEN: usize = 1024;

/// A message to publish. The SDK gives it a ULID id when the producer does not, so every
/// transport returns the same kind of id and a retried publish can be recognised.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Message {
    pub id: Option<String>,
    /// Ordering key: messages with one key keep their order where the destination orders
    /// by key.
    pub key: Option<Bytes>,
    pub headers: BTreeMap<String, String>,
    pub payload: Bytes,
    /// Higher first; 0 is the lowest.
    pub priority: u8,
    /// Deliver no earlier than this long after publish.
    pub delay: Option<Duration>,
    /// Expire if still undelivered this long after publish.
    pub ttl: Option<Duration>,
    /// Publishes repeating a dedup id within the destination's window are stored once.
    pub dedup_id: Option<String>,
}

impl Message {
    pub fn new(payload: impl Into<Bytes>) -> Message {
        Message {
            payload: payload.into(),
            ..Message::default()
        }
    }
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }
    pub fn with_priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }
    pub fn with_dedup_id(mut self, dedup_id: impl Into<String>) -> Self {
        self.dedup_id = Some(dedup_id.into());
        self
    }

    /// The id, chosen now (a ULID) if the producer chose none.
    pub(crate) fn ensure_id(&mut self) -> &str {
        self.id.get_or_insert_with(new_id)
    }
}

/// Why and from where a message was dead-lettered; read from the message's `ferry-dlq-*`
/// headers, which every transport writes the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterInfo {
    /// `max_deliveries`, `rejected`, `expired`, ...
    pub reason: String,
    /// Deliveries made before it died.
    pub deliveries: u32,
    /// The queue (or subscription) it died in.
    pub origin: String,
    pub last_error: Option<String>,
    pub first_failure_ms: Option<i64>,
    pub last_failure_ms: Option<i64>,
    pub consumer: Option<String>,
}

impl DeadLetterInfo {
    /// The dead-letter metadata in `headers`, if they carry any.
    pub fn from_headers(headers: &BTreeMap<String, String>) -> Option<DeadLetterInfo> {
        let reason = headers.get(header::DLQ_REASON)?.clone();
        let int = |name: &str| headers.get(name).and_then(|v| v.parse::<i64>().ok());
        Some(DeadLetterInfo {
            reason,
            deliveries: int(header::DLQ_DELIVERIES).unwrap_or(0).max(0) as u32,
            origin: headers.get(header::DLQ_ORIGIN).cloned().unwrap_or_default(),
            last_error: headers.get(header::DLQ_ERROR).cloned(),
            first_failure_ms: int(header::DLQ_FIRST_FAILURE_AT),
            last_failure_ms: int(header::DLQ_LAST_FAILURE_AT),
            consumer: headers.get(header::DLQ_CONSUMER).cloned(),
        })
    }

    /// Writes this metadata into `headers`, for transports that dead-letter by republishing.
    pub fn write_headers(&self, headers: &mut BTreeMap<String, String>) {
        headers.insert(header::DLQ_REASON.into(), self.reason.clone());
        headers.insert(header::DLQ_DELIVERIES.into(), self.deliveries.to_string());
        headers.insert(header::DLQ_ORIGIN.into(), self.origin.clone());
        let mut optional = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                headers.insert(name.into(), value);
            }
        };
        optional(
            header::DLQ_ERROR,
            self.last_error.as_deref().map(truncate_error),
        );
        optional(
            header::DLQ_FIRST_FAILURE_AT,
            self.first_failure_ms.map(|v| v.to_string()),
        );
        optional(
            header::DLQ_LAST_FAILURE_AT,
            self.last_failure_ms.map(|v| v.to_string()),
        );
        optional(header::DLQ_CONSUMER, self.consumer.clone());
    }
}

/// `error` cut to at most [`MAX_ERROR_LEN`] bytes on a character boundary.
pub fn truncate_error(error: &str) -> String {
    let mut end = error.len().min(MAX_ERROR_LEN);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    error[..end].to_owned()
}

/// A delivered message, as every transport hands it over.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub id: String,
    pub key: Option<Bytes>,
    pub headers: BTreeMap<String, String>,
    pub payload: Bytes,
    pub priority: u8,
    /// When the engine stored it, in milliseconds since the Unix epoch.
    pub published_at_ms: i64,
    /// 1 for the first delivery; rises with each redelivery.
    pub attempt: u32,
    /// Set when this message was dead-lettered (read from a dead-letter queue).
    pub dead_letter: Option<DeadLetterInfo>,
}

impl Received {
    /// `message` as a consumer would first receive it (tests of encodings built on
    /// messages).
    #[cfg(test)]
    pub(crate) fn first_delivery_of(message: Message) -> Received {
        Received {
            id: message.id.clone().expect("a message with its id"),
            key: message.key,
            headers: message.headers,
            payload: message.payload,
            priority: 0,
            published_at_ms: 1,
            attempt: 1,
            dead_letter: None,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// How long ago the message was published, by this machine's clock.
    pub fn age(&self) -> Duration {
        Duration::from_millis(now_ms().saturating_sub(self.published_at_ms).max(0) as u64)
    }
}

/// A fresh ULID: the time now and 80 random bits (ids sort by creation time).
pub fn new_id() -> String {
    let random = fastrand::u128(..) & ((1u128 << 80) - 1);
    ulid::Ulid::from_parts(now_ms() as u64, random).to_string()
}

/// Milliseconds since the Unix epoch, by the system clock.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letter_metadata_survives_a_trip_through_headers() {
        let info = DeadLetterInfo {
            reason: reason::MAX_DELIVERIES.into(),
            deliveries: 5,
            origin: "orders".into(),
            last_error: Some("é".repeat(600)),
            first_failure_ms: Some(10),
            last_failure_ms: Some(20),
            consumer: Some("worker-1".into()),
        };
        let mut headers = BTreeMap::new();
        info.write_headers(&mut headers);
        let back = DeadLetterInfo::from_headers(&headers).unwrap();
        assert_eq!(back.last_error.as_ref().unwrap().len(), MAX_ERROR_LEN);
        assert_eq!(
            DeadLetterInfo {
                last_error: info.last_error.clone().map(|e| truncate_error(&e)),
                ..info
            },
            back
        );
        assert_eq!(DeadLetterInfo::from_headers(&BTreeMap::new()), None);
    }

    #[test]
    fn a_message_gets_an_id_once() {
        let mut m = Message::new("x");
        let id = m.ensure_id().to_owned();
        assert_eq!(id.len(), 26);
        assert_eq!(m.ensure_id(), id);
    }
}
