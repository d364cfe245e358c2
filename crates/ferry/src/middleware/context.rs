//! [`HandlerContext`]: what a handler and every layer see of a delivery.

use std::ops::Deref;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::envelope::Envelope;
use crate::message::Received;
use crate::spec::Source;

use super::trace::TraceContext;

/// A delivered message with where it came from. Cheap to clone (the retry layer calls the
/// handler again with a clone). The [`Delivery`](crate::Delivery) itself stays with the
/// worker, which settles it once from the stack's answer.
#[derive(Debug, Clone)]
pub struct HandlerContext {
    message: Arc<Received>,
    source: Arc<str>,
    max_deliveries: Option<u32>,
    trace: Option<TraceContext>,
}

impl HandlerContext {
    pub fn new(message: Received, source: &Source) -> HandlerContext {
        HandlerContext {
            message: Arc::new(message),
            source: source_label(source).into(),
            max_deliveries: None,
            trace: None,
        }
    }

    /// Says the source allows `max` deliveries of a message (the [`Worker`](super::Worker)
    /// sets it from [`Consumer::max_deliveries`](crate::Consumer::max_deliveries)).
    pub fn with_max_deliveries(mut self, max: u32) -> HandlerContext {
        self.max_deliveries = Some(max);
        self
    }

    /// Deliveries the source allows a message, the first included, when known: with
    /// [`attempt`](Received::attempt), whether this delivery is the last.
    pub fn max_deliveries(&self) -> Option<u32> {
        self.max_deliveries
    }

    pub fn message(&self) -> &Received {
        &self.message
    }

    /// The source as metrics and spans label it (see [`source_label`]).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The trace this handling belongs to, set by the [trace layer](super::trace): inject it
    /// into messages published onward so the trace continues.
    pub fn trace(&self) -> Option<&TraceContext> {
        self.trace.as_ref()
    }

    pub(crate) fn with_trace(mut self, trace: TraceContext) -> HandlerContext {
        self.trace = Some(trace);
        self
    }

    /// The payload decoded from JSON.
    pub fn json<T: DeserializeOwned>(&self) -> crate::Result<T> {
        Ok(serde_json::from_slice(&self.message.payload)?)
    }

    /// The typed event this message carries (see [`Envelope`]), as
    /// [`Delivery::envelope`](crate::Delivery::envelope) reads it. A message without one,
    /// or whose payload does not decode as `T`, is an error that `?` turns into a permanent
    /// failure: the message goes to the dead-letter queue.
    pub fn envelope<T: DeserializeOwned>(&self) -> crate::Result<Envelope<T>> {
        Envelope::from_received(&self.message)
    }
}

impl Deref for HandlerContext {
    type Target = Received;
    fn deref(&self) -> &Received {
        &self.message
    }
}

/// A short stable name for `source` in metric labels, span fields and dedup keys: the queue
/// name, `topic/subscription`, or either followed by `.dlq`.
pub fn source_label(source: &Source) -> String {
    match source {
        Source::Queue(name) => name.clone(),
        Source::Subscription { topic, name } => format!("{topic}/{name}"),
        Source::DeadLetters(origin) => format!("{}.dlq", source_label(origin)),
    }
}
