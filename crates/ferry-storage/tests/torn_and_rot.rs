//! Torn writes and bit rot injected into the files of a closed log, and what reopening and
//! reading make of them. Every test prints its seed on failure; replay one with
//! `FERRY_TORN_SEED=<seed>`.
//!
//! Two kinds of image are damaged:
//! - a *closed* log: the checkpoint covers the whole active segment;
//! - a *crash* image: a copy of the files taken while the log was open, after appends that
//!   were fsynced but not yet checkpointed, so the active segment has a tail past the
//!   checkpoint, as after a power loss.

use std::fs::{self, OpenOptions};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_storage::batch::{self, BatchHeader};

mod common;
use common::rng::Rng;
use ferry_storage::index;
use ferry_storage::{Durability, Log, LogConfig, NewRecord, Record, RecoveryReport, StorageError};

// ---------------------------------------------------------------------------------------------
// Randomness with printed seeds.

fn seed_for(test: &str) -> u64 {
    let seed = ferry_testkit::killed_child::seed_from_env("FERRY_TORN_SEED");
    // Captured by the test harness and shown only when the test fails.
    println!("{test}: seed {seed} (replay with FERRY_TORN_SEED={seed})");
    seed
}

// ---------------------------------------------------------------------------------------------
// The log under test.

const SEGMENT_BYTES: u64 = 8 * 1024;

fn config() -> LogConfig {
    LogConfig {
        durability: Durability::Fsync,
        segment_bytes: SEGMENT_BYTES,
        index_interval_bytes: 256,
        max_batch_bytes: 4096,
        max_record_bytes: 4096,
        segment_max_age: None,
        // These tests cut and flip bytes at positions computed from the file's length; the
        // preallocated zero tail has tests of its own (preallocation.rs).
        preallocate_bytes: 0,
        ..LogConfig::default()
    }
}

fn repair_config() -> LogConfig {
    LogConfig {
        repair: true,
        ..config()
    }
}

fn gen_batch(rng: &mut Rng, first_offset: u64, max_value: u64) -> Vec<NewRecord> {
    let n = 1 + rng.below(4);
    (first_offset..first_offset + n)
        .map(|offset| {
            let size = 1 + rng.below(max_value) as usize;
            let mut record =
                NewRecord::new(rng.bytes(size)).with_timestamp(1_000_000 + 10 * offset as i64);
            if rng.below(3) != 0 {
                record = record.with_key(format!("key-{}", offset % 13));
            }
            for h in 0..rng.below(3) {
                let len = 1 + rng.below(16) as usize;
                record = record.with_header(format!("h{h}"), rng.bytes(len));
            }
            record
        })
        .collect()
}

fn batch_len(records: &[NewRecord]) -> u64 {
    (batch::HEADER_LEN + records.iter().map(NewRecord::encoded_len).sum::<usize>()) as u64
}

fn append(log: &Log, records: Vec<NewRecord>, expected: &mut Vec<NewRecord>) -> u64 {
    let len = batch_len(&records);
    let appended = log.append(records.clone()).expect("append");
    assert_eq!(appended.base_offset, expected.len() as u64);
    expected.extend(records);
    len
}

fn log_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

fn index_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.index"))
}

fn checkpoint_path(dir: &Path) -> PathBuf {
    dir.join("recovery.checkpoint")
}

/// The batches of a segment file, as `(position, header)`, read without the log.
fn batches_of(path: &Path) -> Vec<(u64, BatchHeader)> {
    let bytes = fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let header = batch::verify(&bytes[pos..], usize::MAX).expect("pristine image verifies");
        out.push((pos as u64, header));
        pos += header.length as usize;
    }
    out
}

fn segment_bases(dir: &Path) -> Vec<u64> {
    let mut bases: Vec<u64> = fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            (path.extension()? == "log").then(|| path.file_stem()?.to_str()?.parse().ok())?
        })
        .collect();
    bases.sort_unstable();
    bases
}

struct Fixture {
    root: tempfile::TempDir,
    /// The pristine files every trial starts from.
    image: PathBuf,
    /// Every record, by offset.
    expected: Vec<NewRecord>,
    bases: Vec<u64>,
    /// Bytes of the active segment (and offsets) the checkpoint vouches for.
    checkpoint_pos: u64,
    checkpoint_next: u64,
    /// A valid checkpoint file written while an older segment was active.
    stale_checkpoint: Vec<u8>,
}

