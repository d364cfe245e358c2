//! Regression tests for defects found in review, each named after the failure it prevents:
//! a resurrected segment of a failed roll shadowing acknowledged records, retention racing a
//! roll, power-loss holes in preallocated space taken for damage (and damage taken for a
//! torn write), completions out of offset order, a log dropped or waited for from its own
//! completion, and an unbounded read budget.
//!
//! The full-disk test mounts a small tmpfs, which needs root (CI and the development machines
//! run as root). Elsewhere it skips with a loud message; under `CI=true` that is a failure.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::*;
use ferry_storage::{
    Appended, Durability, Log, LogConfig, NewRecord, RetentionPolicy, StorageError, batch,
};
use ferry_testkit::SmallFs;

/// A `mount` or `umount` forked by the tmpfs test holds a copy of every descriptor of the
/// process until it execs, including other tests' directory locks, which then seem held for
/// a moment. Tests that reopen a directory hold this for reading; the tmpfs test for writing.
static MOUNTS: RwLock<()> = RwLock::new(());

fn no_mount_running() -> std::sync::RwLockReadGuard<'static, ()> {
    MOUNTS.read().unwrap_or_else(|e| e.into_inner())
}

/// A temporary directory in memory when there is one: these tests roll and sync a lot.
fn fast_tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

fn index_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.index"))
}

/// Fills the file system holding `path` to the last byte.
fn fill(path: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    while file.write_all(&[0u8; 4096]).is_ok() {}
    while file.write_all(&[0u8; 1]).is_ok() {}
}

/// (a) A roll that fails on a full disk after creating the next segment removes it again,
/// but a power loss can bring the empty file back. Recovery must drop it: otherwise the
/// records acknowledged into the old segment after the failed roll are shadowed by it, and
/// their offsets are handed out a second time.
#[test]
fn failed_roll_on_a_full_disk_never_lets_its_resurrected_segment_shadow_acknowledged_records() {
    let _mounts = MOUNTS.write().unwrap_or_else(|e| e.into_inner());
    let Some(fs) = SmallFs::mount("256k") else {
        return;
    };
    let dir = fs.path.join("log");
    let config = LogConfig {
        durability: Durability::Fsync,
        preallocate_bytes: 0,
        // An index entry per batch and no checkpoint until close: sealing the segment must
        // write a fresh index page, which the full disk refuses.
        index_interval_bytes: 1,
        checkpoint_interval: Duration::from_secs(3600),
        ..small_config()
    };
    let log = open(&dir, &config);
    for i in 0..5 {
        log.append(vec![record(i, 10)]).unwrap();
    }
    fill(&fs.path.join("filler"));
    let rolled = log.roll();
    assert!(
        matches!(rolled, Err(StorageError::DiskFull { .. })),
        "roll on a full disk: {rolled:?}"
    );
    let next_base = 5;
    assert_eq!(
        log.segment_count(),
        1,
        "the failed roll left a segment behind"
    );
    assert!(
        !segment_path(&dir, next_base).exists(),
        "the failed roll's segment file is still there"
    );
    // The old segment's last page has room: these are written, fdatasynced and acknowledged.
    for i in 5..8 {
        let appended = log.append(vec![record(i, 10)]).unwrap();
        assert_eq!(appended.base_offset, i);
    }
    std::fs::remove_file(fs.path.join("filler")).unwrap();
    drop(log);

    // Power loss: the failed roll's names come back (empty).
    std::fs::File::create(segment_path(&dir, next_base)).unwrap();
    std::fs::File::create(index_path(&dir, next_base)).unwrap();
    let log = open(&dir, &config);
    assert_eq!(log.segment_count(), 1, "the resurrected segment was kept");
    assert!(!segment_path(&dir, next_base).exists());
    assert_eq!(log.end_offset(), 8, "acknowledged records are shadowed");
    let records = read_all(&log);
    assert_eq!(records.len(), 8);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.offset, i as u64);
        assert_eq!(r.value, record(i as u64, 10).value, "offset {i}");
    }
    assert_eq!(
        log.append(vec![record(8, 10)]).unwrap().base_offset,
        8,
        "the next append must get a fresh offset"
    );
    drop(log);
    let log = open(&dir, &config);
    let records = read_all(&log);
    assert_eq!(records.len(), 9);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.offset, i as u64);
        assert_eq!(r.value, record(i as u64, 10).value, "offset {i}");
    }
    drop(log);
}

