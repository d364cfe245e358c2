//! Names, queue arguments, the stored delivery policy, and how a Ferry message is laid out
//! as an AMQP message (and read back).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use serde::{Deserialize, Serialize};

use crate::declared::Declared;
use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, Message, Received, new_id, now_ms, reason};
use crate::spec::DeliveryPolicy;
use crate::transport::stored_backoff::StoredBackoff;

/// Headers this transport adds; a producer may not set them.
pub const KEY: &str = "ferry-key";
pub const PUBLISHED_AT: &str = "ferry-published-at";
/// Deliveries made before the last delayed retry, whose republish reset the engine's count.
pub const ATTEMPTS: &str = "ferry-attempts";
/// A message's own TTL in ms: marks it as not taking its queue's default (its
/// `expiration` is dropped when a delay or retry queue moves it on).
pub const TTL: &str = "ferry-ttl";
const DELIVERY_COUNT: &str = "x-delivery-count";

pub fn dlq(name: &str) -> String {
    format!("{name}.dlq")
}

pub fn settings_queue(name: &str) -> String {
    format!("{name}:settings")
}

pub fn retry_queue(target: &str, delay_ms: u64) -> String {
    format!("{target}:retry:{delay_ms}")
}

pub fn delay_queue(target: &str, delay_ms: u64) -> String {
    format!("{target}:delay:{delay_ms}")
}

/// The longest TTL RabbitMQ takes (2^32 - 1 ms, about 49 days).
const MAX_TTL_MS: u64 = u32::MAX as u64;

/// `delay` rounded up to the next step of a ladder of 12 steps per decade (1, 1.2, 1.5,
/// 1.8, 2.2, 2.7, 3.3, 4, 5, 6, 7.5, 9 × 10^k ms), so a queue serves many delays — each at most 25 %
/// late, never early.
pub fn bucket_ms(delay: Duration) -> Result<u64> {
    const STEPS: [u64; 12] = [10, 12, 15, 18, 22, 27, 33, 40, 50, 60, 75, 90];
    let ms = delay.as_nanos().div_ceil(1_000_000).max(1);
    if ms > MAX_TTL_MS as u128 {
        return Err(Error::invalid(
            "delay",
            "RabbitMQ holds a message at most 2^32-1 ms (about 49 days)",
        ));
    }
    let ms = ms as u64;
    if ms < 10 {
        return Ok(ms);
    }
    let mut scale = 1u64;
    while ms > 90 * scale {
        scale *= 10;
    }
    let step = STEPS
        .iter()
        .map(|s| s * scale)
        .find(|v| *v >= ms)
        .unwrap_or(100 * scale);
    Ok(step.min(MAX_TTL_MS))
}

/// What a queue or subscription was declared with, kept on the engine in `name:settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The topic, for a subscription.
    pub topic: Option<String>,
    pub max_deliveries: u32,
    #[serde(flatten)]
    pub backoff: StoredBackoff,
    pub dead_letter: bool,
    pub lease_ms: u64,
    pub default_ttl_ms: Option<u64>,
    pub max_delay_ms: u64,
    pub max_length: Option<u64>,
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

impl Settings {
    pub fn new(topic: Option<String>, d: &DeliveryPolicy, max_length: Option<u64>) -> Settings {
        Settings {
            topic,
            max_deliveries: d.max_deliveries,
            backoff: StoredBackoff::new(&d.backoff),
            dead_letter: d.dead_letter,
            lease_ms: ms(d.lease),
            default_ttl_ms: d.default_ttl.map(ms),
            max_delay_ms: ms(d.max_delay),
            max_length,
        }
    }

    /// The policy of a queue Ferry did not declare.
    pub fn unknown() -> Settings {
        Settings::new(None, &DeliveryPolicy::default(), None)
    }

    /// What dead letters are consumed with: no limit on deliveries and nowhere further to go.
    pub fn for_dead_letters(origin: &Settings) -> Settings {
        Settings {
            topic: None,
            max_deliveries: u32::MAX,
            dead_letter: false,
            ..origin.clone()
        }
    }

    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    /// In the SDK's words, for a refused redeclaration: the fields this transport keeps.
    pub fn declared(&self) -> Declared {
        let b = self.backoff.to_backoff();
        Declared::default()
            .max_deliveries(self.max_deliveries)
            .backoff(b.base, b.cap, b.multiplier, b.jitter)
            .dead_letter(self.dead_letter)
            .lease(self.lease())
            .default_ttl(self.default_ttl_ms.map(Duration::from_millis))
            .max_delay(Duration::from_millis(self.max_delay_ms))
            .max_length(self.max_length)
    }

