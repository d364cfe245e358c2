//! Message-move tasks: StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask —
//! moving a dead-letter queue's messages back where they came from, or into another queue,
//! in the background, on the broker's redrive.
//!
//! **A task** moves at most as many messages as its source held when it started (not
//! counting those in flight: `ApproximateNumberOfMessagesToMove`) — so a task whose
//! messages fail back into the source still ends — oldest first, in batches of
//! `Broker::redrive`: with `MaxNumberOfMessagesPerSecond` a batch is a second's worth,
//! paced by the broker and topped up here to a second; without it, batches of
//! [`UNRATED_BATCH`] one after another. Without `DestinationArn` each message goes back to
//! the queue its dead-letter metadata names; a message with none (sent to the dead-letter
//! queue directly, or whose origin was deleted) stays. The task is `COMPLETED` once a batch
//! moves less than it asked for or all it had to move is moved, `FAILED` on the first
//! broker error (its code the `FailureReason`, as SQS gives it), `CANCELLED` once a cancel
//! is seen between batches (`CANCELLING` until then).
//!
//! **Records** are the source queue's (`store.rs`), written at each batch: List reads them,
//! Cancel marks one `CANCELLING` there for the runner to see. One active task per source.
//! When the endpoint stops, a runner stops at its next batch, leaving the task active in
//! its record; [`resume`] runs it again when the endpoint next serves (see `store.rs`).
//!
//! **Task handles** are base64 of `{"taskId":…,"sourceArn":…}`, the shape SQS's have, so
//! a handle names its source queue.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ferry_broker::{Broker, RedriveRequest};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::{Call, integer_in, required_string, store_failed, string};
use crate::errors::{Code, SqsError, from_broker};
use crate::store::{MAX_MOVE_TASKS, MoveTask, MoveTaskStatus, Store};

/// Messages a batch moves when the task has no rate.
const UNRATED_BATCH: usize = 100;

/// SQS's bounds on MaxNumberOfMessagesPerSecond.
const RATE: std::ops::RangeInclusive<i64> = 1..=500;

pub async fn start(call: &Call<'_>) -> Result<Value, SqsError> {
    let source_arn = required_string(call.input, "SourceArn")?;
    let source = existing_queue(call, source_arn, "SourceArn")?;
    if !is_dead_letter_target(&call.sqs.broker, &source) {
        return Err(SqsError::invalid(
            "Source queue must be configured as a Dead Letter Queue.",
        ));
    }
    let destination = string(call.input, "DestinationArn")?
        .map(|arn| existing_queue(call, arn, "DestinationArn"))
        .transpose()?;
    if destination.as_deref() == Some(source.as_str()) {
        return Err(SqsError::invalid(
            "Value for parameter DestinationArn is invalid. Reason: the destination must be \
             another queue than the source.",
        ));
    }
    let rate = integer_in(call.input, "MaxNumberOfMessagesPerSecond", RATE)?.map(|r| r as u32);
    let state = call
        .sqs
        .broker
        .describe_queue(&source)
        .map_err(from_broker)?
        .stats
        .state;
    let task = MoveTask {
        id: new_task_id()?,
        status: MoveTaskStatus::Running,
        destination,
        rate,
        moved: 0,
        to_move: state.tracked.saturating_sub(state.in_flight) as u64,
        failure: None,
        started_ms: call.now_ms(),
    };
    let accepted = call
        .sqs
        .store
        .update(&source, |record| {
            if record.move_tasks.iter().any(|t| t.status.is_active()) {
                return false;
            }
            record.move_tasks.push(task.clone());
            let excess = record.move_tasks.len().saturating_sub(MAX_MOVE_TASKS);
            record.move_tasks.drain(..excess);
            true
        })
        .map_err(store_failed)?;
    if !accepted {
        return Err(SqsError::invalid(
            "There is already a task running. Only one active task is allowed for a source \
             queue arn at a given time.",
        ));
    }
    let handle = encode_handle(&task.id, source_arn);
    let runner = Runner {
        broker: call.sqs.broker.clone(),
        store: call.sqs.store.clone(),
        stop: call.sqs.stop.subscribe(),
        source,
        task,
    };
    tokio::spawn(runner.run());
    Ok(json!({ "TaskHandle": handle }))
}

/// Runs again the tasks a stop of the endpoint left active (`Sqs::serve` calls it): each
/// goes on from the count its record saved, and a `CANCELLING` one ends `CANCELLED`.
pub(crate) fn resume(inner: &crate::Inner) {
    for (source, task) in inner.store.active_move_tasks() {
        tracing::info!(queue = %source, task = %task.id, moved = task.moved,
            "resuming a message-move task the endpoint's stop left running");
        let runner = Runner {
            broker: inner.broker.clone(),
            store: inner.store.clone(),
            stop: inner.stop.subscribe(),
            source,
            task,
        };
        tokio::spawn(runner.run());
    }
}

