//! The transactional outbox on PostgreSQL: publishing to the embedded broker, and to Redis
//! through the SDK (an external engine that deduplicates by id). Covers rollback, the
//! crash windows, two relays claiming with `FOR UPDATE SKIP LOCKED`, a broker outage,
//! retention, and LISTEN/NOTIFY waking the relay long before its poll interval.
//!
//! Runs against `FERRY_POSTGRES_URL` and `FERRY_REDIS_URL` (defaults: this machine's
//! servers); skips loudly when one does not answer, and fails instead under `CI=true`.
#![cfg(all(feature = "postgres", feature = "embedded"))]

mod outbox_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ferry::outbox::{Backlog, OutboxEvent, PostgresOutbox, Relay, RelayConfig, RelayHooks};
use ferry::{Error, Ferry};
use outbox_support::*;
use sqlx::postgres::{PgPool, PgPoolOptions};
use tempfile::TempDir;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379/0";

async fn pg_pool() -> Option<PgPool> {
    let url = ferry_testkit::url_or_skip("PostgreSQL", "FERRY_POSTGRES_URL", DEFAULT_URL)?;
    Some(
        PgPoolOptions::new()
            .max_connections(8)
            .connect(&url)
            .await
            .expect("connect to PostgreSQL"),
    )
}

struct PgDb {
    pool: PgPool,
    outbox: PostgresOutbox,
}

impl PgDb {
    async fn drop_table(&self) {
        sqlx::query(&format!("DROP TABLE IF EXISTS {}", self.outbox.table()))
            .execute(&self.pool)
            .await
            .unwrap();
    }
}

#[async_trait]
impl OutboxDb for PgDb {
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

/// Which broker the relay publishes to.
#[derive(Clone, Copy)]
enum Engine {
    Embedded,
    Redis,
}

struct Setup {
    db: PgDb,
    broker: Broker,
    _dir: TempDir,
}

impl Setup {
    async fn teardown(self) {
        self.db.drop_table().await;
        self.broker.delete_queue().await;
    }
}

/// A fresh outbox table and a fresh queue, or `None` when a service is missing.
async fn setup(engine: Engine, dedup: bool) -> Option<Setup> {
    let pool = pg_pool().await?;
    let dir = TempDir::new().unwrap();
    let url = match engine {
        Engine::Embedded => format!("embedded:{}", dir.path().display()),
        Engine::Redis => ferry_testkit::url_or_skip("Redis", "FERRY_REDIS_URL", DEFAULT_REDIS_URL)?,
    };
    let outbox =
        PostgresOutbox::with_table(pool.clone(), &ferry_testkit::fresh_ident("obx", "t")).unwrap();
    outbox.install().await.unwrap();
    outbox.install().await.expect("install is idempotent");
    let transport = ferry::transport::connect(&url)
        .await
        .expect("connect the broker");
    Some(Setup {
        db: PgDb { pool, outbox },
        broker: Broker::new(transport, dedup).await,
        _dir: dir,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_enqueued_in_a_rolled_back_transaction_is_never_published() {
    let Some(s) = setup(Engine::Embedded, true).await else {
        return;
    };
    rollback_is_never_published(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_dying_between_publish_and_mark_republishes_and_the_broker_stores_it_once() {
    let Some(s) = setup(Engine::Embedded, true).await else {
        return;
    };
    crash_after_publish_before_mark_publishes_again(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_republish_to_redis_after_a_crash_is_stored_once() {
    let Some(s) = setup(Engine::Redis, true).await else {
        return;
    };
    crash_after_publish_before_mark_publishes_again(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_transport_dedup_the_republished_event_is_absorbed_by_the_inbox() {
    let Some(s) = setup(Engine::Embedded, false).await else {
        return;
    };
    crash_after_publish_before_mark_publishes_again(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_dying_after_claiming_loses_nothing_once_its_lease_lapses() {
    let Some(s) = setup(Engine::Embedded, true).await else {
        return;
    };
    crash_after_claim_before_publish_loses_nothing(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_on_one_table_publish_each_row_once_in_aggregate_order() {
    let Some(s) = setup(Engine::Embedded, true).await else {
        return;
    };
    two_relays_publish_each_row_once_in_aggregate_order(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_relays_publishing_to_redis_deliver_each_row_once_in_aggregate_order() {
    let Some(s) = setup(Engine::Redis, true).await else {
        return;
    };
    two_relays_publish_each_row_once_in_aggregate_order(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_whose_publish_could_outlast_the_lease_are_handed_back_untried() {
    let Some(s) = setup(Engine::Embedded, true).await else {
        return;
    };
    rows_the_lease_cannot_cover_are_handed_back_untried(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_row_holds_back_only_the_later_rows_of_its_aggregate() {
    let Some(s) = setup(Engine::Embedded, true).await else {
        return;
    };
    a_failing_row_holds_back_its_aggregate_only(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_opens_the_breaker_and_rows_wait_until_recovery() {
    let Some(s) = setup(Engine::Embedded, true).await else {
        return;
    };
    broker_outage_opens_the_breaker_and_recovery_publishes_all(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_rows_are_deleted_after_the_retention() {
    let Some(s) = setup(Engine::Embedded, true).await else {
        return;
    };
    retention_cleanup_deletes_only_published_rows_past_retention(&s.db, &s.broker).await;
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_wakes_a_listening_relay_long_before_its_poll_interval() {
    let Some(s) = setup(Engine::Embedded, true).await else {
        return;
    };
    let poll = Duration::from_secs(60);
    let config = RelayConfig {
        poll_interval: poll,
        ..quick()
    };
    let running = s.db.relay(&s.broker.ferry, config, None).unwrap().spawn();
    // A notification sent before the relay listens is lost, and the poll would then take
    // a minute: wait until its LISTEN has run rather than hoping a sleep covered it.
    let listen = format!("LISTEN \"{}\"", s.db.outbox.table());
    eventually("the relay to listen on the table's channel", async || {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM pg_stat_activity WHERE query = $1")
            .bind(&listen)
            .fetch_one(&s.db.pool)
            .await
            .unwrap()
            > 0
    })
    .await;
    assert!(s.broker.stored().is_empty());

    let committed = Instant::now();
    let ids =
        s.db.enqueue(vec![s.broker.event("n", "wake up")], true)
            .await;
    eventually("the relay to publish the new row", async || {
        !s.broker.stored().is_empty()
    })
    .await;
    assert!(
        committed.elapsed() < poll / 4,
        "woken by the notification, not by the poll"
    );
    assert_eq!(s.broker.stored()[0].id, ids[0]);
    running.shutdown().await.unwrap();
    s.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_name_that_is_not_a_plain_identifier_is_refused() {
    let Some(pool) = pg_pool().await else {
        return;
    };
    for bad in ["Orders", "orders; DROP TABLE x", "1st", ""] {
        assert!(matches!(
            PostgresOutbox::with_table(pool.clone(), bad),
            Err(Error::Invalid { .. })
        ));
    }
}
