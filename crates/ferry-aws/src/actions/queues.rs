//! Queue administration: CreateQueue, DeleteQueue, GetQueueUrl, ListQueues,
//! Get/SetQueueAttributes, PurgeQueue, ListDeadLetterSourceQueues.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ferry_broker::QueueInfo;
use serde_json::{Value, json};

use super::{Call, integer_in, required_string, store_failed, string, string_list, string_map};
use crate::attributes;
use crate::errors::{Code, SqsError, from_broker};
use crate::store::QueueRecord;

/// SQS allows one purge of a queue per minute.
const PURGE_INTERVAL_MS: i64 = 60_000;

/// Whether `name` is a valid SQS queue name: 1 to 80 of `A-Za-z0-9_-`, a FIFO queue's
/// ending in `.fifo` (counted in the 80).
fn valid_queue_name(name: &str) -> bool {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    !base.is_empty()
        && name.len() <= 80
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn describe(call: &Call, queue: &str) -> Result<QueueInfo, SqsError> {
    call.sqs.broker.describe_queue(queue).map_err(from_broker)
}

fn seconds(call: &Call) -> i64 {
    call.now_ms() / 1000
}

/// Checks that a RedrivePolicy's target exists, is of the same kind (FIFO or standard)
/// as `queue`, and lets `queue` dead-letter into it (its RedriveAllowPolicy).
fn check_redrive_target(call: &Call, queue: &str, policy: &str) -> Result<(), SqsError> {
    let location = &call.sqs.location;
    let Some(redrive) = attributes::parse_redrive(policy, location)? else {
        return Ok(());
    };
    let bad = |why: &str| {
        SqsError::invalid(format!(
            "Value {policy} for parameter RedrivePolicy is invalid. Reason: {why}"
        ))
    };
    if redrive.target == queue {
        return Err(bad("A queue cannot be its own dead-letter queue."));
    }
    if call.sqs.broker.describe_queue(&redrive.target).is_err() {
        return Err(bad("Dead letter target does not exist."));
    }
    if redrive.target.ends_with(".fifo") != queue.ends_with(".fifo") {
        return Err(bad(
            "The dead-letter queue of a FIFO queue must be a FIFO queue, and of a standard \
             queue a standard queue.",
        ));
    }
    let allow = call
        .sqs
        .store
        .get(&redrive.target)
        .and_then(|r| r.attributes.get("RedriveAllowPolicy").cloned());
    if let Some(allow) = allow {
        let (permission, sources) = attributes::parse_allow(&allow)?;
        let arn = location.arn(queue);
        let allowed = match permission.as_str() {
            "denyAll" => false,
            "byQueue" => sources.contains(&arn),
            _ => true,
        };
        if !allowed {
            return Err(bad(
                "The dead-letter queue's RedriveAllowPolicy does not allow this queue.",
            ));
        }
    }
    Ok(())
}

pub async fn create(call: &Call<'_>) -> Result<Value, SqsError> {
    let name = required_string(call.input, "QueueName")?;
    if !valid_queue_name(name) {
        return Err(SqsError::invalid(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in \
             length",
        ));
    }
    let fifo = name.ends_with(".fifo");
    let location = &call.sqs.location;
    let mut requested = string_map(call.input, "Attributes")?;
    // Asking for a FIFO queue under a standard queue's name is a bad name, as SQS says.
    if !fifo
        && requested
            .get("FifoQueue")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        return Err(SqsError::invalid(
            "The name of a FIFO queue can only include alphanumeric characters, hyphens, or \
             underscores, must end with .fifo suffix and be 1 to 80 in length.",
        ));
    }
    if fifo {
        requested.entry("FifoQueue".into()).or_insert("true".into());
    }
    let attributes = attributes::normalize(&requested, fifo, location)?;
    let mut tags = string_map(call.input, "tags")?;
    tags.extend(string_map(call.input, "Tags")?);
    super::tags::check(name, &tags)?;
    if let Ok(existing) = call.sqs.broker.describe_queue(name) {
        let record = call.sqs.store.get(name);
        let current = attributes::effective(&existing, record.as_ref(), location);
        for (key, value) in &attributes {
            let have = current.get(key).map_or("", String::as_str);
            if have != value {
                return Err(SqsError::new(
                    Code::QueueNameExists,
                    format!(
                        "A queue already exists with the same name and a different value for \
                         attribute {key}"
                    ),
                ));
            }
        }
        return Ok(json!({ "QueueUrl": call.url(name) }));
    }
    if let Some(policy) = attributes.get("RedrivePolicy") {
        check_redrive_target(call, name, policy)?;
    }
    let spec = attributes::spec_for(&attributes, fifo, location);
    let now = seconds(call);
    let previous = call.sqs.store.get(name);
    let record = QueueRecord {
        attributes,
        tags,
        created: now,
        last_modified: now,
        ..QueueRecord::default()
    };
    // The record first: see the crash window in `store.rs`.
    call.sqs
        .store
        .set(name, Some(record))
        .map_err(store_failed)?;
    if let Err(e) = call.sqs.broker.create_queue(name, spec).await {
        let _ = call.sqs.store.set(name, previous);
        return Err(from_broker(e));
    }
    Ok(json!({ "QueueUrl": call.url(name) }))
}

