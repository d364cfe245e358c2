//! Messages, deliveries and descriptions in JSON, shaped like `ferry.v1`'s.
//!
//! Bytes travel as UTF-8 text by default (`payload`, `key`), or as standard base64 in
//! `payload_base64` / `key_base64` — one or the other, never both. Deliveries carry
//! `payload` when it is valid UTF-8 and `payload_base64` otherwise (likewise the key).

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use ferry_proto::v1;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::spec::{QueueSpec, SubscriptionSpec, TopicSpec};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutgoingMessage {
    pub payload: Option<String>,
    pub payload_base64: Option<String>,
    pub key: Option<String>,
    pub key_base64: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub priority: u32,
    pub delay_ms: Option<u64>,
    pub deliver_at_ms: Option<i64>,
    pub ttl_ms: Option<u64>,
    pub dedup_id: Option<String>,
    /// A ULID chosen by the producer.
    pub id: Option<String>,
}

fn bytes_field(
    index: usize,
    name: &str,
    text: Option<String>,
    base64: Option<String>,
) -> Result<Option<Bytes>, ApiError> {
    match (text, base64) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "conflicting_fields",
            format!("messages[{index}]: set {name} or {name}_base64, not both"),
        )),
        (Some(text), None) => Ok(Some(Bytes::from(text))),
        (None, Some(encoded)) => BASE64
            .decode(encoded.as_bytes())
            .map(|b| Some(Bytes::from(b)))
            .map_err(|e| {
                ApiError::bad_request(
                    "bad_base64",
                    format!("messages[{index}].{name}_base64 is not standard base64: {e}"),
                )
            }),
        (None, None) => Ok(None),
    }
}

impl OutgoingMessage {
    /// The `ferry.v1` message; `index` names it in errors.
    pub fn into_proto(self, index: usize) -> Result<v1::OutgoingMessage, ApiError> {
        let payload = bytes_field(index, "payload", self.payload, self.payload_base64)?
            .ok_or_else(|| {
                ApiError::bad_request(
                    "missing_field",
                    format!(
                        "messages[{index}] has no payload: set payload (text) or \
                         payload_base64 (\"\" for an empty one)"
                    ),
                )
            })?;
        let key = bytes_field(index, "key", self.key, self.key_base64)?;
        let delivery = match (self.delay_ms, self.deliver_at_ms) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "conflicting_fields",
                    format!("messages[{index}]: set delay_ms or deliver_at_ms, not both"),
                ));
            }
            (Some(after), None) => Some(v1::outgoing_message::Delivery::DeliverAfterMs(after)),
            (None, Some(at)) => Some(v1::outgoing_message::Delivery::DeliverAtMs(at)),
            (None, None) => None,
        };
        Ok(v1::OutgoingMessage {
            payload,
            key,
            headers: self.headers.into_iter().collect(),
            priority: self.priority,
            delivery,
            ttl_ms: self.ttl_ms,
            dedup_id: self.dedup_id,
            id: self.id,
        })
    }
}

pub(crate) fn text_or_base64(bytes: &[u8]) -> (Option<String>, Option<String>) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (Some(text.to_owned()), None),
        Err(_) => (None, Some(BASE64.encode(bytes))),
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct DeadLetterInfo {
    pub reason: String,
    pub deliveries: u32,
    pub origin_queue: String,
    pub origin_seq: u64,
    pub origin_published_at_ms: i64,
    pub last_error: Option<String>,
    pub first_failure_at_ms: Option<i64>,
    pub last_failure_at_ms: Option<i64>,
    pub consumer: Option<String>,
}

/// A delivery (token and lease set) or a peeked message (token 0, no lease).
#[derive(Debug, Serialize, Deserialize)]
pub struct Delivery {
    pub id: String,
    pub seq: u64,
    pub token: u64,
    pub delivery: u32,
    pub lease_until_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_base64: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub priority: u32,
    pub published_at_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterInfo>,
}

