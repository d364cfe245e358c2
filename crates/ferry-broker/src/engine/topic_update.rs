//! Changing a topic's settings after it was created.
//!
//! **What may change** is what maintenance and publishes read each time they run, not
//! what shaped the topic's storage: the retention bounds and whether they override
//! subscriptions, compaction (on, off, its tombstone retention and lag), where keyless
//! messages go, the idempotent producers' window and the schema subject publishes must
//! match. Each applies from the next pass or
//! publish it governs: retention and compaction at the next housekeeping pass, the key
//! requirement of a compacted topic at the next publish. Records already deleted stay
//! deleted; turning compaction on compacts what is already kept (keyless records, which
//! compaction always keeps, included); turning it off stops compacting, and the gaps it
//! left stay.
//!
//! **What may not** is refused with [`BrokerError::TopicSettingFixed`] and changes nothing:
//! the partition count (it only grows, through
//! [`Broker::add_partitions`](crate::Broker::add_partitions)) and the durability (the
//! partitions' logs are opened with it).
//!
//! **Checks and commit** are those of creation: the new spec is validated, committed to the
//! metadata store, and only then applied to the live topic, so on any error nothing
//! changes and a reopen reads what was committed. The spec change takes the metadata lock
//! every topic change takes, so it cannot undo a concurrent `add_partitions`.

use std::sync::atomic::Ordering;

use super::Broker;
use super::topic::Shape;
use super::topics::TOPIC_PREFIX;
use crate::error::{BrokerError, Result};
use crate::spec_codec;
use crate::topic::TopicSpec;

impl Broker {
    /// Changes the settings of topic `name` that may change after creation: `change` edits a
    /// copy of the current spec under the metadata lock. Returns the spec now in force. See
    /// the head comment of `engine/topic_update.rs` for what may change and when it
    /// applies; on any error nothing changes.
    pub async fn update_topic(
        &self,
        name: &str,
        change: impl FnOnce(&mut TopicSpec),
    ) -> Result<TopicSpec> {
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let topic = self.topic(name)?;
        let shape = topic.shape();
        let current = &shape.spec;
        let mut next = current.clone();
        change(&mut next);
        let fixed = |setting: &'static str, why: &'static str| {
            Err(BrokerError::TopicSettingFixed {
                topic: topic.name.clone(),
                setting,
                why,
            })
        };
        if next.partitions != current.partitions {
            return fixed(
                "partitions",
                "partitions are added with add_partitions, and never removed",
            );
        }
        if next.durability != current.durability {
            return fixed("durability", "the partitions' logs are opened with it");
        }
        next.validate()?;
        if next == *current {
            return Ok(next);
        }
        meta.put(
            format!("{TOPIC_PREFIX}{}", topic.name),
            spec_codec::topic::encode(&next),
        )?;
        for partition in &shape.partitions {
            partition
                .compacted
                .store(next.compaction.is_some(), Ordering::Release);
        }
        topic.set_shape(Shape {
            spec: next.clone(),
            partitions: shape.partitions.clone(),
        });
        Ok(next)
    }
}
