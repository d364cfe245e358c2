//! Creating, deleting, listing and describing queues.

use std::sync::Arc;

use ferry_storage::MetaBatch;

use super::Queue;
use crate::engine::{Broker, SPEC_PREFIX, deleted_dir};
use crate::error::{BrokerError, Result};
use crate::name::Name;
use crate::queue::state::QueueStateStats;
use crate::spec::{DeadLetter, QueueSpec};
use crate::spec_codec;
use crate::topology::validate_topology;

#[derive(Debug, Clone, PartialEq)]
pub struct QueueInfo {
    pub name: Name,
    pub spec: QueueSpec,
    pub stats: QueueStats,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueStats {
    /// Ready, in flight, delayed … now.
    pub state: QueueStateStats,
    /// The seq the next stored message will get: how many messages were ever stored —
    /// published, dead-lettered into this queue or redriven into it.
    pub next_seq: u64,
    /// The counters below count since the queue was created; they survive restarts.
    pub acked: u64,
    /// Failed attempts followed by a retry: nacks and lease expiries. (A failed attempt
    /// that dead-letters counts under `dead_lettered`.)
    pub nacked: u64,
    /// Messages that left this queue for its dead-letter queue or topic (or were
    /// discarded, with dead-lettering disabled).
    pub dead_lettered: u64,
    /// Dropped to make room under the overflow policy `DropHead`.
    pub dropped: u64,
    /// Scheduled messages cancelled by id ([`Broker::cancel`]).
    pub cancelled: u64,
    /// Moved out of this dead-letter queue by [`Broker::redrive`].
    pub redriven: u64,
    /// A subscription's messages taken out unsettled because the topic's retention, set to
    /// override subscriptions, deleted them (see
    /// [`TopicRetention::overrides_subscriptions`](crate::TopicRetention::overrides_subscriptions)).
    pub skipped: u64,
    /// Deleted by [`Broker::purge_queue`].
    pub purged: u64,
}

impl Broker {
    /// Creates a queue after checking its name, its spec and the topology with it; with
    /// [`DeadLetter::Default`] also creates `<name>.dlq` (dead-lettering disabled) if
    /// missing. On any error nothing changes.
    pub async fn create_queue(&self, name: &str, spec: QueueSpec) -> Result<()> {
        self.create_queue_with(name, spec, Vec::new()).await
    }

    /// Creates a queue and, in the same metadata commit, `extra` entries: what makes the
    /// queue something more (a subscription) is on disk with it or not at all.
    pub(in crate::engine) async fn create_queue_with(
        &self,
        name: &str,
        spec: QueueSpec,
        extra: Vec<(String, Vec<u8>)>,
    ) -> Result<()> {
        let name = Name::new(name)?;
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let mut new = vec![(name.clone(), spec.clone())];
        {
            let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
            if queues.contains_key(&name) {
                return Err(BrokerError::QueueExists { queue: name });
            }
            new.extend(default_dead_letter_to_create(&name, &spec, &queues)?);
            let mut all: Vec<(Name, QueueSpec)> = queues
                .iter()
                .map(|(n, q)| (n.clone(), (*q.spec()).clone()))
                .collect();
            all.extend(new.iter().cloned());
            validate_topology(&all)?;
        }
        self.check_dead_letter_topic(&name, &spec)?;
        let opened = self.open_new_queues(&new)?;
        let mut batch = MetaBatch::new();
        for (name, spec) in &new {
            batch.put(
                format!("{SPEC_PREFIX}{name}"),
                spec_codec::queue::encode(spec),
            );
        }
        for (key, value) in extra {
            batch.put(key, value);
        }
        meta.commit(batch)?;
        let mut queues = self.inner.queues.write().unwrap_or_else(|e| e.into_inner());
        for queue in opened {
            queues.insert(queue.name.clone(), queue);
        }
        Ok(())
    }

    /// Refuses a spec whose dead letters go to a topic that does not exist
    /// ([`BrokerError::DeadLetterTopicMissing`]), as [`validate_topology`] refuses a missing
    /// [`DeadLetter::Named`] queue. Called with the metadata lock held, which
    /// [`Broker::delete_topic`] takes too, so the topic cannot go between this check and
    /// the commit.
    pub(super) fn check_dead_letter_topic(&self, queue: &Name, spec: &QueueSpec) -> Result<()> {
        let Some(topic) = spec.dead_letter.topic() else {
            return Ok(());
        };
        let topics = self.inner.topics.read().unwrap_or_else(|e| e.into_inner());
        if topics.contains_key(topic) {
            Ok(())
        } else {
            Err(BrokerError::DeadLetterTopicMissing {
                queue: queue.clone(),
                topic: topic.clone(),
            })
        }
    }

    /// The first queue whose dead letters go to `topic`, if one does: such a topic cannot
    /// be deleted ([`BrokerError::TopicIsDeadLetterTarget`]), as a queue another queue
    /// dead-letters into cannot.
    pub(in crate::engine) fn dead_letter_origin_of_topic(&self, topic: &Name) -> Option<Name> {
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        queues
            .iter()
            .find(|(_, q)| q.spec().dead_letter.topic() == Some(topic))
            .map(|(name, _)| name.clone())
    }

