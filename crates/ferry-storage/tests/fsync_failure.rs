//! A failed `fdatasync`: the log is poisoned, never claims durability again, never hands out
//! an offset twice, and does not spin retrying. With a slow `fdatasync`: a group written
//! while one runs gets a second sync of its own, never a third, and completions keep their
//! order.
//!
//! fdatasync failures are injected by an `LD_PRELOAD` shim (`tests/support/failsync.c`),
//! built with the system C compiler when the test runs. Each test re-executes this test
//! binary as a child with the shim preloaded, `FERRY_FAILSYNC_SCENARIO` naming the scenario
//! to run and `FERRY_FAILSYNC_DIR` a directory of its own for the shim's control files and the
//! log, so tests running in parallel never see each other's failures. Without a C compiler
//! the tests skip with a loud message; under `CI=true` that is a failure.

mod common;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use ferry_storage::{Durability, LogConfig, NewRecord, StorageError};

const SCENARIO_ENV: &str = "FERRY_FAILSYNC_SCENARIO";
const CONTROL_DIR_ENV: &str = "FERRY_FAILSYNC_DIR";
/// The shim's control files (see `failsync.c`).
const FAIL_ONCE: &str = "fail_once";
const FAIL_ALWAYS: &str = "fail_always";
const SLOW_MS: &str = "slow_ms";
/// Printed by a child that ran its scenario to the end.
const DONE_MARKER: &str = "FAILSYNC-SCENARIO-DONE";
/// A hung child (a deadlocked writer, say) is killed after this long.
const CHILD_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `scenario` in a child process with the shim preloaded. In that child (the same test,
/// re-executed), runs `scenario` itself with the control directory.
fn run_with_failing_fdatasync(name: &str, scenario: impl FnOnce(&Path)) {
    match std::env::var(SCENARIO_ENV) {
        Ok(wanted) if wanted == name => {
            let control = PathBuf::from(
                std::env::var_os(CONTROL_DIR_ENV).expect("the parent sets the control directory"),
            );
            assert!(
                !shim_count_fn().is_null(),
                "the fdatasync shim is not loaded in the child"
            );
            scenario(&control);
            println!("\n{DONE_MARKER} {name}");
            return;
        }
        // A child started for another scenario: nothing to do here.
        Ok(_) => return,
        Err(_) => {}
    }
    let control = tempfile::tempdir().unwrap();
    let Some(shim) = build_shim(control.path()) else {
        return;
    };
    let stdout_path = control.path().join("child.stdout");
    let stderr_path = control.path().join("child.stderr");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("LD_PRELOAD", &shim)
        .env(SCENARIO_ENV, name)
        .env(CONTROL_DIR_ENV, control.path())
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).unwrap())
        .stderr(File::create(&stderr_path).unwrap())
        .spawn()
        .expect("re-execute the test binary");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > CHILD_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = fs::read_to_string(&stdout_path).unwrap_or_default();
    let stderr = fs::read_to_string(&stderr_path).unwrap_or_default();
    let ran = stdout.contains(&format!("{DONE_MARKER} {name}"));
    assert!(
        status.is_some_and(|s| s.success()) && ran,
        "scenario {name} failed in the child (status {status:?}, {:.1?} elapsed)\n\
         --- child stdout ---\n{stdout}\n--- child stderr ---\n{stderr}",
        started.elapsed()
    );
}

/// Compiles the shim into `dir`; `None` (after a loud message) when there is no C compiler.
fn build_shim(dir: &Path) -> Option<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/failsync.c");
    let shim = dir.join("libfailsync.so");
    let output = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&shim)
        .arg(&source)
        .arg("-ldl")
        .output();
    match output {
        Ok(out) if out.status.success() => Some(shim),
        Ok(out) => panic!(
            "cc could not build the fdatasync shim {}:\n{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => {
            ferry_testkit::skip_or_fail(&format!(
                "no C compiler to build the fdatasync shim (`cc`: {e})"
            ));
            None
        }
    }
}

fn shim_count_fn() -> *mut libc::c_void {
    // SAFETY: dlsym with a NUL-terminated name only looks the symbol up.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"failsync_count".as_ptr()) }
}