    /// The arguments of the work queue: what the engine itself enforces.
    pub fn queue_args(&self, name: &str) -> Result<FieldTable> {
        let mut args = quorum_args();
        // The engine's net under the SDK's own count: after max_deliveries returns without
        // a settlement (a consumer that died each time) it dead-letters on its own.
        args.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongLongInt(i64::from(self.max_deliveries.max(2) - 1)),
        );
        if self.dead_letter {
            args.insert("x-dead-letter-exchange".into(), long(""));
            args.insert("x-dead-letter-routing-key".into(), long(&dlq(name)));
        }
        // Not x-message-ttl: RabbitMQ applies the lower of it and a message's own
        // expiration, where a message's own TTL is to replace the default. The default is
        // checked as each message is delivered (`past_default_ttl`).
        if let Some(max) = self.max_length {
            // A 3.10 quorum queue refuses publishes only once it holds more than its
            // x-max-length ready messages, so it would take one more than the limit.
            let max = i64::try_from(max - 1)
                .map_err(|_| Error::invalid("max_length", "too large for RabbitMQ"))?;
            args.insert("x-max-length".into(), AMQPValue::LongLongInt(max));
        }
        Ok(args)
    }
}

/// A durable quorum queue that refuses publishes when full and dead-letters at least once
/// (RabbitMQ 3.10 needs reject-publish for that strategy).
pub fn quorum_args() -> FieldTable {
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), long("quorum"));
    args.insert("x-overflow".into(), long("reject-publish"));
    args.insert("x-dead-letter-strategy".into(), long("at-least-once"));
    args
}

/// A queue holding messages `delay_ms` and then dead-lettering them into `target` (routed
/// by the default exchange) or, for a topic, into the exchange `target`. It deletes itself
/// once unused for an hour past its TTL, by when everything in it has moved on.
pub fn timer_args(delay_ms: u64, target: &str) -> FieldTable {
    let mut args = quorum_args();
    args.insert(
        "x-message-ttl".into(),
        AMQPValue::LongLongInt(delay_ms as i64),
    );
    args.insert("x-dead-letter-exchange".into(), long(""));
    args.insert("x-dead-letter-routing-key".into(), long(target));
    args.insert(
        "x-expires".into(),
        AMQPValue::LongLongInt((delay_ms + 3_600_000).min(MAX_TTL_MS) as i64),
    );
    args
}

pub fn long(text: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(text))
}

/// The AMQP form of a message as a producer gave it.
pub fn outgoing(message: &Message) -> Result<(Vec<u8>, BasicProperties)> {
    let mut headers = FieldTable::default();
    for (name, value) in &message.headers {
        if is_reserved(name) || name.len() > 255 {
            return Err(Error::invalid(
                format!("header `{name}`"),
                "the name is the transport's or RabbitMQ's own (ferry-key, \
                 ferry-published-at, ferry-attempts, ferry-ttl, x-delivery-count, x-death, \
                 x-first-death-*, x-last-death-*) or longer than 255 bytes",
            ));
        }
        headers.insert(name.as_str().into(), long(value));
    }
    if let Some(key) = &message.key {
        headers.insert(
            KEY.into(),
            AMQPValue::LongString(LongString::from(key.to_vec())),
        );
    }
    headers.insert(PUBLISHED_AT.into(), AMQPValue::LongLongInt(now_ms()));
    let ttl = match message.ttl {
        Some(ttl) => {
            let ttl = ms(ttl).max(1);
            if ttl > MAX_TTL_MS {
                return Err(Error::invalid("ttl", "at most 2^32-1 ms on RabbitMQ"));
            }
            headers.insert(TTL.into(), AMQPValue::LongLongInt(ttl as i64));
            Some(ttl)
        }
        None => None,
    };
    let id = message.id.clone().unwrap_or_else(new_id);
    if id.len() > 255 {
        return Err(Error::invalid("message id", "longer than 255 bytes"));
    }
    let mut properties = BasicProperties::default()
        .with_message_id(ShortString::from(id))
        .with_delivery_mode(2)
        .with_timestamp((now_ms() / 1000) as u64)
        .with_headers(headers);
    if let Some(ttl) = ttl {
        properties = properties.with_expiration(ShortString::from(ttl.to_string()));
    }
    Ok((message.payload.to_vec(), properties))
}