/// Sets the flag when dropped, so a panicking loop still stops its partner thread.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// (b) Retention running while the writer rolls once saw every segment sealed (the old one
/// marked sealed before the new one was added) and deleted them all: `start_offset()` and
/// reads then indexed an empty segment list and panicked.
#[test]
fn retention_racing_segment_rolls_never_empties_the_segment_list() {
    let _mounts = no_mount_running();
    let dir = fast_tempdir();
    let config = LogConfig {
        durability: Durability::None,
        ..small_config()
    };
    let log = Arc::new(open(dir.path(), &config));
    let stop = Arc::new(AtomicBool::new(false));
    let retention = {
        let (log, stop) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            let _stop = StopOnDrop(stop.clone());
            let policy = RetentionPolicy {
                low_watermark: Some(u64::MAX),
                ..Default::default()
            };
            let mut runs = 0u64;
            while !stop.load(Ordering::Relaxed) {
                log.apply_retention(&policy).expect("retention");
                let start = log.start_offset();
                let end = log.end_offset();
                assert!(start <= end, "start offset {start} past the end {end}");
                // Only this thread deletes segments: what it just saw stays readable.
                log.read(start, 4096).expect("read from the start offset");
                runs += 1;
            }
            runs
        })
    };
    let appender = {
        let _stop = StopOnDrop(stop.clone());
        let started = Instant::now();
        let mut rolls = 0u64;
        while !stop.load(Ordering::Relaxed)
            && (started.elapsed() < Duration::from_secs(1) || rolls < 15)
            && started.elapsed() < Duration::from_secs(10)
        {
            let appended = log.append(vec![record(rolls, 10)]).unwrap();
            assert_eq!(appended.base_offset, rolls);
            log.roll().unwrap();
            rolls += 1;
        }
        rolls
    };
    stop.store(true, Ordering::Relaxed);
    let runs = match retention.join() {
        Ok(runs) => runs,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    assert!(
        appender >= 15,
        "only {appender} rolls (and {runs} retention runs): the race was not exercised"
    );
    assert!(log.segment_count() >= 1);
    assert!(log.start_offset() <= log.end_offset());
    assert_eq!(log.end_offset(), appender);
    assert!(read_all(&log).iter().all(|r| r.offset < appender));
    let last = log.append(vec![record(appender, 10)]).unwrap();
    assert_eq!(last.base_offset, appender);
    assert_eq!(
        log.read(appender, 4096).unwrap()[0].value,
        record(appender, 10).value
    );
    let log = Arc::try_unwrap(log).expect("only handle");
    drop(log);
    let log = open(dir.path(), &config);
    assert!(log.start_offset() <= log.end_offset());
    assert_eq!(log.end_offset(), appender + 1);
    let records = read_all(&log);
    assert_eq!(
        records.last().map(|r| r.value.clone()),
        Some(record(appender, 10).value)
    );
}

fn preallocating_config() -> LogConfig {
    LogConfig {
        durability: Durability::Fsync,
        preallocate_bytes: 64 * 1024,
        segment_bytes: 256 * 1024,
        // The checkpoint stays where the open put it: every batch is past it, so recovery
        // must judge torn write against damage on the evidence in the segment alone.
        checkpoint_interval: Duration::from_secs(3600),
        ..small_config()
    }
}