pub fn list(call: &Call) -> Result<Value, SqsError> {
    let source_arn = required_string(call.input, "SourceArn")?;
    let source = existing_queue(call, source_arn, "SourceArn")?;
    let max = integer_in(call.input, "MaxResults", 1..=10)?.unwrap_or(1) as usize;
    let tasks = call
        .sqs
        .store
        .get(&source)
        .map(|r| r.move_tasks)
        .unwrap_or_default();
    let location = &call.sqs.location;
    let results: Vec<Value> = tasks
        .iter()
        .rev()
        .take(max)
        .map(|task| {
            let mut entry = Map::new();
            if task.status == MoveTaskStatus::Running {
                entry.insert(
                    "TaskHandle".into(),
                    encode_handle(&task.id, source_arn).into(),
                );
            }
            entry.insert("Status".into(), task.status.as_str().into());
            entry.insert("SourceArn".into(), location.arn(&source).into());
            if let Some(destination) = &task.destination {
                entry.insert("DestinationArn".into(), location.arn(destination).into());
            }
            if let Some(rate) = task.rate {
                entry.insert("MaxNumberOfMessagesPerSecond".into(), rate.into());
            }
            entry.insert("ApproximateNumberOfMessagesMoved".into(), task.moved.into());
            entry.insert(
                "ApproximateNumberOfMessagesToMove".into(),
                task.to_move.into(),
            );
            if let Some(failure) = &task.failure {
                entry.insert("FailureReason".into(), failure.as_str().into());
            }
            entry.insert("StartedTimestamp".into(), task.started_ms.into());
            Value::Object(entry)
        })
        .collect();
    Ok(json!({ "Results": results }))
}

pub fn cancel(call: &Call) -> Result<Value, SqsError> {
    let handle = required_string(call.input, "TaskHandle")?;
    let (id, source_arn) = decode_handle(handle)
        .ok_or_else(|| SqsError::invalid("Value for parameter TaskHandle is invalid."))?;
    let source = existing_queue(call, &source_arn, "SourceArn")?;
    let outcome = call
        .sqs
        .store
        .update_existing(&source, |record| {
            let task = record.move_tasks.iter_mut().find(|t| t.id == id)?;
            if task.status == MoveTaskStatus::Running {
                task.status = MoveTaskStatus::Cancelling;
            }
            Some((task.status, task.moved))
        })
        .map_err(store_failed)?
        .flatten();
    match outcome {
        None => Err(SqsError::new(
            Code::ResourceNotFoundException,
            "Task does not exist.",
        )),
        Some((MoveTaskStatus::Cancelling, moved)) => {
            Ok(json!({ "ApproximateNumberOfMessagesMoved": moved }))
        }
        Some((status, _)) => Err(SqsError::new(
            Code::ResourceNotFoundException,
            format!(
                "Task does not exist: only a RUNNING task can be cancelled, and this one is {}.",
                status.as_str()
            ),
        )),
    }
}

/// The queue an ARN of this endpoint names, if it exists; SQS's answer otherwise.
fn existing_queue(call: &Call, arn: &str, parameter: &str) -> Result<String, SqsError> {
    let missing = || {
        SqsError::new(
            Code::ResourceNotFoundException,
            format!("The resource that you specified for the {parameter} parameter doesn't exist."),
        )
    };
    let queue = call.sqs.location.queue_of_arn(arn).ok_or_else(missing)?;
    call.sqs
        .broker
        .describe_queue(queue)
        .map_err(|_| missing())?;
    Ok(queue.to_owned())
}

/// Whether some other queue dead-letters into `queue`, as SQS requires of a task's source.
fn is_dead_letter_target(broker: &Broker, queue: &str) -> bool {
    broker.list_queues().into_iter().any(|name| {
        name.as_str() != queue
            && broker.describe_queue(name.as_str()).is_ok_and(|info| {
                info.spec
                    .dead_letter_target(&name)
                    .ok()
                    .flatten()
                    .is_some_and(|target| target.as_str() == queue)
            })
    })
}

fn encode_handle(id: &str, source_arn: &str) -> String {
    STANDARD.encode(json!({ "taskId": id, "sourceArn": source_arn }).to_string())
}

/// The task id and source ARN a handle carries; `None` for anything else. A forged handle
/// gains nothing: the task is looked up among the named source queue's own tasks.
pub(crate) fn decode_handle(handle: &str) -> Option<(String, String)> {
    let bytes = STANDARD.decode(handle).ok()?;
    let doc: Value = serde_json::from_slice(&bytes).ok()?;
    Some((
        doc.get("taskId")?.as_str()?.to_owned(),
        doc.get("sourceArn")?.as_str()?.to_owned(),
    ))
}