/// A delivered message's properties for its republish: the same id, key, headers and
/// publish time, without the engine's delivery bookkeeping, with `edit` applied to the
/// headers (`ferry-attempts` is the caller's to set). Its expiry was for its first wait in the queue and is not carried over.
pub fn republished(
    properties: &BasicProperties,
    edit: impl FnOnce(&mut FieldTable),
) -> BasicProperties {
    let mut headers = FieldTable::default();
    if let Some(old) = properties.headers() {
        for (name, value) in old {
            let name = name.as_str();
            if [DELIVERY_COUNT, ATTEMPTS, "x-death"].contains(&name) || is_death_header(name) {
                continue;
            }
            headers.insert(name.into(), value.clone());
        }
    }
    edit(&mut headers);
    let mut out = BasicProperties::default()
        .with_delivery_mode(2)
        .with_headers(headers);
    if let Some(id) = properties.message_id() {
        out = out.with_message_id(id.clone());
    }
    if let Some(ts) = properties.timestamp() {
        out = out.with_timestamp(*ts);
    }
    out
}

/// Headers this transport or RabbitMQ sets and strips; a producer's would be lost.
fn is_reserved(name: &str) -> bool {
    [KEY, PUBLISHED_AT, ATTEMPTS, TTL, DELIVERY_COUNT, "x-death"].contains(&name)
        || is_death_header(name)
}

fn is_death_header(name: &str) -> bool {
    name.starts_with("x-first-death-") || name.starts_with("x-last-death-")
}

fn int(value: &AMQPValue) -> Option<i64> {
    Some(match value {
        AMQPValue::ShortShortInt(v) => i64::from(*v),
        AMQPValue::ShortShortUInt(v) => i64::from(*v),
        AMQPValue::ShortInt(v) => i64::from(*v),
        AMQPValue::ShortUInt(v) => i64::from(*v),
        AMQPValue::LongInt(v) => i64::from(*v),
        AMQPValue::LongUInt(v) => i64::from(*v),
        AMQPValue::LongLongInt(v) => *v,
        AMQPValue::Timestamp(v) => *v as i64,
        AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes()).ok()?.parse().ok()?,
        _ => return None,
    })
}

fn text(value: &AMQPValue) -> Option<String> {
    match value {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        AMQPValue::Boolean(b) => Some(b.to_string()),
        AMQPValue::Float(f) => Some(f.to_string()),
        AMQPValue::Double(f) => Some(f.to_string()),
        AMQPValue::ByteArray(_) | AMQPValue::FieldArray(_) | AMQPValue::FieldTable(_) => None,
        AMQPValue::Void | AMQPValue::DecimalValue(_) => None,
        other => int(other).map(|v| v.to_string()),
    }
}

/// Whether a delivered message has outlived its queue's `default_ttl_ms`: it has no TTL of
/// its own and was published that long before `now_ms`.
pub fn past_default_ttl(
    properties: &BasicProperties,
    default_ttl_ms: Option<u64>,
    now_ms: i64,
) -> bool {
    let Some(ttl) = default_ttl_ms else {
        return false;
    };
    let header = |name: &str| {
        properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(name).and_then(int))
    };
    if header(TTL).is_some() {
        return false;
    }
    header(PUBLISHED_AT)
        .is_some_and(|at| at.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)) <= now_ms)
}

/// Deliveries made of this message so far, this one included.
pub fn attempt(properties: &BasicProperties) -> u32 {
    let header = |name: &str| {
        properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(name))
            .and_then(int)
            .unwrap_or(0)
    };
    let before = header(ATTEMPTS) + header(DELIVERY_COUNT);
    (before.clamp(0, u32::MAX as i64 - 1) as u32) + 1
}

