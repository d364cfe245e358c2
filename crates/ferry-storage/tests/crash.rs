//! Crash test with a real SIGKILL.
//!
//! The parent test re-executes this test binary with `FERRY_CRASH_CHILD_DIR` set, which turns
//! `crash_child_appender` into an appender process: several threads append records whose
//! content derives from an id `(round, thread, seq)` to a `Durability::Fsync` log with small
//! segments and print `ACK <offset> <thread> <seq>` for every record once its append is
//! acknowledged. The parent SIGKILLs the child at a random moment, reopens the log and checks
//! that nothing acknowledged is missing or different, that offsets run contiguously, and
//! that whatever unacknowledged data survived is intact.
//!
//! Replay a run with `FERRY_CRASH_SEED=<seed printed on failure>`.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_storage::{Durability, Log, LogConfig, NewRecord, Record, StorageError};

mod common;
use common::rng::Rng;
use ferry_testkit::killed_child::{Kill, Killed, run_and_kill, splitmix};

const CHILD_DIR_ENV: &str = "FERRY_CRASH_CHILD_DIR";
const CHILD_ROUND_ENV: &str = "FERRY_CRASH_ROUND";
const CHILD_THREADS_ENV: &str = "FERRY_CRASH_THREADS";
const CHILD_CHECKPOINT_ENV: &str = "FERRY_CRASH_CHECKPOINT_MS";
const CHILD_TEST_NAME: &str = "crash_child_appender";
/// A child that is never killed stops by itself after this long.
const CHILD_MAX_RUN: Duration = Duration::from_secs(15);

/// Who wrote a record: everything about it derives from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Id {
    round: u32,
    thread: u32,
    seq: u64,
}

impl Id {
    fn header(&self) -> String {
        format!("{}.{}.{}", self.round, self.thread, self.seq)
    }
    fn parse(s: &[u8]) -> Option<Id> {
        let s = std::str::from_utf8(s).ok()?;
        let mut parts = s.split('.');
        let id = Id {
            round: parts.next()?.parse().ok()?,
            thread: parts.next()?.parse().ok()?,
            seq: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(id)
    }
}

/// The record the child appends for `id`: 1..2000 value bytes, usually a key, sometimes an
/// extra header, sometimes an explicit timestamp. The `id` header names the record so the
/// parent can check records it was never told about.
fn derive(id: Id) -> NewRecord {
    let h = splitmix(((id.round as u64) << 48) ^ ((id.thread as u64) << 40) ^ id.seq);
    let size = 1 + (h % 1999) as usize;
    let mut rng = Rng::new(h);
    let mut value = Vec::with_capacity(size + 8);
    while value.len() < size {
        value.extend_from_slice(&rng.next().to_le_bytes());
    }
    value.truncate(size);
    let mut record = NewRecord::new(value).with_header("id", id.header());
    if !(h >> 12).is_multiple_of(3) {
        record = record.with_key(format!("key-{}-{}", id.thread, id.seq % 17));
    }
    if (h >> 20).is_multiple_of(4) {
        record = record.with_header("trace", rng.next().to_le_bytes().to_vec());
    }
    if (h >> 24).is_multiple_of(2) {
        record = record.with_timestamp(1_600_000_000_000 + (id.seq as i64) * 3);
    }
    record
}

fn crash_config(checkpoint_ms: u64) -> LogConfig {
    LogConfig {
        durability: Durability::Fsync,
        segment_bytes: 64 * 1024,
        index_interval_bytes: 1024,
        max_batch_bytes: 16 * 1024,
        max_record_bytes: 8 * 1024,
        checkpoint_interval: Duration::from_millis(checkpoint_ms),
        segment_max_age: None,
        ..LogConfig::default()
    }
}

fn env_u64(name: &str) -> u64 {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is set for the child"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a number"))
}

