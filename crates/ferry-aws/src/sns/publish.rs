//! Publish and PublishBatch: the message is written to the Ferry topic, then delivered to
//! each subscribed SQS queue whose filter policy passes it.
//!
//! **Durability and atomicity.** The broker's subscriptions are queues of their own that
//! the topic feeds; an SNS subscription delivers into a queue that already exists (the
//! SQS queue), which a broker subscription cannot be. So the front end fans out itself: a
//! publish is one durable write to the topic and then one durable publish per subscribed
//! queue, acknowledged once all are done. They are not one atomic write: a crash (or a
//! failed write) between them leaves the message in the topic and some queues but not
//! the others, and the client, having no answer, publishes again — which a FIFO queue
//! deduplicates (the SNS deduplication id is the queue's) and a standard queue receives
//! twice (SNS's at-least-once). A queue that refuses the delivery for good (deleted, too
//! small) gets it in the subscription's RedrivePolicy dead-letter queue, or not at all,
//! with a warning logged, and the publish succeeds, as SNS's does; a refusal for now (a
//! full disk) fails the publish once every queue was tried, so the client sends it again.
//!
//! **FIFO topics** deduplicate for five minutes ([`FifoState`]): a repeat is answered as
//! the first publish. The window is read back from the topic after a restart, and a
//! repeat of a message whose deliveries are not known to be done (read back, or failed
//! midway) delivers it again instead of writing it to the topic again.

use std::collections::BTreeMap;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use ferry_broker::{Headers, OutgoingMessage, Position};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::delivery::deliver_all;
use super::errors::{Code, SnsError, from_broker, from_sqs};
use super::linked::reconcile;
use super::{Call, string};
use crate::message_attributes::{self, AttributeValue, Attributes, DEDUP_HEADER};

/// The largest message SNS takes, attributes included.
pub const MAX_MESSAGE: usize = 262_144;
const MAX_BATCH: usize = 10;
const DEDUP_WINDOW_MS: i64 = 5 * 60 * 1000;
/// Headers a topic message carries for Ferry's own consumers.
const MESSAGE_ID_HEADER: &str = "aws:sns-message-id";
const SUBJECT_HEADER: &str = "aws:sns-subject";
const SEQUENCE_HEADER: &str = "aws:sns-sequence-number";
/// Set when the message is a `MessageStructure=json` one.
const STRUCTURE_HEADER: &str = "aws:sns-message-structure";

/// A checked publish.
#[derive(Clone)]
pub(super) struct Prepared {
    pub(super) topic: String,
    pub(super) fifo: bool,
    pub(super) message: String,
    /// The `sqs` entry of a `MessageStructure=json` message.
    pub(super) for_sqs: Option<String>,
    pub(super) subject: Option<String>,
    pub(super) attributes: Attributes,
    pub(super) group: Option<String>,
    pub(super) dedup: Option<String>,
}

/// What queues get of a `MessageStructure=json` message: its `sqs` entry, or `default`.
fn sqs_entry(message: &str) -> Result<String, SnsError> {
    let Ok(Value::Object(per_protocol)) = serde_json::from_str::<Value>(message) else {
        return Err(SnsError::parameter(
            "Message Structure - JSON message body failed to parse",
        ));
    };
    let Some(default) = per_protocol.get("default").and_then(Value::as_str) else {
        return Err(SnsError::parameter(
            "Message Structure - No default entry in JSON message body",
        ));
    };
    let sqs = per_protocol
        .get("sqs")
        .and_then(Value::as_str)
        .unwrap_or(default);
    Ok(sqs.to_owned())
}

fn group_or_dedup_id(what: &str, value: &str) -> Result<(), SnsError> {
    if value.is_empty() || value.len() > 128 || !value.bytes().all(|b| (33..=126).contains(&b)) {
        return Err(SnsError::parameter(format!(
            "{what} Reason: use 1 to 128 alphanumeric or punctuation characters"
        )));
    }
    Ok(())
}

