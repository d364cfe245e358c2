//! [`OutboxEvent`]: what the application enqueues — a message and where it goes.

use serde::Serialize;

use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::message::{Message, new_id, now_ms};
use crate::spec::{Destination, validate_name};

use super::row::NewRow;

/// A message to publish once the enclosing transaction commits.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxEvent {
    pub destination: Destination,
    /// Its `key` is the aggregate key: events with one key are published in enqueue
    /// order. Its `id`, when set, becomes the row id (else a fresh ULID); the id is also
    /// the dedup id unless the message carries its own. A `delay` or `ttl` counts from
    /// the publish, not from the enqueue.
    pub message: Message,
}

impl OutboxEvent {
    pub fn new(destination: Destination, message: Message) -> OutboxEvent {
        OutboxEvent {
            destination,
            message,
        }
    }

    /// A typed event in the [`Envelope`] (JSON payload).
    pub fn envelope<T: Serialize>(
        destination: Destination,
        envelope: &Envelope<T>,
    ) -> Result<OutboxEvent> {
        Ok(OutboxEvent::new(destination, envelope.to_message()?))
    }

    /// The row to insert; refuses what could never be published, so a bad event fails the
    /// caller's transaction rather than sitting in the table forever.
    pub(crate) fn into_row(self) -> Result<NewRow> {
        validate_name(self.destination.name())?;
        let message = self.message;
        let id = message.id.unwrap_or_else(new_id);
        if id.is_empty() || id.len() > 200 {
            return Err(Error::invalid("message id", "must be 1 to 200 characters"));
        }
        let millis = |d: Option<std::time::Duration>| {
            d.map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        };
        let (kind, name) = match self.destination {
            Destination::Queue(name) => ("queue", name),
            Destination::Topic(name) => ("topic", name),
        };
        Ok(NewRow {
            id,
            destination_kind: kind,
            destination: name,
            aggregate_key: message.key.map(|k| k.to_vec()),
            payload: message.payload.to_vec(),
            headers: serde_json::to_string(&message.headers)?,
            priority: i16::from(message.priority),
            delay_ms: millis(message.delay),
            ttl_ms: millis(message.ttl),
            dedup_id: message.dedup_id,
            created_at: now_ms(),
        })
    }
}
