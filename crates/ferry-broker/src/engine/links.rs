//! Attaching an existing queue to a topic (see [`crate::link`]): the queue receives the
//! topic's records as references, fed by the same cursors, catch-up and retention pins as
//! a subscription (`engine/subscriptions.rs`), next to what is published to it directly —
//! one delivery order, one lease, retry, dead-letter and redrive.
//!
//! **Stored state.** Per link, `link/<queue>/<link>` holds its [`StoredLink`] and
//! `subscription-cursor/<queue>/<link>` its saved cursors; `link-id/<queue>` the next id
//! to give, so an id is never reused while settled references carrying an old one stay in
//! the queue's log (recovery skips those of forgotten links, and must not credit them to a
//! new one). Attach commits all three at once: a crash leaves the link or nothing.
//!
//! **Detach** stops the feed at once and keeps the link, marked detached, until the
//! references it issued are settled: they stay deliverable, and keep their topic records
//! pinned until then; housekeeping then forgets it (metadata first). Deleting the queue
//! deletes its links with it.
//!
//! **Deleting a topic** is refused while a link attached to it is not detached
//! ([`BrokerError::TopicHasSubscriptions`] names it). What detached links still reference
//! is *copied* into their queues first ([`Broker::copy_out_references`]): each pending
//! reference not in flight becomes a full message (its id, key, priority, times and the
//! `ferry-link*` headers kept; its delivery count starts again), appended, then the
//! reference is settled; one in flight makes the delete fail with
//! [`BrokerError::TopicReferencedInFlight`], to be retried once it is settled. A crash
//! between the copy and the settlement leaves both, the topic not yet deleted: the
//! message is delivered twice, never lost.
//!
//! **Dead letters and redrive** read the referenced message in full (as a receive does) and
//! write that copy: a referenced message leaves its queue as a copy, carrying its origin in
//! the `ferry-link*` headers (see `record.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use ferry_storage::{MetaBatch, MetaStore};

use super::Broker;
use super::queue::Queue;
use super::subscriptions::{CURSOR_PREFIX, Link, LinkRole, decode_cursors, encode_cursors};
use super::topic::Topic;
use crate::error::{BrokerError, Result};
use crate::link::{self, FilterEvaluators, LinkSpec, StoredLink};
use crate::message::Message;
use crate::name::Name;
use crate::subscription::SubscriptionStart;

const LINK_PREFIX: &str = "link/";
const NEXT_ID_PREFIX: &str = "link-id/";
const SKIPS_PREFIX: &str = super::subscriptions::SKIPS_PREFIX;

/// A queue's link as [`Broker::queue_links`] reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkInfo {
    pub name: Name,
    pub spec: LinkSpec,
    /// Detached and waiting for its references to be settled.
    pub detached: bool,
    /// References in the queue not yet settled.
    pub pending: u64,
    /// Topic records the link has not considered yet (catch-up in progress).
    pub not_yet_considered: u64,
}

impl Broker {
    /// Attaches queue `queue` to `spec.topic` as link `link`: from then on the topic's
    /// records that pass the filter are delivered into the queue as references. With
    /// [`SubscriptionStart::Earliest`] it takes in what the topic keeps before it returns.
    /// A queue may have several links, to several topics or to one.
    pub async fn attach_queue(&self, queue: &str, link: &str, spec: LinkSpec) -> Result<()> {
        let name = Name::new(link)?;
        let queue = self.queue(queue)?;
        if queue.source.get().is_some() || queue.temporary.is_some() {
            return Err(BrokerError::QueueNotUpdatable {
                queue: queue.name.clone(),
                why: "it is a subscription or a temporary queue; attach a plain queue",
            });
        }
        let topic = self.topic(spec.topic.as_str())?;
        let filter = self.inner.config.filter_evaluators.compile(&spec.filter)?;
        let link = {
            let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
            // Deleting a queue or a topic happens under the metadata lock: checked under it,
            // neither can be gone when the link is committed (its record would outlive it).
            if !self
                .queue(queue.name.as_str())
                .is_ok_and(|q| Arc::ptr_eq(&q, &queue))
            {
                return Err(BrokerError::QueueNotFound {
                    queue: queue.name.to_string(),
                });
            }
            if !self
                .topic(topic.name.as_str())
                .is_ok_and(|t| Arc::ptr_eq(&t, &topic))
            {
                return Err(BrokerError::TopicNotFound {
                    topic: topic.name.to_string(),
                });
            }
            if queue.attached_link(&name).is_some() {
                return Err(BrokerError::LinkExists {
                    queue: queue.name.clone(),
                    link: name,
                });
            }
            let id = next_id(&meta, &queue.name);
            let start: Vec<u64> = topic
                .shape()
                .partitions
                .iter()
                .map(|p| match spec.start {
                    SubscriptionStart::Now => p.log.end_offset(),
                    SubscriptionStart::Earliest => p.log.start_offset(),
                })
                .collect();
            let key = format!("{}/{name}", queue.name);
            let stored = StoredLink {
                id,
                spec: spec.clone(),
                detached: false,
            };
            let mut batch = MetaBatch::new();
            batch.put(
                format!("{LINK_PREFIX}{key}"),
                link::encode(&stored).into_bytes(),
            );
            batch.put(format!("{CURSOR_PREFIX}{key}"), encode_cursors(&start));
            batch.put(
                format!("{NEXT_ID_PREFIX}{}", queue.name),
                (id + 1).to_le_bytes().to_vec(),
            );
            meta.commit(batch)?;
            let link = Arc::new(Link::new(
                id,
                key,
                attached_role(name, spec, false),
                Arc::clone(&topic),
                filter,
                &queue,
            ));
            link.set_cursors(&start);
            queue.add_link(Arc::clone(&link));
            topic.subscribe(Arc::clone(&link));
            link
        };
        while !link.catch_up()? {}
        Ok(())
    }