fn prepare(call: &Call, topic: &str, entry: &Map<String, Value>) -> Result<Prepared, SnsError> {
    let fifo = topic.ends_with(".fifo");
    let Some(message) = string(entry, "Message")? else {
        return Err(SnsError::missing("Message"));
    };
    if message.is_empty() {
        return Err(SnsError::parameter("Empty message"));
    }
    let subject = string(entry, "Subject")?;
    if let Some(s) = subject
        && (s.is_empty() || s.chars().count() >= 100 || s.chars().any(char::is_control))
    {
        return Err(SnsError::parameter("Subject"));
    }
    let mut for_sqs = None;
    match string(entry, "MessageStructure")? {
        None => {}
        Some("json") => for_sqs = Some(sqs_entry(message)?),
        Some(other) => {
            return Err(SnsError::parameter(format!(
                "MessageStructure Reason: the only valid value is json, not {}",
                other.chars().take(50).collect::<String>()
            )));
        }
    }
    let attributes =
        message_attributes::parse(entry.get("MessageAttributes"), false).map_err(from_sqs)?;
    for (name, a) in &attributes {
        let array = match &a.value {
            AttributeValue::String(text) if a.data_type == "String.Array" => {
                serde_json::from_str::<Value>(text).ok()
            }
            _ => continue,
        };
        let scalars = |items: &Vec<Value>| items.iter().all(|v| !v.is_array() && !v.is_object());
        if !array
            .as_ref()
            .and_then(Value::as_array)
            .is_some_and(scalars)
        {
            return Err(SnsError::new(
                Code::InvalidParameterValue,
                format!(
                    "The message attribute '{name}' with type 'String.Array' must be a JSON \
                     array of strings, numbers, true, false or null."
                ),
            ));
        }
    }
    if message.len() + message_attributes::size(&attributes) > MAX_MESSAGE {
        return Err(SnsError::parameter(format!(
            "Message too long; a message and its attributes are at most {MAX_MESSAGE} bytes"
        )));
    }
    let group = string(entry, "MessageGroupId")?;
    let dedup = string(entry, "MessageDeduplicationId")?;
    if let Some(g) = group {
        group_or_dedup_id("MessageGroupId", g)?;
    }
    if let Some(d) = dedup {
        group_or_dedup_id("MessageDeduplicationId", d)?;
    }
    let dedup = if fifo {
        if group.is_none() {
            return Err(SnsError::parameter(
                "The MessageGroupId parameter is required for FIFO topics",
            ));
        }
        let content_dedup = call.sns().store.read(|s| {
            s.topics
                .get(topic)
                .and_then(|t| t.attributes.get("ContentBasedDeduplication"))
                .map(String::as_str)
                == Some("true")
        });
        match dedup {
            Some(d) => Some(d.to_owned()),
            None if content_dedup => Some(
                Sha256::digest(message.as_bytes())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
            ),
            None => {
                return Err(SnsError::parameter(
                    "The topic should either have ContentBasedDeduplication enabled or \
                     MessageDeduplicationId provided explicitly",
                ));
            }
        }
    } else {
        if dedup.is_some() {
            return Err(SnsError::parameter(
                "MessageDeduplicationId Reason: The request includes MessageDeduplicationId \
                 parameter that is not valid for this topic type",
            ));
        }
        None
    };
    Ok(Prepared {
        topic: topic.to_owned(),
        fifo,
        message: message.to_owned(),
        for_sqs,
        subject: subject.map(str::to_owned),
        attributes,
        group: group.map(str::to_owned),
        dedup,
    })
}

/// The topic a Publish names (TopicArn or TargetArn).
fn target(call: &Call, input: &Map<String, Value>) -> Result<String, SnsError> {
    if string(input, "PhoneNumber")?.is_some() {
        return Err(SnsError::parameter(
            "PhoneNumber Reason: Ferry does not deliver SMS; publish to a topic",
        ));
    }
    let arn = match (string(input, "TopicArn")?, string(input, "TargetArn")?) {
        (Some(a), _) | (None, Some(a)) => a,
        (None, None) => {
            return Err(SnsError::parameter(
                "TopicArn or TargetArn Reason: no value for required parameter",
            ));
        }
    };
    call.existing_topic(arn, "TopicArn")
}