/// A random (version 4) UUID, as SQS's task ids are.
fn new_task_id() -> Result<String, SqsError> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| {
            tracing::error!(error = %e, "reading the system's random source failed");
            SqsError::new(
                Code::ServiceUnavailable,
                "Ferry could not make a task id; try again.",
            )
        })?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// How a task ended.
enum End {
    Completed,
    Cancelled,
    Failed(String),
}

/// A task moving messages in the background.
struct Runner {
    broker: Broker,
    store: Store,
    /// Set when the endpoint stops serving.
    stop: watch::Receiver<bool>,
    source: String,
    task: MoveTask,
}

impl Runner {
    async fn run(mut self) {
        let batch = self.task.rate.map_or(UNRATED_BATCH, |r| r as usize);
        let end = loop {
            if *self.stop.borrow() {
                // Left RUNNING: the endpoint resumes it when it serves again.
                return;
            }
            match self.status() {
                None => return, // the source queue was deleted, and its tasks with it
                Some(MoveTaskStatus::Cancelling) => break End::Cancelled,
                Some(_) => {}
            }
            let left = self.task.to_move.saturating_sub(self.task.moved);
            if left == 0 {
                break End::Completed;
            }
            let want = batch.min(usize::try_from(left).unwrap_or(usize::MAX));
            let began = tokio::time::Instant::now();
            let request = RedriveRequest {
                target: self.task.destination.clone(),
                max_messages: Some(want),
                rate_per_sec: self.task.rate,
                ..RedriveRequest::default()
            };
            let report = match self.broker.redrive(&self.source, request).await {
                Ok(report) => report,
                Err(e) => break End::Failed(from_broker(e).code.query_code().to_owned()),
            };
            self.task.moved += report.moved as u64;
            self.save_progress();
            if report.moved < want {
                break End::Completed;
            }
            if let Some(rate) = self.task.rate {
                // The broker spaces a batch's messages by 1/rate; the batch takes a whole
                // want/rate, so the next one starts on time and not early.
                let span = Duration::from_secs_f64(want as f64 / f64::from(rate));
                let mut stop = self.stop.clone();
                tokio::select! {
                    _ = tokio::time::sleep_until(began + span) => {}
                    _ = stop.wait_for(|s| *s) => {}
                }
            }
        };
        self.finish(end);
    }

    fn status(&self) -> Option<MoveTaskStatus> {
        let record = self.store.get(&self.source)?;
        record
            .move_tasks
            .iter()
            .find(|t| t.id == self.task.id)
            .map(|t| t.status)
    }

    fn save_progress(&self) {
        let moved = self.task.moved;
        let saved = self.store.update_existing(&self.source, |record| {
            if let Some(task) = record.move_tasks.iter_mut().find(|t| t.id == self.task.id) {
                task.moved = moved;
            }
        });
        if let Err(e) = saved {
            tracing::warn!(error = %e, queue = %self.source, "saving a message-move task's progress failed");
        }
    }

    fn finish(&self, end: End) {
        let moved = self.task.moved;
        let saved = self.store.update_existing(&self.source, |record| {
            let Some(task) = record.move_tasks.iter_mut().find(|t| t.id == self.task.id) else {
                return;
            };
            task.moved = moved;
            // A cancel that came after the last batch still ends the task as cancelled.
            let cancelled = task.status == MoveTaskStatus::Cancelling;
            match end {
                End::Completed if !cancelled => task.status = MoveTaskStatus::Completed,
                End::Completed | End::Cancelled => task.status = MoveTaskStatus::Cancelled,
                End::Failed(ref reason) => {
                    task.status = MoveTaskStatus::Failed;
                    task.failure = Some(reason.clone());
                }
            }
        });
        if let Err(e) = saved {
            tracing::warn!(error = %e, queue = %self.source, "saving a message-move task's end failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_carries_its_task_and_source() {
        let handle = encode_handle("t-1", "arn:aws:sqs:us-east-1:000000000000:dlq");
        assert_eq!(
            decode_handle(&handle),
            Some((
                "t-1".to_owned(),
                "arn:aws:sqs:us-east-1:000000000000:dlq".to_owned()
            ))
        );
        for bad in [
            "",
            "not base64!",
            &STANDARD.encode("{}"),
            &STANDARD.encode("[1]"),
        ] {
            assert_eq!(decode_handle(bad), None, "{bad}");
        }
    }

    #[test]
    fn task_ids_are_version_4_uuids_and_differ() {
        let a = new_task_id().unwrap();
        let b = new_task_id().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
    }
}
