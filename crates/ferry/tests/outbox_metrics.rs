//! The outbox's gauges, read through a recorder installed for this test binary alone: the
//! unpublished rows and the oldest row's age rise while the broker is down and fall to
//! zero once the relay catches up. SQLite and the embedded broker; no service needed.
#![cfg(all(feature = "sqlite", feature = "embedded"))]

mod outbox_support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ferry::outbox::{OLDEST_UNPUBLISHED_AGE, SqliteOutbox, UNPUBLISHED_ROWS};
use metrics::{
    Counter, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use outbox_support::*;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use tempfile::TempDir;

/// Keeps the last value of every gauge, by name and `table` label.
#[derive(Default)]
struct Gauges {
    cells: Mutex<HashMap<(String, String), Arc<Cell>>>,
}

#[derive(Default)]
struct Cell(Mutex<f64>);

impl GaugeFn for Cell {
    fn increment(&self, value: f64) {
        *self.0.lock().unwrap() += value;
    }
    fn decrement(&self, value: f64) {
        *self.0.lock().unwrap() -= value;
    }
    fn set(&self, value: f64) {
        *self.0.lock().unwrap() = value;
    }
}

impl Gauges {
    fn get(&self, name: &str, table: &str) -> Option<f64> {
        let cells = self.cells.lock().unwrap();
        let cell = cells.get(&(name.to_owned(), table.to_owned()))?;
        Some(*cell.0.lock().unwrap())
    }
}

struct Shared(Arc<Gauges>);

impl Recorder for Shared {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let table = key
            .labels()
            .find(|l| l.key() == "table")
            .map(|l| l.value().to_owned())
            .unwrap_or_default();
        let cell = self
            .0
            .cells
            .lock()
            .unwrap()
            .entry((key.name().to_owned(), table))
            .or_default()
            .clone();
        Gauge::from_arc(cell)
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlog_gauges_rise_during_an_outage_and_fall_to_zero_after_recovery() {
    let gauges = Arc::new(Gauges::default());
    metrics::set_global_recorder(Shared(gauges.clone())).expect("the only recorder here");

    let db_dir = TempDir::new().unwrap();
    let broker_dir = TempDir::new().unwrap();
    let pool = SqlitePoolOptions::new()
        .max_connections(2)
        .connect_with(
            SqliteConnectOptions::new()
                .filename(db_dir.path().join("app.db"))
                .create_if_missing(true),
        )
        .await
        .unwrap();
    let outbox = SqliteOutbox::with_table(pool.clone(), "gauged_outbox").unwrap();
    outbox.install().await.unwrap();
    let transport = ferry::transport::connect(&format!("embedded:{}", broker_dir.path().display()))
        .await
        .unwrap();
    let broker = Broker::new(transport, true).await;
    broker.switch.set_up(false);

    let relay = outbox.relay(&broker.ferry, quick()).unwrap();
    let running = relay.spawn();
    let mut tx = pool.begin().await.unwrap();
    for i in 0..5 {
        outbox
            .enqueue(&mut tx, broker.event(&format!("g{i}"), "x"))
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();

    let table = "gauged_outbox";
    eventually("the gauges to show the backlog", async || {
        gauges.get(UNPUBLISHED_ROWS, table) == Some(5.0)
            && gauges.get(OLDEST_UNPUBLISHED_AGE, table).unwrap_or(0.0) >= 0.5
    })
    .await;

    broker.switch.set_up(true);
    eventually("the gauges to fall to zero", async || {
        gauges.get(UNPUBLISHED_ROWS, table) == Some(0.0)
            && gauges.get(OLDEST_UNPUBLISHED_AGE, table) == Some(0.0)
    })
    .await;
    running.shutdown().await.unwrap();
    assert_eq!(broker.drain(5).await.len(), 5);
}
