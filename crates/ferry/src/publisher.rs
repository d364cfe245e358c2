//! [`Publisher`]: sends messages to one destination.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use serde::Serialize;

use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::Destination;
use crate::transport::Transport;

/// Publishes to one queue or topic; cheap to clone.
#[derive(Clone)]
pub struct Publisher {
    transport: Arc<dyn Transport>,
    destination: Destination,
    /// Set once the queue was seen to have a dedup window, so dedup ids are not checked
    /// again; shared by clones.
    has_dedup_window: Arc<AtomicBool>,
}

impl Publisher {
    pub(crate) fn new(transport: Arc<dyn Transport>, destination: Destination) -> Publisher {
        Publisher {
            transport,
            destination,
            has_dedup_window: Arc::new(AtomicBool::new(false)),
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
    /// it would do nothing: one rule, in the same words, on every transport. The queue's
    /// window is asked for once; until one is seen, each batch with a dedup id asks again,
    /// so a queue declared again with a window is seen at once.
    async fn check_dedup_ids(&self, batch: &[Message]) -> Result<()> {
        let Destination::Queue(queue) = &self.destination else {
            return Ok(());
        };
        let Some(message) = batch.iter().find(|m| m.dedup_id.is_some()) else {
            return Ok(());
        };
        if self.has_dedup_window.load(AtomicOrdering::Relaxed) {
            return Ok(());
        }
        if self.transport.dedup_window(queue).await?.is_some() {
            self.has_dedup_window.store(true, AtomicOrdering::Relaxed);
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
