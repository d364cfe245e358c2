//! The PostgreSQL inbox: the record commits with the handler's effects or not at all, and a
//! concurrent duplicate waits on the unique key until the first transaction ends. Messages
//! come from the embedded broker; the tables live in `FERRY_POSTGRES_URL` (default: the
//! machine's server), under names unique to the run, dropped at the end. Skips loudly when
//! nothing answers, and fails instead under `CI=true`.
#![cfg(feature = "postgres")]

mod inbox_support;

use std::time::Duration;

use ferry::inbox::{DedupWindow, PostgresInbox, Processed, Recorded};
use ferry::{Destination, Message};
use ferry_testkit::fresh_ident;
use inbox_support::{assert_drained, broker, consumer, next, queue};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// An inbox table and an effects table of its own, both fresh.
struct Db {
    pool: PgPool,
    inbox: PostgresInbox,
    effects: String,
}

impl Db {
    async fn effects(&self) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {}", self.effects))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    fn insert_effect(&self) -> String {
        format!("INSERT INTO {} (message) VALUES ($1)", self.effects)
    }

    async fn drop_tables(self) {
        for table in [self.inbox.table(), &self.effects] {
            sqlx::query(&format!("DROP TABLE IF EXISTS {table}"))
                .execute(&self.pool)
                .await
                .unwrap();
        }
        self.pool.close().await;
    }
}

async fn database(what: &str) -> Option<Db> {
    let url = ferry_testkit::url_or_skip("PostgreSQL", "FERRY_POSTGRES_URL", DEFAULT_URL)?;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await
        .expect("connect to PostgreSQL");
    let inbox = PostgresInbox::new(&fresh_ident("inbox", what)).unwrap();
    inbox.install(&pool).await.unwrap();
    inbox.install(&pool).await.unwrap();
    let effects = format!("{}_effects", inbox.table());
    sqlx::query(&format!("CREATE TABLE {effects} (message TEXT NOT NULL)"))
        .execute(&pool)
        .await
        .unwrap();
    Some(Db {
        pool,
        inbox,
        effects,
    })
}

#[tokio::test]
async fn a_message_redelivered_ten_times_commits_one_effect() {
    let Some(db) = database("redelivered").await else {
        return;
    };
    let (_dir, ferry) = broker().await;
    let queue = queue(&ferry, "redelivered").await;
    ferry
        .publisher(Destination::queue(&queue))
        .send(Message::new("charge 10"))
        .await
        .unwrap();
    let mut consumer = consumer(&ferry, &queue).await;
    let mut firsts = 0;
    for attempt in 1..=10 {
        let delivery = next(&mut consumer).await;
        assert_eq!(
            delivery.attempt, attempt,
            "the same message, delivered again"
        );
        let mut tx = db.pool.begin().await.unwrap();
        if db.inbox.record(&mut tx, &delivery.id).await.unwrap() == Recorded::First {
            firsts += 1;
            sqlx::query(&db.insert_effect())
                .bind(&delivery.id)
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
        // The ack "gets lost" nine times: the message comes back.
        if attempt < 10 {
            delivery.nack(Some(Duration::ZERO)).await.unwrap();
        } else {
            delivery.ack().await.unwrap();
        }
    }
    assert_eq!(firsts, 1);
    assert_eq!(db.effects().await, 1);
    assert_drained(&mut consumer).await;
    db.drop_tables().await;
}

#[tokio::test]
async fn the_same_id_published_ten_times_is_processed_once() {
    let Some(db) = database("republished").await else {
        return;
    };
    let (_dir, ferry) = broker().await;
    let queue = queue(&ferry, "republished").await;
    let publisher = ferry.publisher(Destination::queue(&queue));
    let id = ferry::message::new_id();
    for _ in 0..10 {
        publisher
            .send(Message::new("ship").with_id(&id))
            .await
            .unwrap();
    }
    let mut consumer = consumer(&ferry, &queue).await;
    let (mut done, mut duplicates) = (0, 0);
    let insert = &db.insert_effect();
    for _ in 0..10 {
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.id, id);
        let outcome = db
            .inbox
            .process(&db.pool, delivery, |mut tx, message| async move {
                sqlx::query(insert)
                    .bind(&message.id)
                    .execute(&mut *tx)
                    .await?;
                Ok::<_, sqlx::Error>((tx, ()))
            })
            .await
            .unwrap();
        match outcome {
            Processed::Done(()) => done += 1,
            Processed::Duplicate => duplicates += 1,
            Processed::Failed(e) => panic!("handler failed: {e}"),
        }
    }
    assert_eq!((done, duplicates), (1, 9));
    assert_eq!(db.effects().await, 1);
    assert_drained(&mut consumer).await;
    db.drop_tables().await;
}