impl Fixture {
    fn active_base(&self) -> u64 {
        *self.bases.last().unwrap()
    }
    fn sealed(&self) -> &[u64] {
        &self.bases[..self.bases.len() - 1]
    }
    fn next_base(&self, base: u64) -> u64 {
        let i = self.bases.iter().position(|&b| b == base).unwrap();
        self.bases
            .get(i + 1)
            .copied()
            .unwrap_or(self.expected.len() as u64)
    }
    fn active_len(&self) -> u64 {
        fs::metadata(log_path(&self.image, self.active_base()))
            .unwrap()
            .len()
    }
    /// A fresh copy of the image to damage.
    fn copy(&self, name: &str) -> PathBuf {
        let dir = self.root.path().join(name);
        if dir.exists() {
            fs::remove_dir_all(&dir).unwrap();
        }
        copy_files(&self.image, &dir);
        dir
    }
}

fn copy_files(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() && entry.file_name() != "LOCK" {
            fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// Three or more sealed segments and an active one. With `crash`, the active segment also
/// holds fsynced batches past the checkpoint, ending in a small batch.
fn build(seed: u64, crash: bool) -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let live = root.path().join("live");
    let mut rng = Rng::new(seed);
    let mut expected = Vec::new();
    let log = Log::open(&live, config()).unwrap();
    let mut stale_checkpoint = None;
    while log.segment_count() < 4 {
        append(
            &log,
            gen_batch(&mut rng, expected.len() as u64, 300),
            &mut expected,
        );
        if stale_checkpoint.is_none() && log.segment_count() >= 2 {
            stale_checkpoint = Some(fs::read(checkpoint_path(&live)).unwrap());
        }
    }
    log.roll().unwrap();
    let mut active_bytes = 0;
    while active_bytes < 2500 {
        active_bytes += append(
            &log,
            gen_batch(&mut rng, expected.len() as u64, 300),
            &mut expected,
        );
    }
    log.close().unwrap();
    let bases = segment_bases(&live);
    let checkpoint_pos = fs::metadata(log_path(&live, *bases.last().unwrap()))
        .unwrap()
        .len();
    let checkpoint_next = expected.len() as u64;
    let image = root.path().join("image");
    if crash {
        // Checkpoints only at open, close and roll: everything appended now is fsynced and
        // acknowledged but lies past the checkpoint.
        let log = Log::open(
            &live,
            LogConfig {
                checkpoint_interval: Duration::from_secs(3600),
                ..config()
            },
        )
        .unwrap();
        let mut room = SEGMENT_BYTES - checkpoint_pos - 400;
        loop {
            let records = gen_batch(&mut rng, expected.len() as u64, 200);
            if batch_len(&records) > room {
                break;
            }
            room -= append(&log, records, &mut expected);
        }
        let last = gen_batch(&mut rng, expected.len() as u64, 40);
        assert!(batch_len(&last) <= 400);
        append(&log, last, &mut expected);
        assert_eq!(
            log.segment_count(),
            bases.len(),
            "the crash tail must not roll"
        );
        copy_files(&live, &image);
        drop(log);
    } else {
        copy_files(&live, &image);
    }
    Fixture {
        root,
        image,
        expected,
        bases,
        checkpoint_pos,
        checkpoint_next,
        stale_checkpoint: stale_checkpoint.unwrap(),
    }
}

fn assert_record(got: &Record, want: &NewRecord, label: &str) {
    common::assert_same_content(got, want, label);
    assert_eq!(
        Some(got.timestamp),
        want.timestamp,
        "{label}: timestamp at offset {}",
        got.offset
    );
}

/// Reads the whole log and checks every record against `expected`; offsets in `lost` must be
/// absent and every other offset below the end present.
fn assert_reads(log: &Log, expected: &[NewRecord], lost: &[Range<u64>], label: &str) {
    let is_lost = |o: u64| lost.iter().any(|r| r.contains(&o));
    assert_eq!(log.start_offset(), 0, "{label}");
    let end = log.end_offset();
    let mut next = 0;
    while next < end {
        let records = log
            .read(next, 16 * 1024)
            .unwrap_or_else(|e| panic!("{label}: read at {next} failed: {e}"));
        if records.is_empty() {
            break;
        }
        for r in &records {
            assert!(
                r.offset >= next,
                "{label}: read at {next} went backwards to {}",
                r.offset
            );
            for o in next..r.offset {
                assert!(
                    is_lost(o),
                    "{label}: offset {o} is missing but was not reported lost"
                );
            }
            assert!(
                !is_lost(r.offset),
                "{label}: offset {} was reported lost but reads back",
                r.offset
            );
            assert_record(r, &expected[r.offset as usize], label);
            next = r.offset + 1;
        }
    }
    for o in next..end {
        assert!(
            is_lost(o),
            "{label}: offset {o} is missing but was not reported lost"
        );
    }
}

fn open_ok(dir: &Path, config: LogConfig, label: &str) -> Log {
    Log::open(dir, config).unwrap_or_else(|e| panic!("{label}: open failed: {e}"))
}

fn expect_corrupt_log(dir: &Path, label: &str) -> (PathBuf, Range<u64>) {
    match Log::open(dir, config()) {
        Err(StorageError::CorruptLog { file, lost, .. }) => (file, lost),
        Err(e) => panic!("{label}: expected CorruptLog, got {e}"),
        Ok(log) => panic!(
            "{label}: damage went unnoticed: opened with {:?}",
            log.recovery_report()
        ),
    }
}

fn truncate(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn flip(path: &Path, position: u64, mask: u8) {
    assert_ne!(mask, 0);
    let mut bytes = fs::read(path).unwrap();
    bytes[position as usize] ^= mask;
    fs::write(path, bytes).unwrap();
}

/// Offset that follows the whole batches ending at or before `cut`.
fn surviving_next(batches: &[(u64, BatchHeader)], cut: u64, base: u64) -> (u64, u64) {
    batches
        .iter()
        .take_while(|(pos, h)| pos + h.length as u64 <= cut)
        .last()
        .map_or((0, base), |(pos, h)| {
            (pos + h.length as u64, h.next_offset())
        })
}

/// After a repair the log must be stable: a plain reopen finds nothing more to do, and the
/// next append goes after every offset ever handed out.
fn assert_repaired_log_is_stable(
    dir: &Path,
    fx: &Fixture,
    lost: &[Range<u64>],
    end: u64,
    label: &str,
) {
    let log = open_ok(dir, config(), &format!("{label}, reopen after repair"));
    let report = log.recovery_report().clone();
    assert_eq!(
        report.truncated, None,
        "{label}: reopen after repair: {report:?}"
    );
    assert!(
        report.repaired.is_empty(),
        "{label}: reopen after repair: {report:?}"
    );
    assert_eq!(
        log.end_offset(),
        end,
        "{label}: lost offsets must not be handed out again"
    );
    assert_reads(&log, &fx.expected, lost, label);
    let appended = log
        .append(vec![NewRecord::new("after repair").with_timestamp(5)])
        .unwrap();
    assert_eq!(appended.base_offset, end, "{label}");
}

fn assert_quarantined(dir: &Path, report: &RecoveryReport, damaged: &[u8], label: &str) {
    let q = &report.repaired[0].quarantined_to;
    assert_eq!(q.parent().unwrap(), dir.join("quarantine"), "{label}");
    assert_eq!(
        fs::read(q).unwrap(),
        damaged,
        "{label}: the quarantined copy is the damaged file"
    );
}

// ---------------------------------------------------------------------------------------------
// (a) torn tails

#[test]
fn torn_tail_past_the_checkpoint_is_cut_at_the_last_whole_batch_and_loses_nothing_before() {
    let seed = seed_for("torn_tail");
    let fx = build(seed, true);
    let mut rng = Rng::new(seed ^ 0xA);
    let base = fx.active_base();
    let image_path = log_path(&fx.image, base);
    let batches = batches_of(&image_path);
    let len = fx.active_len();
    let (last_pos, _) = *batches.last().unwrap();
    assert!(
        batches.iter().any(|(p, _)| *p == fx.checkpoint_pos),
        "checkpoint sits on a batch boundary"
    );
    // Every byte of the last batch, every batch boundary past the checkpoint, and random cuts.
    let mut cuts: Vec<u64> = (last_pos..len).collect();
    cuts.extend(
        batches
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| *p >= fx.checkpoint_pos),
    );
    cuts.extend((0..60).map(|_| rng.range(fx.checkpoint_pos..len)));
    cuts.sort_unstable();
    cuts.dedup();
    for (i, &cut) in cuts.iter().enumerate() {
        let label = format!("seed {seed}: cut at {cut} of {len}");
        let dir = fx.copy("trial");
        let path = log_path(&dir, base);
        truncate(&path, cut);
        let (whole_end, end) = surviving_next(&batches, cut, base);
        let log = open_ok(&dir, config(), &label);
        let report = log.recovery_report().clone();
        let want = (whole_end < cut).then(|| (path.clone(), whole_end..cut));
        assert_eq!(report.truncated, want, "{label}");
        assert!(report.repaired.is_empty(), "{label}: {report:?}");
        assert_eq!(
            log.end_offset(),
            end,
            "{label}: nothing after the cut may appear"
        );
        assert_reads(&log, &fx.expected[..end as usize], &[], &label);
        // Appends resume right after the recovered end and survive a reopen.
        if i % 8 == 0 || cut == len - 1 {
            let appended = log
                .append(vec![NewRecord::new("resume").with_timestamp(7)])
                .unwrap();
            assert_eq!(appended.base_offset, end, "{label}");
            log.close().unwrap();
            let log = open_ok(&dir, config(), &label);
            assert_eq!(
                log.recovery_report().truncated,
                None,
                "{label}: second open"
            );
            assert_eq!(log.end_offset(), end + 1, "{label}");
            assert_eq!(log.read(end, 1024).unwrap()[0].value, "resume", "{label}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (b) truncation below what the checkpoint (or a sealed footer) vouches for

#[test]
fn truncated_active_segment_below_the_checkpoint_refuses_to_open_and_repair_reports_the_loss() {
    let seed = seed_for("truncated_below_checkpoint");
    let mut rng = Rng::new(seed ^ 0xB);
    for crash in [false, true] {
        let fx = build(seed.wrapping_add(crash as u64), crash);
        let base = fx.active_base();
        let batches = batches_of(&log_path(&fx.image, base));
        // Every boundary below the checkpoint (including an empty file) and random cuts.
        let mut cuts: Vec<u64> = batches
            .iter()
            .map(|(p, _)| *p)
            .filter(|p| *p < fx.checkpoint_pos)
            .collect();
        cuts.extend((0..25).map(|_| rng.range(0..fx.checkpoint_pos)));
        cuts.sort_unstable();
        cuts.dedup();
        for cut in cuts {
            let label = format!(
                "seed {seed}, crash image {crash}: cut at {cut} below checkpoint {}",
                fx.checkpoint_pos
            );
            let dir = fx.copy("trial");
            let path = log_path(&dir, base);
            truncate(&path, cut);
            let damaged = fs::read(&path).unwrap();
            let (_, survives) = surviving_next(&batches, cut, base);
            let lost = survives..fx.checkpoint_next;
            let (file, reported) = expect_corrupt_log(&dir, &label);
            assert_eq!(file, path, "{label}");
            assert_eq!(
                reported, lost,
                "{label}: the error names the offsets at stake"
            );

            let log = open_ok(&dir, repair_config(), &label);
            let report = log.recovery_report().clone();
            assert_eq!(report.repaired.len(), 1, "{label}: {report:?}");
            assert_eq!(report.repaired[0].file, path, "{label}");
            assert_eq!(report.repaired[0].lost, vec![lost.clone()], "{label}");
            assert_quarantined(&dir, &report, &damaged, &label);
            assert_eq!(
                log.end_offset(),
                fx.checkpoint_next,
                "{label}: lost offsets are not reused"
            );
            assert_reads(&log, &fx.expected, std::slice::from_ref(&lost), &label);
            drop(log);
            assert_repaired_log_is_stable(&dir, &fx, &[lost], fx.checkpoint_next, &label);
        }
    }
}

#[test]
fn truncated_sealed_segment_refuses_to_open_and_repair_reports_the_loss() {
    let seed = seed_for("truncated_sealed");
    let mut rng = Rng::new(seed ^ 0xB5);
    let fx = build(seed, false);
    for trial in 0..30 {
        let base = fx.sealed()[rng.below(fx.sealed().len() as u64) as usize];
        let next_base = fx.next_base(base);
        let batches = batches_of(&log_path(&fx.image, base));
        let len = fs::metadata(log_path(&fx.image, base)).unwrap().len();
        // Alternate between cuts on a batch boundary and anywhere.
        let cut = if trial % 2 == 0 {
            batches[rng.below(batches.len() as u64) as usize].0
        } else {
            rng.range(0..len)
        };
        let label = format!("seed {seed}: segment {base} cut at {cut} of {len}");
        let dir = fx.copy("trial");
        let path = log_path(&dir, base);
        truncate(&path, cut);
        let damaged = fs::read(&path).unwrap();
        let (_, survives) = surviving_next(&batches, cut, base);
        let lost = survives..next_base;
        let (file, reported) = expect_corrupt_log(&dir, &label);
        assert_eq!(file, path, "{label}");
        assert_eq!(reported, lost, "{label}");

        let log = open_ok(&dir, repair_config(), &label);
        let report = log.recovery_report().clone();
        assert_eq!(report.repaired.len(), 1, "{label}: {report:?}");
        assert_eq!(report.repaired[0].file, path, "{label}");
        assert_eq!(report.repaired[0].lost, vec![lost.clone()], "{label}");
        assert_quarantined(&dir, &report, &damaged, &label);
        let end = fx.expected.len() as u64;
        assert_eq!(log.end_offset(), end, "{label}");
        assert_reads(&log, &fx.expected, std::slice::from_ref(&lost), &label);
        drop(log);
        assert_repaired_log_is_stable(&dir, &fx, &[lost], end, &label);
    }
}

// ---------------------------------------------------------------------------------------------
// (c) bit rot in the active segment

/// Flips 1..=3 bytes inside `[start, end)`; returns the damaged file contents.
fn rot(path: &Path, rng: &mut Rng, range: Range<u64>) -> Vec<u8> {
    let original = fs::read(path).unwrap();
    let mut bytes = original.clone();
    // Two flips of one byte can cancel out: flip until the bytes really differ.
    while bytes == original {
        for _ in 0..1 + rng.below(3) {
            let at = rng.range(range.clone()) as usize;
            bytes[at] ^= 1 + rng.below(255) as u8;
        }
    }
    fs::write(path, &bytes).unwrap();
    bytes
}

#[test]
fn bit_rot_in_a_scanned_active_batch_refuses_to_open_and_repair_loses_only_that_batch() {
    let seed = seed_for("active_rot");
    let mut rng = Rng::new(seed ^ 0xC);
    for crash in [false, true] {
        let fx = build(seed.wrapping_add(crash as u64), crash);
        let base = fx.active_base();
        let batches = batches_of(&log_path(&fx.image, base));
        // Open scans from the last index entry below the checkpoint; rot below that entry is
        // found by reads instead (see `bit_rot_below_the_active_checkpoint_...`). In the
        // scanned part, rot is damage when the checkpoint covers the batch or an intact batch
        // follows it; rot in the last batch past the checkpoint looks exactly like a torn
        // write and is cut off (see the torn-tail test).
        let entries =
            index::load_active_prefix(&index_path(&fx.image, base), fx.checkpoint_pos).unwrap();
        let scan_from = entries.last().map_or(0, |e| e.position as u64);
        let candidates: Vec<usize> = (0..batches.len())
            .filter(|&i| batches[i].0 >= scan_from)
            .filter(|&i| i + 1 < batches.len() || batches[i].0 < fx.checkpoint_pos)
            .collect();
        assert!(
            !candidates.is_empty(),
            "crash image {crash}: no batch where open must notice rot"
        );
        for trial in 0..30 {
            let i = candidates[rng.below(candidates.len() as u64) as usize];
            let (pos, header) = batches[i];
            let label = format!(
                "seed {seed}, crash image {crash}, trial {trial}: rot in batch {i} at {pos} (offsets {}..{})",
                header.base_offset,
                header.next_offset()
            );
            let dir = fx.copy("trial");
            let path = log_path(&dir, base);
            // Also aim at the length field now and then: a damaged length must not hide the
            // intact batches that follow.
            let damaged = if trial % 5 == 0 {
                rot(&path, &mut rng, pos..pos + 4)
            } else {
                rot(&path, &mut rng, pos..pos + header.length as u64)
            };
            let (file, reported) = expect_corrupt_log(&dir, &label);
            assert_eq!(file, path, "{label}");
            assert_eq!(reported.start, header.base_offset, "{label}");
            assert!(
                reported.end >= header.next_offset(),
                "{label}: {reported:?}"
            );

            let log = open_ok(&dir, repair_config(), &label);
            let report = log.recovery_report().clone();
            let lost = header.base_offset..header.next_offset();
            assert_eq!(report.repaired.len(), 1, "{label}: {report:?}");
            assert_eq!(
                report.repaired[0].lost,
                vec![lost.clone()],
                "{label}: exactly the rotten batch is lost"
            );
            assert_eq!(report.truncated, None, "{label}");
            assert_quarantined(&dir, &report, &damaged, &label);
            let end = fx.expected.len() as u64;
            assert_eq!(log.end_offset(), end, "{label}");
            assert_reads(&log, &fx.expected, std::slice::from_ref(&lost), &label);
            drop(log);
            assert_repaired_log_is_stable(&dir, &fx, &[lost], end, &label);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (d) bit rot where open does not look: sealed segments, and the trusted part of the active one

/// Reads from every offset in `range` with small and large budgets: a read either returns the
/// right records starting exactly at the offset asked for, or fails with `Corrupt` naming
/// `file`. Returns how many reads failed.
fn assert_reads_never_wrong(
    log: &Log,
    fx: &Fixture,
    range: Range<u64>,
    damaged: Range<u64>,
    file: &Path,
    label: &str,
) -> usize {
    let mut failures = 0;
    for from in range {
        for budget in [1, 700, 64 * 1024] {
            match log.read(from, budget) {
                Ok(records) => {
                    assert!(
                        !records.is_empty(),
                        "{label}: read at {from} (budget {budget}) returned nothing"
                    );
                    for (k, r) in records.iter().enumerate() {
                        assert_eq!(
                            r.offset,
                            from + k as u64,
                            "{label}: read at {from} (budget {budget}) skipped records"
                        );
                        assert!(
                            !damaged.contains(&r.offset),
                            "{label}: read at {from} returned rotten offset {}",
                            r.offset
                        );
                        assert_record(r, &fx.expected[r.offset as usize], label);
                    }
                }
                Err(StorageError::Corrupt { file: named, .. }) => {
                    assert_eq!(named, file, "{label}: read at {from}");
                    failures += 1;
                }
                Err(e) => panic!("{label}: read at {from} failed with {e}"),
            }
        }
        if damaged.contains(&from) {
            assert!(
                matches!(log.read(from, 1), Err(StorageError::Corrupt { .. })),
                "{label}: read of rotten offset {from} must fail"
            );
        }
    }
    failures
}

/// Header fields worth aiming at: length, magic, version, attributes, CRC, base offset,
/// record count, timestamps.
const HEADER_TARGETS: [u64; 9] = [0, 4, 6, 7, 8, 12, 20, 24, 32];

#[test]
fn bit_rot_in_a_sealed_segment_is_reported_on_read_never_returned_as_data() {
    let seed = seed_for("sealed_rot");
    let mut rng = Rng::new(seed ^ 0xD);
    let fx = build(seed, false);
    let active_len = fx.active_len();
    for trial in 0..40 {
        let base = fx.sealed()[rng.below(fx.sealed().len() as u64) as usize];
        let batches = batches_of(&log_path(&fx.image, base));
        let (pos, header) = batches[rng.below(batches.len() as u64) as usize];
        let dir = fx.copy("trial");
        let path = log_path(&dir, base);
        let at = if trial % 2 == 0 {
            pos + HEADER_TARGETS[rng.below(HEADER_TARGETS.len() as u64) as usize]
        } else {
            rng.range(pos..pos + header.length as u64)
        };
        let mask = 1 + rng.below(255) as u8;
        flip(&path, at, mask);
        let label = format!(
            "seed {seed}, trial {trial}: segment {base}, batch at {pos} (offsets {}..{}), byte {at} ^= {mask:#04x}",
            header.base_offset,
            header.next_offset()
        );
        let log = open_ok(&dir, config(), &label);
        let report = log.recovery_report().clone();
        assert!(
            report.repaired.is_empty() && report.rebuilt_indexes.is_empty(),
            "{label}: open must not scan sealed segments: {report:?}"
        );
        assert!(report.scanned_bytes <= active_len, "{label}");
        let damaged = header.base_offset..header.next_offset();
        let failures =
            assert_reads_never_wrong(&log, &fx, base..fx.next_base(base), damaged, &path, &label);
        assert!(failures > 0, "{label}");
    }
}

#[test]
fn bit_rot_below_the_active_checkpoint_is_reported_on_read_never_returned_as_data() {
    let seed = seed_for("trusted_active_rot");
    let mut rng = Rng::new(seed ^ 0xD2);
    let fx = build(seed, false);
    let base = fx.active_base();
    let batches = batches_of(&log_path(&fx.image, base));
    let entries =
        index::load_active_prefix(&index_path(&fx.image, base), fx.checkpoint_pos).unwrap();
    let scan_from = entries.last().map_or(0, |e| e.position as u64);
    let trusted: Vec<_> = batches
        .iter()
        .filter(|(p, _)| *p < scan_from)
        .copied()
        .collect();
    assert!(!trusted.is_empty());
    for trial in 0..20 {
        let (pos, header) = trusted[rng.below(trusted.len() as u64) as usize];
        let dir = fx.copy("trial");
        let path = log_path(&dir, base);
        let at = if trial % 2 == 0 {
            pos + HEADER_TARGETS[rng.below(HEADER_TARGETS.len() as u64) as usize]
        } else {
            rng.range(pos..pos + header.length as u64)
        };
        let mask = 1 + rng.below(255) as u8;
        flip(&path, at, mask);
        let label =
            format!("seed {seed}, trial {trial}: active batch at {pos}, byte {at} ^= {mask:#04x}");
        let log = open_ok(&dir, config(), &label);
        let damaged = header.base_offset..header.next_offset();
        let failures = assert_reads_never_wrong(
            &log,
            &fx,
            base..fx.expected.len() as u64,
            damaged,
            &path,
            &label,
        );
        assert!(failures > 0, "{label}");
    }
}

/// The header fields a read trusts to skip batches below the offset it wants (base offset and
/// record count) are damaged so that the batch seems to end lower than it does: a read must
/// still report the damage, not skip to the next batch or come back empty.
#[test]
fn rot_in_the_offsets_of_a_batch_a_read_would_skip_is_reported_not_skipped() {
    let seed = seed_for("skipped_batch_rot");
    let fx = build(seed, false);
    for &base in &fx.bases {
        let batches = batches_of(&log_path(&fx.image, base));
        for &(pos, header) in &batches {
            // Clear the highest set bit of the lowest non-zero byte: the value only shrinks.
            let lower = |field: u64, value: u64| {
                let bytes = value.to_le_bytes();
                let k = bytes.iter().position(|b| *b != 0)?;
                Some((
                    pos + field + k as u64,
                    1u8 << (7 - bytes[k].leading_zeros()),
                ))
            };
            let targets = [
                ("base offset", lower(12, header.base_offset)),
                ("record count", lower(20, header.record_count as u64)),
            ];
            for (field, target) in targets {
                let Some((at, mask)) = target else { continue };
                let dir = fx.copy("trial");
                let path = log_path(&dir, base);
                flip(&path, at, mask);
                let label = format!(
                    "seed {seed}: segment {base}, batch at {pos} (offsets {}..{}), {field} byte {at} ^= {mask:#04x}",
                    header.base_offset,
                    header.next_offset()
                );
                // In the part of the active segment that open scans, open itself notices.
                let log = match Log::open(&dir, config()) {
                    Ok(log) => log,
                    Err(StorageError::CorruptLog { file, .. })
                        if base == fx.active_base() && file == path =>
                    {
                        continue;
                    }
                    Err(e) => panic!("{label}: open failed: {e}"),
                };
                let damaged = header.base_offset..header.next_offset();
                assert_reads_never_wrong(
                    &log,
                    &fx,
                    base..fx.next_base(base),
                    damaged,
                    &path,
                    &label,
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (e) damaged or missing sealed indexes

#[test]
fn missing_or_damaged_sealed_index_is_rebuilt_from_the_log_and_reads_stay_correct() {
    let seed = seed_for("sealed_index");
    let mut rng = Rng::new(seed ^ 0xE);
    let fx = build(seed, false);
    let cases = [
        "delete",
        "empty",
        "truncate",
        "footer",
        "entries",
        "other segment's",
        "all deleted",
    ];
    for case in cases {
        for _ in 0..4 {
            let target = fx.sealed()[rng.below(fx.sealed().len() as u64) as usize];
            let dir = fx.copy("trial");
            let path = index_path(&dir, target);
            let len = fs::metadata(&path).unwrap().len();
            let mut damaged = vec![path.clone()];
            match case {
                "delete" => fs::remove_file(&path).unwrap(),
                "empty" => fs::write(&path, b"").unwrap(),
                "truncate" => truncate(&path, rng.below(len)),
                "footer" => flip(
                    &path,
                    len - 1 - rng.below(index::FOOTER_LEN as u64),
                    1 + rng.below(255) as u8,
                ),
                "entries" => {
                    let entries_len = len - index::FOOTER_LEN as u64;
                    assert!(entries_len > 0);
                    flip(&path, rng.below(entries_len), 1 + rng.below(255) as u8)
                }
                "other segment's" => {
                    let other = *fx.sealed().iter().find(|&&b| b != target).unwrap();
                    let other_log = fs::metadata(log_path(&dir, other)).unwrap().len();
                    let this_log = fs::metadata(log_path(&dir, target)).unwrap().len();
                    assert_ne!(other_log, this_log, "fixture segments differ in length");
                    fs::copy(index_path(&dir, other), &path).unwrap();
                }
                "all deleted" => {
                    damaged = fx.sealed().iter().map(|&b| index_path(&dir, b)).collect();
                    for p in &damaged {
                        fs::remove_file(p).unwrap();
                    }
                }
                _ => unreachable!(),
            }
            let label = format!("seed {seed}: {case} index of segment {target}");
            let log = open_ok(&dir, config(), &label);
            let report = log.recovery_report().clone();
            assert!(report.repaired.is_empty(), "{label}: {report:?}");
            if case == "entries" {
                // Open reads only footers, which are intact; the entries' CRC is checked
                // when the index is first loaded for a read.
                assert!(report.rebuilt_indexes.is_empty(), "{label}: {report:?}");
            } else {
                let mut rebuilt = report.rebuilt_indexes.clone();
                rebuilt.sort();
                assert_eq!(rebuilt, damaged, "{label}");
            }
            assert_eq!(log.end_offset(), fx.expected.len() as u64, "{label}");
            assert_reads(&log, &fx.expected, &[], &label);
            for from in (0..fx.expected.len() as u64).step_by(7) {
                assert_eq!(log.read(from, 1).unwrap()[0].offset, from, "{label}");
            }
            // The rebuilt index is whole again on disk, and a reopen trusts it.
            let footer = index::read_footer(&path)
                .unwrap()
                .unwrap_or_else(|| panic!("{label}: no footer after rebuild"));
            assert!(
                index::load_sealed(&path, &footer).unwrap().is_some(),
                "{label}"
            );
            drop(log);
            let log = open_ok(&dir, config(), &label);
            assert!(
                log.recovery_report().rebuilt_indexes.is_empty(),
                "{label}: second open"
            );
            assert_reads(&log, &fx.expected, &[], &label);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// (f) damaged checkpoint

#[test]
fn damaged_or_stale_checkpoint_falls_back_to_a_full_scan_of_the_active_segment() {
    let seed = seed_for("checkpoint");
    let mut rng = Rng::new(seed ^ 0xF);
    for crash in [false, true] {
        let fx = build(seed.wrapping_add(crash as u64), crash);
        let active_len = fx.active_len();
        for case in ["delete", "flip", "truncate", "garbage", "stale"] {
            let dir = fx.copy("trial");
            let path = checkpoint_path(&dir);
            match case {
                "delete" => fs::remove_file(&path).unwrap(),
                "flip" => {
                    let len = fs::metadata(&path).unwrap().len();
                    flip(&path, rng.below(len), 1 + rng.below(255) as u8)
                }
                "truncate" => truncate(&path, rng.below(40)),
                "garbage" => fs::write(&path, rng.bytes(40)).unwrap(),
                "stale" => fs::write(&path, &fx.stale_checkpoint).unwrap(),
                _ => unreachable!(),
            }
            let label = format!("seed {seed}, crash image {crash}: {case} checkpoint");
            let log = open_ok(&dir, config(), &label);
            let report = log.recovery_report().clone();
            assert_eq!(
                report.scanned_bytes, active_len,
                "{label}: the whole active segment is scanned"
            );
            assert_eq!(report.truncated, None, "{label}");
            assert!(report.repaired.is_empty(), "{label}");
            assert_eq!(log.end_offset(), fx.expected.len() as u64, "{label}");
            assert_reads(&log, &fx.expected, &[], &label);
            drop(log);
            // Recovery wrote a fresh checkpoint: the next open scans (almost) nothing.
            let log = open_ok(&dir, config(), &label);
            assert!(
                log.recovery_report().scanned_bytes < active_len / 2,
                "{label}: {:?}",
                log.recovery_report()
            );
            assert_reads(&log, &fx.expected, &[], &label);
        }
    }
}
