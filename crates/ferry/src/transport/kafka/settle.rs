//! Settling one delivery: an ack commits its offset, a nack or a reject publishes a copy
//! (to a retry topic or the dead-letter topic) and then commits past the original.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use super::capabilities::NAME;
use super::codec::{Record, now_ms};
use super::ledger::Inner;
use super::names;
use crate::error::{Error, Result};

/// One delivery, settled through its consumer.
pub(super) struct Delivery {
    pub(super) inner: Arc<Inner>,
    pub(super) record: Record,
    pub(super) attempt: u32,
    pub(super) generation: u64,
    pub(super) settled: AtomicBool,
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if !self.settled.load(Ordering::Acquire) {
            self.inner.release(&self.record, self.generation);
        }
    }
}

impl Delivery {
    fn id(&self) -> String {
        self.record.id()
    }

    fn claim(&self) -> Result<()> {
        if self.settled.swap(true, Ordering::AcqRel) {
            return Err(Error::NotHeld {
                id: self.id(),
                why: "it was settled already".into(),
            });
        }
        Ok(())
    }

    /// Closes the offset and commits it.
    async fn done(&self) -> Result<()> {
        let (at, watermark) = self
            .inner
            .settle(&self.record, self.generation, &self.id())?;
        self.inner.commit(at, watermark).await
    }

    /// Publishes a copy to `topic`, then closes the original.
    async fn forward(&self, topic: String, headers: BTreeMap<String, String>) -> Result<()> {
        super::publish::send_one(
            &self.inner.producer,
            topic,
            None,
            self.record.key.as_ref(),
            &self.record.payload,
            headers,
        )
        .await?;
        self.done().await
    }

    async fn dead_letter(&self, reason: &str, error: Option<&str>) -> Result<()> {
        let policy = self.inner.source.policy.as_ref().expect("a live source");
        if !policy.dead_letter {
            // Declared without dead letters: the message is dropped.
            return self.done().await;
        }
        let source = &self.inner.source;
        let headers = self.record.dead_letter_headers(
            reason,
            self.attempt,
            &source.name,
            error,
            &source.consumer,
        );
        self.forward(names::dead_letter_topic(&source.name), headers)
            .await
    }
}

#[async_trait]
impl crate::transport::Settler for Delivery {
    async fn ack(&self) -> Result<()> {
        self.claim()?;
        self.done().await
    }

    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        self.claim()?;
        let source = &self.inner.source;
        let Some(policy) = &source.policy else {
            if delay.is_some_and(|d| !d.is_zero()) {
                self.settled.store(false, Ordering::Release);
                return Err(Error::unsupported(
                    NAME,
                    "delayed nack of a dead letter",
                    "a dead-letter queue has no retry topics; a nacked dead letter comes back at \
                     once",
                ));
            }
            let headers = self.record.retry_headers(self.attempt + 1, None, error);
            return self
                .forward(names::dead_letter_topic(&source.name), headers)
                .await;
        };
        if self.attempt >= policy.max_deliveries {
            return self
                .dead_letter(crate::message::reason::MAX_DELIVERIES, error)
                .await;
        }
        let delay = delay.unwrap_or_else(|| {
            policy
                .delivery()
                .backoff
                .delay(self.attempt, fastrand::f64())
        });
        if policy.ordering {
            return self.inner.hold(
                self.record.clone(),
                self.attempt + 1,
                self.generation,
                delay,
                &self.id(),
            );
        }
        let Some(rung) = names::rung_of(delay, policy.rungs()) else {
            self.settled.store(false, Ordering::Release);
            return Err(Error::invalid(
                "nack delay",
                format!(
                    "{delay:?} is beyond the source's retry topics (its backoff cap and \
                     max_delay); nack for at most the longer of them"
                ),
            ));
        };
        let due = (!delay.is_zero()).then(|| now_ms() + delay.as_millis() as i64);
        let headers = self.record.retry_headers(self.attempt + 1, due, error);
        self.forward(names::retry_topic(&source.name, rung), headers)
            .await
    }

    async fn reject(&self, why: &str) -> Result<()> {
        if self.inner.source.policy.is_none() {
            return Err(Error::unsupported(
                NAME,
                "rejecting a dead letter",
                "a dead letter has no further queue; ack it to remove it, or nack it to keep it",
            ));
        }
        self.claim()?;
        self.dead_letter(crate::message::reason::REJECTED, Some(why))
            .await
    }

    async fn extend(&self, _by: Duration) -> Result<()> {
        Err(Error::unsupported(
            NAME,
            crate::capability::Feature::LeaseExtension.name(),
            "Kafka has no per-message lease to extend",
        ))
    }
}
