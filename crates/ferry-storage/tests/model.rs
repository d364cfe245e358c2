//! Model-based property test: random sequences of append / read / roll / reopen / retention /
//! compaction against a `Vec` model. Every acknowledged record must read back identical, from
//! any offset, across reopens, until retention removes it — and retention may only remove a
//! prefix. Compaction may only remove a record a later record of the same key supersedes
//! (tombstones never expire here), never one at or above its bound, and reads step over
//! what it removed.

mod common;

use bytes::Bytes;
use std::collections::BTreeSet;
use std::time::Duration;

use ferry_storage::{CompactionPolicy, Durability, Log, LogConfig, NewRecord, RetentionPolicy};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<(Option<u8>, usize, u8)>),
    Read {
        from_permille: u16,
        max_bytes: usize,
    },
    Roll,
    Reopen,
    RetainBelow {
        permille: u16,
    },
    RetainBytes(u64),
    Compact {
        below_permille: u16,
    },
    Sync,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Few keys, so compaction finds superseded records.
        8 => prop::collection::vec((prop::option::of(0u8..16), 0usize..700, any::<u8>()), 1..6)
            .prop_map(Op::Append),
        4 => (0u16..=1000, 1usize..4000).prop_map(|(from_permille, max_bytes)| Op::Read { from_permille, max_bytes }),
        1 => Just(Op::Roll),
        1 => Just(Op::Reopen),
        1 => (0u16..=1000).prop_map(|permille| Op::RetainBelow { permille }),
        1 => (1024u64..20_000).prop_map(Op::RetainBytes),
        1 => (0u16..=1000).prop_map(|below_permille| Op::Compact { below_permille }),
        1 => Just(Op::Sync),
    ]
}

fn value(seed: u8, len: usize) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| seed.wrapping_add(i as u8))
            .collect::<Vec<_>>(),
    )
}

struct Model {
    /// Every record ever acknowledged; `start` says how many retention removed.
    records: Vec<(Option<Bytes>, Bytes)>,
    start: u64,
    /// Offsets compaction removed.
    removed: BTreeSet<u64>,
}

impl Model {
    fn present_from(&self, from: u64) -> Option<u64> {
        (from..self.records.len() as u64).find(|o| !self.removed.contains(o))
    }
}

fn check_range(log: &Log, model: &Model, from: u64, max_bytes: usize) {
    let got = log.read(from, max_bytes).expect("read");
    if model.present_from(from).is_some() {
        assert!(!got.is_empty(), "read at {from} returned nothing");
    }
    let mut expected = from;
    for record in &got {
        // Every record from `from` on that compaction left is returned, in order.
        let offset = model
            .present_from(expected)
            .expect("a record past the model's end");
        assert_eq!(record.offset, offset);
        expected = offset + 1;
        let (key, value) = &model.records[offset as usize];
        assert_eq!(&record.key, key, "key at {offset}");
        assert_eq!(&record.value, value, "value at {offset}");
    }
}

fn run(ops: Vec<Op>, durability: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        durability,
        segment_bytes: 4096,
        index_interval_bytes: 200,
        max_batch_bytes: 4096,
        max_record_bytes: 4096,
        ..LogConfig::default()
    };
    let mut log = Some(Log::open(dir.path(), config.clone()).unwrap());
    let mut model = Model {
        records: Vec::new(),
        start: 0,
        removed: BTreeSet::new(),
    };
    for op in ops {
        let l = log.as_ref().unwrap();
        match op {
            Op::Append(specs) => {
                let records: Vec<_> = specs
                    .iter()
                    .map(|(key, len, seed)| {
                        let mut r = NewRecord::new(value(*seed, *len));
                        r.key = key.map(|k| Bytes::from(vec![k; 3]));
                        r
                    })
                    .collect();
                let appended = l.append(records.clone()).unwrap();
                assert_eq!(appended.base_offset, model.records.len() as u64);
                model
                    .records
                    .extend(records.into_iter().map(|r| (r.key, r.value)));
            }
            Op::Read {
                from_permille,
                max_bytes,
            } => {
                let end = model.records.len() as u64;
                let from = model.start + (end - model.start) * from_permille as u64 / 1000;
                check_range(l, &model, from, max_bytes);
            }
            Op::Roll => l.roll().unwrap(),
            Op::Sync => l.sync().unwrap(),
            Op::Reopen => {
                drop(log.take());
                log = Some(Log::open(dir.path(), config.clone()).unwrap());
            }
            Op::RetainBelow { permille } => {
                let end = model.records.len() as u64;
                let watermark = end * permille as u64 / 1000;
                let report = l
                    .apply_retention(&RetentionPolicy {
                        low_watermark: Some(watermark),
                        ..Default::default()
                    })
                    .unwrap();
                assert!(report.start_offset <= watermark.max(model.start));
                assert!(report.start_offset >= model.start);
                model.start = report.start_offset;
            }
            Op::RetainBytes(max) => {
                let report = l
                    .apply_retention(&RetentionPolicy {
                        max_bytes: Some(max),
                        ..Default::default()
                    })
                    .unwrap();
                assert!(report.start_offset >= model.start);
                model.start = report.start_offset;
            }
            Op::Compact { below_permille } => {
                let end = model.records.len() as u64;
                let below = end * below_permille as u64 / 1000;
                let report = l
                    .compact(&CompactionPolicy {
                        below,
                        tombstone_retention: Duration::from_secs(3600),
                    })
                    .unwrap();
                let mut kept = BTreeSet::new();
                let mut next = report.start_offset;
                while next < end {
                    let records = l.read(next, 64 * 1024).unwrap();
                    let Some(last) = records.last() else { break };
                    next = last.offset + 1;
                    kept.extend(records.iter().map(|r| r.offset));
                }
                for offset in model.start..end {
                    if kept.contains(&offset) || model.removed.contains(&offset) {
                        continue;
                    }
                    let key = &model.records[offset as usize].0;
                    assert!(offset < below, "{offset} removed at or above {below}");
                    assert!(
                        key.is_some()
                            && model.records[offset as usize + 1..]
                                .iter()
                                .any(|(k, _)| k == key),
                        "{offset} removed but not superseded"
                    );
                    model.removed.insert(offset);
                    assert!(
                        report.records_removed > 0,
                        "{offset} removed, none reported"
                    );
                }
                assert!(report.start_offset >= model.start);
                model.start = report.start_offset;
            }
        }
        let l = log.as_ref().unwrap();
        assert_eq!(l.start_offset(), model.start);
        assert_eq!(l.end_offset(), model.records.len() as u64);
    }
    let l = log.as_ref().unwrap();
    let mut next = model.start;
    while let Some(present) = model.present_from(next) {
        check_range(l, &model, next, 2048);
        next = l.read(next, 2048).unwrap().last().unwrap().offset + 1;
        assert!(next > present);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn acknowledged_records_read_back_identical_under_random_operations(
        ops in prop::collection::vec(op(), 1..80)
    ) {
        run(ops, Durability::Fsync);
    }

    #[test]
    fn unsynced_modes_match_the_model_across_clean_reopens(
        ops in prop::collection::vec(op(), 1..60)
    ) {
        run(ops, Durability::None);
    }
}
