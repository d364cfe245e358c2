//! What a producer hands the broker ([`OutgoingMessage`]), the limits it must respect
//! ([`Limits`]), and what the broker keeps once it accepts it ([`Message`]).
//!
//! The two shapes differ on purpose: a producer speaks in relative terms ("in 10 minutes",
//! "for an hour", "no id yet"), the broker stores absolutes (`deliver_at`, `expires_at`, an
//! id), resolved once against one clock reading so a restart or a replay never re-resolves
//! them differently.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

use crate::error::{BrokerError, Result};
use crate::header;
use crate::message_id::MessageId;
use crate::random::RandomSource;

/// User headers: a string map, ordered so that encoding and comparison are deterministic.
pub type Headers = BTreeMap<String, String>;

/// When a message becomes deliverable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeliveryTime {
    #[default]
    Now,
    /// At this absolute time, in ms since the Unix epoch. A time in the past is not an
    /// error and means now: producers' clocks drift, and a scheduler that fires a little late
    /// should not have its message refused.
    At(i64),
    /// This long after publish.
    After(Duration),
}

impl DeliveryTime {
    /// The absolute time, never earlier than `now_ms`.
    pub fn resolve(self, now_ms: i64) -> i64 {
        match self {
            DeliveryTime::Now => now_ms,
            DeliveryTime::At(at) => at.max(now_ms),
            DeliveryTime::After(delay) => now_ms.saturating_add(millis(delay)),
        }
    }
}

/// Per-message size and time limits, checked at publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_payload_bytes: usize,
    /// User headers only; the broker's own come on top.
    pub max_headers: usize,
    pub max_header_name_bytes: usize,
    pub max_header_value_bytes: usize,
    pub max_key_bytes: usize,
    pub max_dedup_id_bytes: usize,
    pub max_delay: Duration,
    pub max_ttl: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        const DAY: u64 = 24 * 3600;
        Limits {
            max_payload_bytes: 1 << 20,
            max_headers: 64,
            max_header_name_bytes: 256,
            max_header_value_bytes: 8 << 10,
            max_key_bytes: 4 << 10,
            max_dedup_id_bytes: 512,
            max_delay: Duration::from_secs(90 * DAY),
            max_ttl: Duration::from_secs(90 * DAY),
        }
    }
}

/// A message as a producer publishes it. Build with [`OutgoingMessage::new`] and the `with_`
/// methods; the broker checks it with [`OutgoingMessage::validate`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OutgoingMessage {
    /// Producer-chosen id; the broker generates one when `None`.
    pub id: Option<MessageId>,
    /// Ordering key: messages with the same key keep publish order on key-shared queues.
    pub key: Option<Bytes>,
    pub headers: Headers,
    pub payload: Bytes,
    /// Higher is delivered first; 0 (the default) is the lowest.
    pub priority: u8,
    pub delivery: DeliveryTime,
    /// How long after publish the message expires if still undelivered; counted from
    /// publish, not from `deliver_at`.
    pub ttl: Option<Duration>,
    /// Publishes with the same dedup id inside the queue's window are stored once.
    pub dedup_id: Option<String>,
}

