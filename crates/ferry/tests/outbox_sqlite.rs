//! The transactional outbox on SQLite, publishing to the embedded broker: rollback, the
//! two crash windows, two relays on one table, a failing row, a broker outage, retention
//! and dedup by capability. No service needed.
#![cfg(all(feature = "sqlite", feature = "embedded"))]

mod outbox_support;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferry::outbox::{Backlog, OutboxEvent, Relay, RelayConfig, RelayHooks, SqliteOutbox};
use ferry::{Error, Ferry};
use outbox_support::*;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use tempfile::TempDir;

struct SqliteDb {
    pool: SqlitePool,
    outbox: SqliteOutbox,
}

#[async_trait]
impl OutboxDb for SqliteDb {
    async fn enqueue(&self, events: Vec<OutboxEvent>, commit: bool) -> Vec<String> {
        let mut tx = self.pool.begin().await.unwrap();
        let mut ids = Vec::new();
        for event in events {
            ids.push(self.outbox.enqueue(&mut tx, event).await.unwrap());
        }
        if commit {
            tx.commit().await.unwrap();
        } else {
            tx.rollback().await.unwrap();
        }
        ids
    }
    fn relay(
        &self,
        ferry: &Ferry,
        config: RelayConfig,
        hooks: Option<Arc<dyn RelayHooks>>,
    ) -> ferry::Result<Relay> {
        match hooks {
            Some(hooks) => self.outbox.relay_with_hooks(ferry, config, hooks),
            None => self.outbox.relay(ferry, config),
        }
    }
    async fn backlog(&self) -> Backlog {
        self.outbox.backlog().await.unwrap()
    }
    async fn rows(&self) -> u64 {
        let n: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {}", self.outbox.table()))
            .fetch_one(&self.pool)
            .await
            .unwrap();
        n as u64
    }
}

/// A SQLite outbox and an embedded broker, each in its own temporary directory.
struct Setup {
    db: SqliteDb,
    broker: Broker,
    _dirs: (TempDir, TempDir),
}

async fn pool(dir: &TempDir) -> SqlitePool {
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("app.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .busy_timeout(Duration::from_secs(10));
    SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .unwrap()
}

async fn setup(dedup: bool) -> Setup {
    let db_dir = TempDir::new().unwrap();
    let broker_dir = TempDir::new().unwrap();
    let pool = pool(&db_dir).await;
    let outbox = SqliteOutbox::with_table(pool.clone(), "orders_outbox").unwrap();
    outbox.install().await.unwrap();
    outbox.install().await.expect("install is idempotent");
    let transport = ferry::transport::connect(&format!("embedded:{}", broker_dir.path().display()))
        .await
        .unwrap();
    Setup {
        db: SqliteDb { pool, outbox },
        broker: Broker::new(transport, dedup).await,
        _dirs: (db_dir, broker_dir),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_enqueued_in_a_rolled_back_transaction_is_never_published() {
    let s = setup(true).await;
    rollback_is_never_published(&s.db, &s.broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_dying_between_publish_and_mark_republishes_and_the_broker_stores_it_once() {
    let s = setup(true).await;
    crash_after_publish_before_mark_publishes_again(&s.db, &s.broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_transport_dedup_the_republished_event_is_absorbed_by_the_inbox() {
    let s = setup(false).await;
    crash_after_publish_before_mark_publishes_again(&s.db, &s.broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_dying_after_claiming_loses_nothing_once_its_lease_lapses() {
    let s = setup(true).await;
    crash_after_claim_before_publish_loses_nothing(&s.db, &s.broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_on_one_table_publish_each_row_once_in_aggregate_order() {
    let s = setup(true).await;
    two_relays_publish_each_row_once_in_aggregate_order(&s.db, &s.broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_whose_publish_could_outlast_the_lease_are_handed_back_untried() {
    let s = setup(true).await;
    rows_the_lease_cannot_cover_are_handed_back_untried(&s.db, &s.broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_row_holds_back_only_the_later_rows_of_its_aggregate() {
    let s = setup(true).await;
    a_failing_row_holds_back_its_aggregate_only(&s.db, &s.broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_opens_the_breaker_and_rows_wait_until_recovery() {
    let s = setup(true).await;
    broker_outage_opens_the_breaker_and_recovery_publishes_all(&s.db, &s.broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_rows_are_deleted_after_the_retention() {
    let s = setup(true).await;
    retention_cleanup_deletes_only_published_rows_past_retention(&s.db, &s.broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_dedup_refuses_a_transport_that_cannot_deduplicate() {
    let s = setup(false).await;
    require_dedup_refuses_a_transport_without_dedup(&s.db, &s.broker).await;
}

#[tokio::test]
async fn a_table_name_that_is_not_a_plain_identifier_is_refused() {
    let dir = TempDir::new().unwrap();
    let pool = pool(&dir).await;
    for bad in ["Orders", "orders; DROP TABLE x", "1st", ""] {
        assert!(matches!(
            SqliteOutbox::with_table(pool.clone(), bad),
            Err(Error::Invalid { .. })
        ));
    }
}

#[tokio::test]
async fn a_second_event_with_the_same_id_is_a_conflict() {
    let s = setup(true).await;
    let event = || {
        OutboxEvent::new(
            s.broker.destination(),
            ferry::Message::new("once").with_id("order-7-placed"),
        )
    };
    let mut tx = s.db.pool.begin().await.unwrap();
    s.db.outbox.enqueue(&mut tx, event()).await.unwrap();
    let err = s.db.outbox.enqueue(&mut tx, event()).await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err}");
}