    /// Detaches link `link` of `queue`: the topic feeds it nothing more. What it delivered
    /// and the queue has not settled stays in the queue, and pins its topic records, until
    /// settled; the link is forgotten then (see the module doc).
    pub async fn detach_queue(&self, queue: &str, link: &str) -> Result<()> {
        let name = Name::new(link)?;
        let queue = self.queue(queue)?;
        let not_found = || BrokerError::LinkNotFound {
            queue: queue.name.clone(),
            link: name.clone(),
        };
        let found = queue
            .attached_link(&name)
            .filter(|l| !l.is_detached())
            .ok_or_else(not_found)?;
        let LinkRole::Attached { spec, .. } = &found.role else {
            return Err(not_found());
        };
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let stored = StoredLink {
            id: found.id,
            spec: spec.clone(),
            detached: true,
        };
        meta.put(
            format!("{LINK_PREFIX}{}", found.key),
            link::encode(&stored).into_bytes(),
        )?;
        let idle = found.detach();
        drop(meta);
        if idle {
            self.forget_links(&queue, &[found])?;
        }
        Ok(())
    }

    /// The links of `queue`, by name.
    pub fn queue_links(&self, queue: &str) -> Result<Vec<LinkInfo>> {
        let queue = self.queue(queue)?;
        let mut out: Vec<LinkInfo> = queue
            .attached
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(|l| {
                let LinkRole::Attached { name, spec, .. } = &l.role else {
                    return None;
                };
                let detached = l.is_detached();
                let not_yet_considered = if detached {
                    0
                } else {
                    l.topic
                        .shape()
                        .partitions
                        .iter()
                        .map(|p| l.behind(p.index, p.log.end_offset()))
                        .sum()
                };
                Some(LinkInfo {
                    name: name.clone(),
                    spec: spec.clone(),
                    detached,
                    pending: l.pending(),
                    not_yet_considered,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Copies what the detached links of `topic` still reference into their queues and
    /// forgets them, before the topic is deleted (see the module doc).
    pub(super) async fn copy_out_references(&self, topic: &Topic) -> Result<()> {
        for link in topic.fanout.links() {
            let Some(queue) = link.queue() else {
                continue;
            };
            for seq in link.pending_seqs() {
                let now_ms = self.now_ms();
                let message = queue.read(seq)?;
                if !queue.lock().state.take(seq, now_ms) {
                    if queue.lock().state.is_tracked(seq) {
                        return Err(BrokerError::TopicReferencedInFlight {
                            topic: topic.name.clone(),
                            queue: queue.name.clone(),
                            link: link.name(),
                        });
                    }
                    continue;
                }
                let copy = Message {
                    deliver_at: None,
                    ..message
                };
                if let Err(error) = self
                    .store_limited(&queue, vec![super::Incoming::without_dedup(copy)], None)
                    .await
                {
                    let message = queue.read(seq)?;
                    let mut tracked = queue.tracked(seq, &message);
                    let mut inner = queue.lock();
                    tracked.deliveries = inner.deliveries.get(&seq).copied().unwrap_or(0);
                    inner.state.track(tracked, now_ms);
                    return Err(error);
                }
                let rx = {
                    let mut inner = queue.lock();
                    queue.journal(
                        &mut inner,
                        &[crate::queue::journal::JournalEvent::Redriven { seq }],
                        now_ms,
                    )
                };
                super::durable(rx).await?;
            }
            self.forget_links(&queue, &[link])?;
        }
        Ok(())
    }

    /// Housekeeping: forgets the detached links whose references are all settled.
    pub(super) fn forget_detached_links(&self, queues: &[Arc<Queue>]) -> Result<()> {
        for queue in queues {
            let done: Vec<Arc<Link>> = queue
                .attached
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .filter(|l| l.is_detached() && l.is_idle())
                .cloned()
                .collect();
            if !done.is_empty() {
                self.forget_links(queue, &done)?;
            }
        }
        Ok(())
    }

    /// Metadata first: a crash before the link is gone from memory changes nothing, the
    /// link being detached and idle.
    fn forget_links(&self, queue: &Arc<Queue>, links: &[Arc<Link>]) -> Result<()> {
        let mut meta = self.inner.meta.lock().unwrap_or_else(|e| e.into_inner());
        let mut batch = MetaBatch::new();
        for link in links {
            for prefix in [LINK_PREFIX, CURSOR_PREFIX, SKIPS_PREFIX] {
                batch.delete(format!("{prefix}{}", link.key));
            }
        }
        meta.commit(batch)?;
        for link in links {
            queue.remove_link(link);
            link.topic.fanout.remove(link);
        }
        Ok(())
    }

    /// The metadata of `queue`'s attached links, for `delete_queue`.
    pub(super) fn attached_link_keys(meta: &MetaStore, queue: &Name) -> Vec<String> {
        let mut keys = vec![format!("{NEXT_ID_PREFIX}{queue}")];
        for (key, _) in meta.scan_prefix(&format!("{LINK_PREFIX}{queue}/")) {
            let link_key = &key[LINK_PREFIX.len()..];
            keys.push(format!("{CURSOR_PREFIX}{link_key}"));
            keys.push(format!("{SKIPS_PREFIX}{link_key}"));
            keys.push(key);
        }
        keys
    }
}

impl Queue {
    /// The attached link named `name`, detached or not.
    pub fn attached_link(&self, name: &Name) -> Option<Arc<Link>> {
        self.attached
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|l| matches!(&l.role, LinkRole::Attached { name: n, .. } if n == name))
            .cloned()
    }
}

fn attached_role(name: Name, spec: LinkSpec, detached: bool) -> LinkRole {
    LinkRole::Attached {
        name,
        spec,
        detached: AtomicBool::new(detached),
    }
}

fn next_id(meta: &MetaStore, queue: &Name) -> u32 {
    meta.get(&format!("{NEXT_ID_PREFIX}{queue}"))
        .and_then(|v| <[u8; 4]>::try_from(&v[..]).ok())
        .map_or(1, u32::from_le_bytes)
}

/// Ties every stored attached link to its queue and topic, with its saved cursors and
/// skips, compiling its filter with the registered evaluators; before recovery, which
/// routes each reference on disk to its link by id.
pub(super) fn link_attached(
    meta: &MetaStore,
    queues: &BTreeMap<Name, Arc<Queue>>,
    topics: &BTreeMap<Name, Arc<Topic>>,
    evaluators: &FilterEvaluators,
) -> Result<Vec<Arc<Link>>> {
    let mut links = Vec::new();
    for (key, value) in meta.scan_prefix(LINK_PREFIX) {
        let link_key = key[LINK_PREFIX.len()..].to_owned();
        let bad = |problem: String| BrokerError::MalformedLink {
            key: key.clone(),
            problem,
        };
        let (queue, name) = link_key
            .split_once('/')
            .ok_or_else(|| bad("not <queue>/<link>".into()))?;
        let queue = Name::new(queue).map_err(|e| bad(e.to_string()))?;
        let name = Name::new(name).map_err(|e| bad(e.to_string()))?;
        let queue = queues
            .get(&queue)
            .ok_or_else(|| bad("a link without its queue".into()))?;
        let stored = link::decode(&value).map_err(bad)?;
        let topic = topics
            .get(&stored.spec.topic)
            .ok_or_else(|| bad(format!("its topic {} does not exist", stored.spec.topic)))?;
        // An unknown kind is the caller's to fix (register it), not damage: its own error.
        let filter = evaluators.compile(&stored.spec.filter)?;
        let link = Arc::new(Link::new(
            stored.id,
            link_key.clone(),
            attached_role(name, stored.spec, stored.detached),
            Arc::clone(topic),
            filter,
            queue,
        ));
        if let Some(cursors) = meta.get(&format!("{CURSOR_PREFIX}{link_key}")) {
            link.set_cursors(&decode_cursors(&cursors));
        }
        if let Some(ranges) = meta.get(&format!("{SKIPS_PREFIX}{link_key}")) {
            link.set_skipped(super::subscriptions::decode_skips(&ranges));
        }
        queue.add_link(Arc::clone(&link));
        topic.subscribe(Arc::clone(&link));
        links.push(link);
    }
    Ok(links)
}