pub async fn delete(call: &Call<'_>) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    call.sqs
        .broker
        .delete_queue(&queue)
        .await
        .map_err(from_broker)?;
    // A record left by a failure here is dropped at the next start.
    if let Err(e) = call.sqs.store.set(&queue, None) {
        tracing::warn!(error = %e, "forgetting a deleted queue's SQS attributes failed");
    }
    Ok(json!({}))
}

pub fn get_url(call: &Call) -> Result<Value, SqsError> {
    let name = required_string(call.input, "QueueName")?;
    if let Some(owner) = string(call.input, "QueueOwnerAWSAccountId")?
        && owner != call.sqs.location.account_id
    {
        return Err(SqsError::no_queue());
    }
    ferry_broker::Name::new(name).map_err(|_| SqsError::no_queue())?;
    describe(call, name)?;
    Ok(json!({ "QueueUrl": call.url(name) }))
}

/// One page of `names`: after the NextToken's name, at most MaxResults of them.
fn page(
    call: &Call,
    names: Vec<String>,
    default_max: usize,
) -> Result<(Vec<String>, Option<String>), SqsError> {
    let max = integer_in(call.input, "MaxResults", 1..=1000)?;
    let after = match string(call.input, "NextToken")? {
        None => None,
        Some(token) => Some(
            URL_SAFE_NO_PAD
                .decode(token)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| SqsError::invalid("Invalid NextToken value."))?,
        ),
    };
    let mut names: Vec<String> = names
        .into_iter()
        .filter(|n| after.as_ref().is_none_or(|a| n > a))
        .collect();
    let limit = max.map_or(default_max, |m| m as usize);
    let more = names.len() > limit;
    names.truncate(limit);
    let token = (more && max.is_some())
        .then(|| names.last().map(|n| URL_SAFE_NO_PAD.encode(n)))
        .flatten();
    Ok((names, token))
}

pub fn list(call: &Call) -> Result<Value, SqsError> {
    let prefix = string(call.input, "QueueNamePrefix")?.unwrap_or("");
    let names: Vec<String> = call
        .sqs
        .broker
        .list_queues()
        .into_iter()
        .map(|n| n.to_string())
        .filter(|n| n.starts_with(prefix) && call.caller.may_see(n))
        .collect();
    let (names, token) = page(call, names, 1000)?;
    let mut out = serde_json::Map::new();
    if !names.is_empty() {
        let urls: Vec<Value> = names.iter().map(|n| call.url(n).into()).collect();
        out.insert("QueueUrls".into(), Value::Array(urls));
    }
    if let Some(token) = token {
        out.insert("NextToken".into(), token.into());
    }
    Ok(Value::Object(out))
}

