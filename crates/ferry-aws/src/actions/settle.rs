//! DeleteMessage and ChangeMessageVisibility (and their batches): settling a delivery
//! through the broker's ack, extend and nack, addressed by receipt handle.
//!
//! As SQS documents, deleting with a receipt handle of an earlier receive succeeds and
//! may delete nothing: a stale lease is answered with success. Changing the visibility
//! of a message not in flight under that handle is `MessageNotInflight`.

use std::time::Duration;

use ferry_broker::{ErrorKind, LeaseToken};
use serde_json::{Map, Value, json};

use super::{Call, batch, integer_in, required_string};
use crate::attributes::MAX_VISIBILITY;
use crate::errors::{SqsError, from_broker};
use crate::receipt::Receipt;

/// The receipt `handle` stands for, if it is a handle of `queue`'s. A handle that is not
/// is `ReceiptHandleIsInvalid` — unless the queue is missing: then `QueueDoesNotExist`
/// whatever handle came with it, as in SQS. The queue is looked up only then, off the
/// path of every good handle (whose ack or extend finds a missing queue itself).
fn receipt(call: &Call, queue: &str, handle: &str) -> Result<Receipt, SqsError> {
    match call.sqs.receipts.decode(handle) {
        Some(r) if r.queue == queue => Ok(r),
        _ => {
            call.sqs.broker.describe_queue(queue).map_err(from_broker)?;
            Err(SqsError::bad_receipt(handle))
        }
    }
}

/// The queue of a batch, looked up once before its entries are read: a missing queue
/// refuses the batch whole.
fn existing_queue(call: &Call) -> Result<String, SqsError> {
    let queue = call.queue()?;
    call.sqs
        .broker
        .describe_queue(&queue)
        .map_err(from_broker)?;
    Ok(queue)
}

pub async fn delete(call: &Call<'_>) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    let handle = required_string(call.input, "ReceiptHandle")?;
    let r = receipt(call, &queue, handle)?;
    match call
        .sqs
        .broker
        .ack(&queue, r.seq, LeaseToken(r.token))
        .await
    {
        Ok(_) => Ok(json!({})),
        Err(e) if e.kind() == ErrorKind::StaleLease => Ok(json!({})),
        Err(e) => Err(from_broker(e)),
    }
}

pub async fn delete_batch(call: &Call<'_>) -> Result<Value, SqsError> {
    let queue = existing_queue(call)?;
    let entries = batch::entries(call.input, "DeleteMessageBatchRequestEntry")?;
    let mut failed = Vec::new();
    let mut acks = Vec::new();
    for entry in &entries {
        let id = entry["Id"].as_str().unwrap_or_default();
        let decoded =
            required_string(entry, "ReceiptHandle").and_then(|h| receipt(call, &queue, h));
        match decoded {
            Ok(r) => acks.push((id, r)),
            Err(e) => failed.push(batch::failed(id, &e)),
        }
    }
    let mut successful = Vec::new();
    if !acks.is_empty() {
        let pairs: Vec<(u64, LeaseToken)> = acks
            .iter()
            .map(|(_, r)| (r.seq, LeaseToken(r.token)))
            .collect();
        let outcomes = call
            .sqs
            .broker
            .ack_batch(&queue, &pairs)
            .await
            .map_err(from_broker)?;
        for ((id, _), outcome) in acks.iter().zip(outcomes) {
            match outcome {
                Ok(_) => successful.push(json!({ "Id": id })),
                Err(e) if e.kind() == ErrorKind::StaleLease => successful.push(json!({ "Id": id })),
                Err(e) => failed.push(batch::failed(id, &from_broker(e))),
            }
        }
    }
    Ok(batch::answer(successful, failed))
}

async fn change_one(
    call: &Call<'_>,
    queue: &str,
    entry: &Map<String, Value>,
) -> Result<(), SqsError> {
    let handle = required_string(entry, "ReceiptHandle")?;
    let timeout = integer_in(entry, "VisibilityTimeout", 0..=i64::from(MAX_VISIBILITY))?
        .ok_or_else(|| SqsError::missing("VisibilityTimeout"))?;
    let r = receipt(call, queue, handle)?;
    let broker = &call.sqs.broker;
    let token = LeaseToken(r.token);
    if timeout == 0 {
        broker
            .nack(
                queue,
                r.seq,
                token,
                Some(Duration::ZERO),
                Some("visibility timeout set to 0"),
            )
            .await
            .map(|_| ())
    } else {
        broker
            .extend(queue, r.seq, token, Duration::from_secs(timeout as u64))
            .await
            .map(|_| ())
    }
    .map_err(from_broker)
}

pub async fn change_visibility(call: &Call<'_>) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    change_one(call, &queue, call.input).await?;
    Ok(json!({}))
}

pub async fn change_visibility_batch(call: &Call<'_>) -> Result<Value, SqsError> {
    let queue = existing_queue(call)?;
    let entries = batch::entries(call.input, "ChangeMessageVisibilityBatchRequestEntry")?;
    let mut successful = Vec::new();
    let mut failed = Vec::new();
    for entry in entries {
        let id = entry["Id"].as_str().unwrap_or_default();
        match change_one(call, &queue, entry).await {
            Ok(()) => successful.push(json!({ "Id": id })),
            Err(e) => failed.push(batch::failed(id, &e)),
        }
    }
    Ok(batch::answer(successful, failed))
}