/// What a publish answers: its message id and, on a FIFO topic, its sequence number.
struct Sent {
    message_id: String,
    sequence: Option<String>,
}

/// What a FIFO topic keeps between publishes (see `Sns::fifo`).
#[derive(Default)]
pub struct FifoState {
    /// Whether the deduplication window was read back from the topic since the start.
    loaded: bool,
    last_sequence: u128,
    /// Deduplication ids (scoped) of the last five minutes.
    seen: HashMap<String, Deduplicated>,
}

/// The first publish of a deduplication id.
struct Deduplicated {
    message_id: String,
    sequence: String,
    at_ms: i64,
    /// The message while its deliveries are not known to be done: a publish that failed
    /// midway, or one read back from the topic after a restart. A repeat delivers it
    /// again (FIFO queues deduplicate it) instead of writing it to the topic again.
    pending: Option<Arc<Prepared>>,
}

impl FifoState {
    /// Reads the last five minutes of the topic back: its deduplication ids, as pending,
    /// and its last sequence number. So a repeat after a restart is still a repeat.
    fn load(&mut self, call: &Call, topic: &str, now: i64) -> Result<(), SnsError> {
        let broker = &call.inner.broker;
        let per_group = per_group_dedup(call, topic);
        let info = broker.describe_topic(topic).map_err(from_broker)?;
        for partition in info.partitions {
            let mut from = Position::Timestamp(now - DEDUP_WINDOW_MS);
            loop {
                let records = broker
                    .read_topic(topic, partition.partition, from, 500)
                    .map_err(from_broker)?;
                let Some(last) = records.last() else { break };
                from = Position::Offset(last.offset + 1);
                for record in &records {
                    let m = &record.message;
                    let header = |name: &str| m.headers.get(name).cloned();
                    let (Some(dedup), Some(message_id), Some(sequence)) = (
                        m.dedup_id.clone(),
                        header(MESSAGE_ID_HEADER),
                        header(SEQUENCE_HEADER),
                    ) else {
                        continue;
                    };
                    let group = m
                        .key
                        .as_ref()
                        .map(|k| String::from_utf8_lossy(k).into_owned());
                    if let Ok(n) = sequence.parse::<u128>() {
                        self.last_sequence = self.last_sequence.max(n);
                    }
                    let prepared = prepared_of_message(topic, m);
                    self.seen.insert(
                        dedup_key(per_group, group.as_deref(), &dedup),
                        Deduplicated {
                            message_id,
                            sequence,
                            at_ms: m.published_at,
                            pending: prepared.map(Arc::new),
                        },
                    );
                }
            }
        }
        self.loaded = true;
        Ok(())
    }
}

fn per_group_dedup(call: &Call, topic: &str) -> bool {
    call.sns().store.read(|s| {
        s.topics
            .get(topic)
            .and_then(|t| t.attributes.get("FifoThroughputScope"))
            .map(String::as_str)
            == Some("MessageGroup")
    })
}

/// A deduplication id in its scope: the topic's, or its group's.
fn dedup_key(per_group: bool, group: Option<&str>, dedup: &str) -> String {
    let scope = if per_group { group.unwrap_or("") } else { "" };
    format!("{}:{scope}{dedup}", scope.len())
}

/// A message as the topic keeps it, ready to be delivered again or rendered; `None` for
/// one the SNS front end did not write.
pub(super) fn prepared_of_message(topic: &str, m: &ferry_broker::Message) -> Option<Prepared> {
    prepared_from(
        topic,
        &m.headers,
        &m.payload,
        m.key.as_ref(),
        m.dedup_id.clone(),
    )
}

