//! SendMessage and SendMessageBatch: an SQS message becomes a Ferry publish.

use std::time::Duration;

use bytes::Bytes;
use ferry_broker::{DeliveryTime, ErrorKind, Headers, MessageId, OutgoingMessage};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{Call, batch, integer_in, required_string, string};
use crate::attributes::{self, MAX_DELAY};
use crate::errors::{Code, SqsError, from_broker};
use crate::md5;
use crate::message_attributes::{self, DEDUP_HEADER, TRACE_HEADER};

/// Whether SQS allows `c` in a message body or string attribute.
pub fn allowed_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

/// What a send needs to know about its queue.
pub struct Target {
    pub queue: String,
    fifo: bool,
    max_size: usize,
    delay: u32,
    content_dedup: bool,
    dedup_per_group: bool,
}

impl Target {
    pub fn of(call: &Call) -> Result<Target, SqsError> {
        let queue = call.queue()?;
        call.sqs
            .broker
            .describe_queue(&queue)
            .map_err(from_broker)?;
        let record = call.sqs.store.get(&queue);
        let number = |name: &str| {
            record
                .as_ref()
                .and_then(|r| r.attributes.get(name)?.parse::<u32>().ok())
        };
        let flag = |name: &str, on: &str| {
            record
                .as_ref()
                .and_then(|r| r.attributes.get(name))
                .is_some_and(|v| v == on)
        };
        Ok(Target {
            fifo: queue.ends_with(".fifo"),
            max_size: number("MaximumMessageSize").unwrap_or(attributes::MAX_MESSAGE_SIZE) as usize,
            delay: number("DelaySeconds").unwrap_or(0),
            content_dedup: flag("ContentBasedDeduplication", "true"),
            dedup_per_group: flag("DeduplicationScope", "messageGroup"),
            queue,
        })
    }
}

/// A checked message and the digests its answer carries.
struct Prepared {
    message: OutgoingMessage,
    md5_body: String,
    md5_attributes: Option<String>,
    md5_system: Option<String>,
}

fn fifo_id(what: &str, value: &str) -> Result<(), SqsError> {
    if value.is_empty() || value.len() > 128 || !value.bytes().all(|b| (33..=126).contains(&b)) {
        return Err(SqsError::invalid(format!(
            "Value {} for parameter {what} is invalid. Reason: use 1 to 128 printable ASCII \
             characters.",
            value.chars().take(130).collect::<String>()
        )));
    }
    Ok(())
}

/// What a FIFO queue requires of each message: a MessageGroupId, and a
/// MessageDeduplicationId unless the queue has content-based deduplication.
fn fifo_requirements(target: &Target, entry: &Map<String, Value>) -> Result<(), SqsError> {
    if string(entry, "MessageGroupId")?.is_none() {
        return Err(SqsError::missing("MessageGroupId"));
    }
    if !target.content_dedup && string(entry, "MessageDeduplicationId")?.is_none() {
        return Err(SqsError::invalid(
            "The queue should either have ContentBasedDeduplication enabled or \
             MessageDeduplicationId provided explicitly",
        ));
    }
    Ok(())
}

fn prepare(target: &Target, entry: &Map<String, Value>) -> Result<Prepared, SqsError> {
    let body = required_string(entry, "MessageBody")?;
    if body.is_empty() {
        return Err(SqsError::missing("MessageBody"));
    }
    if !body.chars().all(allowed_char) {
        return Err(SqsError::new(
            Code::InvalidMessageContents,
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to \
             #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
        ));
    }
    let attributes = message_attributes::parse(entry.get("MessageAttributes"), false)?;
    let system = message_attributes::parse(entry.get("MessageSystemAttributes"), true)?;
    let size = body.len() + message_attributes::size(&attributes);
    if size > target.max_size {
        return Err(SqsError::invalid(format!(
            "One or more parameters are invalid. Reason: Message must be shorter than {} bytes.",
            target.max_size
        )));
    }
    let delay = integer_in(entry, "DelaySeconds", 0..=i64::from(MAX_DELAY))?;
    let group = string(entry, "MessageGroupId")?;
    let dedup = string(entry, "MessageDeduplicationId")?;
    if let Some(g) = group {
        fifo_id("MessageGroupId", g)?;
    }
    let mut headers = Headers::new();
    message_attributes::to_headers(&attributes, &mut headers);
    if let Some(trace) = system.get("AWSTraceHeader")
        && let message_attributes::AttributeValue::String(s) = &trace.value
    {
        headers.insert(TRACE_HEADER.into(), s.clone());
    }
    let mut dedup_id = None;
    if target.fifo {
        // A FIFO queue is delayed as a whole (its DelaySeconds attribute): a message's own
        // delay may only be 0.
        if let Some(d) = delay.filter(|d| *d != 0) {
            return Err(SqsError::invalid(format!(
                "Value {d} for parameter DelaySeconds is invalid. Reason: The request include \
                 parameter that is not valid for this queue type."
            )));
        }
        fifo_requirements(target, entry)?;
        let group = group.unwrap_or_default();
        let id = match dedup {
            Some(d) => {
                fifo_id("MessageDeduplicationId", d)?;
                d.to_owned()
            }
            None => Sha256::digest(body.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        };
        headers.insert(DEDUP_HEADER.into(), id.clone());
        dedup_id = Some(if target.dedup_per_group {
            format!("{}:{group}{id}", group.len())
        } else {
            id
        });
    } else if let Some(d) = dedup {
        return Err(SqsError::invalid(format!(
            "Value {} for parameter MessageDeduplicationId is invalid. Reason: The request \
             includes a parameter that is not valid for this queue type.",
            d.chars().take(130).collect::<String>()
        )));
    }
    let delay = delay.map_or(target.delay, |d| d as u32);
    let message = OutgoingMessage {
        key: group.map(|g| Bytes::copy_from_slice(g.as_bytes())),
        headers,
        payload: Bytes::copy_from_slice(body.as_bytes()),
        delivery: if delay > 0 {
            DeliveryTime::After(Duration::from_secs(u64::from(delay)))
        } else {
            DeliveryTime::Now
        },
        // The queue's MessageRetentionPeriod is its spec's default TTL: the broker applies it.
        ttl: None,
        dedup_id,
        ..OutgoingMessage::default()
    };
    Ok(Prepared {
        message,
        md5_body: md5::hex_md5(body.as_bytes()),
        md5_attributes: md5::of_attributes(&attributes),
        md5_system: md5::of_attributes(&system),
    })
}

/// A FIFO message's SequenceNumber: its id's 128 bits in decimal, unique and growing with
/// the time it was sent.
pub fn sequence_number(id: MessageId) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut n: u128 = 0;
    for c in id.to_string().bytes() {
        let digit = ALPHABET.iter().position(|a| *a == c).unwrap_or(0) as u128;
        n = n.wrapping_mul(32).wrapping_add(digit);
    }
    format!("{n:020}")
}