/// One line to stdout in a single write: a pipe write of less than PIPE_BUF bytes is atomic,
/// so the parent sees whole lines from all threads, never interleaved ones.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes()).expect("write to parent");
    out.flush().expect("flush to parent");
}

/// The child side: does nothing unless the parent started this binary to be crashed.
#[test]
fn crash_child_appender() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let round = env_u64(CHILD_ROUND_ENV) as u32;
    let threads = env_u64(CHILD_THREADS_ENV) as u32;
    let config = crash_config(env_u64(CHILD_CHECKPOINT_ENV));
    let log = match Log::open(&dir, config) {
        Ok(log) => Arc::new(log),
        Err(e) => {
            say(&format!("\nOPENFAIL {e}\n"));
            std::process::exit(2);
        }
    };
    // libtest has printed "test crash_child_appender ... " without a newline: end that line.
    say(&format!("\nREADY {}\n", log.end_offset()));
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|thread| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut rng = Rng::new(((round as u64) << 32) | thread as u64);
                let mut seq = 0u64;
                while started.elapsed() < CHILD_MAX_RUN {
                    let n = 1 + rng.below(3);
                    let records = (seq..seq + n)
                        .map(|s| {
                            derive(Id {
                                round,
                                thread,
                                seq: s,
                            })
                        })
                        .collect();
                    match log.append(records) {
                        Ok(appended) => {
                            assert_eq!(appended.last_offset - appended.base_offset + 1, n);
                            let mut lines = String::new();
                            for i in 0..n {
                                lines += &format!(
                                    "ACK {} {thread} {}\n",
                                    appended.base_offset + i,
                                    seq + i
                                );
                            }
                            say(&lines);
                        }
                        Err(e) => {
                            say(&format!("APPENDFAIL {e}\n"));
                            std::process::exit(3);
                        }
                    }
                    seq += n;
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    // Only reached when the parent never killed us.
    std::process::exit(4);
}

/// Kills the child if the parent test panics before doing so.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

struct RoundOutcome {
    acks: Vec<(u64, Id)>,
    ready: bool,
}

fn run_child(
    dir: &Path,
    round: u32,
    threads: u32,
    checkpoint_ms: u64,
    kill_after: Duration,
) -> RoundOutcome {
    let envs = [
        (CHILD_DIR_ENV, dir.display().to_string()),
        (CHILD_ROUND_ENV, round.to_string()),
        (CHILD_THREADS_ENV, threads.to_string()),
        (CHILD_CHECKPOINT_ENV, checkpoint_ms.to_string()),
    ];
    let Killed {
        lines,
        stderr,
        status,
        ..
    } = run_and_kill(CHILD_TEST_NAME, &envs, Kill::AfterSpawn(kill_after));
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "child exited on its own ({status:?}) before the kill\nstdout: {lines:?}\nstderr: {stderr}"
    );
    let mut acks = Vec::new();
    let mut ready = false;
    for line in &lines {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("ACK") => {
                let offset: u64 = words.next().unwrap().parse().unwrap();
                let thread: u32 = words.next().unwrap().parse().unwrap();
                let seq: u64 = words.next().unwrap().parse().unwrap();
                acks.push((offset, Id { round, thread, seq }));
            }
            Some("READY") => ready = true,
            Some("OPENFAIL") | Some("APPENDFAIL") => {
                panic!("child failed: {line}\nstderr: {stderr}")
            }
            _ => {}
        }
    }
    RoundOutcome { acks, ready }
}