/// [`prepared_of_message`] from the parts of a message.
pub(super) fn prepared_from(
    topic: &str,
    headers: &Headers,
    payload: &[u8],
    key: Option<&Bytes>,
    dedup: Option<String>,
) -> Option<Prepared> {
    headers.get(MESSAGE_ID_HEADER)?;
    let message = String::from_utf8(payload.to_vec()).ok()?;
    let for_sqs = match headers.get(STRUCTURE_HEADER).map(String::as_str) {
        Some("json") => Some(sqs_entry(&message).ok()?),
        _ => None,
    };
    Some(Prepared {
        topic: topic.to_owned(),
        fifo: topic.ends_with(".fifo"),
        for_sqs,
        subject: headers.get(SUBJECT_HEADER).cloned(),
        // Not the broker's own headers (a referenced message's `ferry-link*`).
        attributes: message_attributes::from_headers(headers)
            .into_iter()
            .filter(|(name, _)| !ferry_broker::header::is_reserved(name))
            .collect(),
        group: key.map(|k| String::from_utf8_lossy(k).into_owned()),
        dedup,
        message,
    })
}

/// The SNS MessageId and SequenceNumber a topic message was published with.
pub(super) fn sns_ids(headers: &Headers) -> (Option<&str>, Option<&str>) {
    (
        headers.get(MESSAGE_ID_HEADER).map(String::as_str),
        headers.get(SEQUENCE_HEADER).map(String::as_str),
    )
}

async fn send(call: &Call<'_>, p: &Prepared) -> Result<Sent, SnsError> {
    let sns = call.sns();
    let state = p.fifo.then(|| sns.fifo_state(&p.topic));
    let mut state = match &state {
        Some(lock) => Some(lock.lock().await),
        None => None,
    };
    let now = call.now_ms();
    let key = p
        .dedup
        .as_ref()
        .map(|d| dedup_key(per_group_dedup(call, &p.topic), p.group.as_deref(), d));
    // A FIFO topic's repeat within five minutes is answered as the first publish and not
    // written again; delivered again only if the first's deliveries are not known done.
    if let (Some(state), Some(key)) = (state.as_mut(), &key) {
        if !state.loaded {
            state.load(call, &p.topic, now)?;
        }
        state.seen.retain(|_, d| d.at_ms + DEDUP_WINDOW_MS > now);
        if let Some(first) = state.seen.get_mut(key) {
            if let Some(pending) = first.pending.clone() {
                let sequence = Some(first.sequence.as_str());
                let linked = reconcile(call, &p.topic).await?;
                deliver_all(
                    call,
                    &pending,
                    &first.message_id,
                    sequence,
                    first.at_ms,
                    &linked,
                )
                .await?;
                first.pending = None;
            }
            return Ok(Sent {
                message_id: first.message_id.clone(),
                sequence: Some(first.sequence.clone()),
            });
        }
    }
    let message_id = sns.mint_uuid(&p.message);
    // Growing per topic: the time in ms with six digits for the publishes within one.
    let sequence = state.as_mut().map(|state| {
        let next = (state.last_sequence + 1).max((now.max(0) as u128) * 1_000_000);
        state.last_sequence = next;
        format!("{next:020}")
    });
    // The topic's copy, for Ferry's own subscriptions (and for reading the deduplication
    // window back after a restart).
    let mut headers = Headers::new();
    message_attributes::to_headers(&p.attributes, &mut headers);
    headers.insert(MESSAGE_ID_HEADER.into(), message_id.clone());
    if let Some(s) = &p.subject {
        headers.insert(SUBJECT_HEADER.into(), s.clone());
    }
    if let Some(d) = &p.dedup {
        headers.insert(DEDUP_HEADER.into(), d.clone());
    }
    if let Some(seq) = &sequence {
        headers.insert(SEQUENCE_HEADER.into(), seq.clone());
    }
    if p.for_sqs.is_some() {
        headers.insert(STRUCTURE_HEADER.into(), "json".into());
    }
    let record = OutgoingMessage {
        key: p
            .group
            .as_ref()
            .map(|g| Bytes::copy_from_slice(g.as_bytes())),
        headers,
        payload: Bytes::copy_from_slice(p.message.as_bytes()),
        dedup_id: p.dedup.clone(),
        ..OutgoingMessage::default()
    };
    // Links first: what the topic holds once this write is durable reaches every linked
    // queue, by the feed or, after a crash, by the broker's catch-up.
    let linked = reconcile(call, &p.topic).await?;
    call.inner
        .broker
        .publish_to_topic(&p.topic, vec![record])
        .await
        .map_err(from_broker)?;
    let pending = Arc::new(p.clone());
    if let (Some(state), Some(key)) = (state.as_mut(), &key) {
        state.seen.insert(
            key.clone(),
            Deduplicated {
                message_id: message_id.clone(),
                sequence: sequence.clone().unwrap_or_default(),
                at_ms: now,
                pending: Some(Arc::clone(&pending)),
            },
        );
    }
    deliver_all(
        call,
        &pending,
        &message_id,
        sequence.as_deref(),
        now,
        &linked,
    )
    .await?;
    if let (Some(state), Some(key)) = (state.as_mut(), &key)
        && let Some(first) = state.seen.get_mut(key)
    {
        first.pending = None;
    }
    Ok(Sent {
        message_id,
        sequence,
    })
}

