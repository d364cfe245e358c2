//! The writer thread's own measurements (`Log::stats`): every durable append shows up as a
//! group commit of its records and bytes, every fdatasync it waited for as one fsync, and
//! logs that share one `LogStats` add up.

mod common;

use std::sync::Arc;

use common::*;
use ferry_storage::{Durability, Log, LogConfig, LogStats, SystemClock};

fn fsync_no_prealloc() -> LogConfig {
    LogConfig {
        preallocate_bytes: 0,
        ..fsync_config()
    }
}

#[test]
fn each_sequential_fsync_append_is_one_group_and_one_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), &fsync_no_prealloc());
    let before = log.stats();
    assert_eq!(before.fsync_ns.count(), 0);
    assert_eq!(before.commit_records.count(), 0);
    let mut records = 0;
    for i in 0..10u64 {
        let batch: Vec<_> = (0..=i % 3).map(|j| record(i * 10 + j, 40)).collect();
        records += batch.len() as u64;
        log.append(batch).unwrap();
    }
    let after = log.stats();
    assert_eq!(after.fsync_ns.count(), 10, "one fdatasync per lone append");
    assert!(after.fsync_ns.sum > 0, "an fdatasync takes some time");
    assert_eq!(after.commit_records.count(), 10);
    assert_eq!(after.commit_records.sum, records);
    // Every byte the log holds was written by exactly one group.
    assert_eq!(after.commit_bytes.count(), 10);
    assert_eq!(after.commit_bytes.sum, log.size_bytes());
    // One-record groups land in the first bucket, three-record ones in the `<= 4` one.
    let by_bound: Vec<_> = after.commit_records.cumulative().take(3).collect();
    assert_eq!(by_bound, vec![(1, 4), (2, 7), (4, 10)]);
}

#[test]
fn concurrent_appends_share_fsyncs_and_their_groups_sum_to_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(open(dir.path(), &fsync_no_prealloc()));
    let (threads, per_thread) = (8u64, 50u64);
    std::thread::scope(|s| {
        for t in 0..threads {
            let log = &log;
            s.spawn(move || {
                for i in 0..per_thread {
                    log.append(vec![record(t * 1000 + i, 32)]).unwrap();
                }
            });
        }
    });
    let stats = log.stats();
    let appends = threads * per_thread;
    assert_eq!(stats.commit_records.sum, appends);
    assert_eq!(stats.commit_bytes.sum, log.size_bytes());
    // Under `Fsync` each group is synced once, so groups and fsyncs agree.
    assert_eq!(stats.fsync_ns.count(), stats.commit_records.count());
    assert!(stats.commit_records.count() <= appends);
}

#[test]
fn without_fsync_durability_groups_count_and_only_explicit_syncs_do() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        durability: Durability::None,
        ..small_config()
    };
    let log = open(dir.path(), &config);
    for i in 0..5 {
        log.append(vec![record(i, 16), record(i + 100, 16)])
            .unwrap();
    }
    let stats = log.stats();
    assert_eq!(stats.commit_records.count(), 5);
    assert_eq!(stats.commit_records.sum, 10);
    assert_eq!(stats.fsync_ns.count(), 0);
    log.sync().unwrap();
    assert_eq!(log.stats().fsync_ns.count(), 1);
    // Nothing new to sync: no second fdatasync.
    log.sync().unwrap();
    assert_eq!(log.stats().fsync_ns.count(), 1);
}

#[test]
fn logs_sharing_stats_add_up_and_the_sum_outlives_a_closed_log() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let shared = Arc::new(LogStats::default());
    let open_shared = |dir: &std::path::Path| {
        Log::open_with_stats(
            dir,
            fsync_no_prealloc(),
            Arc::new(SystemClock),
            shared.clone(),
        )
        .unwrap()
    };
    let (a, b) = (open_shared(a_dir.path()), open_shared(b_dir.path()));
    a.append(vec![record(1, 10)]).unwrap();
    b.append(vec![record(2, 10), record(3, 10)]).unwrap();
    assert_eq!(a.stats(), b.stats(), "one shared view");
    assert_eq!(shared.snapshot().commit_records.sum, 3);
    assert_eq!(shared.snapshot().fsync_ns.count(), 2);
    a.close().unwrap();
    b.append(vec![record(4, 10)]).unwrap();
    let total = shared.snapshot();
    assert_eq!(total.commit_records.sum, 4);
    assert_eq!(total.fsync_ns.count(), 3);
}