/// What the parent knows about one directory across rounds.
/// This test binary again, running only the child appender on the log in `dir`.
fn child_appender(dir: &Path) -> Command {
    let exe = std::env::current_exe().expect("current test binary");
    let mut command = Command::new(exe);
    command
        .args([
            "--exact",
            CHILD_TEST_NAME,
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR_ENV, dir);
    command
}

#[derive(Default)]
struct DirState {
    /// Every record seen at the last verification, by offset.
    seen: Vec<Id>,
    /// Acknowledgements since the last verification.
    acked: Vec<(u64, Id)>,
}

fn assert_same_record(got: &Record, id: Id) {
    let want = derive(id);
    common::assert_same_content(got, &want, &format!("{id:?}"));
    if let Some(ts) = want.timestamp {
        assert_eq!(
            got.timestamp, ts,
            "timestamp of {id:?} at offset {}",
            got.offset
        );
    }
}

/// Reopens the log in the parent and checks it against everything the children said.
fn verify(dir: &Path, state: &mut DirState, label: &str) -> String {
    let log = Log::open(dir, crash_config(1000))
        .unwrap_or_else(|e| panic!("{label}: reopen after SIGKILL failed: {e}"));
    let report = log.recovery_report().clone();
    assert!(
        report.repaired.is_empty(),
        "{label}: a process crash needed repair: {report:?}"
    );
    assert_eq!(log.start_offset(), 0, "{label}");
    let end = log.end_offset();
    let mut ids = Vec::with_capacity(end as usize);
    let mut next = 0u64;
    while next < end {
        let records = log
            .read(next, 256 * 1024)
            .unwrap_or_else(|e| panic!("{label}: read at {next} of {end} failed: {e}"));
        assert!(
            !records.is_empty(),
            "{label}: read at {next} returned nothing before end {end}"
        );
        for record in records {
            assert_eq!(record.offset, next, "{label}: offsets must be contiguous");
            let id_header = record
                .headers
                .first()
                .filter(|(name, _)| name == &Bytes::from_static(b"id"))
                .unwrap_or_else(|| panic!("{label}: record {next} lost its id header"));
            let id = Id::parse(&id_header.1).unwrap_or_else(|| {
                panic!("{label}: record {next} has a garbled id {:?}", id_header.1)
            });
            assert_same_record(&record, id);
            ids.push(id);
            next += 1;
        }
    }
    assert_eq!(ids.len() as u64, end, "{label}");
    // Nothing is stored twice.
    let unique: HashSet<Id> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "{label}: a record is stored twice");
    // Each thread appends sequentially, so what survived of it is a prefix of what it sent.
    let mut per_thread: HashMap<(u32, u32), Vec<u64>> = HashMap::new();
    for id in &ids {
        per_thread
            .entry((id.round, id.thread))
            .or_default()
            .push(id.seq);
    }
    for ((round, thread), mut seqs) in per_thread {
        seqs.sort_unstable();
        assert!(
            seqs.iter().enumerate().all(|(i, &s)| i as u64 == s),
            "{label}: round {round} thread {thread} has a hole: {seqs:?}"
        );
    }
    // What was there at the last verification is still there, unchanged.
    assert!(
        ids.len() >= state.seen.len(),
        "{label}: the log shrank below what was verified"
    );
    assert_eq!(
        &ids[..state.seen.len()],
        &state.seen[..],
        "{label}: verified records changed"
    );
    // Every acknowledged record is present where the child was told it went.
    for &(offset, id) in &state.acked {
        assert!(
            offset < end,
            "{label}: acknowledged offset {offset} ({id:?}) is gone; end is {end}"
        );
        assert_eq!(
            ids[offset as usize], id,
            "{label}: acknowledged offset {offset} holds another record"
        );
    }
    let acked = state.acked.len();
    let never_acked = end - state.seen.len() as u64 - acked as u64;
    state.seen = ids;
    state.acked.clear();
    log.close()
        .unwrap_or_else(|e| panic!("{label}: close failed: {e}"));
    format!(
        "end {end}, {acked} acks checked, {never_acked} unacknowledged records survived intact, truncated {:?}, scanned {} B",
        report.truncated.map(|(_, r)| r),
        report.scanned_bytes
    )
}

