//! The SQS actions, one module per family, each mapping a request (the model's input
//! shape as JSON) onto the broker and back (the model's output shape).

mod batch;
pub(crate) mod move_tasks;
mod permissions;
mod queues;
mod receive;
pub(crate) mod receive_attempts;
pub(crate) mod reset;
pub(crate) mod send;
mod settle;
mod tags;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::Inner;
use crate::auth::Caller;
use crate::errors::{Code, SqsError};

pub async fn dispatch(
    sqs: &Inner,
    caller: &Caller<'_>,
    action: &str,
    input: &Map<String, Value>,
    host: &str,
) -> Result<Value, SqsError> {
    let call = Call {
        sqs,
        caller,
        input,
        host,
    };
    match action {
        "CreateQueue" => queues::create(&call).await,
        "DeleteQueue" => queues::delete(&call).await,
        "GetQueueUrl" => queues::get_url(&call),
        "ListQueues" => queues::list(&call),
        "GetQueueAttributes" => queues::get_attributes(&call),
        "SetQueueAttributes" => queues::set_attributes(&call).await,
        "PurgeQueue" => queues::purge(&call).await,
        "ListDeadLetterSourceQueues" => queues::dead_letter_sources(&call),
        "AddPermission" => permissions::add(&call),
        "RemovePermission" => permissions::remove(&call),
        "TagQueue" => tags::tag(&call),
        "UntagQueue" => tags::untag(&call),
        "ListQueueTags" => tags::list(&call),
        "SendMessage" => send::send(&call).await,
        "SendMessageBatch" => send::send_batch(&call).await,
        "ReceiveMessage" => receive::receive(&call).await,
        "DeleteMessage" => settle::delete(&call).await,
        "DeleteMessageBatch" => settle::delete_batch(&call).await,
        "ChangeMessageVisibility" => settle::change_visibility(&call).await,
        "ChangeMessageVisibilityBatch" => settle::change_visibility_batch(&call).await,
        "StartMessageMoveTask" => move_tasks::start(&call).await,
        "ListMessageMoveTasks" => move_tasks::list(&call),
        "CancelMessageMoveTask" => move_tasks::cancel(&call),
        other => Err(SqsError::new(
            Code::InvalidAction,
            format!(
                "The action {} is not valid for this endpoint.",
                other.chars().take(100).collect::<String>()
            ),
        )),
    }
}

/// One request being served.
pub struct Call<'a> {
    pub sqs: &'a Inner,
    /// Who asked: lists show only the queues it holds a right on.
    pub caller: &'a Caller<'a>,
    pub input: &'a Map<String, Value>,
    /// The Host the client reached, for the queue URLs it is answered with.
    pub host: &'a str,
}

impl Call<'_> {
    /// The queue the request's QueueUrl names. A name no Ferry queue could have is a queue
    /// that does not exist, as SQS says of it.
    pub fn queue(&self) -> Result<String, SqsError> {
        let url = required_string(self.input, "QueueUrl")?;
        let name = self.sqs.location.queue_of_url(url)?;
        ferry_broker::Name::new(&name).map_err(|_| SqsError::no_queue())?;
        Ok(name)
    }

    pub fn url(&self, queue: &str) -> String {
        self.sqs.location.url(self.host, queue)
    }

    pub fn now_ms(&self) -> i64 {
        self.sqs.broker.now_ms()
    }
}

pub fn string<'a>(input: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, SqsError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(SqsError::invalid(format!("{key} must be a string."))),
    }
}

pub fn required_string<'a>(input: &'a Map<String, Value>, key: &str) -> Result<&'a str, SqsError> {
    string(input, key)?.ok_or_else(|| SqsError::missing(key))
}

/// An integer member: a JSON number, or a string of digits (the query protocol's).
pub fn integer(input: &Map<String, Value>, key: &str) -> Result<Option<i64>, SqsError> {
    let bad = || SqsError::invalid(format!("{key} must be an integer."));
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(bad),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| bad()),
        Some(_) => Err(bad()),
    }
}

/// An integer member within `range`, with SQS's wording when outside.
pub fn integer_in(
    input: &Map<String, Value>,
    key: &str,
    range: std::ops::RangeInclusive<i64>,
) -> Result<Option<i64>, SqsError> {
    match integer(input, key)? {
        Some(v) if !range.contains(&v) => Err(SqsError::invalid(format!(
            "Value {v} for parameter {key} is invalid. Reason: must be between {} and {}.",
            range.start(),
            range.end()
        ))),
        other => Ok(other),
    }
}

pub fn string_list(input: &Map<String, Value>, key: &str) -> Result<Vec<String>, SqsError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| SqsError::invalid(format!("{key} must be a list of strings.")))
            })
            .collect(),
        Some(_) => Err(SqsError::invalid(format!(
            "{key} must be a list of strings."
        ))),
    }
}

pub fn string_map(
    input: &Map<String, Value>,
    key: &str,
) -> Result<BTreeMap<String, String>, SqsError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(SqsError::invalid(format!(
                    "{key} must map names to strings."
                ))),
            })
            .collect(),
        Some(_) => Err(SqsError::invalid(format!("{key} must be a map."))),
    }
}

/// A store write that failed: the request is refused and nothing changed.
pub fn store_failed(e: std::io::Error) -> SqsError {
    tracing::error!(error = %e, "writing the SQS front end's queue records failed");
    SqsError::new(
        Code::ServiceUnavailable,
        "Ferry could not write the queue's attributes durably; try again.",
    )
}
