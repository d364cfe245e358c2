//! Writes the seed corpus of the `recovery_scan` target: real log directories, made by the
//! real `Log` with the target's small limits, then damaged the ways a crash or a disk
//! damages them, each packed into the target's input format (`src/lib.rs`).
//!
//!     cargo run --manifest-path crates/ferry-storage/fuzz/Cargo.toml \
//!         --example gen_recovery_seeds -- crates/ferry-storage/fuzz/corpus/recovery_scan

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ferry_storage::{Durability, Log, LogConfig, ManualClock, NewRecord};
use ferry_storage_fuzz::{CHECKPOINT_FILE, DirImage, File, Kind};

/// The target's limits (see fuzz_targets/recovery_scan.rs).
fn config() -> LogConfig {
    LogConfig {
        durability: Durability::Fsync,
        segment_bytes: 4096,
        segment_max_age: None,
        index_interval_bytes: 256,
        max_record_bytes: 4096,
        max_batch_bytes: 4096,
        max_headers: 16,
        max_group_bytes: 4096,
        checkpoint_interval: Duration::from_secs(3600),
        index_cache_segments: 2,
        preallocate_bytes: 0,
        repair: false,
    }
}

fn records(n: usize, size: usize) -> Vec<NewRecord> {
    (0..n)
        .map(|i| {
            NewRecord::new(vec![b'a' + (i % 26) as u8; size])
                .with_key(format!("k{}", i % 3))
                .with_header("type", "seed")
                .with_timestamp(1_000 + i as i64)
        })
        .collect()
}

/// A log in a fresh directory after `appends` appends of `per_append` records.
fn make_log(appends: usize, per_append: usize, size: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = Log::open_with_clock(dir.path(), config(), Arc::new(ManualClock::new(1_000)))
        .expect("a new log");
    for _ in 0..appends {
        log.append(records(per_append, size)).expect("an append");
    }
    log.close().expect("close");
    dir
}

/// The directory's segment files and checkpoint as an image.
fn image_of(dir: &Path) -> DirImage {
    let mut files = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("an entry").path())
        .collect();
    names.sort();
    for path in names {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let bytes = std::fs::read(&path).expect("read");
        if name == CHECKPOINT_FILE {
            files.push(File {
                kind: Kind::Checkpoint,
                base: 0,
                bytes,
            });
            continue;
        }
        let (Some(stem), Some(ext)) = (
            path.file_stem().and_then(|s| s.to_str()),
            path.extension().and_then(|s| s.to_str()),
        ) else {
            continue;
        };
        let Ok(base) = stem.parse::<u32>() else {
            continue;
        };
        let kind = match ext {
            "log" => Kind::Log,
            "index" => Kind::Index,
            _ => continue,
        };
        files.push(File { kind, base, bytes });
    }
    DirImage {
        repair: false,
        fix_checksums: false,
        files,
    }
}

fn last_log(image: &mut DirImage) -> &mut File {
    image
        .files
        .iter_mut()
        .filter(|f| f.kind == Kind::Log)
        .next_back()
        .expect("a segment")
}

fn main() {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: gen_recovery_seeds <corpus dir>"),
    );
    std::fs::create_dir_all(&out).expect("the corpus directory");
    let mut seeds: Vec<(&str, DirImage)> = Vec::new();

    seeds.push(("seed-empty-directory", DirImage::default()));

    let one = make_log(4, 3, 40);
    seeds.push(("seed-one-segment-clean", image_of(one.path())));

    let mut checked = image_of(one.path());
    checked.fix_checksums = true;
    seeds.push(("seed-one-segment-fix-checksums", checked));

    let many = make_log(12, 4, 120);
    let rolled = image_of(many.path());
    seeds.push(("seed-rolled-segments", rolled.clone()));

    let mut torn = rolled.clone();
    let tail = last_log(&mut torn);
    let cut = tail.bytes.len().saturating_sub(30);
    tail.bytes.truncate(cut);
    seeds.push(("seed-torn-tail", torn));

    let mut rot = rolled.clone();
    rot.repair = true;
    let first = rot
        .files
        .iter_mut()
        .find(|f| f.kind == Kind::Log)
        .expect("a segment");
    let middle = first.bytes.len() / 2;
    first.bytes[middle] ^= 0x40;
    seeds.push(("seed-bit-rot-repair", rot));

    let mut zeros = image_of(one.path());
    last_log(&mut zeros).bytes.extend_from_slice(&[0u8; 1024]);
    seeds.push(("seed-preallocated-zeros", zeros));

    let mut unfinished = rolled.clone();
    let next_base = unfinished
        .files
        .iter()
        .filter(|f| f.kind == Kind::Log)
        .map(|f| f.base)
        .max()
        .expect("a segment")
        + 1000;
    unfinished.files.push(File {
        kind: Kind::Log,
        base: next_base,
        bytes: Vec::new(),
    });
    unfinished.files.push(File {
        kind: Kind::Leftover,
        base: next_base,
        bytes: b"half-written".to_vec(),
    });
    unfinished.files.push(File {
        kind: Kind::Index,
        base: next_base + 1,
        bytes: vec![0; 20],
    });
    seeds.push(("seed-unfinished-roll-and-leftovers", unfinished));

    for (name, image) in seeds {
        let bytes = image.encode();
        assert_eq!(DirImage::parse(&bytes), image, "{name} round-trips");
        std::fs::write(out.join(name), bytes).expect("write a seed");
        println!("{name}");
    }
}
