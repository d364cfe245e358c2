//! `expiration_policy`: a subscription no one has used for its `ttl` is deleted, as
//! Pub/Sub deletes it. Use is what a subscriber does with it — Pull, a StreamingPull open
//! on it, Acknowledge, ModifyAckDeadline, Seek — and creation counts as use.
//!
//! The latest use is kept in memory as it happens, and written to the subscription's
//! record by the sweep when it moved by more than [`PERSIST_STEP`] (a ttl is at least a
//! day, so the record is at most that much behind, and a restart never makes a
//! subscription look idle sooner than it was). The sweep runs every [`SWEEP_EVERY`] while
//! the endpoint serves, on the broker's clock, and never deletes a subscription with a
//! stream open on it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tonic::Status;

use crate::PubSub;
use crate::convert::duration;
use crate::store::SubscriptionRecord;

/// Pub/Sub's shortest ttl.
pub const MIN_TTL: Duration = Duration::from_secs(24 * 3600);
/// How often idle subscriptions are looked for.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// How far the latest use may run ahead of the record before the sweep writes it.
const PERSIST_STEP: Duration = Duration::from_secs(3600);

/// The ttl asked for, checked: `None` when the subscription never expires.
pub fn ttl(
    policy: Option<&googleapis_tonic_google_pubsub_v1::google::pubsub::v1::ExpirationPolicy>,
) -> Result<Option<Duration>, Status> {
    let Some(d) = policy.and_then(|p| p.ttl.as_ref()) else {
        return Ok(None);
    };
    let ttl = duration(d, "expiration_policy.ttl")?;
    if ttl < MIN_TTL {
        return Err(Status::invalid_argument(
            "expiration_policy.ttl must be at least 1 day",
        ));
    }
    Ok(Some(ttl))
}

/// The latest use of each subscription since the endpoint started, by broker name.
#[derive(Default)]
pub struct Uses(Mutex<HashMap<String, i64>>);

impl PubSub {
    /// Notes that `subscription` (a broker name) is in use now.
    pub(crate) fn used(&self, subscription: &str) {
        let now = self.broker().now_ms();
        let mut uses = self.inner.uses.0.lock().unwrap_or_else(|e| e.into_inner());
        match uses.get_mut(subscription) {
            Some(at) => *at = (*at).max(now),
            None => {
                uses.insert(subscription.to_owned(), now);
            }
        }
    }

    /// Deletes the subscriptions idle for their ttl, and writes the latest uses that moved
    /// far enough to their records. Returns the names deleted.
    pub async fn sweep_expired(&self) -> Vec<String> {
        let now = self.broker().now_ms();
        let mut deleted = Vec::new();
        for (name, record) in self.store().all() {
            let Some(ttl_ms) = record.expiration_ttl_ms else {
                continue;
            };
            let used = self
                .inner
                .uses
                .0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&name)
                .copied();
            let last = used.unwrap_or(i64::MIN).max(record.last_used_ms);
            if self.open_streams().has_open(&name) {
                self.used(&name);
                continue;
            }
            if now.saturating_sub(last) >= ttl_ms {
                let topic = self.broker().subscription_spec(&name).ok().map(|s| s.topic);
                match self.broker().delete_queue(&name).await {
                    Ok(()) => {}
                    Err(e) if e.kind() == ferry_broker::ErrorKind::NotFound => {}
                    Err(e) => {
                        tracing::warn!(subscription = %name, error = %e, "deleting an expired subscription failed");
                        continue;
                    }
                }
                if let Err(e) = self.store().set(&name, None) {
                    tracing::warn!(subscription = %name, error = %e, "forgetting an expired subscription's record failed");
                }
                tracing::info!(subscription = %name, "deleted: unused for its expiration ttl");
                if let Some(topic) = topic {
                    self.forget_topic_if_deleted(&topic).await;
                }
                deleted.push(name);
            } else if last - record.last_used_ms >= PERSIST_STEP.as_millis() as i64 {
                let kept = SubscriptionRecord {
                    last_used_ms: last,
                    ..record
                };
                if let Err(e) = self.store().set(&name, Some(kept)) {
                    tracing::warn!(subscription = %name, error = %e, "keeping a subscription's latest use failed");
                }
            }
        }
        deleted
    }
}
