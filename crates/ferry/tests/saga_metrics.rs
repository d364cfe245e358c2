//! The saga counters: started, completed, failed and timeouts, read through a recorder
//! installed for this test binary alone (a recorder is process-global).
#![cfg(all(feature = "sqlite", feature = "embedded"))]

mod saga_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry::saga::{Command, Kind, Orchestrator, Status};
use metrics::{Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, SharedString, Unit};
use saga_support::{Act, Behaviour, ManualClock, Shop, assert_status, eventually};
use serde_json::json;

/// Counter values by `name{label=value,...}`.
static COUNTS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

struct Cell(String);

impl CounterFn for Cell {
    fn increment(&self, value: u64) {
        *COUNTS.lock().unwrap().entry(self.0.clone()).or_default() += value;
    }
    fn absolute(&self, value: u64) {
        COUNTS.lock().unwrap().insert(self.0.clone(), value);
    }
}

struct Counting;

impl metrics::Recorder for Counting {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        Counter::from_arc(Arc::new(Cell(format!(
            "{}{{{}}}",
            key.name(),
            labels.join(",")
        ))))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

fn count(name: &str) -> u64 {
    COUNTS.lock().unwrap().get(name).copied().unwrap_or(0)
}

#[tokio::test]
async fn sagas_count_starts_completions_failures_and_timeouts() {
    metrics::set_global_recorder(Counting).expect("the only recorder of this binary");
    // `declines` fails at its first step; `silent` never gets its charge answered.
    let behaviour: Behaviour = Arc::new(|command: &Command, _| {
        match (
            command.saga_id.as_str(),
            command.step.as_str(),
            command.kind,
        ) {
            ("declines", "reserve", Kind::Action) => Act::Decline,
            ("silent", "charge", Kind::Action) => Act::Silent,
            _ => Act::Do,
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let (ferry, store) = saga_support::embedded_with_store(dir.path()).await;
    let shop = Shop::open(ferry, "metrics", true, behaviour).await;
    let clock = ManualClock::new();
    let orchestrator = Orchestrator::new(
        shop.ferry.clone(),
        store,
        shop.definition().deadline(Duration::from_secs(60)),
        shop.options().clock(clock.clone()),
    )
    .unwrap();
    let running = orchestrator.run().await.unwrap();
    for id in ["completes", "declines", "silent"] {
        orchestrator.start_with_id(id, json!({})).await.unwrap();
    }
    orchestrator
        .start_with_id("completes", json!({}))
        .await
        .unwrap();
    let wait = Duration::from_secs(15);
    assert_status(
        &orchestrator.wait("completes", wait).await.unwrap(),
        Status::Completed,
    );
    assert_status(
        &orchestrator.wait("declines", wait).await.unwrap(),
        Status::Failed,
    );
    eventually("the silent charge", || {
        shop.ledger().seen("silent.1.action") == 1
    })
    .await;
    // Past the step timeout (20 s): the charge is sent again; past the deadline: undone.
    clock.advance(Duration::from_secs(21));
    let step_timeouts = "ferry_saga_timeouts_total{saga=order,kind=step}";
    eventually("the charge re-sent", || count(step_timeouts) == 1).await;
    clock.advance(Duration::from_secs(40));
    assert_status(
        &orchestrator.wait("silent", wait).await.unwrap(),
        Status::Failed,
    );

    // A saga's state is saved before its transition is counted, so `wait` can see it
    // finished a moment before the counter moves.
    eventually("the finished sagas counted", || {
        count("ferry_saga_completed_total{saga=order}") == 1
            && count("ferry_saga_failed_total{saga=order}") == 2
    })
    .await;
    assert_eq!(count("ferry_saga_started_total{saga=order}"), 3);
    assert_eq!(count("ferry_saga_completed_total{saga=order}"), 1);
    assert_eq!(count("ferry_saga_failed_total{saga=order}"), 2);
    assert_eq!(
        count("ferry_saga_timeouts_total{saga=order,kind=deadline}"),
        1
    );
    running.stop().await;
    shop.close().await;
}
