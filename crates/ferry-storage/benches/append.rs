//! Micro-benchmarks of the storage engine's hot paths, kept short (about a minute for
//! `cargo bench -p ferry-storage`). Whole-system figures with fsync and many appenders come
//! from `ferry bench storage`; these isolate the CPU cost of encoding, appending and reading.

use std::hint::black_box;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferry_storage::batch::{self, RecordBatch};
use ferry_storage::{Durability, Log, LogConfig, NewRecord};

fn no_fsync() -> LogConfig {
    LogConfig {
        durability: Durability::None,
        ..LogConfig::default()
    }
}

/// Encode then verify-and-decode one batch of 100 × 128 B records: the CPU cost per batch that
/// every append and every read pays (CRC32C both ways).
fn batch_codec(c: &mut Criterion) {
    let value = Bytes::from(vec![0x5Au8; 128]);
    let records: Vec<NewRecord> = (0..100).map(|_| NewRecord::new(value.clone())).collect();
    let mut group = c.benchmark_group("batch");
    group.throughput(Throughput::Elements(records.len() as u64));
    group.bench_function("encode_decode_100x128B", |b| {
        b.iter(|| {
            let mut buf = BytesMut::new();
            batch::encode(&mut buf, 0, black_box(&records), 1_700_000_000_000);
            let decoded = RecordBatch::decode(buf.freeze(), 1 << 20).expect("valid batch");
            black_box(decoded.records().count())
        })
    });
    group.finish();
}

/// One synchronous 1 KiB append without fsync: the round trip through the writer thread
/// (channel, encode, write(2), completion) and nothing of the disk.
fn log_append(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let log = Log::open(dir.path().join("log"), no_fsync()).expect("open log");
    let value = Bytes::from(vec![0x5Au8; 1024]);
    let mut group = c.benchmark_group("log");
    group.throughput(Throughput::Bytes(value.len() as u64));
    group.bench_function("append_1KiB_durability_none", |b| {
        b.iter(|| {
            log.append(vec![NewRecord::new(value.clone())])
                .expect("append")
        })
    });
    group.finish();
    log.close().expect("close");
}

/// Reads of about 64 KiB from a 16 MiB log (1 KiB records in batches of 16), walking through
/// the log so successive reads hit different index entries. The log stays in the page cache,
/// so this is the engine's cost: index lookup, pread, CRC check, record split.
fn log_read(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let log = Log::open(dir.path().join("log"), no_fsync()).expect("open log");
    let value = Bytes::from(vec![0x5Au8; 1024]);
    for _ in 0..1024 {
        let batch = (0..16).map(|_| NewRecord::new(value.clone())).collect();
        log.append(batch).expect("append");
    }
    let end = log.end_offset();
    let mut group = c.benchmark_group("log");
    group.throughput(Throughput::Bytes(64 * 1024));
    group.bench_function("read_64KiB", |b| {
        let mut from = 0u64;
        b.iter(|| {
            let records = log.read(from, 64 * 1024).expect("read");
            from = (from + 997) % (end - 64);
            black_box(records.len())
        })
    });
    group.finish();
    log.close().expect("close");
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = batch_codec, log_append, log_read
}
criterion_main!(benches);