    /// Opens the logs of queues about to be created; they become queues once their specs
    /// are committed to the metadata.
    pub(super) fn open_new_queues(&self, new: &[(Name, QueueSpec)]) -> Result<Vec<Arc<Queue>>> {
        let mut opened = Vec::new();
        for (name, spec) in new {
            // Left behind by a create or delete interrupted by a crash: not in the metadata,
            // so not a queue; its logs must not leak into the new one.
            let dir = Queue::dir(&self.inner.dir, name);
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .map_err(|e| ferry_storage::StorageError::io("remove stale queue", &dir, e))?;
            }
            let seed = self
                .inner
                .rng
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .u64(..);
            let queue = Queue::open(
                &self.inner.dir,
                name.clone(),
                spec.clone(),
                &self.inner.config,
                &self.inner.log_stats,
                seed,
                self.inner.token_base,
            )?;
            opened.push(Arc::new(queue));
        }
        Ok(opened)
    }

    /// Deletes a queue and its messages. Refused while another queue dead-letters into it.
    ///
    /// Allowed while messages are in flight, as `DeleteQueue` in SQS and `queue.delete`
    /// in RabbitMQ are by default: deleting is the operator's decision, and a consumer
    /// cannot be waited for. The leases end with the queue — a later ack, nack, reject or
    /// extend of one is [`BrokerError::QueueNotFound`] — and nothing is dead-lettered.
    ///
    /// A poisoned queue ([`BrokerError::QueuePoisoned`]) can be deleted: nothing in it can
    /// be trusted until a reopen, and deleting is what an operator may want instead.
    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        let aside = self.forget_queue(name)?;
        deleted_dir::remove("remove queue", aside).await
    }

    /// Deletes a queue's metadata and lets go of it; its files' directory, set aside.
    fn forget_queue(&self, name: &str) -> Result<Option<std::path::PathBuf>> {
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let queue = match self.queue(name) {
            Err(BrokerError::QueuePoisoned { queue, .. }) => self
                .inner
                .queues
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .get(&queue)
                .cloned()
                .ok_or(BrokerError::QueueNotFound {
                    queue: queue.to_string(),
                })?,
            other => other?,
        };
        {
            let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
            for (origin, q) in queues.iter() {
                if origin != &queue.name
                    && q.spec().dead_letter_target(origin).ok().flatten().as_ref()
                        == Some(&queue.name)
                {
                    return Err(BrokerError::QueueIsDeadLetterTarget {
                        queue: queue.name.clone(),
                        origin: origin.clone(),
                    });
                }
            }
        }
        // Metadata first: a crash before the files are gone leaves a directory that is not
        // a queue, which create_queue clears.
        let mut batch = MetaBatch::new();
        batch.delete(format!("{SPEC_PREFIX}{}", queue.name));
        if queue.source.get().is_some() {
            for key in Self::subscription_keys(&queue.name) {
                batch.delete(key);
            }
        }
        // Its attached links go with it, references and pins included.
        for key in Self::attached_link_keys(&meta, &queue.name) {
            batch.delete(key);
        }
        meta.commit(batch)?;
        self.inner
            .queues
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&queue.name);
        for link in queue.links() {
            link.topic.fanout.remove(&link);
        }
        let dir = Queue::dir(&self.inner.dir, &queue.name);
        drop(queue);
        deleted_dir::set_aside(&dir)
    }

    /// Whether `name` is a dead-letter queue: its name ends in `.dlq` (the suffix is
    /// reserved for them, and every default dead-letter queue has it) or some queue names
    /// it as its dead-letter queue. Access control asks this to keep reading dead letters
    /// apart from consuming ordinary queues; it holds whether or not the queue exists yet.
    pub fn is_dead_letter_queue(&self, name: &str) -> bool {
        if name.ends_with(Name::DEAD_LETTER_SUFFIX) {
            return true;
        }
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        queues.values().any(
            |q| matches!(&q.spec().dead_letter, DeadLetter::Named(target) if target.as_str() == name),
        )
    }

    /// Every queue, with its spec: the set [`validate_topology`] checks.
    pub(super) fn all_specs(&self) -> Vec<(Name, QueueSpec)> {
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        queues
            .iter()
            .map(|(n, q)| (n.clone(), (*q.spec()).clone()))
            .collect()
    }

    pub fn list_queues(&self) -> Vec<Name> {
        let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        queues.keys().cloned().collect()
    }

    pub fn describe_queue(&self, name: &str) -> Result<QueueInfo> {
        let queue = self.queue(name)?;
        let (state, counts) = {
            let inner = queue.lock();
            (inner.state.stats(self.now_ms()), inner.counts)
        };
        Ok(QueueInfo {
            name: queue.name.clone(),
            spec: (*queue.spec()).clone(),
            stats: QueueStats {
                state,
                next_seq: queue.messages.end_offset(),
                acked: counts.acked,
                nacked: counts.nacked,
                dead_lettered: counts.dead_lettered,
                dropped: counts.dropped,
                cancelled: counts.cancelled,
                redriven: counts.redriven,
                skipped: counts.skipped,
                purged: counts.purged,
            },
        })
    }
}

/// The `<name>.dlq` that a queue with `spec` ([`DeadLetter::Default`]) needs and that does not
/// exist yet, with the spec it is created with: dead-lettering disabled, the queue's
/// durability.
pub(super) fn default_dead_letter_to_create(
    name: &Name,
    spec: &QueueSpec,
    queues: &std::collections::BTreeMap<Name, Arc<Queue>>,
) -> Result<Option<(Name, QueueSpec)>> {
    if spec.dead_letter != DeadLetter::Default {
        return Ok(None);
    }
    let dlq = spec
        .dead_letter_target(name)?
        .expect("default has a target");
    if queues.contains_key(&dlq) {
        return Ok(None);
    }
    let dlq_spec = QueueSpec {
        dead_letter: DeadLetter::Disabled,
        durability: spec.durability,
        ..QueueSpec::default()
    };
    Ok(Some((dlq, dlq_spec)))
}
