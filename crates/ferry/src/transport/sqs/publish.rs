//! Publishing: SendMessageBatch to a queue, PublishBatch to a topic, ten messages a call
//! (both APIs' limit). A batch that fails part-way has stored a prefix or more; each
//! message keeps its id, and a FIFO queue takes the id as its deduplication id, so a retry
//! stores nothing twice there.

use aws_sdk_sqs::primitives::Blob;

use super::aws;
use super::capabilities::NAME;
use super::codec::{self, Attr, Encoded};
use super::engine::{Found, Shared, seconds_up};
use super::topology::MAX_DELAY;
use crate::error::{Error, Result};
use crate::message::{Message, now_ms};

/// Entries per SendMessageBatch / PublishBatch call.
const PER_CALL: usize = 10;
/// What one batch call carries at most, payloads and attributes together (SQS's and SNS's
/// 256 KiB, with room for the request's own fields).
const CALL_BYTES: usize = 240 * 1024;
/// The longest ordering key: its hex form is the MessageGroupId, 128 characters at most.
const MAX_KEY: usize = 64;

/// The FIFO message group of a message: its key in hex (group ids are printable ASCII),
/// else its id, so that messages without a key are not held behind each other.
pub(super) fn group_of(key: Option<&[u8]>, id: &str) -> String {
    match key {
        Some(key) => key.iter().map(|b| format!("{b:02x}")).collect(),
        None => id.to_owned(),
    }
}

fn size(encoded: &Encoded) -> usize {
    encoded.body.len()
        + encoded
            .attributes
            .iter()
            .map(|(name, value)| {
                name.len()
                    + match value {
                        Attr::String(s) | Attr::Number(s) => s.len(),
                        Attr::Binary(b) => b.len(),
                    }
            })
            .sum::<usize>()
}

/// Splits `items` into calls of at most ten entries and [`CALL_BYTES`].
fn calls<T>(items: Vec<(Encoded, T)>) -> Vec<Vec<(Encoded, T)>> {
    let mut calls: Vec<Vec<(Encoded, T)>> = Vec::new();
    let mut bytes = 0;
    for item in items {
        let n = size(&item.0);
        match calls.last_mut() {
            Some(call) if call.len() < PER_CALL && bytes + n <= CALL_BYTES => {
                bytes += n;
                call.push(item);
            }
            _ => {
                bytes = n;
                calls.push(vec![item]);
            }
        }
    }
    calls
}

pub(super) fn sqs_attribute(value: &Attr) -> aws_sdk_sqs::types::MessageAttributeValue {
    let b = aws_sdk_sqs::types::MessageAttributeValue::builder();
    match value {
        Attr::String(s) => b.data_type("String").string_value(s),
        Attr::Number(s) => b.data_type("Number").string_value(s),
        Attr::Binary(v) => b.data_type("Binary").binary_value(Blob::new(v.clone())),
    }
    .build()
    .expect("a data type is set")
}

fn sns_attribute(value: &Attr) -> aws_sdk_sns::types::MessageAttributeValue {
    let b = aws_sdk_sns::types::MessageAttributeValue::builder();
    match value {
        Attr::String(s) => b.data_type("String").string_value(s),
        Attr::Number(s) => b.data_type("Number").string_value(s),
        Attr::Binary(v) => b
            .data_type("Binary")
            .binary_value(aws_sdk_sns::primitives::Blob::new(v.clone())),
    }
    .build()
    .expect("a data type is set")
}

/// What SQS needs of one message beyond its encoding.
struct Placement {
    delay: i32,
    group: Option<String>,
    dedup: Option<String>,
}

pub(super) async fn to_queue(shared: &Shared, queue: &Found, batch: Vec<Message>) -> Result<()> {
    shared.check_open()?;
    let published_at = now_ms();
    let mut items = Vec::with_capacity(batch.len());
    // Every message is checked before any is sent: a refused batch stores nothing.
    for message in &batch {
        let id = message.id.as_deref().unwrap_or_default();
        let delay = message.delay.unwrap_or_default();
        if delay > MAX_DELAY {
            return Err(Error::invalid(
                format!("delay of message {id}"),
                format!("{delay:?} is beyond SQS's 15 minutes"),
            ));
        }
        if queue.fifo && !delay.is_zero() {
            return Err(Error::unsupported(
                NAME,
                "a delayed publish to a queue with ordering or deduplication",
                "SQS FIFO queues take no per-message delay",
            ));
        }
        if message.key.as_ref().is_some_and(|k| k.len() > MAX_KEY) {
            return Err(Error::invalid(
                format!("key of message {id}"),
                format!("longer than {MAX_KEY} bytes, the longest SQS message group"),
            ));
        }
        let placement = Placement {
            delay: seconds_up(delay),
            group: queue.fifo.then(|| group_of(message.key.as_deref(), id)),
            dedup: queue
                .fifo
                .then(|| message.dedup_id.clone().unwrap_or_else(|| id.to_owned())),
        };
        items.push((codec::encode(message, published_at), placement));
    }
    for call in calls(items) {
        send_batch(shared, &queue.url, call).await?;
    }
    Ok(())
}