/// Waits until the preallocator has zero-filled the segment to at least `len` bytes.
fn wait_for_file_len(path: &Path, len: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(path).unwrap().len() < len {
        assert!(Instant::now() < deadline, "{path:?} never grew to {len}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Copies the log directory while the log is open: the image a power loss would leave.
fn crash_image(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path.file_name().unwrap() != "LOCK" {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

/// The checkpoint's `(segment base, position)`.
fn checkpoint_of(dir: &Path) -> (u64, u64) {
    let bytes = std::fs::read(dir.join("recovery.checkpoint")).unwrap();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    (word(4), word(12))
}

/// The intact batches at the start of a segment file, as `(position, header)`.
fn batches_of(path: &Path) -> Vec<(u64, batch::BatchHeader)> {
    let bytes = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while let Ok(header) = batch::verify(&bytes[pos..], usize::MAX) {
        out.push((pos as u64, header));
        pos += header.length as usize;
    }
    out
}

/// (c) With preallocated zeros a power loss can persist the pages of the one unsynced group
/// out of order: a hole (zeros) where its first batch was, then its last batch intact. That
/// is a torn write, cut and reported, not damage in the middle of the log.
#[test]
fn power_loss_hole_in_the_last_preallocated_group_is_a_torn_write_not_corruption() {
    let _mounts = no_mount_running();
    let dir = tempfile::tempdir().unwrap();
    let image = tempfile::tempdir().unwrap();
    let config = preallocating_config();
    let log = Log::open(dir.path(), config.clone()).unwrap();
    for i in 0..10 {
        log.append(vec![record(i, 50)]).unwrap();
    }
    let data_len = log.size_bytes();
    // The in-flight group: batch A (offset 10) from the data end to one page past the next
    // page boundary, then batch B (offset 11, the group's last) on a page of its own. A's
    // pages never reached the disk; B's did.
    let b_at = (data_len / 4096 + 2) * 4096;
    let live = segment_path(dir.path(), 0);
    wait_for_file_len(&live, b_at + 8192);
    crash_image(dir.path(), image.path());
    drop(log);
    let mut b = BytesMut::new();
    batch::encode(&mut b, 11, &[NewRecord::new(vec![2u8; 100])], 5);
    batch::mark_group_end(&mut b);
    let segment = segment_path(image.path(), 0);
    let mut bytes = std::fs::read(&segment).unwrap();
    assert!(bytes[data_len as usize..].iter().all(|&x| x == 0));
    bytes[b_at as usize..b_at as usize + b.len()].copy_from_slice(&b);
    std::fs::write(&segment, &bytes).unwrap();
    assert!(checkpoint_of(image.path()).1 <= data_len);

    let log = match Log::open(image.path(), config.clone()) {
        Ok(log) => log,
        Err(e) => panic!("no acknowledged record is missing, yet the log refuses to open: {e}"),
    };
    let report = log.recovery_report();
    assert_eq!(
        report.truncated,
        Some((segment.clone(), data_len..bytes.len() as u64)),
        "the torn group is cut and reported"
    );
    assert!(report.repaired.is_empty());
    assert_eq!(log.end_offset(), 10);
    let records = read_all(&log);
    assert_eq!(records.len(), 10);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.value, record(i as u64, 50).value, "offset {i}");
    }
    assert_eq!(log.append(vec![record(10, 50)]).unwrap().base_offset, 10);
    drop(log);
    let log = Log::open(image.path(), config).unwrap();
    assert_eq!(log.recovery_report().truncated, None);
    assert_eq!(read_all(&log).len(), 11);
}

/// A log image of six acknowledged groups of one batch each (values of nonzero bytes that
/// span several sectors) followed by preallocated zeros, every batch past the checkpoint.
/// Returns the image directory and its batches.
fn acknowledged_groups_image(root: &Path) -> (PathBuf, Vec<(u64, batch::BatchHeader)>) {
    let live = root.join("live");
    let pristine = root.join("pristine");
    let log = Log::open(&live, preallocating_config()).unwrap();
    for i in 0..6u8 {
        log.append(vec![NewRecord::new(vec![0xA0 | i; 1500])])
            .unwrap();
    }
    let data_len = log.size_bytes();
    wait_for_file_len(&segment_path(&live, 0), data_len + 4096);
    crash_image(&live, &pristine);
    drop(log);
    let batches = batches_of(&segment_path(&pristine, 0));
    assert_eq!(batches.len(), 6);
    assert!(batches.iter().all(|(_, h)| h.is_group_end()));
    assert!(checkpoint_of(&pristine).1 <= batches[1].0);
    (pristine, batches)
}

/// Damages a copy of the image with `damage(segment bytes, batch position)` applied to batch
/// `damaged`, and expects the open to refuse with `CorruptLog` naming that batch.
fn assert_damage_refused(
    root: &Path,
    pristine: &Path,
    batches: &[(u64, batch::BatchHeader)],
    damaged: usize,
    damage: impl Fn(&mut [u8], usize),
) {
    let image = root.join(format!("damaged-{damaged}"));
    crash_image(pristine, &image);
    let segment = segment_path(&image, 0);
    let mut bytes = std::fs::read(&segment).unwrap();
    let (position, header) = batches[damaged];
    damage(&mut bytes, position as usize);
    std::fs::write(&segment, &bytes).unwrap();
    match Log::open(&image, preallocating_config()) {
        Err(StorageError::CorruptLog {
            file,
            position: at,
            lost,
            ..
        }) => {
            assert_eq!(file, segment);
            assert_eq!(at, position, "damage in batch {damaged}");
            assert_eq!(lost, header.base_offset..header.next_offset());
        }
        Ok(log) => panic!(
            "damage to acknowledged batch {damaged} was accepted: {:?}",
            log.recovery_report()
        ),
        Err(e) => panic!("damage to batch {damaged}: expected CorruptLog, got {e}"),
    }
}

/// (c) The other side of the same judgement: bit rot (flipped bytes, no zeroed sector) in an
/// acknowledged batch followed by a later group's intact data is damage, and the log refuses
/// to open rather than cut off acknowledged records as if they were a torn write.
#[test]
fn bit_rot_in_an_acknowledged_batch_before_a_later_group_still_refuses_to_open() {
    let _mounts = no_mount_running();
    let root = tempfile::tempdir().unwrap();
    let (pristine, batches) = acknowledged_groups_image(root.path());
    let rot = |bytes: &mut [u8], at: usize| {
        for i in [100, 600, 1100] {
            bytes[at + i] ^= 0xFF;
        }
    };
    // Rot in the second-to-last batch: only the last group's batch follows it, so only the
    // missing zero sector tells it from a torn write. Rot further back: intact groups follow.
    for damaged in [4, 1] {
        assert_damage_refused(root.path(), &pristine, &batches, damaged, rot);
    }
}

/// (c) A zeroed sector looks like a write that never reached the disk, but one in an
/// acknowledged batch followed by a whole later group (a group-end batch with more data
/// after it) cannot be the torn last group: the log refuses to open.
#[test]
fn zeroed_sector_in_an_acknowledged_batch_followed_by_later_groups_still_refuses_to_open() {
    let _mounts = no_mount_running();
    let root = tempfile::tempdir().unwrap();
    let (pristine, batches) = acknowledged_groups_image(root.path());
    let zero_a_sector = |bytes: &mut [u8], at: usize| {
        let sector = (at + 48).div_ceil(512) * 512;
        bytes[sector..sector + 512].fill(0);
    };
    for damaged in [1, 3] {
        assert_damage_refused(root.path(), &pristine, &batches, damaged, zero_a_sector);
    }
}

/// Collects completion results in the order the completions ran.
type Seen = Arc<Mutex<Vec<Result<Appended, String>>>>;

fn recorder(
    seen: &Seen,
    tx: &mpsc::Sender<()>,
) -> Box<dyn FnOnce(ferry_storage::Result<Appended>) + Send> {
    let (seen, tx) = (seen.clone(), tx.clone());
    Box::new(move |r| {
        seen.lock().unwrap().push(r.map_err(|e| e.to_string()));
        let _ = tx.send(());
    })
}

fn offsets_in_completion_order(seen: &Seen) -> Vec<u64> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|r| r.as_ref().expect("append failed").base_offset)
        .collect()
}

/// (d) Groups of more than two completions go to the completer thread, smaller ones ran
/// inline on the writer, even while the completer still had earlier groups queued: a lone
/// append after a burst of three was completed before them.
#[test]
fn append_then_completions_run_in_offset_order_across_bursts_and_lone_appends() {
    let dir = fast_tempdir();
    let config = LogConfig {
        durability: Durability::None,
        segment_bytes: 1 << 20,
        ..small_config()
    };
    let log = open(dir.path(), &config);
    let seen: Seen = Arc::default();
    let (tx, rx) = mpsc::channel();
    let n = 20_000u64;
    let spin = |micros| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_micros(micros) {}
    };
    for i in 0..n {
        log.append_then(
            vec![NewRecord::new(vec![(i % 251) as u8; 8])],
            recorder(&seen, &tx),
        );
        // A burst of three (one group, to the completer), then a lone append.
        match i % 4 {
            2 => spin(30),
            3 => spin(100),
            _ => {}
        }
    }
    for _ in 0..n {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("a completion never ran");
    }
    let offsets = offsets_in_completion_order(&seen);
    let inversions = offsets.windows(2).filter(|w| w[1] < w[0]).count();
    assert_eq!(
        inversions, 0,
        "{inversions} completions ran before an earlier append's"
    );
    assert_eq!(offsets, (0..n).collect::<Vec<_>>());
}