/// How many times fdatasync was called in this process (child only).
fn fdatasync_calls() -> i64 {
    let symbol = shim_count_fn();
    assert!(!symbol.is_null(), "the fdatasync shim is not loaded");
    // SAFETY: the shim defines `long failsync_count(void)`.
    let count = unsafe {
        std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> libc::c_long>(symbol)
    };
    count() as i64
}

/// The most fdatasync calls that ran at once in this process (child only).
fn fdatasync_max_concurrent() -> i64 {
    // SAFETY: dlsym with a NUL-terminated name only looks the symbol up.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"failsync_max_concurrent".as_ptr()) };
    assert!(!symbol.is_null(), "the fdatasync shim is not loaded");
    // SAFETY: the shim defines `long failsync_max_concurrent(void)`.
    let max = unsafe {
        std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> libc::c_long>(symbol)
    };
    max() as i64
}

/// Makes every later fdatasync take at least `delay`.
fn slow_down(control: &Path, delay: Duration) {
    fs::write(control.join(SLOW_MS), delay.as_millis().to_string()).unwrap();
}

/// Appends one record without waiting; its outcome and the time it took from submission
/// land in `outcomes`, in completion order.
fn append_recorded(
    log: &ferry_storage::Log,
    label: &'static str,
    outcomes: &Arc<Mutex<Vec<Outcome>>>,
) {
    let outcomes = outcomes.clone();
    let submitted = Instant::now();
    log.append_then(
        vec![NewRecord::new(label)],
        Box::new(move |result| {
            outcomes.lock().unwrap().push(Outcome {
                label,
                result,
                took: submitted.elapsed(),
            });
        }),
    );
}

#[derive(Debug)]
struct Outcome {
    label: &'static str,
    result: Result<ferry_storage::Appended, StorageError>,
    took: Duration,
}

