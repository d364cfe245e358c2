//! [`Publisher`]: sends messages to one destination.

use std::sync::Arc;

use serde::Serialize;

use crate::envelope::Envelope;
use crate::error::Result;
use crate::message::Message;
use crate::spec::Destination;
use crate::transport::Transport;

/// Publishes to one queue or topic; cheap to clone.
#[derive(Clone)]
pub struct Publisher {
    transport: Arc<dyn Transport>,
    destination: Destination,
}

impl Publisher {
    pub(crate) fn new(transport: Arc<dyn Transport>, destination: Destination) -> Publisher {
        Publisher {
            transport,
            destination,
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
    /// before anything is sent.
    pub async fn send_batch(&self, mut batch: Vec<Message>) -> Result<Vec<String>> {
        let capabilities = self.transport.capabilities();
        let mut ids = Vec::with_capacity(batch.len());
        for message in &mut batch {
            capabilities.check_message(message)?;
            ids.push(message.ensure_id().to_owned());
        }
        if !batch.is_empty() {
            self.transport.publish(&self.destination, batch).await?;
        }
        Ok(ids)
    }

    /// Publishes a typed event in the envelope (JSON payload); returns its id.
    pub async fn send_event<T: Serialize>(&self, envelope: &Envelope<T>) -> Result<String> {
        self.send(envelope.to_message()?).await
    }
}
