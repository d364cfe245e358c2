//! ReceiveMessage: a receive under a lease, answered with SQS's message shape.
//!
//! The visibility timeout is the lease (the request's, else the queue's), the long poll
//! the broker's wait. The broker call runs in a task of its own, so a client that hangs
//! up mid-poll cannot cut a receive short between leasing and answering: what it leased
//! becomes visible again when the lease ends, as in SQS when an answer is lost.
//!
//! **FIFO queues** take runs of a message group ([`PerKey::Consecutive`]): as SQS does, a
//! receive returns as many messages of one group as it can, in order, before the next
//! group's, and the group is held until all of them are deleted or visible again; one that
//! becomes visible waits, with everything behind it, until no message of its group is in
//! flight, and then goes first. A retry with the ReceiveRequestAttemptId of an earlier
//! receive answers it again (`receive_attempts.rs`). On standard queues SQS ignores the
//! attempt id (it applies to FIFO queues only), and so does Ferry.

use std::time::Duration;

use ferry_broker::{ErrorKind, PerKey, ReceiveOptions, ReceivedMessage};
use serde_json::{Map, Value, json};

use super::receive_attempts::{self, Attempt};
use super::{Call, integer_in, string, string_list};
use crate::attributes::{self, MAX_VISIBILITY, MAX_WAIT};
use crate::dead_letter_attributes;
use crate::errors::{SqsError, from_broker};
use crate::md5;
use crate::message_attributes::{self, DEDUP_HEADER, TRACE_HEADER};
use crate::receipt::Receipt;

/// The consumer name every SQS receive uses: SQS has no consumer identity.
const CONSUMER: &str = "sqs";

pub async fn receive(call: &Call<'_>) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    let max = integer_in(call.input, "MaxNumberOfMessages", 1..=10)?.unwrap_or(1) as usize;
    let visibility = integer_in(
        call.input,
        "VisibilityTimeout",
        0..=i64::from(MAX_VISIBILITY),
    )?;
    let wait = integer_in(call.input, "WaitTimeSeconds", 0..=i64::from(MAX_WAIT))?;
    let mut system = string_list(call.input, "AttributeNames")?;
    system.extend(string_list(call.input, "MessageSystemAttributeNames")?);
    let wanted = string_list(call.input, "MessageAttributeNames")?;
    let fifo = queue.ends_with(".fifo");
    // Only FIFO queues take it, as in SQS; elsewhere SQS ignores it.
    let attempt_id = match string(call.input, "ReceiveRequestAttemptId")? {
        Some(id) if fifo => {
            receive_attempts::check_id(id)?;
            Some(id.to_owned())
        }
        _ => None,
    };
    let broker = call.sqs.broker.clone();
    let info = broker.describe_queue(&queue).map_err(from_broker)?;
    let record = call.sqs.store.get(&queue).unwrap_or_default();
    let queue_number = |name: &str| {
        record
            .attributes
            .get(name)
            .and_then(|v| v.parse::<u32>().ok())
    };
    // Without one, the queue's VisibilityTimeout: the spec's lease, which the broker applies.
    let lease = visibility.map(|v| attributes::lease_of(v as u32));
    let wait = wait.map_or_else(
        || queue_number("ReceiveMessageWaitTimeSeconds").unwrap_or(0),
        |w| w as u32,
    );
    let poll = (wait > 0).then(|| Duration::from_secs(u64::from(wait)));
    if let Some(id) = &attempt_id {
        let visibility = lease.unwrap_or(info.spec.lease);
        if let Some(attempt) = retried(call, &queue, id, visibility).await {
            let answered = answer(
                call,
                &queue,
                &attempt.messages,
                &system,
                &wanted,
                attempt.at_ms,
            );
            return Ok(answered);
        }
    }
    let options = ReceiveOptions {
        max,
        lease,
        wait: poll,
        // A FIFO queue is a key-shared one: several messages of a group per receive.
        per_key: if fifo {
            PerKey::Consecutive
        } else {
            PerKey::One
        },
    };
    let mut stop = call.sqs.stop.subscribe();
    let task = {
        let broker = broker.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            let stopped = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            broker
                .receive_with(&queue, CONSUMER, options, stopped)
                .await
        })
    };
    let messages = task
        .await
        .map_err(|_| SqsError::new(crate::errors::Code::InternalFailure, "the receive failed"))?
        .map_err(from_broker)?;
    let received_at_ms = call.now_ms();
    if let Some(id) = attempt_id {
        let attempt = Attempt {
            id,
            at_ms: received_at_ms,
            messages: messages.clone(),
        };
        call.sqs.receive_attempts.remember(&queue, attempt);
    }
    Ok(answer(
        call,
        &queue,
        &messages,
        &system,
        &wanted,
        received_at_ms,
    ))
}

/// The answer to a receive made at `received_at_ms` (a retry's is the first receive's, so
/// that it is the same answer, first-receive timestamps included).
fn answer(
    call: &Call,
    queue: &str,
    messages: &[ReceivedMessage],
    system: &[String],
    wanted: &[String],
    received_at_ms: i64,
) -> Value {
    if messages.is_empty() {
        return json!({});
    }
    let out: Vec<Value> = messages
        .iter()
        .map(|m| message(call, queue, m, system, wanted, received_at_ms))
        .collect();
    json!({ "Messages": out })
}