async fn send_batch(shared: &Shared, url: &str, call: Vec<(Encoded, Placement)>) -> Result<()> {
    use aws_sdk_sqs::types::SendMessageBatchRequestEntry as Entry;
    let mut entries = Vec::with_capacity(call.len());
    for (i, (encoded, placement)) in call.iter().enumerate() {
        let mut entry = Entry::builder()
            .id(i.to_string())
            .message_body(&encoded.body)
            .set_message_group_id(placement.group.clone())
            .set_message_deduplication_id(placement.dedup.clone());
        if placement.delay > 0 {
            entry = entry.delay_seconds(placement.delay);
        }
        for (name, value) in &encoded.attributes {
            entry = entry.message_attributes(*name, sqs_attribute(value));
        }
        entries.push(entry.build().expect("id and body are set"));
    }
    let out = shared
        .sqs
        .send_message_batch()
        .queue_url(url)
        .set_entries(Some(entries))
        .send()
        .await
        .map_err(|e| aws::failure(e).into_error())?;
    match out.failed().first() {
        None => Ok(()),
        Some(failed) => Err(entry_failure(
            &call,
            &failed.id,
            failed.sender_fault,
            &failed.code,
            failed.message(),
        )),
    }
}

/// The SDK's error for one refused entry: the caller's fault is `Invalid`.
fn entry_failure<T>(
    call: &[(Encoded, T)],
    entry: &str,
    sender_fault: bool,
    code: &str,
    message: Option<&str>,
) -> Error {
    let id = entry
        .parse::<usize>()
        .ok()
        .and_then(|i| call.get(i))
        .map_or(entry, |(encoded, _)| encoded.id.as_str());
    let why = format!("{code}: {}", message.unwrap_or_default());
    if sender_fault {
        Error::invalid(format!("message {id}"), why)
    } else {
        Error::Transport {
            transport: NAME,
            message: format!("message {id} was not stored: {why}"),
            source: None,
        }
    }
}

pub(super) async fn to_topic(
    shared: &Shared,
    topic: &str,
    arn: &str,
    batch: Vec<Message>,
) -> Result<()> {
    use aws_sdk_sns::types::PublishBatchRequestEntry as Entry;
    shared.check_open()?;
    let published_at = now_ms();
    let mut items = Vec::with_capacity(batch.len());
    for message in &batch {
        let id = message.id.as_deref().unwrap_or_default();
        if message.delay.is_some_and(|d| !d.is_zero()) {
            return Err(Error::unsupported(
                NAME,
                "a delayed publish to a topic",
                "SNS delivers at once; publish delayed messages to a queue",
            ));
        }
        if message.dedup_id.is_some() {
            return Err(Error::invalid(
                format!("dedup id of message {id}"),
                format!(
                    "topic `{topic}` is an SNS standard topic, which does not deduplicate; \
                     publish without one"
                ),
            ));
        }
        items.push((codec::encode(message, published_at), ()));
    }
    for call in calls(items) {
        let entries = call
            .iter()
            .enumerate()
            .map(|(i, (encoded, ()))| {
                let mut entry = Entry::builder().id(i.to_string()).message(&encoded.body);
                for (name, value) in &encoded.attributes {
                    entry = entry.message_attributes(*name, sns_attribute(value));
                }
                entry.build().expect("id and message are set")
            })
            .collect();
        let out = shared
            .sns
            .publish_batch()
            .topic_arn(arn)
            .set_publish_batch_request_entries(Some(entries))
            .send()
            .await
            .map_err(|e| {
                let f = aws::failure(e);
                if f.is(aws::NO_TOPIC) {
                    Error::NotFound {
                        kind: "topic",
                        name: topic.to_owned(),
                    }
                } else {
                    f.into_error()
                }
            })?;
        if let Some(failed) = out.failed().first() {
            return Err(entry_failure(
                &call,
                &failed.id,
                failed.sender_fault,
                &failed.code,
                failed.message(),
            ));
        }
    }
    Ok(())
}
