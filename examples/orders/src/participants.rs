//! The saga's participants: the order service (accept, cancel as compensation, confirm),
//! inventory (reserve, release) and payment (charge, refund). Each reads commands from its
//! own queue and answers on the saga's reply queue.
//!
//! A participant is idempotent by the command id: the command, the effect and the answer
//! are recorded in one transaction with an insert into its inbox table, so a command sent
//! again (the orchestrator re-sends after a restart or a step timeout) does nothing twice
//! and gets the same answer.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ferry::Ferry;
use ferry::inbox::{Recorded, SqliteInbox};
use ferry::middleware::{HandlerContext, HandlerError};
use ferry::saga::{Command, Kind, Outcome};
use sqlx::{SqliteConnection, SqlitePool};

use crate::Stats;
use crate::domain::{Fate, FaultPlan, OrderPlaced, order_number};
use crate::shop::OrderService;

/// Which participant a command queue belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Orders,
    Inventory,
    Payment,
}

/// Everything a participant's handler needs; cheap to clone.
#[derive(Clone)]
pub struct Participant {
    pub role: Role,
    pub ferry: Ferry,
    pub pool: SqlitePool,
    pub inbox: SqliteInbox,
    pub orders: OrderService,
    pub plan: FaultPlan,
    pub stats: Arc<Stats>,
}

impl Participant {
    /// Handles one command delivery: effect and answer, at most once per command id.
    pub async fn handle(&self, ctx: HandlerContext) -> Result<(), HandlerError> {
        let command = Command::from_received(ctx.message())
            .map_err(|e| HandlerError::permanent(format!("not a saga command: {e}")))?;
        let order: OrderPlaced = command
            .payload()
            .map_err(|e| HandlerError::permanent(format!("bad order in command: {e}")))?;
        let mut tx = self.pool.begin().await.map_err(HandlerError::transient)?;
        let outcome = match self
            .inbox
            .record(&mut tx, &command.command_id)
            .await
            .map_err(HandlerError::transient)?
        {
            Recorded::First => {
                let outcome = self
                    .effect(&mut tx, &command, &order)
                    .await
                    .map_err(HandlerError::transient)?;
                sqlx::query("INSERT INTO command_outcomes (command_id, outcome) VALUES (?1, ?2)")
                    .bind(&command.command_id)
                    .bind(serde_json::to_string(&outcome).map_err(HandlerError::permanent)?)
                    .execute(&mut *tx)
                    .await
                    .map_err(HandlerError::transient)?;
                outcome
            }
            Recorded::Duplicate => {
                self.stats
                    .duplicates_suppressed
                    .fetch_add(1, Ordering::Relaxed);
                let text: String = sqlx::query_scalar(
                    "SELECT outcome FROM command_outcomes WHERE command_id = ?1",
                )
                .bind(&command.command_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(HandlerError::transient)?;
                serde_json::from_str(&text).map_err(HandlerError::permanent)?
            }
        };
        tx.commit().await.map_err(HandlerError::transient)?;
        // Answered after the commit: a crash in between re-sends the command, which finds
        // the record and answers the same.
        command
            .reply(&self.ferry, &outcome)
            .await
            .map_err(HandlerError::transient)
    }

    async fn effect(
        &self,
        conn: &mut SqliteConnection,
        command: &Command,
        order: &OrderPlaced,
    ) -> anyhow::Result<Outcome> {
        let id = &order.order_id;
        Ok(match (self.role, command.kind) {
            // The order is there and still placed: the saga may go on.
            (Role::Orders, Kind::Action) if command.step == "accept-order" => {
                let status: Option<String> =
                    sqlx::query_scalar("SELECT status FROM orders WHERE id = ?1")
                        .bind(id)
                        .fetch_optional(&mut *conn)
                        .await?;
                match status.as_deref() {
                    Some("PLACED") => Outcome::succeeded(id)?,
                    other => Outcome::failed(format!("order {id} is {other:?}")),
                }
            }
            (Role::Orders, Kind::Compensation) => {
                self.orders.cancel(conn, order).await?;
                Outcome::succeeded("cancelled")?
            }
            (Role::Orders, Kind::Action) => {
                self.orders.confirm(conn, order).await?;
                Outcome::succeeded("confirmed")?
            }
            (Role::Inventory, Kind::Action) => {
                for line in &order.lines {
                    let taken = sqlx::query(
                        "UPDATE stock SET available = available - ?1
                         WHERE sku = ?2 AND available >= ?1",
                    )
                    .bind(line.quantity)
                    .bind(&line.sku)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected();
                    anyhow::ensure!(taken == 1, "no stock of {}", line.sku);
                }
                sqlx::query(
                    "INSERT INTO reservations (order_id, lines, status) VALUES (?1, ?2, 'RESERVED')",
                )
                .bind(id)
                .bind(serde_json::to_string(&order.lines)?)
                .execute(&mut *conn)
                .await?;
                Outcome::succeeded("reserved")?
            }
            (Role::Inventory, Kind::Compensation) => {
                let released = sqlx::query(
                    "UPDATE reservations SET status = 'RELEASED'
                     WHERE order_id = ?1 AND status = 'RESERVED'",
                )
                .bind(id)
                .execute(&mut *conn)
                .await?
                .rows_affected();
                if released == 1 {
                    for line in &order.lines {
                        sqlx::query("UPDATE stock SET available = available + ?1 WHERE sku = ?2")
                            .bind(line.quantity)
                            .bind(&line.sku)
                            .execute(&mut *conn)
                            .await?;
                    }
                }
                Outcome::succeeded("released")?
            }
            (Role::Payment, Kind::Action) => {
                let declined = order_number(id).map(|n| self.plan.fate(n)) == Some(Fate::Declined);
                let status = if declined { "DECLINED" } else { "CHARGED" };
                sqlx::query(
                    "INSERT INTO payments (order_id, amount_cents, status) VALUES (?1, ?2, ?3)",
                )
                .bind(id)
                .bind(order.total_cents)
                .bind(status)
                .execute(&mut *conn)
                .await?;
                if declined {
                    Outcome::failed("card declined")
                } else {
                    Outcome::succeeded("charged")?
                }
            }
            (Role::Payment, Kind::Compensation) => {
                sqlx::query(
                    "UPDATE payments SET status = 'REFUNDED' WHERE order_id = ?1 AND status = 'CHARGED'",
                )
                .bind(id)
                .execute(&mut *conn)
                .await?;
                Outcome::succeeded("refunded")?
            }
        })
    }
}