/// Waits until some session inserting into the inbox table waits on a lock, as the
/// duplicate insert does on the first transaction's uncommitted key; a sleep would only
/// hope it got there.
async fn blocked_on_a_lock(db: &Db) {
    let pattern = format!("INSERT INTO {}%", db.inbox.table());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND query LIKE $1",
        )
        .bind(&pattern)
        .fetch_one(&db.pool)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the duplicate insert never waited on the first transaction"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_concurrent_duplicate_waits_for_the_first_transaction_and_finds_its_record() {
    let Some(db) = database("blocking").await else {
        return;
    };
    let key = "order-7:OrderPlaced";
    let mut first = db.pool.begin().await.unwrap();
    assert_eq!(
        db.inbox.record(&mut first, key).await.unwrap(),
        Recorded::First
    );

    // A second consumer, same key: its insert blocks on the unique key.
    let (pool, inbox) = (db.pool.clone(), db.inbox.clone());
    let second = tokio::spawn(async move {
        let mut tx = pool.begin().await.unwrap();
        let recorded = inbox.record(&mut tx, key).await.unwrap();
        tx.commit().await.unwrap();
        recorded
    });
    blocked_on_a_lock(&db).await;
    assert!(
        !second.is_finished(),
        "the duplicate must wait for the first transaction"
    );
    first.commit().await.unwrap();
    assert_eq!(second.await.unwrap(), Recorded::Duplicate);

    // When the first rolls back instead, the waiting one records the key itself.
    let key = "order-8:OrderPlaced";
    let mut first = db.pool.begin().await.unwrap();
    assert_eq!(
        db.inbox.record(&mut first, key).await.unwrap(),
        Recorded::First
    );
    let (pool, inbox) = (db.pool.clone(), db.inbox.clone());
    let second = tokio::spawn(async move {
        let mut tx = pool.begin().await.unwrap();
        let recorded = inbox.record(&mut tx, key).await.unwrap();
        tx.commit().await.unwrap();
        recorded
    });
    // Rolled back only once the second insert waits on it: otherwise the second would
    // find the key free and pass without proving anything.
    blocked_on_a_lock(&db).await;
    first.rollback().await.unwrap();
    assert_eq!(second.await.unwrap(), Recorded::First);
    db.drop_tables().await;
}

