//! The `Pipelined` driver: N logical appenders, each with exactly one append (of the cell's
//! records per append) in flight, and no thread of their own. The bench thread submits the first N appends with
//! `append_then`; from then on each completion callback (on the log's writer or completer
//! thread) records its latency and submits that appender's next append. This is how an async
//! broker drives the log: many tasks, a few OS threads, nobody blocked in `append`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use bytes::Bytes;
use ferry_storage::{Appended, Log};
use hdrhistogram::Histogram;

use super::storage::{Window, batch};
use super::{fsync_count, latency_histogram};

/// How long the appends in flight at the stop flag may take to finish before the bench gives
/// up on the cell: far beyond any sane fdatasync, short of hanging forever.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// State shared by the bench thread and every callback.
struct Pipeline {
    value: Bytes,
    /// Records in each append, all sharing `value`.
    per_append: usize,
    stop: AtomicBool,
    tally: Mutex<Tally>,
    /// Signalled when `in_flight` drops to zero.
    drained: Condvar,
}

struct Tally {
    /// Appends submitted whose callback has not finished with them yet.
    in_flight: usize,
    appends: u64,
    latency_ns: Histogram<u64>,
    /// When the last counted append completed.
    last: Instant,
    /// The first failure; its appender stops, the others run on until the stop flag.
    error: Option<anyhow::Error>,
}

/// Runs `appenders` chains of `per_append`-record appends on `log` for `duration`, then waits
/// until every append in flight has completed and hands the log back, so the caller can close
/// it.
pub fn run(
    log: Log,
    value: Bytes,
    per_append: usize,
    appenders: usize,
    duration: Duration,
) -> anyhow::Result<(Log, Window)> {
    let log = Arc::new(log);
    let fsyncs_before = fsync_count::count();
    let start = Instant::now();
    let pipeline = Arc::new(Pipeline {
        value,
        per_append,
        stop: AtomicBool::new(false),
        tally: Mutex::new(Tally {
            in_flight: appenders,
            appends: 0,
            latency_ns: latency_histogram(),
            last: start,
            error: None,
        }),
        drained: Condvar::new(),
    });
    for _ in 0..appenders {
        submit(&log, &pipeline);
    }
    std::thread::sleep(duration);
    pipeline.stop.store(true, Ordering::Relaxed);

    let tally = pipeline.tally.lock().expect("tally lock");
    let (mut tally, timeout) = pipeline
        .drained
        .wait_timeout_while(tally, DRAIN_TIMEOUT, |t| t.in_flight > 0)
        .expect("tally lock");
    if timeout.timed_out() {
        bail!(
            "{} of {appenders} pipelined appends still in flight {} s after the stop",
            tally.in_flight,
            DRAIN_TIMEOUT.as_secs()
        );
    }
    // Read before close: closing syncs and would add an fdatasync outside the measured window.
    let fsyncs = fsync_count::count() - fsyncs_before;
    let error = tally.error.take();
    let window = Window {
        start,
        end: tally.last,
        appends: tally.appends,
        fsyncs,
        latency_ns: std::mem::replace(&mut tally.latency_ns, latency_histogram()),
    };
    drop(tally);
    // Taken back even on failure, so the log is dropped here and not on one of its own threads.
    let log = unwrap_log(log)?;
    match error {
        Some(error) => Err(error),
        None => Ok((log, window)),
    }
}

/// One append of one appender; its callback submits the next.
fn submit(log: &Arc<Log>, pipeline: &Arc<Pipeline>) {
    let next_log = log.clone();
    let next_pipeline = pipeline.clone();
    let submitted = Instant::now();
    log.append_then(
        batch(&pipeline.value, pipeline.per_append),
        Box::new(move |result| completed(next_log, next_pipeline, submitted, result)),
    );
}

/// The callback: count the append, then resubmit unless stopping (or failed).
fn completed(
    log: Arc<Log>,
    pipeline: Arc<Pipeline>,
    submitted: Instant,
    result: ferry_storage::Result<Appended>,
) {
    let now = Instant::now();
    let stopping = pipeline.stop.load(Ordering::Relaxed);
    let mut tally = pipeline.tally.lock().expect("tally lock");
    let failed = match result {
        Ok(_) => {
            tally.appends += 1;
            tally
                .latency_ns
                .saturating_record((now - submitted).as_nanos() as u64);
            tally.last = tally.last.max(now);
            false
        }
        Err(e) => {
            if tally.error.is_none() {
                tally.error = Some(anyhow::Error::new(e).context("pipelined append"));
            }
            true
        }
    };
    if stopping || failed {
        // Let go of the log before the bench thread can see this appender finished, so it
        // finds the log (nearly always) unshared when it takes it back to close it.
        drop(log);
        tally.in_flight -= 1;
        if tally.in_flight == 0 {
            pipeline.drained.notify_all();
        }
        return;
    }
    drop(tally);
    submit(&log, &pipeline);
}

/// Takes the log back from the `Arc`. Every chain has counted its last append by now, but a
/// callback that resubmitted may still be returning from `append_then` on a storage thread
/// and hold its clone for a moment longer.
fn unwrap_log(mut log: Arc<Log>) -> anyhow::Result<Log> {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    loop {
        match Arc::try_unwrap(log) {
            Ok(log) => return Ok(log),
            Err(shared) if Instant::now() < deadline => {
                log = shared;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(_) => bail!("a pipelined callback kept its handle on the log"),
        }
    }
}
