//! Messages and times between Pub/Sub's wire types and the broker's.

use std::time::Duration;

use bytes::Bytes;
use ferry_broker::{DeadLetterInfo, MessageId, OutgoingMessage, ReceivedMessage};
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tonic::Status;

use crate::ack_id;

/// A published message as the broker stores it: data as the payload, attributes as
/// headers (the broker refuses names it reserves, with its own message), the ordering key
/// as the key, and an id minted here so Publish can answer with it.
pub fn outgoing(message: pb::PubsubMessage, now_ms: i64) -> Result<OutgoingMessage, Status> {
    if message.data.is_empty() && message.attributes.is_empty() {
        return Err(Status::invalid_argument(
            "Some messages contain no data and no attributes: a message needs one or both",
        ));
    }
    let key = (!message.ordering_key.is_empty()).then(|| Bytes::from(message.ordering_key));
    Ok(OutgoingMessage {
        id: Some(mint_id(now_ms)),
        key,
        headers: message.attributes,
        payload: message.data,
        ..OutgoingMessage::default()
    })
}

/// A new message id: a ULID of the publish time, as the broker mints its own.
fn mint_id(now_ms: i64) -> MessageId {
    let ms = u64::try_from(now_ms).unwrap_or(0);
    MessageId::from_ulid(ulid::Ulid::from_parts(ms, fastrand::u128(..)))
}

/// A delivery as Pub/Sub hands it out. `delivery_attempt` is set only on subscriptions
/// with a dead-letter policy, as Pub/Sub sets it. A dead letter carries where it came from
/// in the attributes Pub/Sub adds when it forwards one.
pub fn received(message: ReceivedMessage, counts_attempts: bool) -> pb::ReceivedMessage {
    let mut attributes = message.headers;
    if let Some(letter) = &message.dead_letter {
        dead_letter_attributes(letter, &mut attributes);
    }
    pb::ReceivedMessage {
        ack_id: ack_id::encode(message.seq, message.token),
        message: Some(pb::PubsubMessage {
            data: message.payload,
            attributes,
            message_id: message.id.to_string(),
            publish_time: Some(timestamp(message.published_at)),
            ordering_key: message
                .key
                .map(|k| String::from_utf8_lossy(&k).into_owned())
                .unwrap_or_default(),
        }),
        delivery_attempt: if counts_attempts {
            i32::try_from(message.delivery).unwrap_or(i32::MAX)
        } else {
            0
        },
    }
}

/// Pub/Sub's attributes on a forwarded dead letter: the delivery count, the subscription
/// (and its project) it came from, and when it was first published. A letter from a queue
/// that no Pub/Sub name stands for names the queue as the subscription, with no project.
fn dead_letter_attributes(letter: &DeadLetterInfo, attributes: &mut ferry_broker::Headers) {
    let (project, subscription) = letter
        .origin_queue
        .split_once('.')
        .unwrap_or(("", letter.origin_queue.as_str()));
    for (name, value) in [
        (
            "CloudPubSubDeadLetterSourceDeliveryCount",
            letter.deliveries.to_string(),
        ),
        (
            "CloudPubSubDeadLetterSourceSubscription",
            subscription.to_owned(),
        ),
        (
            "CloudPubSubDeadLetterSourceSubscriptionProject",
            project.to_owned(),
        ),
        (
            "CloudPubSubDeadLetterSourceTopicPublishTime",
            timestamp(letter.origin_published_at).to_string(),
        ),
    ] {
        attributes.insert(name.to_owned(), value);
    }
}

/// The bytes a delivery counts for against a stream's `max_outstanding_bytes`.
pub fn size(message: &pb::ReceivedMessage) -> u64 {
    message.message.as_ref().map_or(0, |m| {
        m.data.len() as u64
            + m.attributes
                .iter()
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum::<u64>()
            + m.ordering_key.len() as u64
    })
}

pub fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// A protobuf duration as a `Duration`; negative or out-of-range ones are refused with the
/// setting's name.
pub fn duration(d: &prost_types::Duration, setting: &str) -> Result<Duration, Status> {
    if d.seconds < 0 || d.nanos < 0 || d.nanos >= 1_000_000_000 {
        return Err(Status::invalid_argument(format!(
            "{setting} must be a non-negative duration"
        )));
    }
    Ok(Duration::new(d.seconds as u64, d.nanos as u32))
}

pub fn proto_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_without_data_or_attributes_is_refused() {
        let err = outgoing(pb::PubsubMessage::default(), 0).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn a_published_message_keeps_its_parts_and_gets_an_id_of_its_time() {
        let mut message = pb::PubsubMessage {
            data: Bytes::from_static(b"hello"),
            ordering_key: "customer-1".into(),
            ..Default::default()
        };
        message.attributes.insert("kind".into(), "greeting".into());
        let out = outgoing(message, 1_700_000_000_123).unwrap();
        assert_eq!(out.payload, Bytes::from_static(b"hello"));
        assert_eq!(out.key, Some(Bytes::from_static(b"customer-1")));
        assert_eq!(out.headers["kind"], "greeting");
        assert_eq!(out.id.unwrap().timestamp_ms(), 1_700_000_000_123);
    }

    #[test]
    fn times_convert_both_ways() {
        let t = timestamp(1_500);
        assert_eq!((t.seconds, t.nanos), (1, 500_000_000));
        let d = duration(&proto_duration(Duration::from_millis(2_250)), "x").unwrap();
        assert_eq!(d, Duration::from_millis(2_250));
        let negative = prost_types::Duration {
            seconds: -1,
            nanos: 0,
        };
        assert!(duration(&negative, "x").is_err());
    }
}
