//! Outbox rows as the backends read and write them. Times are milliseconds since the Unix
//! epoch by the clock of the process that wrote them.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::Destination;

/// A row to insert.
#[derive(Debug, Clone)]
pub(crate) struct NewRow {
    pub id: String,
    pub destination_kind: &'static str,
    pub destination: String,
    pub aggregate_key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
    /// JSON object of strings.
    pub headers: String,
    pub priority: i16,
    pub delay_ms: Option<i64>,
    pub ttl_ms: Option<i64>,
    pub dedup_id: Option<String>,
    pub created_at: i64,
}

/// A row a relay claimed, to publish.
#[derive(Debug, Clone)]
pub(crate) struct ClaimedRow {
    pub id: String,
    pub seq: i64,
    pub destination_kind: String,
    pub destination: String,
    pub aggregate_key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
    pub headers: String,
    pub priority: i16,
    pub delay_ms: Option<i64>,
    pub ttl_ms: Option<i64>,
    pub dedup_id: Option<String>,
    /// Failed publishes so far.
    pub attempts: i32,
}

/// Reads a [`ClaimedRow`] from a claim's result row, on either engine (their row types
/// differ, so this is a macro rather than a generic function with a bound per column).
/// Evaluates to `Result<ClaimedRow, sqlx::Error>`.
macro_rules! claimed_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let r = $row;
        (|| -> std::result::Result<$crate::outbox::row::ClaimedRow, sqlx::Error> {
            Ok($crate::outbox::row::ClaimedRow {
                id: r.try_get("id")?,
                seq: r.try_get("seq")?,
                destination_kind: r.try_get("destination_kind")?,
                destination: r.try_get("destination")?,
                aggregate_key: r.try_get("aggregate_key")?,
                payload: r.try_get("payload")?,
                headers: r.try_get("headers")?,
                priority: r.try_get("priority")?,
                delay_ms: r.try_get("delay_ms")?,
                ttl_ms: r.try_get("ttl_ms")?,
                dedup_id: r.try_get("dedup_id")?,
                attempts: r.try_get("attempts")?,
            })
        })()
    }};
}
pub(super) use claimed_row;

/// What a failed insert of row `id` means: a second event with one id is the caller's
/// `Conflict`; anything else is the database's.
pub(super) fn insert_error(engine: &'static str, id: &str, e: sqlx::Error) -> Error {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => Error::Conflict {
            kind: "outbox row",
            name: id.to_owned(),
            problem: "an event with this id is already in the outbox".into(),
        },
        _ => Error::transport(engine, e),
    }
}

/// The columns a claim returns, in [`ClaimedRow`] order.
pub(crate) const CLAIMED_COLUMNS: &str = "id, seq, destination_kind, destination, aggregate_key, \
     payload, headers, priority, delay_ms, ttl_ms, dedup_id, attempts";

impl ClaimedRow {
    /// The message to publish. With `dedup` and a queue, its dedup id is the row id (or the
    /// one the producer chose), so a publish repeated after a crash is stored once.
    pub fn to_message(&self, dedup: bool) -> Result<(Destination, Message)> {
        let destination = match self.destination_kind.as_str() {
            "queue" => Destination::queue(&self.destination),
            "topic" => Destination::topic(&self.destination),
            other => {
                return Err(Error::invalid(
                    format!("outbox row {}", self.id),
                    format!("unknown destination kind `{other}`"),
                ));
            }
        };
        let headers: BTreeMap<String, String> = serde_json::from_str(&self.headers)?;
        let millis = |ms: Option<i64>| ms.map(|ms| Duration::from_millis(ms.max(0) as u64));
        // Only queues keep a dedup window (a topic is declared without one, and engines
        // that key dedup on the destination refuse the id there): an event to a topic goes
        // without, and its subscribers' inboxes recognise a repeat by the message id, which
        // is the row id either way.
        let to_queue = matches!(destination, Destination::Queue(_));
        let dedup_id = match (&self.dedup_id, dedup && to_queue) {
            (Some(chosen), _) => Some(chosen.clone()),
            (None, true) => Some(self.id.clone()),
            (None, false) => None,
        };
        let message = Message {
            id: Some(self.id.clone()),
            key: self.aggregate_key.clone().map(Bytes::from),
            headers,
            payload: Bytes::from(self.payload.clone()),
            priority: self.priority.clamp(0, 255) as u8,
            delay: millis(self.delay_ms),
            ttl: millis(self.ttl_ms),
            dedup_id,
        };
        Ok((destination, message))
    }
}