/// The messages the receive `id` leased on `queue`, if it is a retry SQS answers again:
/// made within 5 minutes, and every message still under that receive's lease, untouched —
/// not deleted, its visibility not changed (its deadline is the one the receive set) and
/// not run out. Their visibility timeout starts again (`visibility`), as SQS documents.
/// `None` for a new receive; the attempt is forgotten then.
async fn retried(call: &Call<'_>, queue: &str, id: &str, visibility: Duration) -> Option<Attempt> {
    let attempts = &call.sqs.receive_attempts;
    let attempt = attempts.recall(queue, id, call.now_ms())?;
    let broker = &call.sqs.broker;
    let now_ms = call.now_ms();
    let untouched = attempt.messages.iter().all(|m| {
        broker
            .lease_deadline(queue, m.seq, m.token)
            .is_ok_and(|until| until == m.lease_until_ms && until > now_ms)
    });
    if !untouched {
        attempts.forget(queue, id);
        return None;
    }
    let mut messages = attempt.messages;
    for m in &mut messages {
        match broker.extend(queue, m.seq, m.token, visibility).await {
            Ok(until) => m.lease_until_ms = until,
            Err(e) => {
                // Settled or ended between the check and now: a new receive. Any lease
                // already restarted just runs longer.
                if e.kind() != ErrorKind::StaleLease {
                    tracing::warn!(error = %e, "restarting a retried receive's leases failed");
                }
                attempts.forget(queue, id);
                return None;
            }
        }
    }
    // The new deadlines are the ones a further retry must find.
    let attempt = Attempt {
        id: id.to_owned(),
        at_ms: attempt.at_ms,
        messages,
    };
    attempts.remember(queue, attempt.clone());
    Some(attempt)
}

fn message(
    call: &Call,
    queue: &str,
    m: &ReceivedMessage,
    system: &[String],
    wanted: &[String],
    received_at_ms: i64,
) -> Value {
    // A message an SNS subscription delivered by reference is rendered now, from the topic
    // message and the link (see `sns/linked.rs`).
    let rendered = crate::sns::linked::render(
        &call.sqs.location,
        call.host,
        &m.headers,
        &m.payload,
        m.published_at,
    );
    let (payload, headers) = match &rendered {
        Some((payload, headers)) => (payload, headers),
        None => (&m.payload, &m.headers),
    };
    let body = String::from_utf8_lossy(payload);
    let handle = call.sqs.receipts.encode(&Receipt {
        queue: queue.to_owned(),
        seq: m.seq,
        token: m.token.0,
    });
    let mut out = Map::new();
    out.insert("MessageId".into(), m.id.to_string().into());
    out.insert("ReceiptHandle".into(), handle.into());
    out.insert("MD5OfBody".into(), md5::hex_md5(body.as_bytes()).into());
    out.insert("Body".into(), body.as_ref().into());
    let all = system.iter().any(|n| n == "All");
    let mut attributes = Map::new();
    let mut add = |name: &str, value: Option<String>| {
        if let Some(value) = value
            && (all || system.iter().any(|n| n == name))
        {
            attributes.insert(name.into(), value.into());
        }
    };
    add("SenderId", Some(call.sqs.location.account_id.clone()));
    add("SentTimestamp", Some(m.published_at.to_string()));
    add("ApproximateReceiveCount", Some(m.delivery.to_string()));
    // The broker does not keep when a message was first delivered: a first delivery is
    // now; a later one reports the send time, the earliest it can have been.
    let first = if m.delivery <= 1 {
        received_at_ms
    } else {
        m.published_at
    };
    add("ApproximateFirstReceiveTimestamp", Some(first.to_string()));
    if queue.ends_with(".fifo") {
        add("SequenceNumber", Some(super::send::sequence_number(m.id)));
        add("MessageDeduplicationId", headers.get(DEDUP_HEADER).cloned());
        add(
            "MessageGroupId",
            m.key
                .as_ref()
                .map(|k| String::from_utf8_lossy(k).into_owned()),
        );
    }
    add("AWSTraceHeader", headers.get(TRACE_HEADER).cloned());
    add(
        "DeadLetterQueueSourceArn",
        m.dead_letter
            .as_ref()
            .map(|d| call.sqs.location.arn(&d.origin_queue)),
    );
    if !attributes.is_empty() {
        out.insert("Attributes".into(), Value::Object(attributes));
    }
    let mut carried = message_attributes::from_headers(headers);
    if let Some(info) = &m.dead_letter {
        // The broker's record wins over a header of the same name a sender made up.
        carried.extend(dead_letter_attributes::of(info));
    }
    let selected = message_attributes::select(&carried, wanted);
    if let Some(md5) = md5::of_attributes(&selected) {
        out.insert("MD5OfMessageAttributes".into(), md5.into());
        out.insert(
            "MessageAttributes".into(),
            message_attributes::to_json(&selected),
        );
    }
    Value::Object(out)
}