/// A delivered AMQP message as the SDK shows it. `dead` says it was read from a dead-letter
/// queue, where the engine's own dead letters (x-death) are described too.
pub fn received(properties: &BasicProperties, data: &[u8], attempt: u32, dead: bool) -> Received {
    let mut headers = BTreeMap::new();
    let mut key = None;
    let mut published_at = None;
    let mut death = None;
    if let Some(table) = properties.headers() {
        for (name, value) in table {
            match name.as_str() {
                KEY => {
                    if let AMQPValue::LongString(s) = value {
                        key = Some(Bytes::copy_from_slice(s.as_bytes()));
                    }
                }
                PUBLISHED_AT => published_at = int(value),
                ATTEMPTS | TTL | DELIVERY_COUNT => {}
                "x-death" => death = Some(value.clone()),
                other if is_death_header(other) => {}
                other => {
                    if let Some(v) = text(value) {
                        headers.insert(other.to_owned(), v);
                    }
                }
            }
        }
    }
    let published_at_ms = published_at
        .or_else(|| properties.timestamp().map(|s| s as i64 * 1000))
        .unwrap_or_else(now_ms);
    let dead_letter = if dead {
        DeadLetterInfo::from_headers(&headers).or_else(|| engine_dead_letter(death, properties))
    } else {
        None
    };
    Received {
        id: properties
            .message_id()
            .as_ref()
            .map(|id| id.as_str().to_owned())
            .unwrap_or_else(new_id),
        key,
        headers,
        payload: Bytes::copy_from_slice(data),
        priority: 0,
        published_at_ms,
        attempt,
        dead_letter,
    }
}

/// The metadata of a message the engine dead-lettered itself (x-delivery-limit or TTL), read
/// from its x-death record.
fn engine_dead_letter(
    death: Option<AMQPValue>,
    properties: &BasicProperties,
) -> Option<DeadLetterInfo> {
    let AMQPValue::FieldArray(deaths) = death? else {
        return None;
    };
    let AMQPValue::FieldTable(first) = deaths.as_slice().first()? else {
        return None;
    };
    let get = |name: &str| first.inner().get(name).and_then(text);
    let why = match get("reason")?.as_str() {
        "delivery_limit" => reason::MAX_DELIVERIES.to_owned(),
        "expired" => reason::EXPIRED.to_owned(),
        "rejected" => reason::REJECTED.to_owned(),
        other => other.to_owned(),
    };
    let origin = get("queue").unwrap_or_default();
    let at = first.inner().get("time").and_then(int).map(|s| s * 1000);
    Some(DeadLetterInfo {
        reason: why,
        deliveries: attempt(properties).saturating_sub(1),
        origin,
        last_error: None,
        first_failure_ms: None,
        last_failure_ms: at,
        consumer: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_round_up_by_at_most_a_quarter() {
        assert_eq!(bucket_ms(Duration::from_millis(100)).unwrap(), 100);
        assert_eq!(bucket_ms(Duration::from_millis(101)).unwrap(), 120);
        assert_eq!(bucket_ms(Duration::from_millis(2000)).unwrap(), 2200);
        assert_eq!(bucket_ms(Duration::from_millis(7)).unwrap(), 7);
        assert_eq!(bucket_ms(Duration::from_micros(1)).unwrap(), 1);
        for ms in 1..200_000u64 {
            let b = bucket_ms(Duration::from_millis(ms)).unwrap();
            assert!(b >= ms && b * 4 <= ms * 5 + 4, "{ms} -> {b}");
        }
        assert!(bucket_ms(Duration::from_secs(60 * 86_400)).is_err());
    }

    #[test]
    fn the_default_ttl_applies_only_to_a_message_without_a_ttl_of_its_own() {
        let published = |message: Message| outgoing(&message).unwrap().1;
        let plain = published(Message::new("plain"));
        let own = published(Message::new("own").with_ttl(Duration::from_secs(600)));
        let at = plain
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(PUBLISHED_AT).and_then(int))
            .unwrap();
        let default = Some(1_000);
        assert!(!past_default_ttl(&plain, default, at + 999));
        assert!(past_default_ttl(&plain, default, at + 1_000));
        assert!(!past_default_ttl(&plain, None, at + 1_000_000));
        // Its own TTL replaces the default, also once a retry queue dropped its expiration.
        assert!(!past_default_ttl(&own, default, at + 1_000_000));
        let retried = republished(&own, |_| {});
        assert!(retried.expiration().is_none());
        assert!(!past_default_ttl(&retried, default, at + 1_000_000));
    }

    #[test]
    fn the_ttl_header_is_the_transports_own() {
        let mut message = Message::new("x");
        message.headers.insert(TTL.to_owned(), "5".to_owned());
        assert!(outgoing(&message).is_err());
    }
}
