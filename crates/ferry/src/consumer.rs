//! [`Consumer`]: a stream of [`Delivery`] values from one source, fetched ahead up to the
//! prefetch; each delivery is settled once — `ack`, `nack` or `reject` take it by value.

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::message::Received;
use crate::spec::{DeliveryPolicy, Source};
use crate::transport::{ConsumerBackend, ConsumerOptions, Incoming, Settler};

/// Takes deliveries from one queue, subscription or dead-letter queue.
pub struct Consumer {
    backend: Box<dyn ConsumerBackend>,
    source: Source,
    options: ConsumerOptions,
    policy: Option<DeliveryPolicy>,
    /// Fetched and not yet handed out.
    buffer: VecDeque<Incoming>,
    closed: bool,
}

impl Consumer {
    pub(crate) fn new(
        backend: Box<dyn ConsumerBackend>,
        source: Source,
        options: ConsumerOptions,
        policy: Option<DeliveryPolicy>,
    ) -> Consumer {
        Consumer {
            backend,
            source,
            options,
            policy,
            buffer: VecDeque::new(),
            closed: false,
        }
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// The delivery policy the source was declared with, when it was declared through the
    /// [`Ferry`](crate::Ferry) handle (or a clone of it) that opened this consumer; `None`
    /// when it was declared elsewhere (another process, another connection) and for dead
    /// letters. [`max_deliveries`](Self::max_deliveries) knows more.
    pub fn delivery_policy(&self) -> Option<&DeliveryPolicy> {
        self.policy.as_ref()
    }

    /// The deliveries the source allows a message before it is dead-lettered, as it was
    /// declared — through this handle, or as the engine keeps the declaration, so a source
    /// declared by another process is known too; `None` reading dead letters, which have
    /// no limit. The [poison layer](crate::middleware::poison) takes its limit from here.
    pub fn max_deliveries(&self) -> Option<u32> {
        match &self.policy {
            Some(policy) => Some(policy.max_deliveries),
            None => self.backend.max_deliveries(),
        }
    }

    /// The next delivery, waiting as long as it takes; `None` once closed.
    pub async fn next(&mut self) -> Option<Result<Delivery>> {
        loop {
            match self.next_within(self.options.poll).await {
                Ok(Some(delivery)) => return Some(Ok(delivery)),
                Ok(None) if self.closed => return None,
                Ok(None) => continue,
                Err(Error::Closed) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The next delivery if one comes within `wait`.
    pub async fn next_within(&mut self, wait: Duration) -> Result<Option<Delivery>> {
        if self.closed {
            return Err(Error::Closed);
        }
        if self.buffer.is_empty() {
            let fetched = self.backend.fetch(self.options.prefetch, wait).await?;
            self.buffer.extend(fetched);
        }
        Ok(self.buffer.pop_front().map(Delivery::new))
    }

    /// Stops consuming; idempotent. Deliveries fetched ahead and not handed out go back at
    /// once (a nack without delay, counted as an attempt); deliveries already handed out
    /// stay valid and can still be settled.
    pub async fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let mut first_error = None;
        for incoming in self.buffer.drain(..) {
            if let Err(e) = incoming.settler.nack(Some(Duration::ZERO), None).await {
                first_error.get_or_insert(e);
            }
        }
        let closed = self.backend.close().await;
        match first_error {
            Some(e) => Err(e),
            None => closed,
        }
    }
}

/// A message held under a lease. Settle it with [`ack`](Self::ack), [`nack`](Self::nack)
/// or [`reject`](Self::reject); one dropped unsettled comes back when its lease ends, as
/// after a crash. Its fields are those of [`Received`].
pub struct Delivery {
    message: Received,
    settler: Arc<dyn Settler>,
}

impl Deref for Delivery {
    type Target = Received;
    fn deref(&self) -> &Received {
        &self.message
    }
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("id", &self.message.id)
            .field("attempt", &self.message.attempt)
            .finish()
    }
}

impl Delivery {
    fn new(incoming: Incoming) -> Delivery {
        Delivery {
            message: incoming.message,
            settler: incoming.settler,
        }
    }

    pub fn message(&self) -> &Received {
        &self.message
    }

    /// The payload decoded from JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T> {
        Ok(serde_json::from_slice(&self.message.payload)?)
    }

    /// The envelope this message carries (see [`Envelope`]).
    pub fn envelope<T: DeserializeOwned>(&self) -> Result<Envelope<T>> {
        Envelope::from_received(&self.message)
    }

    /// Done: the message will not come back. Returns once that is durable.
    pub async fn ack(self) -> Result<()> {
        self.settler.ack().await
    }

    /// Failed for now: back after `delay`, or the retry policy's backoff when `None`; to the
    /// dead-letter queue when deliveries are used up.
    pub async fn nack(self, delay: Option<Duration>) -> Result<()> {
        self.settler.nack(delay, None).await
    }

    /// As [`nack`](Self::nack), keeping `error` (up to 1 KiB) as the last error, which the
    /// dead letter carries if this was the last attempt.
    pub async fn nack_with_error(self, delay: Option<Duration>, error: &str) -> Result<()> {
        self.settler
            .nack(delay, Some(&crate::message::truncate_error(error)))
            .await
    }

    /// Failed for good: to the dead-letter queue now, with `reason` as its last error.
    pub async fn reject(self, reason: &str) -> Result<()> {
        self.settler
            .reject(&crate::message::truncate_error(reason))
            .await
    }

    /// Keeps the message hidden from other consumers for `by` from now.
    pub async fn extend(&self, by: Duration) -> Result<()> {
        if by.is_zero() {
            return Err(Error::invalid("extend", "must be longer than zero"));
        }
        self.settler.extend(by).await
    }
}