impl OutgoingMessage {
    pub fn new(payload: impl Into<Bytes>) -> Self {
        OutgoingMessage {
            payload: payload.into(),
            ..Default::default()
        }
    }
    pub fn with_id(mut self, id: MessageId) -> Self {
        self.id = Some(id);
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
    /// Deliver at an absolute time (ms since the Unix epoch).
    pub fn with_deliver_at(mut self, at_ms: i64) -> Self {
        self.delivery = DeliveryTime::At(at_ms);
        self
    }
    /// Deliver this long after publish.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delivery = DeliveryTime::After(delay);
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

    /// Checks the message against `limits` at time `now_ms`, reporting the first problem.
    /// Times are resolved to whole milliseconds.
    pub fn validate(&self, limits: &Limits, now_ms: i64) -> Result<()> {
        if self.id.is_some_and(|id| id.is_nil()) {
            return Err(BrokerError::NilMessageId);
        }
        if self.payload.len() > limits.max_payload_bytes {
            return Err(BrokerError::PayloadTooLarge {
                size: self.payload.len(),
                max: limits.max_payload_bytes,
            });
        }
        if self.headers.len() > limits.max_headers {
            return Err(BrokerError::TooManyHeaders {
                count: self.headers.len(),
                max: limits.max_headers,
            });
        }
        for (name, value) in &self.headers {
            check_header(name, value, limits)?;
        }
        if let Some(key) = &self.key
            && key.len() > limits.max_key_bytes
        {
            return Err(BrokerError::KeyTooLarge {
                size: key.len(),
                max: limits.max_key_bytes,
            });
        }
        if let Some(dedup_id) = &self.dedup_id {
            // An empty id is almost always an unset field; honouring it would silently
            // collapse every such message into the first one.
            if dedup_id.is_empty() {
                return Err(BrokerError::EmptyDedupId);
            }
            if dedup_id.len() > limits.max_dedup_id_bytes {
                return Err(BrokerError::DedupIdTooLong {
                    len: dedup_id.len(),
                    max: limits.max_dedup_id_bytes,
                });
            }
        }
        let deliver_at = self.delivery.resolve(now_ms);
        let delay_ms = deliver_at.saturating_sub(now_ms);
        if delay_ms > millis(limits.max_delay) {
            return Err(BrokerError::DelayTooLong {
                delay: Duration::from_millis(delay_ms as u64),
                max: limits.max_delay,
            });
        }
        if let Some(ttl) = self.ttl {
            if millis(ttl) < 1 {
                return Err(BrokerError::TtlTooShort { ttl });
            }
            if ttl > limits.max_ttl {
                return Err(BrokerError::TtlTooLong {
                    ttl,
                    max: limits.max_ttl,
                });
            }
            if delay_ms >= millis(ttl) {
                return Err(BrokerError::ExpiresBeforeDelivery {
                    delay: Duration::from_millis(delay_ms as u64),
                    ttl,
                });
            }
        }
        Ok(())
    }

    /// Validates and resolves the message into what the broker stores: an id (generated
    /// from `now_ms` and `rng` when the producer gave none), and absolute delivery and
    /// expiry times.
    pub(crate) fn into_message(
        self,
        limits: &Limits,
        now_ms: i64,
        rng: &mut impl RandomSource,
    ) -> Result<Message> {
        self.validate(limits, now_ms)?;
        let deliver_at = self.delivery.resolve(now_ms);
        Ok(Message {
            id: self.id.unwrap_or_else(|| MessageId::generate(now_ms, rng)),
            key: self.key,
            headers: self.headers,
            payload: self.payload,
            published_at: now_ms,
            priority: self.priority,
            deliver_at: (deliver_at > now_ms).then_some(deliver_at),
            expires_at: self.ttl.map(|ttl| now_ms.saturating_add(millis(ttl))),
            dedup_id: self.dedup_id,
            id_chosen: self.id.is_some(),
            dead_letter: None,
        })
    }
}

fn check_header(name: &str, value: &str, limits: &Limits) -> Result<()> {
    if name.is_empty() {
        return Err(BrokerError::EmptyHeaderName);
    }
    if name.len() > limits.max_header_name_bytes {
        return Err(BrokerError::HeaderNameTooLong {
            prefix: name.chars().take(32).collect(),
            len: name.len(),
            max: limits.max_header_name_bytes,
        });
    }
    // Control characters (CR, LF, NUL …) cannot cross HTTP or gRPC metadata and are how
    // header injection starts; printable text of any script is fine.
    if let Some((position, _)) = name.char_indices().find(|(_, c)| c.is_control()) {
        return Err(BrokerError::HeaderNameHasControlCharacter {
            name: name.to_owned(),
            position,
        });
    }
    if name == header::CREATED_AT {
        if header::parse_created_at(value).is_none() {
            return Err(BrokerError::InvalidSetting {
                setting: header::CREATED_AT,
                problem: format!(
                    "{value:?} is not a time; give ms since the Unix epoch, from 0 up"
                ),
            });
        }
    } else if name == header::SCHEMA_ID {
        if header::parse_schema_id(value).is_none() {
            return Err(BrokerError::InvalidSetting {
                setting: header::SCHEMA_ID,
                problem: format!("{value:?} is not a schema id; give the registry's id in decimal"),
            });
        }
    } else if header::is_reserved(name) {
        return Err(BrokerError::ReservedHeaderName {
            name: name.to_owned(),
        });
    }
    if value.len() > limits.max_header_value_bytes {
        return Err(BrokerError::HeaderValueTooLong {
            name: name.to_owned(),
            len: value.len(),
            max: limits.max_header_value_bytes,
        });
    }
    Ok(())
}

/// Whole milliseconds of `d`, saturating: the broker's clock has ms resolution.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A message the broker has accepted: every time absolute, the id assigned. This is what
/// is stored (see `record.rs`) and what consumers receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub id: MessageId,
    pub key: Option<Bytes>,
    pub headers: Headers,
    pub payload: Bytes,
    /// When the broker accepted it, ms since the Unix epoch.
    pub published_at: i64,
    pub priority: u8,
    /// Not deliverable before this time; `None` when deliverable at publish.
    pub deliver_at: Option<i64>,
    /// Never delivered at or after this time.
    pub expires_at: Option<i64>,
    pub dedup_id: Option<String>,
    /// The producer chose [`id`](Self::id) (rather than the broker assigning it): only then
    /// is the id a dedup key.
    pub id_chosen: bool,
    /// Set on dead letters only: why and from where the message came.
    pub dead_letter: Option<crate::record::DeadLetterInfo>,
}

impl Message {
    /// Whether the message may be handed to a consumer at `now_ms` as far as its schedule
    /// goes.
    pub fn is_due(&self, now_ms: i64) -> bool {
        self.deliver_at.is_none_or(|at| now_ms >= at)
    }

    /// Whether the TTL has run out. The expiry instant itself counts as expired, so a
    /// message is never delivered at its `expires_at`.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expires_at.is_some_and(|at| now_ms >= at)
    }
}

#[cfg(test)]
#[path = "message_tests.rs"]
mod tests;
