//! The services that listen to order events, each on its own subscription: the saga
//! starter, email and analytics. An event no one can read is rejected into the
//! subscription's dead-letter queue at once — retrying would never help.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ferry::Envelope;
use ferry::inbox::{Recorded, SqliteInbox};
use ferry::middleware::{HandlerContext, HandlerError};
use ferry::saga::Orchestrator;
use serde_json::Value;
use sqlx::SqlitePool;

use crate::Stats;
use crate::domain::{FaultPlan, ORDER_PLACED, OrderPlaced, OrderSettled, order_number};

/// Reads an order event; a payload that does not decode is permanent (dead letter).
fn order_of(ctx: &HandlerContext) -> Result<(String, String), HandlerError> {
    let event: Envelope<Value> = Envelope::from_received(ctx.message())
        .map_err(|e| HandlerError::permanent(format!("not an event: {e}")))?;
    let order_id = if event.event_type == ORDER_PLACED {
        serde_json::from_value::<OrderPlaced>(event.payload)
            .map_err(|e| HandlerError::permanent(format!("malformed {ORDER_PLACED}: {e}")))?
            .order_id
    } else {
        serde_json::from_value::<OrderSettled>(event.payload)
            .map_err(|e| HandlerError::permanent(format!("malformed {}: {e}", event.event_type)))?
            .order_id
    };
    Ok((event.event_type, order_id))
}

/// Starts an order saga for every `OrderPlaced`. The saga id is the order id, so a
/// redelivered event starts nothing twice.
pub async fn start_saga(
    orchestrator: Orchestrator,
    ctx: HandlerContext,
) -> Result<(), HandlerError> {
    let (event_type, order_id) = order_of(&ctx)?;
    if event_type != ORDER_PLACED {
        return Ok(());
    }
    let order: OrderPlaced = Envelope::from_received(ctx.message())
        .map(|e: Envelope<OrderPlaced>| e.payload)
        .map_err(|e| HandlerError::permanent(e.to_string()))?;
    orchestrator
        .start_with_id(&order_id, &order)
        .await
        .map_err(HandlerError::transient)?;
    Ok(())
}

/// The email service: one email per event, even when an event comes twice — the email
/// log and the inbox record commit together.
#[derive(Clone)]
pub struct Email {
    pub pool: SqlitePool,
    pub inbox: SqliteInbox,
    pub plan: FaultPlan,
    pub stats: Arc<Stats>,
}

impl Email {
    fn first_crash(&self, order_id: &str) -> bool {
        let mut crashed = self
            .stats
            .crashed_orders
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        crashed.insert(order_id.to_owned())
    }

    pub async fn handle(&self, ctx: HandlerContext) -> Result<(), HandlerError> {
        let (event_type, order_id) = order_of(&ctx)?;
        let mut tx = self.pool.begin().await.map_err(HandlerError::transient)?;
        match self
            .inbox
            .record(&mut tx, &ctx.id)
            .await
            .map_err(HandlerError::transient)?
        {
            Recorded::First => {
                sqlx::query("INSERT INTO emails (order_id, kind) VALUES (?1, ?2)")
                    .bind(&order_id)
                    .bind(&event_type)
                    .execute(&mut *tx)
                    .await
                    .map_err(HandlerError::transient)?;
            }
            Recorded::Duplicate => {
                self.stats
                    .duplicates_suppressed
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        tx.commit().await.map_err(HandlerError::transient)?;
        // The injected crash: the email went out (committed) and the worker dies before
        // acking, so the event comes back — and must not send a second email. Once per
        // planned order, the first time it gets this far (not "on attempt 1": an earlier
        // attempt may have failed on its own, say on a busy database).
        let crashes = order_number(&order_id).is_some_and(|n| self.plan.email_crashes(n));
        if crashes && event_type == ORDER_PLACED && self.first_crash(&order_id) {
            self.stats.crashes_injected.fetch_add(1, Ordering::Relaxed);
            return Err(HandlerError::transient(
                "email worker crashed after sending, before acking",
            ));
        }
        Ok(())
    }
}

/// Analytics: counts events by type. Its stack dedups by message id in memory and turns a
/// panic into a retry.
#[derive(Clone)]
pub struct Analytics {
    pub counts: Arc<Mutex<BTreeMap<String, u64>>>,
    pub plan: FaultPlan,
    pub stats: Arc<Stats>,
}

impl Analytics {
    pub async fn handle(&self, ctx: HandlerContext) -> Result<(), HandlerError> {
        let (event_type, order_id) = order_of(&ctx)?;
        let panics = order_number(&order_id).is_some_and(|n| self.plan.analytics_panics(n));
        if panics && ctx.attempt == 1 && event_type == ORDER_PLACED {
            self.stats.panics_injected.fetch_add(1, Ordering::Relaxed);
            panic!("analytics warehouse client crashed on {order_id}");
        }
        *self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(event_type)
            .or_default() += 1;
        Ok(())
    }
}