impl From<v1::Delivery> for Delivery {
    fn from(d: v1::Delivery) -> Delivery {
        let (payload, payload_base64) = text_or_base64(&d.payload);
        let (key, key_base64) = d.key.as_deref().map(text_or_base64).unwrap_or_default();
        Delivery {
            id: d.id,
            seq: d.seq,
            token: d.token,
            delivery: d.delivery,
            lease_until_ms: d.lease_until_ms,
            payload,
            payload_base64,
            key,
            key_base64,
            headers: d.headers.into_iter().collect(),
            priority: d.priority,
            published_at_ms: d.published_at_ms,
            dead_letter: d.dead_letter.map(|l| DeadLetterInfo {
                reason: l.reason,
                deliveries: l.deliveries,
                origin_queue: l.origin_queue,
                origin_seq: l.origin_seq,
                origin_published_at_ms: l.origin_published_at_ms,
                last_error: l.last_error,
                first_failure_at_ms: l.first_failure_at_ms,
                last_failure_at_ms: l.last_failure_at_ms,
                consumer: l.consumer,
            }),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct QueueStats {
    pub ready: u64,
    pub in_flight: u64,
    pub delayed: u64,
    pub parked: u64,
    pub bytes: u64,
    pub oldest_ready_age_ms: Option<u64>,
    pub published: u64,
    pub acked: u64,
    pub nacked: u64,
    pub dead_lettered: u64,
    pub dropped: u64,
    pub cancelled: u64,
    pub redriven: u64,
    pub skipped: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct QueueInfo {
    pub name: String,
    pub spec: QueueSpec,
    pub stats: QueueStats,
}

impl From<v1::QueueInfo> for QueueInfo {
    fn from(q: v1::QueueInfo) -> QueueInfo {
        let s = q.stats.unwrap_or_default();
        QueueInfo {
            name: q.name,
            spec: q.spec.unwrap_or_default().into(),
            stats: QueueStats {
                ready: s.ready,
                in_flight: s.in_flight,
                delayed: s.delayed,
                parked: s.parked,
                bytes: s.bytes,
                oldest_ready_age_ms: s.oldest_ready_age_ms,
                published: s.published,
                acked: s.acked,
                nacked: s.nacked,
                dead_lettered: s.dead_lettered,
                dropped: s.dropped,
                cancelled: s.cancelled,
                redriven: s.redriven,
                skipped: s.skipped,
            },
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct PartitionInfo {
    pub partition: u32,
    pub start_offset: u64,
    pub end_offset: u64,
    pub bytes: u64,
    pub oldest_published_at_ms: Option<i64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct TopicInfo {
    pub name: String,
    pub spec: TopicSpec,
    pub partitions: Vec<PartitionInfo>,
}

impl From<v1::TopicInfo> for TopicInfo {
    fn from(t: v1::TopicInfo) -> TopicInfo {
        TopicInfo {
            name: t.name,
            spec: t.spec.unwrap_or_default().into(),
            partitions: t
                .partitions
                .into_iter()
                .map(|p| PartitionInfo {
                    partition: p.partition,
                    start_offset: p.start_offset,
                    end_offset: p.end_offset,
                    bytes: p.bytes,
                    oldest_published_at_ms: p.oldest_published_at_ms,
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct SkippedRange {
    pub partition: u32,
    pub from_offset: u64,
    pub to_offset: u64,
    pub dropped: u64,
    pub unread: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct SubscriptionInfo {
    pub spec: SubscriptionSpec,
    pub queue: QueueInfo,
    pub not_yet_considered: u64,
    pub skipped: Vec<SkippedRange>,
}

impl From<v1::SubscriptionInfo> for SubscriptionInfo {
    fn from(s: v1::SubscriptionInfo) -> SubscriptionInfo {
        SubscriptionInfo {
            spec: s.spec.unwrap_or_default().into(),
            queue: s.queue.unwrap_or_default().into(),
            not_yet_considered: s.not_yet_considered,
            skipped: s
                .skipped
                .into_iter()
                .map(|r| SkippedRange {
                    partition: r.partition,
                    from_offset: r.from_offset,
                    to_offset: r.to_offset,
                    dropped: r.dropped,
                    unread: r.unread,
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct GroupMember {
    pub member_id: String,
    pub partitions: Vec<u32>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct GroupPartition {
    pub partition: u32,
    pub owner: Option<String>,
    pub committed: Option<u64>,
    pub end_offset: u64,
    pub lag_records: u64,
    pub lag_ms: i64,
    pub skipped: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct GroupInfo {
    pub topic: String,
    pub group: String,
    pub generation: u64,
    pub members: Vec<GroupMember>,
    pub partitions: Vec<GroupPartition>,
}

impl From<v1::GroupInfo> for GroupInfo {
    fn from(g: v1::GroupInfo) -> GroupInfo {
        GroupInfo {
            topic: g.topic,
            group: g.group,
            generation: g.generation,
            members: g
                .members
                .into_iter()
                .map(|m| GroupMember {
                    member_id: m.member_id,
                    partitions: m.partitions,
                })
                .collect(),
            partitions: g
                .partitions
                .into_iter()
                .map(|p| GroupPartition {
                    partition: p.partition,
                    owner: p.owner,
                    committed: p.committed,
                    end_offset: p.end_offset,
                    lag_records: p.lag_records,
                    lag_ms: p.lag_ms,
                    skipped: p.skipped,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_text_or_base64_never_both() {
        let text = OutgoingMessage {
            payload: Some("héllo".into()),
            ..Default::default()
        };
        assert_eq!(&text.into_proto(0).unwrap().payload[..], "héllo".as_bytes());
        let binary = OutgoingMessage {
            payload_base64: Some("AP8=".into()),
            ..Default::default()
        };
        assert_eq!(&binary.into_proto(0).unwrap().payload[..], &[0, 255]);
        let both = OutgoingMessage {
            payload: Some("a".into()),
            payload_base64: Some("YQ==".into()),
            ..Default::default()
        };
        assert_eq!(both.into_proto(3).unwrap_err().code, "conflicting_fields");
        let neither = OutgoingMessage::default();
        assert_eq!(neither.into_proto(0).unwrap_err().code, "missing_field");
        assert_eq!(text_or_base64(&[0, 255]), (None, Some("AP8=".into())));
    }
}
