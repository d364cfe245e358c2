//! What recovery cuts off is counted, not only logged: the counter
//! `ferry_storage_recovery_truncated_bytes_total` grows by exactly the bytes of a torn tail.

mod common;

use std::fs::OpenOptions;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use ferry_storage::{Durability, Log, LogConfig};
use metrics::{
    Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

const TRUNCATED: &str = "ferry_storage_recovery_truncated_bytes_total";

#[derive(Default)]
struct Total(AtomicU64);

impl CounterFn for Total {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::SeqCst);
    }
    fn absolute(&self, value: u64) {
        self.0.store(value, Ordering::SeqCst);
    }
}

struct TruncatedBytes(Arc<Total>);

impl Recorder for TruncatedBytes {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if key.name() == TRUNCATED {
            Counter::from_arc(self.0.clone())
        } else {
            Counter::noop()
        }
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

#[test]
fn truncated_torn_tail_is_counted_in_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        durability: Durability::Fsync,
        preallocate_bytes: 0,
        ..small_config()
    };
    {
        let log = Log::open(dir.path(), config.clone()).unwrap();
        for i in 0..10 {
            log.append(vec![record(i, 100)]).unwrap();
        }
    }
    // Half of a batch after the clean end, as a write that never finished leaves it.
    let segment = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .unwrap();
    let bytes = std::fs::read(&segment).unwrap();
    let first_batch = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    let torn = &bytes[..first_batch / 2];
    let mut file = OpenOptions::new().append(true).open(&segment).unwrap();
    std::io::Write::write_all(&mut file, torn).unwrap();
    drop(file);

    let total = Arc::new(Total::default());
    let recorder = TruncatedBytes(total.clone());
    let log = metrics::with_local_recorder(&recorder, || Log::open(dir.path(), config).unwrap());
    let (_, range) = log
        .recovery_report()
        .truncated
        .clone()
        .expect("torn tail reported");
    assert_eq!(range.end - range.start, torn.len() as u64);
    assert_eq!(total.0.load(Ordering::SeqCst), torn.len() as u64);
    assert_eq!(log.end_offset(), 10);
}
