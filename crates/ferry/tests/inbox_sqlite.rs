//! The SQLite inbox: the record commits with the handler's effects or not at all, so a
//! redelivered or duplicated message commits no second effect. Messages come from the
//! embedded broker; the database is a file in a temporary directory.
#![cfg(feature = "sqlite")]

mod inbox_support;

use std::time::Duration;

use ferry::inbox::{DedupWindow, Processed, Recorded, SqliteInbox};
use ferry::{Destination, Message};
use inbox_support::{assert_drained, broker, consumer, next, queue};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use tempfile::TempDir;

/// A database file with the inbox installed (twice: `install` is idempotent) and an
/// `effects` table the handlers write to.
async fn database(dir: &TempDir) -> (SqlitePool, SqliteInbox) {
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("app.db"))
        .create_if_missing(true)
        .busy_timeout(Duration::from_secs(10));
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .expect("open sqlite");
    let inbox = SqliteInbox::new("processed_messages").unwrap();
    inbox.install(&pool).await.unwrap();
    inbox.install(&pool).await.unwrap();
    sqlx::query("CREATE TABLE effects (message TEXT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    (pool, inbox)
}

async fn effects(pool: &SqlitePool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM effects")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_message_redelivered_ten_times_commits_one_effect() {
    let (dir, ferry) = broker().await;
    let (pool, inbox) = database(&dir).await;
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
        let mut tx = pool.begin().await.unwrap();
        if inbox.record(&mut tx, &delivery.id).await.unwrap() == Recorded::First {
            firsts += 1;
            sqlx::query("INSERT INTO effects (message) VALUES (?1)")
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
    assert_eq!(effects(&pool).await, 1);
    assert_drained(&mut consumer).await;
}

#[tokio::test]
async fn the_same_id_published_ten_times_is_processed_once() {
    let (dir, ferry) = broker().await;
    let (pool, inbox) = database(&dir).await;
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
    for _ in 0..10 {
        let delivery = next(&mut consumer).await;
        assert_eq!(delivery.id, id);
        let outcome = inbox
            .process(&pool, delivery, |mut tx, message| async move {
                sqlx::query("INSERT INTO effects (message) VALUES (?1)")
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
    assert_eq!(effects(&pool).await, 1);
    assert_drained(&mut consumer).await;
}

#[tokio::test]
async fn concurrent_duplicates_on_two_consumers_commit_one_effect() {
    let (dir, ferry) = broker().await;
    let (pool, inbox) = database(&dir).await;
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
        let (pool, inbox) = (pool.clone(), inbox.clone());
        async move {
            let key = format!("{}:reserve", delivery.header("order-id").unwrap());
            inbox
                .process_keyed(&pool, delivery, &key, |mut tx, message| async move {
                    sqlx::query("INSERT INTO effects (message) VALUES (?1)")
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
    assert_eq!(effects(&pool).await, 1);
    assert_drained(&mut first).await;
    assert_drained(&mut second).await;
}

#[tokio::test]
async fn a_handler_failing_mid_transaction_leaves_no_record_and_the_redelivery_processes_it() {
    let (dir, ferry) = broker().await;
    let (pool, inbox) = database(&dir).await;
    let queue = queue(&ferry, "failing").await;
    let id = ferry
        .publisher(Destination::queue(&queue))
        .send(Message::new("bill"))
        .await
        .unwrap();
    let mut consumer = consumer(&ferry, &queue).await;
    for attempt in 1..=2u32 {
        let delivery = next(&mut consumer).await;
        assert_eq!(
            (delivery.id.as_str(), delivery.attempt),
            (id.as_str(), attempt)
        );
        let outcome = inbox
            .process(&pool, delivery, |mut tx, message| async move {
                sqlx::query("INSERT INTO effects (message) VALUES (?1)")
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
            assert!(!inbox.contains(&pool, &id).await.unwrap(), "no record");
            assert_eq!(effects(&pool).await, 0, "the effect rolled back");
        } else {
            assert!(outcome.is_done(), "{outcome:?}");
        }
    }
    assert!(inbox.contains(&pool, &id).await.unwrap());
    assert_eq!(effects(&pool).await, 1);
    assert_drained(&mut consumer).await;
}

#[tokio::test]
async fn cleanup_deletes_records_older_than_the_window_only() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, inbox) = database(&dir).await;
    let inbox = inbox.with_window(DedupWindow::fixed(Duration::from_secs(3600)).unwrap());
    let mut tx = pool.begin().await.unwrap();
    for key in ["old-1", "old-2", "new-1"] {
        assert_eq!(inbox.record(&mut tx, key).await.unwrap(), Recorded::First);
    }
    tx.commit().await.unwrap();
    let two_hours_ago = ferry::message::now_ms() - 2 * 3600 * 1000;
    sqlx::query("UPDATE processed_messages SET processed_at = ?1 WHERE key LIKE 'old-%'")
        .bind(two_hours_ago)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(inbox.cleanup(&pool).await.unwrap(), 2);
    assert!(!inbox.contains(&pool, "old-1").await.unwrap());
    assert!(inbox.contains(&pool, "new-1").await.unwrap());
    assert_eq!(inbox.cleanup(&pool).await.unwrap(), 0);
}

#[tokio::test]
async fn table_names_that_are_not_plain_identifiers_are_refused() {
    for bad in ["inbox; DROP TABLE effects", "main.inbox", "1inbox", ""] {
        let err = SqliteInbox::new(bad).unwrap_err();
        assert!(matches!(err, ferry::Error::Invalid { .. }), "{bad}: {err}");
    }
}
