//! [`Ferry`]: a connection to one transport, chosen by URL, and the admin calls on it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::capability::Capabilities;
use crate::consumer::Consumer;
use crate::error::Result;
use crate::publisher::{KnownWindows, Publisher};
use crate::spec::{DeliveryPolicy, Destination, QueueDecl, Source, SubscriptionDecl, TopicDecl};
use crate::temporary::{TemporaryQueue, TemporaryQueueDecl};
use crate::transport::{self, ConsumerOptions, Transport};

/// The SDK's entry point; cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Ferry {
    transport: Arc<dyn Transport>,
    /// The delivery policy of each queue and subscription declared through this handle (or
    /// a clone), for its consumers: a declaration that succeeded matches what exists, since
    /// every transport refuses one with other settings as a `Conflict`.
    declared: Arc<Mutex<HashMap<Source, DeliveryPolicy>>>,
    /// The dedup windows of queues known to have one, for publishes with a dedup id.
    windows: Arc<KnownWindows>,
}

impl std::fmt::Debug for Ferry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ferry")
            .field("transport", &self.capabilities().transport)
            .finish()
    }
}

impl Ferry {
    /// Connects to the transport `url` names: `embedded:./dir` (the broker in-process, the
    /// default choice), or another engine compiled in with its feature.
    pub async fn connect(url: &str) -> Result<Ferry> {
        Ok(Ferry::with_transport(transport::connect(url).await?))
    }

    /// Wraps a transport built by hand.
    pub fn with_transport(transport: Arc<dyn Transport>) -> Ferry {
        Ferry {
            transport,
            declared: Arc::default(),
            windows: Arc::default(),
        }
    }

    /// What this transport does natively, emulates, or cannot do.
    pub fn capabilities(&self) -> &Capabilities {
        self.transport.capabilities()
    }

    /// Creates the queue, or checks that it exists with these settings. A setting the
    /// transport cannot honour is [`Error::Unsupported`](crate::Error) and creates nothing.
    pub async fn declare_queue(&self, decl: &QueueDecl) -> Result<()> {
        self.capabilities().check_queue(decl)?;
        self.transport.declare_queue(decl).await?;
        self.remember(Source::queue(&decl.name), &decl.delivery);
        self.windows.learn(&decl.name, decl.dedup_window);
        Ok(())
    }

    /// Declares a temporary queue, bound to this process: the transport deletes it when
    /// this process's connection (or the consumer reading it) ends, or after the idle
    /// timeout without use. Consume it as [`TemporaryQueue::owner`]. Where the transport has
    /// no temporary queues ([`Feature::TemporaryQueues`](crate::Feature)) this is
    /// [`Error::Unsupported`](crate::Error) and declares nothing; a bad idle timeout is
    /// [`Error::Invalid`](crate::Error).
    pub async fn declare_temporary_queue(
        &self,
        decl: &TemporaryQueueDecl,
    ) -> Result<TemporaryQueue> {
        self.capabilities()
            .require(crate::capability::Feature::TemporaryQueues)?;
        decl.validate()?;
        self.transport.declare_temporary_queue(decl).await
    }

    pub async fn declare_topic(&self, decl: &TopicDecl) -> Result<()> {
        decl.validate()?;
        self.capabilities()
            .require(crate::capability::Feature::FanOut)?;
        self.transport.declare_topic(decl).await
    }

    /// Creates a durable subscription to a declared topic: it gets everything published to
    /// the topic from now on.
    pub async fn declare_subscription(&self, decl: &SubscriptionDecl) -> Result<()> {
        self.capabilities().check_subscription(decl)?;
        self.transport.declare_subscription(decl).await?;
        self.remember(
            Source::subscription(&decl.topic, &decl.name),
            &decl.delivery,
        );
        Ok(())
    }

    /// Deletes a queue or a subscription. The Ferry broker keeps its dead-letter queue —
    /// dead letters are evidence — until deleted on its own with
    /// `delete(&source.dead_letters())`; transports that keep dead letters beside the
    /// source remove them with it (then that second delete is `NotFound`).
    pub async fn delete(&self, source: &Source) -> Result<()> {
        self.transport.delete(source).await?;
        self.declarations().remove(source);
        if let Source::Queue(name) = source {
            self.windows.learn(name, None);
        }
        Ok(())
    }

    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        self.transport.delete_topic(name).await
    }

    /// The dedup window queue `queue` was declared with, or `None` when it has none (a
    /// dedup id published there is refused). `NotFound` when there is no such queue.
    pub async fn dedup_window(&self, queue: &str) -> Result<Option<std::time::Duration>> {
        self.windows.of(&*self.transport, queue).await
    }

    pub fn publisher(&self, destination: Destination) -> Publisher {
        Publisher::new(self.transport.clone(), destination, self.windows.clone())
    }

    /// Starts consuming `source`; fails at once if it does not exist. The consumer knows
    /// the source's delivery policy when it was declared through this handle
    /// ([`Consumer::delivery_policy`]).
    pub async fn consumer(&self, source: Source, options: ConsumerOptions) -> Result<Consumer> {
        if options.prefetch == 0 {
            return Err(crate::Error::invalid("prefetch", "must be at least 1"));
        }
        let backend = self.transport.open_consumer(&source, &options).await?;
        let policy = self.declarations().get(&source).cloned();
        Ok(Consumer::new(backend, source, options, policy))
    }

    /// Closes the connection; idempotent. Calls made afterwards, and settlements of
    /// deliveries still held, fail with [`Error::Closed`](crate::Error) — an unsettled
    /// delivery comes back when its lease ends.
    pub async fn close(&self) -> Result<()> {
        self.transport.close().await
    }

    fn remember(&self, source: Source, policy: &DeliveryPolicy) {
        self.declarations().insert(source, policy.clone());
    }

    fn declarations(&self) -> std::sync::MutexGuard<'_, HashMap<Source, DeliveryPolicy>> {
        // Every update is a single insert or remove: the map stays whole whatever panicked.
        self.declared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
