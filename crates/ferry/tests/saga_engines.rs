//! The saga orchestrator on real services: its state in PostgreSQL, its commands and
//! replies over Redis Streams and NATS JetStream through the SDK. Each run completes one
//! saga, compensates one whose second step declines, and resumes one after a crash; two
//! orchestrators sharing one store and reply queue never move a saga twice.
//! Services come from `FERRY_POSTGRES_URL`, `FERRY_REDIS_URL` and `FERRY_NATS_URL` (the
//! machine's servers by default); a test skips loudly when one does not answer, and fails
//! instead under `CI=true`.
#![cfg(all(feature = "postgres", feature = "redis", feature = "nats"))]

mod saga_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ferry::Ferry;
use ferry::saga::{
    Command, CrashSite, Kind, Orchestrator, Point, PostgresSagaStore, SagaStore, Status,
};
use saga_support::{Act, Behaviour, Shop, assert_status, eventually};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

/// A store in a table of its own, or `None` when PostgreSQL does not answer.
async fn postgres_store() -> Option<PostgresSagaStore> {
    let url = ferry_testkit::url_or_skip(
        "PostgreSQL",
        "FERRY_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    )?;
    let table = ferry_testkit::fresh_ident("saga", "test");
    let store = PostgresSagaStore::connect(&url)
        .await
        .expect("connect to PostgreSQL")
        .table(&table)
        .unwrap();
    store.install().await.unwrap();
    store.install().await.expect("install is idempotent");
    Some(store)
}

async fn drop_table(store: &PostgresSagaStore) {
    sqlx::query(&format!("DROP TABLE IF EXISTS {}", store.table_name()))
        .execute(store.pool())
        .await
        .unwrap();
}

fn decline_second_step_of_failing_sagas() -> Behaviour {
    Arc::new(|command: &Command, _| {
        if command.saga_id.starts_with("fails-") && command.step == "charge" {
            Act::Decline
        } else {
            Act::Do
        }
    })
}

/// Completes a saga, compensates one, and resumes one after a crash after its second
/// reply was read.
async fn order_sagas(ferry: Ferry, store: PostgresSagaStore, what: &str) {
    let shop = Shop::open(ferry, what, true, decline_second_step_of_failing_sagas()).await;
    let orchestrator = Orchestrator::new(
        shop.ferry.clone(),
        store.clone(),
        shop.definition(),
        shop.options(),
    )
    .unwrap();
    let running = orchestrator.run().await.unwrap();
    let ok = orchestrator.start(json!({"order": 1})).await.unwrap();
    let fails = format!("fails-{}", ferry::message::new_id());
    orchestrator
        .start_with_id(&fails, json!({"order": 2}))
        .await
        .unwrap();
    assert_status(
        &orchestrator.wait(&ok, WAIT).await.unwrap(),
        Status::Completed,
    );
    let failed = orchestrator.wait(&fails, WAIT).await.unwrap();
    assert_status(&failed, Status::Failed);
    assert_eq!(failed.compensated, ["reserve"]);
    shop.ledger().assert_completed(&ok);
    shop.ledger().assert_failed_at(&fails, 1);
    running.stop().await;

    let site = CrashSite {
        point: Point::Received,
        step: 1,
        kind: Kind::Action,
    };
    let fired = Arc::new(AtomicBool::new(false));
    let hook = {
        let fired = fired.clone();
        Arc::new(move |at: &CrashSite| *at == site && !fired.swap(true, Ordering::SeqCst))
    };
    let doomed = Orchestrator::new(
        shop.ferry.clone(),
        store.clone(),
        shop.definition(),
        shop.options().crash_hook(hook),
    )
    .unwrap();
    let running = doomed.run().await.unwrap();
    let resumed = doomed.start(json!({"order": 3})).await.unwrap();
    eventually("the crash", || doomed.is_crashed()).await;
    running.stopped().await;
    let heir = Orchestrator::new(
        shop.ferry.clone(),
        store.clone(),
        shop.definition(),
        shop.options(),
    )
    .unwrap();
    let running = heir.run().await.unwrap();
    assert_status(&heir.wait(&resumed, WAIT).await.unwrap(), Status::Completed);
    shop.ledger().assert_completed(&resumed);
    running.stop().await;
    shop.close().await;
}

#[tokio::test]
async fn order_sagas_run_with_postgres_state_over_redis_streams() {
    let Some(url) =
        ferry_testkit::url_or_skip("Redis", "FERRY_REDIS_URL", "redis://127.0.0.1:6379/0")
    else {
        return;
    };
    let Some(store) = postgres_store().await else {
        return;
    };
    let ferry = Ferry::connect(&url).await.expect("connect to Redis");
    order_sagas(ferry, store.clone(), "redis").await;
    drop_table(&store).await;
}

#[tokio::test]
async fn order_sagas_run_with_postgres_state_over_nats_jetstream() {
    let Some(url) =
        ferry_testkit::url_or_skip("NATS JetStream", "FERRY_NATS_URL", "nats://127.0.0.1:4222")
    else {
        return;
    };
    let Some(store) = postgres_store().await else {
        return;
    };
    let ferry = Ferry::connect(&url).await.expect("connect to NATS");
    order_sagas(ferry, store.clone(), "nats").await;
    drop_table(&store).await;
}

#[tokio::test]
async fn two_orchestrators_on_one_store_never_move_a_saga_twice() {
    let Some(url) =
        ferry_testkit::url_or_skip("Redis", "FERRY_REDIS_URL", "redis://127.0.0.1:6379/0")
    else {
        return;
    };
    let Some(store) = postgres_store().await else {
        return;
    };
    let ferry = Ferry::connect(&url).await.expect("connect to Redis");
    // Every reply answered twice, on queues without a dedup window: the two orchestrators
    // race for each saga's moves, and the version check lets one win.
    let shop = Shop::open(
        ferry,
        "pair",
        false,
        saga_support::always(Act::DoAndAnswerTwice),
    )
    .await;
    let orchestrators: Vec<Orchestrator> = (0..2)
        .map(|_| {
            Orchestrator::new(
                shop.ferry.clone(),
                store.clone(),
                shop.definition(),
                shop.options(),
            )
            .unwrap()
        })
        .collect();
    let mut running = Vec::new();
    for orchestrator in &orchestrators {
        running.push(orchestrator.run().await.unwrap());
    }
    let mut ids = Vec::new();
    for n in 0..10 {
        ids.push(
            orchestrators[n % 2]
                .start(json!({"order": n}))
                .await
                .unwrap(),
        );
    }
    for id in &ids {
        let state = orchestrators[0].wait(id, WAIT).await.unwrap();
        assert_status(&state, Status::Completed);
        assert_eq!(state.version, 3, "one write per step: {state:?}");
        shop.ledger().assert_completed(id);
    }
    for r in running {
        r.stop().await;
    }
    shop.close().await;
    drop_table(&store).await;
}
