//! The shop's database and the order service. Each service would have its own database in
//! production; here they share one SQLite file (WAL mode), each with its own tables and
//! its own inbox table, which changes nothing about the patterns.
//!
//! The order service writes an order and its `OrderPlaced` event in one transaction
//! through the outbox — no dual write: the event exists if and only if the order does.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use ferry::outbox::{OutboxEvent, SqliteOutbox};
use ferry::{Destination, Envelope};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{SqliteConnection, SqlitePool};

use crate::domain::{
    Fate, FaultPlan, ORDER_CANCELLED, ORDER_CONFIRMED, ORDER_PLACED, OrderPlaced, OrderSettled,
    order_id, placed,
};

/// Stock of every SKU at the start: enough that no order runs out.
pub const INITIAL_STOCK: i64 = 1_000_000;
pub const SKUS: [&str; 4] = ["kettle", "mug-0", "mug-1", "mug-2"];

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS orders (
        id TEXT PRIMARY KEY, customer TEXT NOT NULL, total_cents INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('PLACED', 'CONFIRMED', 'CANCELLED')))",
    "CREATE TABLE IF NOT EXISTS stock (sku TEXT PRIMARY KEY, available INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS reservations (
        order_id TEXT PRIMARY KEY, lines TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('RESERVED', 'RELEASED')))",
    "CREATE TABLE IF NOT EXISTS payments (
        order_id TEXT PRIMARY KEY, amount_cents INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('CHARGED', 'DECLINED', 'REFUNDED')))",
    "CREATE TABLE IF NOT EXISTS emails (
        id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL, kind TEXT NOT NULL)",
    // What each participant answered each saga command, so a duplicate command is answered
    // the same way without doing the work again.
    "CREATE TABLE IF NOT EXISTS command_outcomes (
        command_id TEXT PRIMARY KEY, outcome TEXT NOT NULL)",
];

/// Opens (creating) the shop's database at `path`.
pub async fn open(path: &Path) -> anyhow::Result<SqlitePool> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // Writers queue on SQLite's one write lock; wait for it rather than fail.
        .busy_timeout(Duration::from_secs(30));
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .with_context(|| format!("opening {}", path.display()))?;
    for statement in SCHEMA {
        sqlx::query(statement).execute(&pool).await?;
    }
    for sku in SKUS {
        sqlx::query("INSERT INTO stock (sku, available) VALUES (?1, ?2) ON CONFLICT DO NOTHING")
            .bind(sku)
            .bind(INITIAL_STOCK)
            .execute(&pool)
            .await?;
    }
    Ok(pool)
}

/// The order service's writes: each is one transaction with the events it causes.
#[derive(Clone)]
pub struct OrderService {
    pub pool: SqlitePool,
    pub outbox: SqliteOutbox,
    pub events: String,
    pub run: String,
    pub plan: FaultPlan,
}

impl OrderService {
    /// Places order `n`: the order row and its `OrderPlaced` event commit together. A poison
    /// order's event is one no consumer can read (its lines are not a list).
    pub async fn place(&self, n: u32) -> anyhow::Result<String> {
        let order = placed(&self.run, n);
        let event = if self.plan.fate(n) == Fate::Poison {
            let garbled = serde_json::json!({
                "order_id": order.order_id,
                "customer": order.customer,
                "lines": "three kettles, please",
            });
            self.event(ORDER_PLACED, &order.order_id, garbled)?
        } else {
            self.event(ORDER_PLACED, &order.order_id, &order)?
        };
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO orders (id, customer, total_cents, status) VALUES (?1, ?2, ?3, 'PLACED')",
        )
        .bind(&order.order_id)
        .bind(&order.customer)
        .bind(order.total_cents)
        .execute(&mut *tx)
        .await?;
        self.outbox.enqueue(&mut tx, event).await?;
        tx.commit().await?;
        Ok(order.order_id)
    }

    /// Confirms a placed order and announces it, in the caller's transaction.
    pub async fn confirm(
        &self,
        conn: &mut SqliteConnection,
        order: &OrderPlaced,
    ) -> anyhow::Result<()> {
        self.settle(conn, order, "CONFIRMED", ORDER_CONFIRMED).await
    }

    /// Cancels a placed order and announces it, in the caller's transaction.
    pub async fn cancel(
        &self,
        conn: &mut SqliteConnection,
        order: &OrderPlaced,
    ) -> anyhow::Result<()> {
        self.settle(conn, order, "CANCELLED", ORDER_CANCELLED).await
    }

    async fn settle(
        &self,
        conn: &mut SqliteConnection,
        order: &OrderPlaced,
        status: &str,
        event_type: &str,
    ) -> anyhow::Result<()> {
        let moved =
            sqlx::query("UPDATE orders SET status = ?1 WHERE id = ?2 AND status = 'PLACED'")
                .bind(status)
                .bind(&order.order_id)
                .execute(&mut *conn)
                .await?
                .rows_affected();
        // Only the transition announces: settling twice publishes one event.
        if moved == 1 {
            let settled = OrderSettled {
                order_id: order.order_id.clone(),
                customer: order.customer.clone(),
            };
            let event = self.event(event_type, &order.order_id, &settled)?;
            self.outbox.enqueue(conn, event).await?;
        }
        Ok(())
    }

    /// An event for the events topic, keyed by its order: the relay publishes one order's
    /// events in the order they were written.
    fn event<T: serde::Serialize>(
        &self,
        event_type: &str,
        order_id: &str,
        payload: T,
    ) -> anyhow::Result<OutboxEvent> {
        let envelope = Envelope::new(event_type, payload).source("order-service");
        let mut event = OutboxEvent::envelope(Destination::topic(&self.events), &envelope)?;
        event.message.key = Some(order_id.to_owned().into_bytes().into());
        Ok(event)
    }

    /// Orders by status.
    pub async fn count(&self, status: &str) -> anyhow::Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM orders WHERE status = ?1")
                .bind(status)
                .fetch_one(&self.pool)
                .await?,
        )
    }
}

/// Order ids of the run, by number.
pub fn all_orders(run: &str, plan: FaultPlan) -> Vec<String> {
    (1..=plan.orders).map(|n| order_id(run, n)).collect()
}