/// Blocks the writer inside the inline completion of a first append until `queue` has
/// enqueued more appends, so that those form one group of more than two, completed on the
/// completer thread. Returns once `queue` is done and the writer is let go.
fn with_writer_held(log: &Log, seen: &Seen, tx: &mpsc::Sender<()>, queue: impl FnOnce()) {
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let record = recorder(seen, tx);
    log.append_then(
        vec![NewRecord::new("held")],
        Box::new(move |r| {
            let _ = entered_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(5));
            record(r);
        }),
    );
    entered_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the first completion never ran");
    queue();
    release_tx.send(()).unwrap();
}

/// (d) The deterministic form: a lone append made while the completer is still busy with an
/// earlier group must not be completed inline ahead of that group.
#[test]
fn a_lone_append_never_completes_before_an_earlier_group_still_on_the_completer() {
    let dir = fast_tempdir();
    let config = LogConfig {
        durability: Durability::None,
        ..small_config()
    };
    let log = open(dir.path(), &config);
    let seen: Seen = Arc::default();
    let (tx, rx) = mpsc::channel();
    let (busy_tx, busy_rx) = mpsc::channel();
    let (free_tx, free_rx) = mpsc::channel::<()>();
    with_writer_held(&log, &seen, &tx, || {
        // Offsets 1..=3, one group: its first completion keeps the completer busy.
        let record = recorder(&seen, &tx);
        log.append_then(
            vec![NewRecord::new("1")],
            Box::new(move |r| {
                let _ = busy_tx.send(());
                let _ = free_rx.recv_timeout(Duration::from_secs(5));
                record(r);
            }),
        );
        for i in 2..=3 {
            log.append_then(vec![NewRecord::new(format!("{i}"))], recorder(&seen, &tx));
        }
    });
    busy_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the group never reached the completer");
    log.append_then(vec![NewRecord::new("4")], recorder(&seen, &tx));
    // Time for the writer to complete the lone append inline, were it allowed to.
    std::thread::sleep(Duration::from_millis(50));
    free_tx.send(()).unwrap();
    for _ in 0..5 {
        rx.recv_timeout(Duration::from_secs(5))
            .expect("a completion never ran");
    }
    assert_eq!(offsets_in_completion_order(&seen), vec![0, 1, 2, 3, 4]);
}

