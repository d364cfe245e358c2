//! Queue tags: TagQueue, UntagQueue, ListQueueTags. Tags are the front end's own
//! (`store.rs`); the broker has none.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Call, store_failed, string_list, string_map};
use crate::errors::{SqsError, from_broker};

/// The most tags a queue may have.
const MAX_TAGS: usize = 50;

const BAD_KEYS: &str = "Tag keys must be between 1 and 128 characters in length.";

fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.chars().count() <= 128
}

/// Checks `queue`'s tags against SQS's limits.
pub fn check(queue: &str, tags: &BTreeMap<String, String>) -> Result<(), SqsError> {
    if tags.len() > MAX_TAGS {
        return Err(SqsError::invalid(format!(
            "Too many tags added for queue {queue}."
        )));
    }
    for (key, value) in tags {
        if !valid_key(key) {
            return Err(SqsError::invalid(BAD_KEYS));
        }
        if value.chars().count() > 256 {
            return Err(SqsError::invalid(
                "Tag values may be up to 256 characters in length.",
            ));
        }
    }
    Ok(())
}

pub fn tag(call: &Call) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    let tags = string_map(call.input, "Tags")?;
    if tags.is_empty() {
        return Err(SqsError::missing("Tags"));
    }
    check(&queue, &tags)?;
    call.sqs
        .broker
        .describe_queue(&queue)
        .map_err(from_broker)?;
    let mut all = call.sqs.store.get(&queue).unwrap_or_default().tags;
    all.extend(tags.clone());
    check(&queue, &all)?;
    call.sqs
        .store
        .update(&queue, |r| r.tags.extend(tags))
        .map_err(store_failed)?;
    Ok(json!({}))
}

pub fn untag(call: &Call) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    let keys = string_list(call.input, "TagKeys")?;
    if keys.is_empty() || !keys.iter().all(|k| valid_key(k)) {
        return Err(SqsError::invalid(BAD_KEYS));
    }
    call.sqs
        .broker
        .describe_queue(&queue)
        .map_err(from_broker)?;
    call.sqs
        .store
        .update(&queue, |r| {
            for key in &keys {
                r.tags.remove(key);
            }
        })
        .map_err(store_failed)?;
    Ok(json!({}))
}

pub fn list(call: &Call) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    call.sqs
        .broker
        .describe_queue(&queue)
        .map_err(from_broker)?;
    let tags = call.sqs.store.get(&queue).unwrap_or_default().tags;
    if tags.is_empty() {
        return Ok(json!({}));
    }
    Ok(json!({ "Tags": tags }))
}
