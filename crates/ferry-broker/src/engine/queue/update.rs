//! Changing a queue's settings after it was created.
//!
//! **What may change** is what the broker reads when something happens, not what shaped
//! the queue's storage or state: the retry policy (max deliveries, backoff), the
//! dead-letter target and the retention of dead letters, the lease, the default TTL, the
//! longest delay, the length limit and its overflow policy, the lower-priority share, the
//! schema subject publishes must match. Each
//! applies from the next event it governs — the next failed attempt, receive, publish,
//! dead letter — and never rewrites what already happened: a lease running keeps its
//! deadline, a message published keeps its TTL and delay, a dead letter already moved
//! stays where it went.
//!
//! **What may not** is refused with [`BrokerError::QueueSettingFixed`] and changes nothing:
//! the ordering mode and the priority levels (the delivery state is built on them), the
//! durability (the logs are opened with it) and the dedup window (the window's retention
//! and its rebuild on open are cut to it). A temporary queue (not in the metadata) is
//! refused whole with [`BrokerError::QueueNotUpdatable`]. A subscription's delivery settings
//! change here like a queue's, within what a subscription allows
//! ([`crate::SubscriptionSpec::validate`]); its topic, filter and start do not change.
//!
//! **Checks** are those of creation: the new spec on its own and the topology with it (no
//! dead-letter cycle, a named target — queue or topic — that exists; a [`crate::DeadLetter::Default`] target missing
//! is created with it, as at creation). The new spec is committed to the metadata, with any
//! queue created for it, in one commit, and only then applied to the live queue: on any
//! error nothing changes, and a reopen reads what was committed.
//!
//! **A dead-letter target changed** while a message was on its way to the old one: that
//! message lands in the old target. After a crash in the window the engine's dead-lettering
//! leaves (stored in the dead-letter queue, not yet journaled on the origin), a reopen
//! looks for the letter in the origin's current target only, so the message may be both in
//! the old target and back in the origin: delivered twice, never lost.

use ferry_storage::MetaBatch;

use super::admin::default_dead_letter_to_create;
use crate::engine::subscriptions::LinkRole;
use crate::engine::{Broker, SPEC_PREFIX};
use crate::error::{BrokerError, Result};
use crate::name::Name;
use crate::spec::QueueSpec;
use crate::spec_codec;
use crate::subscription::SubscriptionSpec;
use crate::topology::validate_topology;

impl Broker {
    /// Changes the settings of queue `name` that may change after creation: `change` edits
    /// a copy of the current spec, under the lock every spec change takes, so two updates
    /// never undo each other. Returns the spec now in force. See the head comment of
    /// `engine/queue/update.rs` for what may change and when it applies; on any error
    /// nothing changes.
    pub async fn update_queue(
        &self,
        name: &str,
        change: impl FnOnce(&mut QueueSpec),
    ) -> Result<QueueSpec> {
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let queue = self.queue(name)?;
        if queue.temporary.is_some() {
            return Err(BrokerError::QueueNotUpdatable {
                queue: queue.name.clone(),
                why: "it is a temporary queue, which lives only as long as its owner",
            });
        }
        let current = queue.spec();
        let mut next = (*current).clone();
        change(&mut next);
        check_fixed(&queue.name, &current, &next)?;
        if let Some(link) = queue.source.get()
            && let LinkRole::Subscription(subscription) = &link.role
        {
            SubscriptionSpec {
                delivery: next.clone(),
                ..subscription.clone()
            }
            .validate()?;
        }
        if next == *current {
            return Ok(next);
        }
        let created: Vec<(Name, QueueSpec)> = {
            let queues = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
            default_dead_letter_to_create(&queue.name, &next, &queues)?
                .into_iter()
                .collect()
        };
        let mut all: Vec<(Name, QueueSpec)> = self
            .all_specs()
            .into_iter()
            .map(|(n, spec)| {
                let spec = if n == queue.name { next.clone() } else { spec };
                (n, spec)
            })
            .collect();
        all.extend(created.iter().cloned());
        validate_topology(&all)?;
        self.check_dead_letter_topic(&queue.name, &next)?;
        let opened = self.open_new_queues(&created)?;
        let mut batch = MetaBatch::new();
        for (name, spec) in std::iter::once((&queue.name, &next))
            .chain(created.iter().map(|(name, spec)| (name, spec)))
        {
            batch.put(
                format!("{SPEC_PREFIX}{name}"),
                spec_codec::queue::encode(spec),
            );
        }
        meta.commit(batch)?;
        {
            let mut queues = self.inner.queues.write().unwrap_or_else(|e| e.into_inner());
            for created in opened {
                queues.insert(created.name.clone(), created);
            }
        }
        queue.set_spec(&mut queue.lock(), next.clone());
        Ok(next)
    }
}

/// Refuses a change to a setting that cannot change on a live queue.
fn check_fixed(queue: &Name, current: &QueueSpec, next: &QueueSpec) -> Result<()> {
    let fixed = |setting: &'static str, why: &'static str| {
        Err(BrokerError::QueueSettingFixed {
            queue: queue.clone(),
            setting,
            why,
        })
    };
    if next.ordering != current.ordering {
        return fixed(
            "ordering",
            "messages already in the queue are held in the order of its mode",
        );
    }
    if next.priority_levels != current.priority_levels {
        return fixed(
            "priority_levels",
            "messages already in the queue are queued at its levels",
        );
    }
    if next.durability != current.durability {
        return fixed("durability", "the queue's logs are opened with it");
    }
    if next.dedup_window != current.dedup_window {
        return fixed(
            "dedup_window",
            "the window kept on disk and rebuilt on open is cut to it",
        );
    }
    Ok(())
}