/// Panics on the log's own threads (writer, completer, preallocator) since the hook went in:
/// they do not fail the test by themselves.
static STORAGE_THREAD_PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_storage_thread_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("ferry-log"))
            {
                STORAGE_THREAD_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

/// Opens `dir` once the previous log's threads have let go of it.
fn reopen_when_released(dir: &Path, config: &LogConfig) -> Log {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Log::open(dir, config.clone()) {
            Ok(log) => return log,
            Err(StorageError::Locked { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("the dropped log never released {dir:?}: {e}"),
        }
    }
}

/// Runs one completion that drops the last handle of the log, then checks every completion
/// ran, no storage thread panicked and the directory can be reopened with every record.
fn drop_last_handle_in_completion(expected_thread: &str, hold_writer: bool) {
    let _mounts = no_mount_running();
    count_storage_thread_panics();
    let dir = fast_tempdir();
    let config = LogConfig {
        durability: Durability::Fsync,
        ..small_config()
    };
    let log = Arc::new(open(dir.path(), &config));
    let seen: Seen = Arc::default();
    let (tx, rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let dropped_on = Arc::new(Mutex::new(None::<String>));
    let dropping = {
        let (last, seen, tx, dropped_on) =
            (log.clone(), seen.clone(), tx.clone(), dropped_on.clone());
        Box::new(move |r: ferry_storage::Result<Appended>| {
            // Until the test has let go of its handle, this one is not the last.
            let _ = go_rx.recv_timeout(Duration::from_secs(5));
            seen.lock().unwrap().push(r.map_err(|e| e.to_string()));
            let thread = std::thread::current().name().unwrap_or("?").to_string();
            *dropped_on.lock().unwrap() = Some(thread);
            drop(last);
            let _ = tx.send(());
        })
    };
    let appends = if hold_writer {
        with_writer_held(&log, &seen, &tx, || {
            log.append_then(vec![NewRecord::new("dropper")], dropping);
            for i in 0..4 {
                log.append_then(
                    vec![NewRecord::new(format!("after-{i}"))],
                    recorder(&seen, &tx),
                );
            }
        });
        6
    } else {
        log.append_then(vec![NewRecord::new("dropper")], dropping);
        1
    };
    drop(tx);
    drop(log);
    go_tx.send(()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut ran = 0;
    while ran < appends && Instant::now() < deadline {
        if rx.recv_timeout(Duration::from_millis(100)).is_ok() {
            ran += 1;
        }
    }
    assert_eq!(
        ran,
        appends,
        "only {ran} of {appends} completions ran within 5 s ({} panics on storage threads)",
        STORAGE_THREAD_PANICS.load(Ordering::SeqCst)
    );
    assert!(
        seen.lock().unwrap().iter().all(|r| r.is_ok()),
        "{:?}",
        seen.lock().unwrap()
    );
    let thread = dropped_on.lock().unwrap().clone();
    assert_eq!(
        thread.as_deref(),
        Some(expected_thread),
        "the scenario needs the last handle dropped on the {expected_thread} thread"
    );
    let log = reopen_when_released(dir.path(), &config);
    assert_eq!(read_all(&log).len(), appends);
    assert_eq!(
        STORAGE_THREAD_PANICS.load(Ordering::SeqCst),
        0,
        "a storage thread panicked"
    );
}

/// (e) A completion holding the last `Arc<Log>` dropped it on the writer thread, whose
/// `Drop` then joined the writer from itself (a panic) or waited for itself (a hang).
#[test]
fn dropping_the_last_log_handle_inside_an_inline_completion_neither_hangs_nor_panics() {
    drop_last_handle_in_completion("ferry-log-writer", false);
}

/// (e) The same on the completer thread: the writer's shutdown waits for the completer,
/// which is inside the completion that started the shutdown.
#[test]
fn dropping_the_last_log_handle_inside_a_completer_completion_neither_hangs_nor_panics() {
    drop_last_handle_in_completion("ferry-log-completer", true);
}

/// What a completion saw when it called the log's blocking methods.
#[derive(Debug)]
struct BlockingCalls {
    thread: String,
    append: Result<Appended, StorageError>,
    sync: Result<(), StorageError>,
    roll: Result<(), StorageError>,
}

fn call_blocking_methods(
    log: &Arc<Log>,
    tx: &mpsc::Sender<BlockingCalls>,
) -> Box<dyn FnOnce(ferry_storage::Result<Appended>) + Send> {
    let (log, tx) = (log.clone(), tx.clone());
    Box::new(move |r| {
        r.expect("append");
        let calls = BlockingCalls {
            thread: std::thread::current().name().unwrap_or("?").to_string(),
            append: log.append(vec![NewRecord::new("nested")]),
            sync: log.sync(),
            roll: log.roll(),
        };
        let _ = tx.send(calls);
    })
}

/// (e) A blocking call from a completion waits for the thread it runs on: it must be refused
/// with `BlockingCallInCompletion`, on the writer and on the completer thread, while
/// `append_then` (what the error tells callers to use) still works from there.
#[test]
fn blocking_calls_inside_a_completion_are_refused_instead_of_deadlocking() {
    let dir = fast_tempdir();
    let log = Arc::new(open(dir.path(), &small_config()));
    let (tx, rx) = mpsc::channel();
    // Inline on the writer.
    log.append_then(vec![NewRecord::new("a")], call_blocking_methods(&log, &tx));
    // A group of more than two, on the completer.
    let seen: Seen = Arc::default();
    let (done_tx, done_rx) = mpsc::channel();
    with_writer_held(&log, &seen, &done_tx, || {
        log.append_then(vec![NewRecord::new("b")], call_blocking_methods(&log, &tx));
        log.append_then(vec![NewRecord::new("c")], recorder(&seen, &done_tx));
        log.append_then(vec![NewRecord::new("d")], recorder(&seen, &done_tx));
    });
    let mut threads = Vec::new();
    for _ in 0..2 {
        let calls = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("a completion calling a blocking method hung");
        assert!(
            matches!(
                calls.append,
                Err(StorageError::BlockingCallInCompletion { call: "append" })
            ),
            "{calls:?}"
        );
        assert!(
            matches!(
                calls.sync,
                Err(StorageError::BlockingCallInCompletion { call: "sync" })
            ),
            "{calls:?}"
        );
        assert!(
            matches!(
                calls.roll,
                Err(StorageError::BlockingCallInCompletion { call: "roll" })
            ),
            "{calls:?}"
        );
        threads.push(calls.thread);
    }
    threads.sort();
    assert_eq!(threads, ["ferry-log-completer", "ferry-log-writer"]);
    for _ in 0..3 {
        done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }

    // The non-blocking way from inside a completion.
    let (nested_tx, nested_rx) = mpsc::channel();
    let inner_log = log.clone();
    log.append_then(
        vec![NewRecord::new("outer")],
        Box::new(move |r| {
            r.expect("outer append");
            inner_log.append_then(
                vec![NewRecord::new("inner")],
                Box::new(move |r| {
                    let _ = nested_tx.send(r.map(|a| a.base_offset));
                }),
            );
        }),
    );
    let inner = nested_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("an append_then from a completion never completed")
        .expect("an append_then from a completion failed");
    assert_eq!(inner, 6);
    let values: Vec<_> = read_all(&log).into_iter().map(|r| r.value).collect();
    assert_eq!(values, ["a", "held", "b", "c", "d", "outer", "inner"]);
    // The blocking methods still work from an ordinary thread.
    log.sync().unwrap();
}

/// (f) The read budget was grown with a plain addition: `read(0, usize::MAX)` overflowed
/// (a panic in debug builds) instead of returning everything.
#[test]
fn read_with_an_unbounded_byte_budget_returns_every_record() {
    let dir = fast_tempdir();
    let config = LogConfig {
        durability: Durability::None,
        ..small_config()
    };
    let log = open(dir.path(), &config);
    let n = 300;
    for i in 0..n {
        log.append(vec![record(i, 100)]).unwrap();
    }
    assert!(log.segment_count() > 2, "the read should span segments");
    for budget in [usize::MAX, usize::MAX - 1] {
        let records = log.read(0, budget).unwrap();
        assert_eq!(records.len() as u64, n, "budget {budget}");
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.offset, i as u64);
            assert_eq!(r.value, record(i as u64, 100).value);
        }
        let batches = log.read_batches(0, budget).unwrap();
        assert_eq!(batches.last().unwrap().next_offset(), n);
    }
    let from_middle = log.read(n / 2, usize::MAX).unwrap();
    assert_eq!(from_middle.len() as u64, n - n / 2);
    assert_eq!(from_middle[0].offset, n / 2);
}
