//! [`Responder`]: handles requests still wanted, and replies to their reply queue.

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::header;
use crate::capability::Feature;
use crate::consumer::Delivery;
use crate::error::{Error, Result};
use crate::ferry::Ferry;
use crate::message::{Message, Received, header::CORRELATION_ID, now_ms};
use crate::spec::Destination;

/// What [`Responder::respond`] did with a request.
#[derive(Debug)]
pub enum Responded<E> {
    /// Handled; the reply was published and the request acked.
    Replied,
    /// Its deadline had passed: acked without handling (the requester gave up already).
    Expired,
    /// Handled, but the deadline passed meanwhile: no reply was sent; acked.
    TooLate,
    /// Handled, but the reply queue is gone (its requester closed); acked.
    RequesterGone,
    /// Not a request (no reply-to header, or a deadline that is not a number): rejected to
    /// the dead-letter queue.
    Malformed,
    /// The handler failed: nacked with the error, so it is retried while time remains.
    Failed(E),
}

/// Answers requests sent by a [`Requester`](super::Requester).
pub struct Responder {
    ferry: Ferry,
    /// Whether replies get a TTL (the rest of the request's time).
    ttl: bool,
    expired: AtomicU64,
    replied: AtomicU64,
}

impl Responder {
    pub fn new(ferry: &Ferry) -> Responder {
        Responder {
            ttl: ferry.capabilities().supports(Feature::Ttl),
            ferry: ferry.clone(),
            expired: AtomicU64::new(0),
            replied: AtomicU64::new(0),
        }
    }

    /// Requests skipped because their deadline had passed (before or during handling).
    pub fn expired(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }

    /// Replies sent.
    pub fn replied(&self) -> u64 {
        self.replied.load(Ordering::Relaxed)
    }

    /// Handles one request: skips it if its deadline passed, else runs `handler` and
    /// publishes the message it returns to the request's reply queue, with the request's
    /// correlation id and, where the transport has TTLs, a TTL of the time left. The
    /// request is settled in every case but an `Err` (the engine failed; it is nacked or
    /// left to its lease).
    pub async fn respond<E, F, Fut>(&self, request: Delivery, handler: F) -> Result<Responded<E>>
    where
        E: Display,
        F: FnOnce(Received) -> Fut,
        Fut: Future<Output = Result<Message, E>>,
    {
        let Some(reply_to) = request.header(header::REPLY_TO).map(str::to_owned) else {
            request.reject("not a request: no reply-to header").await?;
            return Ok(Responded::Malformed);
        };
        let deadline = match request.header(header::DEADLINE).map(str::parse::<i64>) {
            None => None,
            Some(Ok(ms)) => Some(ms),
            Some(Err(_)) => {
                request
                    .reject("not a request: request-deadline is not a number")
                    .await?;
                return Ok(Responded::Malformed);
            }
        };
        if deadline.is_some_and(|d| now_ms() >= d) {
            self.count_expired(&request, "skipped unhandled");
            request.ack().await?;
            return Ok(Responded::Expired);
        }

        let mut reply = match handler(request.message().clone()).await {
            Ok(reply) => reply,
            Err(e) => {
                request.nack_with_error(None, &e.to_string()).await?;
                return Ok(Responded::Failed(e));
            }
        };
        if let Some(correlation) = request.header(CORRELATION_ID) {
            reply
                .headers
                .insert(CORRELATION_ID.into(), correlation.to_owned());
        }
        if let Some(deadline) = deadline {
            let left = deadline - now_ms();
            if left <= 0 {
                self.count_expired(&request, "handled, reply dropped");
                request.ack().await?;
                return Ok(Responded::TooLate);
            }
            if self.ttl {
                let left = Duration::from_millis(left as u64);
                reply.ttl = Some(reply.ttl.map_or(left, |ttl| ttl.min(left)));
            }
        }
        match self
            .ferry
            .publisher(Destination::queue(&reply_to))
            .send(reply)
            .await
        {
            Ok(_) => {
                self.replied.fetch_add(1, Ordering::Relaxed);
                request.ack().await?;
                Ok(Responded::Replied)
            }
            Err(Error::NotFound { .. }) => {
                tracing::debug!(id = %request.id, %reply_to, "request/reply: reply queue gone");
                request.ack().await?;
                Ok(Responded::RequesterGone)
            }
            Err(e) => {
                let id = request.id.clone();
                if let Err(nack) = request.nack_with_error(None, &e.to_string()).await {
                    // The lease brings the request back anyway; the send error is the one
                    // the caller needs.
                    tracing::warn!(%id, error = %nack, "request/reply: nack after a failed reply failed");
                }
                Err(e)
            }
        }
    }

    fn count_expired(&self, request: &Received, what: &str) {
        self.expired.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("ferry_request_reply_expired_total").increment(1);
        tracing::info!(id = %request.id, "request/reply: deadline passed, {what}");
    }
}
