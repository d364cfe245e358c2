//! Counts the log's fdatasyncs by listening to the metric the storage engine records after
//! each one (`ferry_storage_fsync_seconds`). Counting at the source, rather than guessing from
//! I/O statistics, is what makes the fsyncs/s column trustworthy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

const FSYNC_HISTOGRAM: &str = "ferry_storage_fsync_seconds";

#[derive(Default)]
struct Tally(AtomicU64);

impl HistogramFn for Tally {
    fn record(&self, _seconds: f64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

struct FsyncRecorder {
    tally: Arc<Tally>,
}

impl Recorder for FsyncRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        if key.name() == FSYNC_HISTOGRAM {
            Histogram::from_arc(self.tally.clone())
        } else {
            Histogram::noop()
        }
    }
}

static TALLY: OnceLock<Arc<Tally>> = OnceLock::new();

/// Installs the counting recorder as the process-wide one (once; later calls are no-ops).
pub fn install() -> anyhow::Result<()> {
    let mut result = Ok(());
    TALLY.get_or_init(|| {
        let tally = Arc::new(Tally::default());
        if metrics::set_global_recorder(FsyncRecorder {
            tally: tally.clone(),
        })
        .is_err()
        {
            result = Err(anyhow::anyhow!(
                "another metrics recorder is installed; fsyncs cannot be counted"
            ));
        }
        tally
    });
    result
}

/// fdatasyncs the storage engine has reported since `install`.
pub fn count() -> u64 {
    TALLY.get().map_or(0, |t| t.0.load(Ordering::Relaxed))
}
