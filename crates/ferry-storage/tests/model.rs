//! Model-based property test: random sequences of append / read / roll / reopen / retention
//! against a `Vec` model. Every acknowledged record must read back identical, from any offset,
//! across reopens, until retention removes it — and retention may only remove a prefix.

mod common;

use bytes::Bytes;
use ferry_storage::{Durability, Log, LogConfig, NewRecord, RetentionPolicy};
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
    Sync,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => prop::collection::vec((prop::option::of(any::<u8>()), 0usize..700, any::<u8>()), 1..6)
            .prop_map(Op::Append),
        4 => (0u16..=1000, 1usize..4000).prop_map(|(from_permille, max_bytes)| Op::Read { from_permille, max_bytes }),
        1 => Just(Op::Roll),
        1 => Just(Op::Reopen),
        1 => (0u16..=1000).prop_map(|permille| Op::RetainBelow { permille }),
        1 => (1024u64..20_000).prop_map(Op::RetainBytes),
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
}

fn check_range(log: &Log, model: &Model, from: u64, max_bytes: usize) {
    let got = log.read(from, max_bytes).expect("read");
    if from < model.records.len() as u64 {
        assert!(!got.is_empty(), "read at {from} returned nothing");
    }
    for (i, record) in got.iter().enumerate() {
        let offset = from + i as u64;
        assert_eq!(record.offset, offset);
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
        }
        let l = log.as_ref().unwrap();
        assert_eq!(l.start_offset(), model.start);
        assert_eq!(l.end_offset(), model.records.len() as u64);
    }
    let l = log.as_ref().unwrap();
    let mut next = model.start;
    while next < model.records.len() as u64 {
        check_range(l, &model, next, 2048);
        next = l.read(next, 2048).unwrap().last().unwrap().offset + 1;
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
