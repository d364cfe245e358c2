//! Settling Redis deliveries. Every settlement of one consumer goes through its group
//! commit ([`crate::transport::group_commit`]): those that arrive together are one call of
//! the settle script, which checks each delivery is still held on its own and ends with one
//! XACK (and one XDEL) per stream for all that are done with.

use std::sync::Arc;
use std::time::Duration;

use ::redis::Value;
use async_trait::async_trait;

use super::engine::{NAME, Plan, SETTLE, Shared, map_error, ms, text, unexpected};
use crate::error::{Error, Result};
use crate::transport::Settler;
use crate::transport::group_commit::{GroupCommit, SubmitBatch, all_failed};

/// One settlement as the script takes it.
pub(super) struct Settlement {
    op: &'static str,
    delivery: Arc<Held>,
    delay: Duration,
    error: String,
}

/// What identifies a delivery: the entry, the stream it is pending in, and the delivery
/// count it had when handed out — a different count later means it was delivered again.
pub(super) struct Held {
    pub from_topic: bool,
    pub entry_id: String,
    pub consumer: String,
    pub count: u32,
    pub carried: u32,
}

/// Sends one consumer's settlements to the server, a batch per script call.
pub(super) struct SettleBatches {
    pub shared: Arc<Shared>,
    pub plan: Arc<Plan>,
}

impl SubmitBatch for SettleBatches {
    type Item = Settlement;
    const TRANSPORT: &'static str = NAME;
    /// Each id is one argument of the closing XACK; Lua's stack takes a few thousand.
    const MAX_BATCH: usize = 512;

    async fn submit(&self, batch: Vec<Settlement>) -> Vec<Result<()>> {
        let mut con = match self.shared.connection() {
            Ok(con) => con,
            Err(e) => return all_failed(batch.len(), e),
        };
        let plan = &self.plan;
        let mut invocation = SETTLE.prepare_invoke();
        invocation
            .key(&plan.home)
            .key(&plan.topic_stream)
            .key(&plan.ext)
            .key(&plan.fails)
            .key(&plan.dlq)
            .key(&plan.delayed)
            .arg(&plan.group)
            .arg(plan.max_deliveries())
            .arg(plan.settings.lease_ms)
            .arg(&plan.origin);
        for s in &batch {
            let held = &s.delivery;
            invocation
                .arg(if held.from_topic { "1" } else { "2" })
                .arg(s.op)
                .arg(&held.entry_id)
                .arg(&held.consumer)
                .arg(held.count)
                .arg(held.carried)
                .arg(ms(s.delay))
                .arg(&s.error);
        }
        let reply: Value = match invocation.invoke_async(&mut con).await {
            Ok(reply) => reply,
            Err(e) => return all_failed(batch.len(), map_error(e)),
        };
        let Value::Array(replies) = &reply else {
            return all_failed(batch.len(), unexpected("settle", &reply));
        };
        batch
            .iter()
            .zip(replies)
            .map(|(s, reply)| match text(reply).as_deref() {
                Some("OK") | Some("DEAD") => Ok(()),
                Some("NOTHELD") => Err(Error::NotHeld {
                    id: s.delivery.entry_id.clone(),
                    why: "its lease ended and it may have gone to another consumer".into(),
                }),
                _ => Err(unexpected(s.op, reply)),
            })
            .collect()
    }
}

pub(super) struct RedisSettler {
    pub settles: Arc<GroupCommit<SettleBatches>>,
    pub plan: Arc<Plan>,
    pub delivery: Arc<Held>,
}

impl RedisSettler {
    async fn settle(&self, op: &'static str, delay: Duration, error: &str) -> Result<()> {
        self.settles
            .settle(Settlement {
                op,
                delivery: self.delivery.clone(),
                delay,
                error: error.to_owned(),
            })
            .await
    }
}

#[async_trait]
impl Settler for RedisSettler {
    async fn ack(&self) -> Result<()> {
        self.settle("ack", Duration::ZERO, "").await
    }

    async fn nack(&self, delay: Option<Duration>, error: Option<&str>) -> Result<()> {
        let held = &self.delivery;
        let delay = delay.unwrap_or_else(|| {
            self.plan
                .settings
                .backoff
                .to_backoff()
                .delay(held.carried + held.count, fastrand::f64())
        });
        self.settle("nack", delay, error.unwrap_or_default()).await
    }

    async fn reject(&self, reason: &str) -> Result<()> {
        if self.plan.is_dead_letters {
            return Err(Error::invalid(
                "reject",
                "a dead letter cannot be dead-lettered again; ack or nack it",
            ));
        }
        self.settle("reject", Duration::ZERO, reason).await
    }

    async fn extend(&self, by: Duration) -> Result<()> {
        self.settle("extend", by, "").await
    }
}