fn sent(target: &Target, prepared: &Prepared, id: MessageId) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("MessageId".into(), id.to_string().into());
    out.insert("MD5OfMessageBody".into(), prepared.md5_body.clone().into());
    if let Some(md5) = &prepared.md5_attributes {
        out.insert("MD5OfMessageAttributes".into(), md5.clone().into());
    }
    if let Some(md5) = &prepared.md5_system {
        out.insert("MD5OfMessageSystemAttributes".into(), md5.clone().into());
    }
    if target.fifo {
        out.insert("SequenceNumber".into(), sequence_number(id).into());
    }
    out
}

pub async fn send(call: &Call<'_>) -> Result<Value, SqsError> {
    let target = Target::of(call)?;
    let prepared = prepare(&target, call.input)?;
    let id = call
        .sqs
        .broker
        .publish(&target.queue, prepared.message.clone())
        .await
        .map_err(from_broker)?;
    Ok(Value::Object(sent(&target, &prepared, id)))
}

pub async fn send_batch(call: &Call<'_>) -> Result<Value, SqsError> {
    let target = Target::of(call)?;
    let entries = batch::entries(call.input, "SendMessageBatchRequestEntry")?;
    if target.fifo {
        // What a FIFO queue requires of every message refuses the batch whole, as SQS
        // does, before any entry is sent.
        for entry in &entries {
            fifo_requirements(&target, entry)?;
        }
    }
    let total: usize = entries
        .iter()
        .map(|e| {
            e.get("MessageBody")
                .and_then(Value::as_str)
                .map_or(0, str::len)
        })
        .sum();
    if total > attributes::MAX_MESSAGE_SIZE as usize {
        return Err(SqsError::new(
            Code::BatchRequestTooLong,
            format!(
                "Batch requests cannot be longer than {} bytes. You have sent {total} bytes.",
                attributes::MAX_MESSAGE_SIZE
            ),
        ));
    }
    let mut failed = Vec::new();
    let mut ready = Vec::new();
    for entry in &entries {
        let id = entry["Id"].as_str().unwrap_or_default();
        match prepare(&target, entry) {
            Ok(p) => ready.push((id, p)),
            Err(e) => failed.push(batch::failed(id, &e)),
        }
    }
    let mut successful = Vec::new();
    if !ready.is_empty() {
        let messages = ready.iter().map(|(_, p)| p.message.clone()).collect();
        match call.sqs.broker.publish_batch(&target.queue, messages).await {
            Ok(ids) => {
                for ((entry_id, prepared), id) in ready.iter().zip(ids) {
                    let mut out = sent(&target, prepared, id);
                    out.insert("Id".into(), (*entry_id).into());
                    successful.push(Value::Object(out));
                }
            }
            // One entry's payload does not match the queue's schema subject: the broker
            // stored none of the batch, but SQS answers each entry on its own, so each is
            // sent alone (in order) and answered with its own outcome.
            Err(e) if e.kind() == ErrorKind::SchemaViolation => {
                for (entry_id, prepared) in &ready {
                    let published = call
                        .sqs
                        .broker
                        .publish(&target.queue, prepared.message.clone())
                        .await;
                    match published {
                        Ok(id) => {
                            let mut out = sent(&target, prepared, id);
                            out.insert("Id".into(), (*entry_id).into());
                            successful.push(Value::Object(out));
                        }
                        Err(e) => failed.push(batch::failed(entry_id, &from_broker(e))),
                    }
                }
            }
            Err(e) => {
                let error = from_broker(e);
                if error.code == Code::QueueDoesNotExist {
                    return Err(error);
                }
                for (entry_id, _) in &ready {
                    failed.push(batch::failed(entry_id, &error));
                }
            }
        }
    }
    Ok(batch::answer(successful, failed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_are_the_ids_bits_in_decimal() {
        let id: MessageId = "00000000000000000000000010".parse().unwrap();
        assert_eq!(sequence_number(id), "00000000000000000032");
    }
}
