//! Request/reply over queues: a [`Requester`] publishes a request carrying a correlation
//! id, its private reply queue and a deadline, and waits for the reply; a [`Responder`]
//! handles requests whose deadline has not passed and publishes the reply to the reply
//! queue with the same correlation id.
//!
//! The seeds' limits: never block a caller on a queue for longer than 2 s ([`BLOCKING_LIMIT`];
//! a requester warns above it), and give requests aggressive TTLs. The request's TTL is the
//! requester's timeout where the transport has message TTLs; where it does not (NATS
//! JetStream 2.9), the deadline header alone makes responders skip stale requests — they
//! stay in the queue until a responder takes and drops them.

use std::time::Duration;

mod requester;
mod responder;

pub use requester::Requester;
pub use responder::{Responded, Responder};

/// The headers of a request (besides [`CORRELATION_ID`](crate::message::header::CORRELATION_ID),
/// which a reply carries back).
///
/// Not `ferry-*` names: the Ferry broker reserves that namespace for its own metadata and
/// refuses such headers from producers.
pub mod header {
    /// The queue the reply goes to (one of the well-known headers of the domain model).
    pub const REPLY_TO: &str = "reply-to";
    /// When the requester stops waiting, in milliseconds since the Unix epoch. Responders
    /// compare it with their own clock, so clocks must agree to well within the timeout.
    pub const DEADLINE: &str = "request-deadline";
}

/// The longest a requester should block on a reply, from the seeds: "never use a message
/// queue to synchronously block a request-response cycle longer than 2 seconds" — beyond
/// that, use a direct call. Longer timeouts work, with a warning.
pub const BLOCKING_LIMIT: Duration = Duration::from_secs(2);