#[test]
fn sigkill_during_appends_loses_no_acknowledged_record_and_leaves_no_garbage() {
    let seed = ferry_testkit::killed_child::seed_from_env("FERRY_CRASH_SEED");
    println!("crash test seed {seed} (replay with FERRY_CRASH_SEED={seed})");
    let mut rng = Rng::new(seed);
    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..4)
        .map(|i| root.path().join(format!("log-{i}")))
        .collect();
    let mut states: Vec<DirState> = (0..dirs.len()).map(|_| DirState::default()).collect();
    // (directory, verify in the parent afterwards). Directory 1 is crashed three times in a
    // row with only the children reopening it, so a child's recovery runs on the previous
    // child's crash leftovers (and may itself be killed).
    let plan = [
        (0, true),
        (0, true),
        (0, true),
        (1, false),
        (1, false),
        (1, true),
        (2, true),
        (3, true),
        (3, true),
        (2, false),
        (2, true),
        (0, true),
    ];
    let started = Instant::now();
    let mut total_acks = 0;
    for (round, &(d, verify_after)) in plan.iter().enumerate() {
        let round = round as u32;
        let threads = 1 + rng.below(4) as u32;
        let checkpoint_ms = [0, 5, 1000][rng.below(3) as usize];
        let kill_after = Duration::from_millis(10 + rng.below(291));
        let outcome = run_child(&dirs[d], round, threads, checkpoint_ms, kill_after);
        total_acks += outcome.acks.len();
        states[d].acked.extend(outcome.acks.iter().copied());
        let label = format!(
            "seed {seed} round {round} dir {d} ({threads} threads, checkpoint every {checkpoint_ms} ms, killed after {kill_after:?}, child ready: {})",
            outcome.ready
        );
        let acks = outcome.acks.len();
        if verify_after {
            let summary = verify(&dirs[d], &mut states[d], &label);
            println!("{label}: {acks} acks; {summary}");
        } else {
            println!("{label}: {acks} acks; not verified yet");
        }
    }
    println!(
        "{} rounds, {total_acks} acks, {:?}",
        plan.len(),
        started.elapsed()
    );
    assert!(
        total_acks > 0,
        "no child got as far as an acknowledged append"
    );
    // Every directory reopens cleanly a second time: recovery left nothing for itself to do.
    for (d, dir) in dirs.iter().enumerate() {
        let log = Log::open(dir, crash_config(1000)).unwrap();
        assert_eq!(log.recovery_report().truncated, None, "dir {d}");
        assert_eq!(log.end_offset(), states[d].seen.len() as u64, "dir {d}");
    }
}

/// A second process opening a directory in use gets the holder's pid, and a holder killed
/// with SIGKILL leaves no stale lock behind (the kernel drops `flock`s of a dead process).
#[test]
fn second_process_is_refused_with_the_holders_pid_until_the_holder_dies() {
    let dir = tempfile::tempdir().unwrap();
    let child = child_appender(dir.path())
        .env(CHILD_ROUND_ENV, "0")
        .env(CHILD_THREADS_ENV, "1")
        .env(CHILD_CHECKPOINT_ENV, "1000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let mut guard = ChildGuard(Some(child));
    let child = guard.0.as_mut().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // Wait for the first acknowledged append: the log is open and holds data.
    while !line.starts_with("ACK") {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "child ended before it opened the log"
        );
    }
    match Log::open(dir.path(), crash_config(1000)) {
        Err(StorageError::Locked { pid, .. }) => assert_eq!(pid, child.id()),
        other => panic!("expected Locked by the child, got {other:?}"),
    }
    // Keep draining so the child never blocks on a full pipe before it is killed.
    let drain = std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    // SAFETY: plain syscall on the pid of a child we have not reaped yet.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) },
        0
    );
    child.wait().unwrap();
    guard.0 = None;
    let _ = drain.join();
    let log = Log::open(dir.path(), crash_config(1000)).expect("lock released by the kernel");
    assert!(log.end_offset() > 0);
}