pub async fn publish(call: &Call<'_>) -> Result<Value, SnsError> {
    let topic = target(call, call.input)?;
    let prepared = prepare(call, &topic, call.input)?;
    let sent = send(call, &prepared).await?;
    let mut out = Map::new();
    out.insert("MessageId".into(), sent.message_id.into());
    if let Some(seq) = sent.sequence {
        out.insert("SequenceNumber".into(), seq.into());
    }
    Ok(Value::Object(out))
}

fn valid_entry_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 80
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

pub async fn publish_batch(call: &Call<'_>) -> Result<Value, SnsError> {
    let arn = super::required(call.input, "TopicArn")?;
    let topic = call.existing_topic(arn, "TopicArn")?;
    let entries: Vec<&Map<String, Value>> = match call.input.get("PublishBatchRequestEntries") {
        // The query protocol sends an empty list as an empty value.
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if s.is_empty() => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_object()
                    .ok_or_else(|| SnsError::parameter("PublishBatchRequestEntries"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(SnsError::parameter(
                "PublishBatchRequestEntries must be a list",
            ));
        }
    };
    if entries.is_empty() {
        return Err(SnsError::new(
            Code::EmptyBatchRequest,
            "The batch request doesn't contain any entries",
        ));
    }
    if entries.len() > MAX_BATCH {
        return Err(SnsError::new(
            Code::TooManyEntriesInBatchRequest,
            "The batch request contains more entries than permissible",
        ));
    }
    let mut ids = HashSet::new();
    let mut total = 0;
    for entry in &entries {
        let id = entry.get("Id").and_then(Value::as_str).unwrap_or("");
        if !valid_entry_id(id) {
            return Err(SnsError::new(
                Code::InvalidBatchEntryId,
                "The Id of a batch entry in a batch request doesn't abide by the specification",
            ));
        }
        if !ids.insert(id) {
            return Err(SnsError::new(
                Code::BatchEntryIdsNotDistinct,
                "Two or more batch entries in the request have the same Id",
            ));
        }
        total += entry
            .get("Message")
            .and_then(Value::as_str)
            .map_or(0, str::len);
    }
    if total > MAX_MESSAGE {
        return Err(SnsError::new(
            Code::BatchRequestTooLong,
            format!(
                "The length of all the messages put together is more than the limit ({MAX_MESSAGE} bytes)"
            ),
        ));
    }
    let mut successful = Vec::new();
    let mut failed = Vec::new();
    for entry in entries {
        let id = entry
            .get("Id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let outcome = match prepare(call, &topic, entry) {
            Ok(prepared) => send(call, &prepared).await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(sent) => {
                let mut out = BTreeMap::new();
                out.insert("Id", Value::from(id));
                out.insert("MessageId", sent.message_id.into());
                if let Some(seq) = sent.sequence {
                    out.insert("SequenceNumber", seq.into());
                }
                successful.push(json!(out));
            }
            Err(e) => failed.push(json!({
                "Id": id,
                "Code": e.code.query_code(),
                "Message": e.message,
                "SenderFault": e.code.fault() == "Sender",
            })),
        }
    }
    Ok(json!({ "Successful": successful, "Failed": failed }))
}
