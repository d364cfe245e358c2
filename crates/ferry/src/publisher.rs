//! [`Publisher`]: sends messages to one destination.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::Destination;
use crate::transport::Transport;

/// The dedup windows of the queues a [`Ferry`](crate::Ferry) handle knows to have one:
/// declared through it, or seen when a publish first carried a dedup id. Shared by the
/// handle, its clones and its publishers, so that a publish with a dedup id asks the engine
/// only about a queue not known yet — a publisher made per message (the outbox relay, the
/// saga) pays that question once per queue, not once per message.
#[derive(Debug, Default)]
pub(crate) struct KnownWindows(Mutex<HashMap<String, Duration>>);

impl KnownWindows {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Duration>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `queue`'s dedup window: known, or asked of the engine and remembered.
    pub async fn of(&self, transport: &dyn Transport, queue: &str) -> Result<Option<Duration>> {
        if let Some(window) = self.map().get(queue).copied() {
            return Ok(Some(window));
        }
        let window = transport.dedup_window(queue).await?;
        self.learn(queue, window);
        Ok(window)
    }

    /// What a declaration or the engine said of `queue`'s window (zero is none).
    pub fn learn(&self, queue: &str, window: Option<Duration>) {
        match window.filter(|w| !w.is_zero()) {
            Some(window) => self.map().insert(queue.to_owned(), window),
            None => self.map().remove(queue),
        };
    }
}

/// Publishes to one queue or topic; cheap to clone.
#[derive(Clone)]
pub struct Publisher {
    transport: Arc<dyn Transport>,
    destination: Destination,
    windows: Arc<KnownWindows>,
}

impl Publisher {
    pub(crate) fn new(
        transport: Arc<dyn Transport>,
        destination: Destination,
        windows: Arc<KnownWindows>,
    ) -> Publisher {
        Publisher {
            transport,
            destination,
            windows,
        }
    }

    pub fn destination(&self) -> &Destination {
        &self.destination
    }

    /// Publishes one message durably; returns its id.
    pub async fn send(&self, message: Message) -> Result<String> {
        let mut ids = self.send_batch(vec![message]).await?;
        Ok(ids.pop().expect("one id per message"))
    }

    /// Publishes a batch; returns the ids in order. A message needing a feature the
    /// transport lacks (a delay, a priority, a TTL, a dedup id) refuses the whole batch
    /// before anything is sent, and so does a dedup id for a queue declared without a
    /// dedup window ([`Error::Invalid`]).
    pub async fn send_batch(&self, mut batch: Vec<Message>) -> Result<Vec<String>> {
        let capabilities = self.transport.capabilities();
        let mut ids = Vec::with_capacity(batch.len());
        for message in &mut batch {
            capabilities.check_message(message)?;
            ids.push(message.ensure_id().to_owned());
        }
        self.check_dedup_ids(&batch).await?;
        if !batch.is_empty() {
            self.transport.publish(&self.destination, batch).await?;
        }
        Ok(ids)
    }

    /// Refuses a batch with a dedup id for a queue declared without a dedup window, where
    /// it would do nothing: one rule, in the same words, on every transport. A queue known
    /// to have a window is not asked about again; one without is asked each time, so a
    /// queue declared again with a window is seen at once.
    async fn check_dedup_ids(&self, batch: &[Message]) -> Result<()> {
        let Destination::Queue(queue) = &self.destination else {
            return Ok(());
        };
        let Some(message) = batch.iter().find(|m| m.dedup_id.is_some()) else {
            return Ok(());
        };
        if self.windows.of(&*self.transport, queue).await?.is_some() {
            return Ok(());
        }
        Err(Error::invalid(
            format!(
                "dedup id of message {}",
                message.id.as_deref().unwrap_or_default()
            ),
            format!(
                "queue `{queue}` was declared without a dedup window, so a dedup id would do \
                 nothing there; publish without one, or declare the queue with a dedup window"
            ),
        ))
    }

    /// Publishes a typed event in the envelope (JSON payload); returns its id.
    pub async fn send_event<T: Serialize>(&self, envelope: &Envelope<T>) -> Result<String> {
        self.send(envelope.to_message()?).await
    }
}
