//! Temporary exclusive queues: a queue that belongs to one consumer (its owner), exists
//! only while that owner is around, and is never recovered after a restart — the reply
//! queue of a request/reply exchange.
//!
//! - **Exclusive**: only the owner may receive from it (or set its prefetch); anyone may
//!   publish to it (that is how replies arrive). Others get [`BrokerError::NotQueueOwner`].
//! - **Auto-deleted** when its owner disconnects ([`Broker::disconnect`], which a server
//!   calls when a client's connection ends) or when no operation has touched it for its
//!   idle timeout (checked by housekeeping), or by [`Broker::delete_queue`].
//! - **Not durable**: not in the metadata store, written with `Durability::None`, no
//!   dead-letter queue (a reply nobody takes is dropped with the queue). A reopen deletes
//!   what is left of them on disk.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use super::Queue;
use crate::engine::Broker;
use crate::error::{BrokerError, Result};
use crate::message::millis;
use crate::message_id::MessageId;
use crate::name::Name;
use crate::spec::{DeadLetter, Durability, QueueSpec};

/// The name prefix of temporary queues.
pub const TEMPORARY_PREFIX: &str = "tmp.";

/// What makes a queue temporary.
#[derive(Debug)]
pub(crate) struct Temporary {
    pub owner: String,
    pub idle_timeout_ms: i64,
    pub last_used_ms: AtomicI64,
}

impl Queue {
    /// Notes an operation on the queue, for a temporary queue's idle timeout.
    pub fn touch(&self, now_ms: i64) {
        if let Some(temporary) = &self.temporary {
            temporary.last_used_ms.store(now_ms, Ordering::Relaxed);
        }
    }

    /// `Err(NotQueueOwner)` when the queue is temporary and `consumer` is not its owner.
    pub fn check_consumer(&self, consumer: &str) -> Result<()> {
        match &self.temporary {
            Some(temporary) if temporary.owner != consumer => Err(BrokerError::NotQueueOwner {
                queue: self.name.clone(),
            }),
            _ => Ok(()),
        }
    }

    fn idle_since(&self, now_ms: i64) -> Option<i64> {
        let temporary = self.temporary.as_ref()?;
        let idle = now_ms - temporary.last_used_ms.load(Ordering::Relaxed);
        (idle >= temporary.idle_timeout_ms).then_some(idle)
    }
}

impl Broker {
    /// Creates a temporary queue owned by `owner`, deleted after `idle_timeout` (1 s to
    /// 1 day) without any operation on it, or when `owner` disconnects; returns its name
    /// (`tmp.` and a ULID). See `engine/queue/temporary.rs`.
    pub async fn create_temporary_queue(
        &self,
        owner: &str,
        idle_timeout: Duration,
    ) -> Result<Name> {
        super::check_consumer(owner)?;
        if idle_timeout < Duration::from_secs(1) || idle_timeout > Duration::from_secs(86_400) {
            return Err(BrokerError::InvalidSetting {
                setting: "idle_timeout",
                problem: format!("must be between 1 s and 1 day, got {idle_timeout:?}"),
            });
        }
        let now_ms = self.now_ms();
        let (id, seed) = {
            let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
            (MessageId::generate(now_ms, &mut *rng), rng.u64(..))
        };
        let name = Name::new(format!("{TEMPORARY_PREFIX}{id}"))?;
        let spec = QueueSpec {
            dead_letter: DeadLetter::Disabled,
            durability: Durability::None,
            ..QueueSpec::default()
        };
        let mut queue = Queue::open(
            &self.inner.dir,
            name.clone(),
            spec,
            &self.inner.config,
            &self.inner.log_stats,
            seed,
            self.inner.token_base,
        )?;
        queue.temporary = Some(Temporary {
            owner: owner.to_owned(),
            idle_timeout_ms: millis(idle_timeout),
            last_used_ms: AtomicI64::new(now_ms),
        });
        let mut queues = self.inner.queues.write().unwrap_or_else(|e| e.into_inner());
        if queues.contains_key(&name) {
            return Err(BrokerError::QueueExists { queue: name });
        }
        queues.insert(name.clone(), Arc::new(queue));
        Ok(name)
    }

    /// The owner of `queue` if it is a temporary queue; `None` for any other queue,
    /// `Err(QueueNotFound)` for none. A server asks it to bind a temporary queue to the
    /// stream its owner consumes it on.
    pub fn temporary_queue_owner(&self, queue: &str) -> Result<Option<String>> {
        let queue = self.queue(queue)?;
        Ok(queue.temporary.as_ref().map(|t| t.owner.clone()))
    }

    /// The owner is gone (its connection ended): deletes its temporary queues. Returns how
    /// many went.
    pub async fn disconnect(&self, owner: &str) -> Result<usize> {
        let owned: Vec<Name> = self
            .queue_list()
            .iter()
            .filter(|q| q.temporary.as_ref().is_some_and(|t| t.owner == owner))
            .map(|q| q.name.clone())
            .collect();
        for name in &owned {
            self.delete_queue(name.as_str()).await?;
        }
        Ok(owned.len())
    }

    /// Deletes temporary queues idle past their timeout; returns how many went.
    pub(in crate::engine) async fn delete_idle_temporary_queues(&self) -> Result<usize> {
        let now_ms = self.now_ms();
        let idle: Vec<Name> = self
            .queue_list()
            .iter()
            .filter(|q| q.idle_since(now_ms).is_some())
            .map(|q| q.name.clone())
            .collect();
        for name in &idle {
            self.delete_queue(name.as_str()).await?;
        }
        Ok(idle.len())
    }
}