fn wait_for(outcomes: &Arc<Mutex<Vec<Outcome>>>, count: usize) {
    let started = Instant::now();
    while outcomes.lock().unwrap().len() < count {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "appends never completed: {:?}",
            outcomes.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn arm(control: &Path, switch: &str) {
    fs::write(control.join(switch), b"").unwrap();
}

fn is_poisoned<T: std::fmt::Debug>(result: &Result<T, StorageError>) -> bool {
    matches!(result, Err(StorageError::Poisoned { .. }))
}

/// The checkpoint file's `(segment base, position)`: bytes of that segment below the
/// position are what the checkpoint vouches for.
fn checkpoint_of(dir: &Path) -> Option<(u64, u64)> {
    let bytes = fs::read(dir.join("recovery.checkpoint")).ok()?;
    assert_eq!(bytes.len(), 48, "unexpected checkpoint size");
    assert_eq!(
        bytes[0..4],
        0xFE77_C4ECu32.to_le_bytes(),
        "checkpoint magic"
    );
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    Some((word(4), word(12)))
}

/// Interval mode: once an fdatasync failed, a retried fdatasync may "succeed" although the
/// kernel dropped the dirty pages (fsyncgate). `sync()` must keep failing, `close()` must not
/// report success, fdatasync must not be called again, and no checkpoint may vouch for the
/// bytes that were never synced; reopening still finds every record acknowledged before.
#[test]
fn poisoned_log_never_reports_sync_or_close_as_successful_after_a_failed_fdatasync() {
    run_with_failing_fdatasync(
        "poisoned_log_never_reports_sync_or_close_as_successful_after_a_failed_fdatasync",
        |control| {
            let dir = control.join("log");
            let config = LogConfig {
                durability: Durability::Interval(Duration::from_secs(3600)),
                // A checkpoint after every successful sync: one written after the failure
                // would show.
                checkpoint_interval: Duration::ZERO,
                ..small_config()
            };
            let log = open(&dir, &config);
            for i in 0..5 {
                log.append(vec![record(i, 100)]).unwrap();
            }
            log.sync().unwrap();
            let synced_len = log.size_bytes();
            // Acknowledged (Interval) but not yet synced.
            for i in 5..10 {
                log.append(vec![record(i, 100)]).unwrap();
            }
            assert!(log.size_bytes() > synced_len);

            let calls_before = fdatasync_calls();
            arm(control, FAIL_ONCE);
            let first = log.sync();
            assert!(is_poisoned(&first), "first sync: {first:?}");
            assert!(
                !control.join(FAIL_ONCE).exists(),
                "the failure did not come from fdatasync"
            );
            // The shim fails only once: a retried fdatasync would now report success.
            let second = log.sync();
            assert!(
                is_poisoned(&second),
                "sync on a poisoned log returned {second:?}: a failed write-back reported as durable"
            );
            let append = log.append(vec![record(10, 100)]);
            assert!(is_poisoned(&append), "append on a poisoned log: {append:?}");
            let roll = log.roll();
            assert!(is_poisoned(&roll), "roll on a poisoned log: {roll:?}");
            let closed = log.close();
            assert!(
                is_poisoned(&closed),
                "close of a poisoned log returned {closed:?}: it must not claim success"
            );
            assert_eq!(
                fdatasync_calls() - calls_before,
                1,
                "a poisoned log called fdatasync again (a retry can falsely succeed)"
            );
            match checkpoint_of(&dir) {
                Some((0, position)) => assert!(
                    position <= synced_len,
                    "the checkpoint vouches for byte {position} but only {synced_len} were synced"
                ),
                other => panic!("expected the checkpoint of segment 0, found {other:?}"),
            }

            let log = open(&dir, &config);
            let records = read_all(&log);
            assert_eq!(
                records.len(),
                10,
                "records acknowledged before the failure went missing"
            );
            for (i, r) in records.iter().enumerate() {
                assert_eq!(r.offset, i as u64);
                assert_eq!(r.value, record(i as u64, 100).value, "offset {i}");
            }
            assert_eq!(log.append(vec![record(10, 100)]).unwrap().base_offset, 10);
        },
    );
}

/// Fsync without preallocation: after append B's fdatasync failed, a roll must be refused,
/// not seal B's bytes into the old segment and start the next one at B's offset. After
/// reopen every offset holds one record, whichever offset a read starts at.
#[test]
fn roll_after_a_failed_fdatasync_is_refused_and_offsets_are_never_reused() {
    run_with_failing_fdatasync(
        "roll_after_a_failed_fdatasync_is_refused_and_offsets_are_never_reused",
        |control| {
            let dir = control.join("log");
            let config = LogConfig {
                durability: Durability::Fsync,
                preallocate_bytes: 0,
                // No checkpoint write (itself an fdatasync) in between.
                checkpoint_interval: Duration::from_secs(3600),
                ..small_config()
            };
            let log = open(&dir, &config);
            let a = log.append(vec![NewRecord::new("A-acked")]).unwrap();
            assert_eq!(a.base_offset, 0);
            arm(control, FAIL_ONCE);
            let b = log.append(vec![NewRecord::new("B-failed")]);
            assert!(is_poisoned(&b), "append whose fdatasync failed: {b:?}");
            assert!(!control.join(FAIL_ONCE).exists());
            let rolled = log.roll();
            assert!(is_poisoned(&rolled), "roll on a poisoned log: {rolled:?}");
            assert_eq!(log.segment_count(), 1, "a poisoned log rolled");
            let again = log.append(vec![NewRecord::new("B2-refused")]);
            assert!(is_poisoned(&again), "{again:?}");
            drop(log);
            let logs: Vec<_> = fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
                .collect();
            assert_eq!(logs.len(), 1, "segments after the refused roll: {logs:?}");

            let log = open(&dir, &config);
            let c = log.append(vec![NewRecord::new("C-acked")]).unwrap();
            assert_offsets_unique(&log, &[(0, "A-acked"), (c.base_offset, "C-acked")]);
            drop(log);
            let log = open(&dir, &config);
            assert_offsets_unique(&log, &[(0, "A-acked"), (c.base_offset, "C-acked")]);
        },
    );
}

/// Reading the whole log shows each offset once, in order; a read starting at any offset
/// returns that offset's record; each acknowledged record is at its own offset. (B, never
/// acknowledged, may or may not have survived between A and C.)
fn assert_offsets_unique(log: &ferry_storage::Log, acked: &[(u64, &str)]) {
    let all = read_all(log);
    let show = || {
        all.iter()
            .map(|r| format!("{}={}", r.offset, String::from_utf8_lossy(&r.value)))
            .collect::<Vec<_>>()
    };
    for pair in all.windows(2) {
        assert_eq!(
            pair[1].offset,
            pair[0].offset + 1,
            "offsets not unique and contiguous: {:?}",
            show()
        );
    }
    for r in &all {
        let from_here = log.read(r.offset, 1).unwrap();
        assert_eq!(
            (from_here[0].offset, &from_here[0].value),
            (r.offset, &r.value),
            "read({}) disagrees with a read of the whole log: {:?}",
            r.offset,
            show()
        );
    }
    for &(offset, value) in acked {
        let got = all.iter().find(|r| r.offset == offset);
        assert_eq!(
            got.map(|r| &r.value[..]),
            Some(value.as_bytes()),
            "acknowledged {value} not at offset {offset}: {:?}",
            show()
        );
    }
}

/// Interval mode with fdatasync failing every time: the writer must not retry the periodic
/// sync in a tight loop (it once did, because only a successful sync moved the timer).
#[test]
fn failing_interval_fdatasync_does_not_make_the_writer_spin() {
    run_with_failing_fdatasync(
        "failing_interval_fdatasync_does_not_make_the_writer_spin",
        |control| {
            let dir = control.join("log");
            let config = LogConfig {
                durability: Durability::Interval(Duration::from_millis(100)),
                ..small_config()
            };
            let log = open(&dir, &config);
            log.append(vec![record(0, 100)]).unwrap();
            arm(control, FAIL_ALWAYS);
            let before = fdatasync_calls();
            let started = Instant::now();
            // Appends keep the group path busy too: it also checks whether a sync is due.
            let mut i = 1;
            while started.elapsed() < Duration::from_secs(1) {
                let _ = log.append(vec![record(i, 100)]);
                i += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            let calls = fdatasync_calls() - before;
            let sync = log.sync();
            fs::remove_file(control.join(FAIL_ALWAYS)).unwrap();
            assert!(calls >= 1, "the interval sync never ran in 1 s");
            assert!(
                calls <= 5,
                "{calls} fdatasync calls in 1 s with a 100 ms interval: the writer spins"
            );
            assert!(is_poisoned(&sync), "sync after the failure: {sync:?}");
            drop(log);
        },
    );
}

/// Fsync with a slow disk: A's sync runs when B is written, so B gets a second sync of its
/// own instead of waiting for A's to end first; C, written while two run, waits for one of
/// them. Every append still waits for a whole sync started after it, and completions come in
/// offset order.
#[test]
fn a_group_written_during_a_slow_fdatasync_gets_a_second_sync_and_completions_stay_in_order() {
    run_with_failing_fdatasync(
        "a_group_written_during_a_slow_fdatasync_gets_a_second_sync_and_completions_stay_in_order",
        |control| {
            let dir = control.join("log");
            let config = LogConfig {
                durability: Durability::Fsync,
                preallocate_bytes: 0,
                checkpoint_interval: Duration::from_secs(3600),
                ..small_config()
            };
            let log = open(&dir, &config);
            log.append(vec![NewRecord::new("warm-up")]).unwrap();
            let slow = Duration::from_millis(400);
            slow_down(control, slow);
            let outcomes = Arc::new(Mutex::new(Vec::new()));
            append_recorded(&log, "A", &outcomes);
            std::thread::sleep(Duration::from_millis(50));
            append_recorded(&log, "B", &outcomes);
            std::thread::sleep(Duration::from_millis(50));
            append_recorded(&log, "C", &outcomes);
            wait_for(&outcomes, 3);
            let outcomes = outcomes.lock().unwrap();
            let order: Vec<_> = outcomes.iter().map(|o| o.label).collect();
            assert_eq!(order, ["A", "B", "C"], "completion order: {outcomes:?}");
            let offsets: Vec<_> = outcomes
                .iter()
                .map(|o| o.result.as_ref().expect("append failed").base_offset)
                .collect();
            assert_eq!(offsets, [1, 2, 3], "{outcomes:?}");
            for o in outcomes.iter() {
                assert!(
                    o.took >= slow,
                    "{} acknowledged {:?} after submission, before any sync started after it \
                     could end",
                    o.label,
                    o.took
                );
            }
            // One sync after the other would make B wait for the rest of A's and then its own:
            // about 750 ms.
            let b = &outcomes[1];
            assert!(
                b.took < slow * 3 / 2,
                "B took {:?}: it waited for A's sync before its own started",
                b.took
            );
            assert_eq!(fdatasync_max_concurrent(), 2, "syncs running at once");
            drop(outcomes);
            fs::remove_file(control.join(SLOW_MS)).unwrap();
            drop(log);
            let log = open(&dir, &config);
            let values: Vec<_> = read_all(&log)
                .iter()
                .map(|r| String::from_utf8_lossy(&r.value).into_owned())
                .collect();
            assert_eq!(values, ["warm-up", "A", "B", "C"]);
        },
    );
}

/// Many appenders against a slow disk: never more than two syncs at once.
#[test]
fn no_more_than_two_fdatasyncs_run_at_once_under_load() {
    run_with_failing_fdatasync(
        "no_more_than_two_fdatasyncs_run_at_once_under_load",
        |control| {
            let dir = control.join("log");
            let config = LogConfig {
                durability: Durability::Fsync,
                preallocate_bytes: 0,
                checkpoint_interval: Duration::from_secs(3600),
                ..small_config()
            };
            let log = open(&dir, &config);
            slow_down(control, Duration::from_millis(20));
            std::thread::scope(|s| {
                for t in 0..8u64 {
                    let log = &log;
                    s.spawn(move || {
                        for i in 0..20 {
                            log.append(vec![record(t * 100 + i, 50)]).unwrap();
                        }
                    });
                }
            });
            assert_eq!(fdatasync_max_concurrent(), 2, "syncs running at once");
            assert_eq!(read_all(&log).len(), 160);
        },
    );
}

/// Fsync with a slow disk: A's sync fails while B's (started after B was written) is still
/// running. The log is poisoned and B fails too, after A (nothing written since the last
/// good sync is trusted, whatever a later sync says); no sync is started after the failure.
#[test]
fn a_failed_fdatasync_fails_the_group_whose_sync_is_still_running_and_poisons_the_log() {
    run_with_failing_fdatasync(
        "a_failed_fdatasync_fails_the_group_whose_sync_is_still_running_and_poisons_the_log",
        |control| {
            let dir = control.join("log");
            let config = LogConfig {
                durability: Durability::Fsync,
                preallocate_bytes: 0,
                checkpoint_interval: Duration::from_secs(3600),
                ..small_config()
            };
            let log = open(&dir, &config);
            let acked = log.append(vec![NewRecord::new("acked")]).unwrap();
            slow_down(control, Duration::from_millis(300));
            arm(control, FAIL_ONCE);
            let calls_before = fdatasync_calls();
            let outcomes = Arc::new(Mutex::new(Vec::new()));
            append_recorded(&log, "A", &outcomes);
            std::thread::sleep(Duration::from_millis(50));
            append_recorded(&log, "B", &outcomes);
            wait_for(&outcomes, 2);
            {
                let outcomes = outcomes.lock().unwrap();
                let order: Vec<_> = outcomes.iter().map(|o| o.label).collect();
                assert_eq!(order, ["A", "B"], "completion order: {outcomes:?}");
                for o in outcomes.iter() {
                    assert!(is_poisoned(&o.result), "{}: {:?}", o.label, o.result);
                }
            }
            assert!(!control.join(FAIL_ONCE).exists());
            let later = log.append(vec![NewRecord::new("later")]);
            assert!(is_poisoned(&later), "append on a poisoned log: {later:?}");
            let closed = log.close();
            assert!(is_poisoned(&closed), "close of a poisoned log: {closed:?}");
            // A's sync and B's may both have started before A's failed; none after.
            let calls = fdatasync_calls() - calls_before;
            assert!(
                calls <= 2,
                "{calls} fdatasync calls: one after the failure (a retry can falsely succeed)"
            );
            fs::remove_file(control.join(SLOW_MS)).unwrap();
            let log = open(&dir, &config);
            let c = log.append(vec![NewRecord::new("C-acked")]).unwrap();
            let all = read_all(&log);
            assert_eq!(all[0].value, "acked".as_bytes());
            assert_eq!(all[0].offset, acked.base_offset);
            assert_eq!(all.last().unwrap().offset, c.base_offset);
            assert_offsets_unique(&log, &[(0, "acked"), (c.base_offset, "C-acked")]);
        },
    );
}