#[tokio::test]
async fn concurrent_duplicates_on_two_consumers_commit_one_effect() {
    let Some(db) = database("concurrent").await else {
        return;
    };
    let (_dir, ferry) = broker().await;
    let queue = queue(&ferry, "concurrent").await;
    let publisher = ferry.publisher(Destination::queue(&queue));
    // Two messages, two ids, one business key: the producer sent the order twice.
    for _ in 0..2 {
        publisher
            .send(Message::new("reserve").with_header("order-id", "order-7"))
            .await
            .unwrap();
    }
    let (mut first, mut second) = (
        consumer(&ferry, &queue).await,
        consumer(&ferry, &queue).await,
    );
    let (a, b) = (next(&mut first).await, next(&mut second).await);
    assert_ne!(a.id, b.id);
    let handle = |delivery: ferry::Delivery| {
        let (pool, inbox, insert) = (db.pool.clone(), db.inbox.clone(), db.insert_effect());
        async move {
            let key = format!("{}:reserve", delivery.header("order-id").unwrap());
            inbox
                .process_keyed(&pool, delivery, &key, |mut tx, message| async move {
                    sqlx::query(&insert)
                        .bind(&message.id)
                        .execute(&mut *tx)
                        .await?;
                    // Hold the transaction open while the other consumer tries.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok::<_, sqlx::Error>((tx, ()))
                })
                .await
                .unwrap()
        }
    };
    let (x, y) = tokio::join!(tokio::spawn(handle(a)), tokio::spawn(handle(b)));
    let (x, y) = (x.unwrap(), y.unwrap());
    assert_eq!(
        [x.is_done(), y.is_done()].iter().filter(|d| **d).count(),
        1,
        "one processed: {x:?} {y:?}"
    );
    assert!(x.is_duplicate() || y.is_duplicate(), "{x:?} {y:?}");
    assert_eq!(db.effects().await, 1);
    assert_drained(&mut first).await;
    assert_drained(&mut second).await;
    db.drop_tables().await;
}

#[tokio::test]
async fn a_handler_failing_mid_transaction_leaves_no_record_and_the_redelivery_processes_it() {
    let Some(db) = database("failing").await else {
        return;
    };
    let (_dir, ferry) = broker().await;
    let queue = queue(&ferry, "failing").await;
    let id = ferry
        .publisher(Destination::queue(&queue))
        .send(Message::new("bill"))
        .await
        .unwrap();
    let mut consumer = consumer(&ferry, &queue).await;
    let insert = db.insert_effect();
    for attempt in 1..=2u32 {
        let delivery = next(&mut consumer).await;
        assert_eq!(
            (delivery.id.as_str(), delivery.attempt),
            (id.as_str(), attempt)
        );
        let insert = insert.clone();
        let outcome = db
            .inbox
            .process(&db.pool, delivery, |mut tx, message| async move {
                sqlx::query(&insert)
                    .bind(&message.id)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.to_string())?;
                if message.attempt == 1 {
                    return Err("the payment service timed out".to_owned());
                }
                Ok((tx, ()))
            })
            .await
            .unwrap();
        if attempt == 1 {
            assert!(matches!(&outcome, Processed::Failed(e) if e.contains("timed out")));
            assert!(
                !db.inbox.contains(&db.pool, &id).await.unwrap(),
                "no record"
            );
            assert_eq!(db.effects().await, 0, "the effect rolled back");
        } else {
            assert!(outcome.is_done(), "{outcome:?}");
        }
    }
    assert!(db.inbox.contains(&db.pool, &id).await.unwrap());
    assert_eq!(db.effects().await, 1);
    assert_drained(&mut consumer).await;
    db.drop_tables().await;
}

#[tokio::test]
async fn cleanup_deletes_records_older_than_the_window_only() {
    let Some(db) = database("cleanup").await else {
        return;
    };
    let inbox = db
        .inbox
        .clone()
        .with_window(DedupWindow::fixed(Duration::from_secs(3600)).unwrap());
    let mut tx = db.pool.begin().await.unwrap();
    for key in ["old-1", "old-2", "new-1"] {
        assert_eq!(inbox.record(&mut tx, key).await.unwrap(), Recorded::First);
    }
    tx.commit().await.unwrap();
    sqlx::query(&format!(
        "UPDATE {} SET processed_at = now() - interval '2 hours' WHERE key LIKE 'old-%'",
        inbox.table()
    ))
    .execute(&db.pool)
    .await
    .unwrap();
    assert_eq!(inbox.cleanup(&db.pool).await.unwrap(), 2);
    assert!(!inbox.contains(&db.pool, "old-1").await.unwrap());
    assert!(inbox.contains(&db.pool, "new-1").await.unwrap());
    assert_eq!(inbox.cleanup(&db.pool).await.unwrap(), 0);
    db.drop_tables().await;
}
