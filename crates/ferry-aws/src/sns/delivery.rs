//! Delivery of a published message into the subscribed SQS queues that the broker does
//! not deliver by reference (see `linked.rs`): a subscription whose queue does not exist,
//! and a delivery larger than the queue takes. Each subscription's filter policy, SNS's
//! JSON envelope or the raw message, the queue's settings (delay, retention, a FIFO
//! queue's group and deduplication id), and what happens when a queue refuses it (the
//! subscription's RedrivePolicy, or a log line, or a failed publish — see `publish.rs`).

use std::time::Duration;

use bytes::Bytes;
use ferry_broker::{DeliveryTime, ErrorKind, Headers, OutgoingMessage};
use serde_json::{Map, Value, json};

use super::errors::{Code, SnsError};
use super::filter::{self, Scope};
use super::linked::{Identity, Linked};
use super::publish::Prepared;
use super::store::SubscriptionRecord;
use super::subscriptions::dead_letter_queue;
use super::{Call, iso8601};
use crate::message_attributes::{self, AttributeValue, DEDUP_HEADER};

/// Delivers to every subscription of the topic that its link (in `linked`) does not take.
/// Every queue is tried, so one failing for now keeps no other from its delivery; the
/// first failure is the answer.
pub(super) async fn deliver_all(
    call: &Call<'_>,
    p: &Prepared,
    message_id: &str,
    sequence: Option<&str>,
    at_ms: i64,
    linked: &[Linked],
) -> Result<(), SnsError> {
    let subscriptions: Vec<(String, SubscriptionRecord)> = call.sns().store.read(|s| {
        s.subscriptions
            .iter()
            .filter(|(_, r)| r.topic == p.topic)
            .map(|(id, r)| (id.clone(), r.clone()))
            .collect()
    });
    let mut failed = None;
    for (id, subscription) in &subscriptions {
        if linked
            .iter()
            .any(|l| &l.id == id && l.takes(p, message_id, sequence, at_ms))
        {
            continue;
        }
        let delivered = deliver(call, p, message_id, sequence, at_ms, id, subscription).await;
        if let Err(e) = delivered {
            failed.get_or_insert(e);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// SNS's JSON envelope of a notification.
pub(super) fn envelope(
    identity: &Identity,
    p: &Prepared,
    body: &str,
    message_id: &str,
    sequence: Option<&str>,
    at_ms: i64,
) -> String {
    let mut out = Map::new();
    out.insert("Type".into(), "Notification".into());
    out.insert("MessageId".into(), message_id.into());
    if let Some(seq) = sequence {
        out.insert("SequenceNumber".into(), seq.into());
    }
    out.insert("TopicArn".into(), identity.topic_arn.into());
    if let Some(s) = &p.subject {
        out.insert("Subject".into(), s.clone().into());
    }
    out.insert("Message".into(), body.into());
    out.insert("Timestamp".into(), iso8601(at_ms).into());
    // Ferry does not sign notifications: the signature fields are there, with a value no
    // verifier accepts, for consumers that only read them.
    out.insert("SignatureVersion".into(), "1".into());
    out.insert("Signature".into(), "RkVSUlktVU5TSUdORUQ=".into());
    out.insert(
        "SigningCertURL".into(),
        format!(
            "http://{}/SimpleNotificationService-ferry-unsigned.pem",
            identity.host
        )
        .into(),
    );
    out.insert(
        "UnsubscribeURL".into(),
        format!(
            "http://{}/?Action=Unsubscribe&SubscriptionArn={}",
            identity.host, identity.subscription_arn
        )
        .into(),
    );
    if !p.attributes.is_empty() {
        let mut attributes = Map::new();
        for (name, a) in &p.attributes {
            let value = match &a.value {
                AttributeValue::String(s) => s.clone(),
                AttributeValue::Binary(b) => {
                    use base64::Engine;
                    base64::engine::general_purpose::STANDARD.encode(b)
                }
            };
            attributes.insert(name.clone(), json!({"Type": a.data_type, "Value": value}));
        }
        out.insert("MessageAttributes".into(), Value::Object(attributes));
    }
    Value::Object(out).to_string()
}

/// Why a queue did not take a delivery.
struct Refused {
    why: String,
    /// For good: the queue is gone or refuses this message (its size, its settings), so
    /// publishing again would not help. Otherwise for now (a full disk, a poisoned
    /// queue): the publish fails, and the client publishing again delivers it.
    lasting: bool,
}

/// Delivers to one subscription's queue, or its dead-letter queue. A lasting refusal
/// without a dead-letter queue drops the message for that subscription, logged, as SNS
/// does after its retries; a passing one fails the publish.
#[allow(clippy::too_many_arguments)]
async fn deliver(
    call: &Call<'_>,
    p: &Prepared,
    message_id: &str,
    sequence: Option<&str>,
    at_ms: i64,
    id: &str,
    subscription: &SubscriptionRecord,
) -> Result<(), SnsError> {
    let attribute = |name: &str| subscription.attributes.get(name).map(String::as_str);
    if let Some(policy) = attribute("FilterPolicy") {
        let scope = attribute("FilterPolicyScope")
            .and_then(Scope::parse)
            .unwrap_or(Scope::MessageAttributes);
        let passes = match serde_json::from_str::<Value>(policy) {
            Ok(policy) => filter::matches(&policy, scope, &p.attributes, &p.message),
            Err(_) => false,
        };
        if !passes {
            return Ok(());
        }
    }
    let Some(queue) = call.inner.location.queue_of_arn(&subscription.endpoint) else {
        return Ok(());
    };
    let body = p.for_sqs.as_deref().unwrap_or(&p.message);
    let raw = attribute("RawMessageDelivery") == Some("true");
    let subscription_arn = format!("{}:{id}", call.topic_arn(&p.topic));
    let mut headers = Headers::new();
    let payload = if raw {
        message_attributes::to_headers(&p.attributes, &mut headers);
        body.to_owned()
    } else {
        let topic_arn = call.topic_arn(&p.topic);
        let identity = Identity {
            topic_arn: &topic_arn,
            subscription_arn: &subscription_arn,
            host: call.host,
        };
        envelope(&identity, p, body, message_id, sequence, at_ms)
    };
    let mut message = OutgoingMessage {
        headers,
        payload: Bytes::from(payload),
        ..OutgoingMessage::default()
    };
    let outcome = publish_to_queue(call, queue, p, message.clone()).await;
    let Err(refused) = outcome else {
        return Ok(());
    };
    let dead_letter = attribute("RedrivePolicy").and_then(|r| dead_letter_queue(call, r).ok());
    if let Some(dlq) = dead_letter {
        message.headers.insert(
            "aws:sns-delivery-error".into(),
            refused.why.chars().take(500).collect(),
        );
        if publish_to_queue(call, &dlq, p, message).await.is_ok() {
            return Ok(());
        }
    }
    if !refused.lasting {
        tracing::warn!(subscription = %subscription_arn, queue = %queue, error = %refused.why,
            "an SNS delivery to an SQS queue failed for now; the publish is refused");
        return Err(SnsError::new(
            Code::InternalError,
            format!(
                "Delivery to the queue {queue} failed: {}. The message is in the topic and may \
                 be in other subscribed queues; publish it again (FIFO queues deduplicate it).",
                refused.why
            ),
        ));
    }
    tracing::warn!(
        subscription = %subscription_arn,
        queue = %queue,
        error = %refused.why,
        "an SNS delivery to an SQS queue was refused and the message was dropped for that subscription"
    );
    Ok(())
}

/// A publish into an SQS queue as SendMessage would make it: the queue's delay and
/// retention, a FIFO queue's group and deduplication id.
async fn publish_to_queue(
    call: &Call<'_>,
    queue: &str,
    p: &Prepared,
    mut message: OutgoingMessage,
) -> Result<(), Refused> {
    let record = call.inner.store.get(queue);
    let attribute = |name: &str| {
        record
            .as_ref()
            .and_then(|r| r.attributes.get(name).cloned())
    };
    let number = |name: &str| attribute(name).and_then(|v| v.parse::<u64>().ok());
    if queue.ends_with(".fifo")
        && let (Some(group), Some(dedup)) = (&p.group, &p.dedup)
    {
        message.key = Some(Bytes::copy_from_slice(group.as_bytes()));
        message.headers.insert(DEDUP_HEADER.into(), dedup.clone());
        message.dedup_id = Some(
            if attribute("DeduplicationScope").as_deref() == Some("messageGroup") {
                format!("{}:{group}{dedup}", group.len())
            } else {
                dedup.clone()
            },
        );
    }
    if let Some(delay) = number("DelaySeconds").filter(|d| *d > 0) {
        message.delivery = DeliveryTime::After(Duration::from_secs(delay));
    }
    if let Some(retention) = number("MessageRetentionPeriod") {
        message.ttl = Some(Duration::from_secs(retention));
    }
    let max_size = number("MaximumMessageSize").unwrap_or(1_048_576) as usize;
    let size = message.payload.len()
        + message
            .headers
            .iter()
            .filter(|(k, _)| !k.starts_with(message_attributes::HEADER_PREFIX))
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>();
    if size > max_size {
        return Err(Refused {
            why: format!(
                "the delivery ({size} bytes) is larger than the queue's MaximumMessageSize \
                 ({max_size})"
            ),
            lasting: true,
        });
    }
    call.inner
        .broker
        .publish(queue, message)
        .await
        .map(|_| ())
        .map_err(|e| Refused {
            lasting: matches!(
                e.kind(),
                ErrorKind::NotFound
                    | ErrorKind::Invalid
                    | ErrorKind::OutOfRange
                    | ErrorKind::TooLarge
                    | ErrorKind::Conflict
                    | ErrorKind::Full
            ),
            why: e.to_string(),
        })
}