pub fn get_attributes(call: &Call) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    let names = string_list(call.input, "AttributeNames")?;
    for name in &names {
        if !attributes::ALL.contains(&name.as_str()) && name != "All" {
            return Err(SqsError::new(
                Code::InvalidAttributeName,
                format!(
                    "Unknown Attribute {}.",
                    name.chars().take(100).collect::<String>()
                ),
            ));
        }
    }
    let info = describe(call, &queue)?;
    let record = call.sqs.store.get(&queue);
    let all = attributes::effective(&info, record.as_ref(), &call.sqs.location);
    let wanted: BTreeMap<String, Value> = all
        .into_iter()
        .filter(|(k, _)| names.iter().any(|n| n == "All" || n == k))
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    if wanted.is_empty() {
        return Ok(json!({}));
    }
    Ok(json!({ "Attributes": wanted }))
}

/// Sets attributes: what the broker's spec holds (`attributes::SPEC_HELD`) through the
/// broker, so every consumer of the queue sees it, and every attribute in the front end's
/// record. The record first and the broker second, the record put back if the broker
/// refuses (a dead-letter cycle, say): a refused request changes nothing.
pub async fn set_attributes(call: &Call<'_>) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    let requested = string_map(call.input, "Attributes")?;
    describe(call, &queue)?;
    let fifo = queue.ends_with(".fifo");
    let location = &call.sqs.location;
    let normalized = attributes::normalize(&requested, fifo, location)?;
    if let Some(policy) = normalized.get("RedrivePolicy") {
        check_redrive_target(call, &queue, policy)?;
    }
    let now = seconds(call);
    let previous = call.sqs.store.get(&queue);
    call.sqs
        .store
        .update(&queue, |record| {
            if record.created == 0 {
                record.created = now;
            }
            record.last_modified = now;
            record.attributes.extend(normalized.clone());
        })
        .map_err(store_failed)?;
    let changes_spec = attributes::SPEC_HELD
        .iter()
        .any(|name| normalized.contains_key(*name));
    if changes_spec
        && let Err(e) = call
            .sqs
            .broker
            .update_queue(&queue, |spec| {
                attributes::apply_to_spec(&normalized, spec, location)
            })
            .await
    {
        let _ = call.sqs.store.set(&queue, previous);
        return Err(from_broker(e));
    }
    Ok(json!({}))
}

/// Deletes every message of the queue through the broker: ready, delayed and in flight
/// (whose receipt handles then delete nothing and change no visibility). SQS allows one
/// purge a minute per queue; the time of the last is in the record.
pub async fn purge(call: &Call<'_>) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    describe(call, &queue)?;
    let now_ms = call.now_ms();
    let refused = call
        .sqs
        .store
        .update(&queue, |record| {
            if record
                .purged_at_ms
                .is_some_and(|at| now_ms - at < PURGE_INTERVAL_MS)
            {
                return true;
            }
            record.purged_at_ms = Some(now_ms);
            false
        })
        .map_err(store_failed)?;
    if refused {
        return Err(SqsError::new(
            Code::PurgeQueueInProgress,
            format!("Only one PurgeQueue operation on {queue} is allowed every 60 seconds."),
        ));
    }
    call.sqs
        .broker
        .purge_queue(&queue)
        .await
        .map_err(from_broker)?;
    Ok(json!({}))
}

pub fn dead_letter_sources(call: &Call) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    describe(call, &queue)?;
    let broker = &call.sqs.broker;
    let mut sources = Vec::new();
    for name in broker.list_queues() {
        let Ok(info) = broker.describe_queue(name.as_str()) else {
            continue;
        };
        if info
            .spec
            .dead_letter_target(&name)
            .ok()
            .flatten()
            .as_ref()
            .map(|t| t.as_str())
            == Some(queue.as_str())
            && name.as_str() != queue
            && call.caller.may_see(name.as_str())
        {
            sources.push(name.to_string());
        }
    }
    let (names, token) = page(call, sources, 1000)?;
    let urls: Vec<Value> = names.iter().map(|n| call.url(n).into()).collect();
    let mut out = json!({ "queueUrls": urls });
    if let Some(token) = token {
        out["NextToken"] = token.into();
    }
    Ok(out)
}
