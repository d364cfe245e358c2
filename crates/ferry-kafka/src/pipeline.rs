//! A connection's answers in flight: the Produce requests begun while the answers before
//! them wait for durability, answered strictly in request order (Kafka clients match an
//! answer to the oldest request they have in flight).
//!
//! Bounded by [`MAX_IN_FLIGHT`]: once that many answers are pending the connection reads no
//! more requests until the oldest is written, so a client cannot make the broker hold an
//! unbounded number of requests for it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::connection::ConnectionError;
use crate::framing::framed;

/// Answers a connection keeps pending: the Java client's and librdkafka's default
/// `max.in.flight.requests.per.connection`.
pub const MAX_IN_FLIGHT: usize = 5;

/// One request's answer once ready: `None` when it gets none.
pub type Answer = Pin<Box<dyn Future<Output = Result<Option<Bytes>, ConnectionError>> + Send>>;

/// The pending answers, oldest first.
#[derive(Default)]
pub struct Pipeline {
    answers: VecDeque<Answer>,
}

impl Pipeline {
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.answers.len() >= MAX_IN_FLIGHT
    }

    pub fn push(&mut self, answer: Answer) {
        self.answers.push_back(answer);
    }

    /// The oldest answer once it is ready, taken out. Cancel-safe: nothing is taken out
    /// before it is ready. Pends forever when there is none (the caller checks first).
    pub async fn next(&mut self) -> Result<Option<Bytes>, ConnectionError> {
        let Some(oldest) = self.answers.front_mut() else {
            return std::future::pending().await;
        };
        // The answers make progress without being polled (their appends complete on the
        // storage writer), so awaiting only the oldest loses no time.
        let answer = oldest.as_mut().await;
        self.answers.pop_front();
        if answer.is_err() {
            // The connection ends: no later answer may be written in its place.
            self.answers.clear();
        }
        answer
    }

    /// Writes every pending answer, in order.
    pub async fn drain<W: AsyncWrite + Unpin>(
        &mut self,
        writer: &mut W,
    ) -> Result<(), ConnectionError> {
        while !self.is_empty() {
            let answer = self.next().await?;
            write(writer, answer).await?;
        }
        Ok(())
    }
}

/// Writes one answer, if there is one.
pub async fn write<W: AsyncWrite + Unpin>(
    writer: &mut W,
    answer: Option<Bytes>,
) -> Result<(), ConnectionError> {
    if let Some(answer) = answer {
        writer.write_all(&framed(&answer)).await?;
        writer.flush().await?;
    }
    Ok(())
}
