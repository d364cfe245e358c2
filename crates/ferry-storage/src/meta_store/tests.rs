//! Tests of the metadata store, kept beside it for access to its file layout.

use super::*;
use proptest::prelude::*;

fn state(s: &MetaStore) -> Map {
    s.scan_prefix("").into_iter().collect()
}

fn open(dir: &Path) -> MetaStore {
    MetaStore::open(dir).unwrap()
}

/// The error's Debug form, for terse assertions on variant and fields.
fn err<T>(result: Result<T>) -> String {
    format!("{:?}", result.err().expect("expected an error"))
}

fn flip(path: &Path, at: usize) {
    let mut data = fs::read(path).unwrap();
    data[at] ^= 0xFF;
    fs::write(path, data).unwrap();
}

#[test]
fn put_get_delete_scan_round_trip_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    for (k, v) in [("sub/b", "2"), ("sub/a", "1"), ("topic/x", "x")] {
        s.put(k, v).unwrap();
    }
    s.put("sub/a", "1b").unwrap();
    s.delete("topic/x").unwrap();
    s.delete("missing").unwrap();
    let expect = vec![("sub/a".into(), "1b".into()), ("sub/b".into(), "2".into())];
    assert_eq!(s.scan_prefix("sub/"), expect);
    assert_eq!((s.get("topic/x"), s.len()), (None, 2));
    drop(s);
    let s = open(dir.path());
    assert_eq!(s.scan_prefix("sub/"), expect);
    assert_eq!(s.scan_prefix("topic/"), vec![]);
    assert_eq!(s.recovery().replayed_records, 6);
}

#[test]
fn torn_last_batch_reopens_to_state_before_it_at_every_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(dir.path(), 0);
    let mut s = open(dir.path());
    for (k, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
        s.put(k, v).unwrap();
    }
    let (before, start) = (state(&s), s.journal_len as usize);
    let mut batch = MetaBatch::new();
    batch.put("a", "10").delete("b").put("d", "4");
    s.commit(batch).unwrap();
    drop(s);
    let full = fs::read(&path).unwrap();
    for cut in start + 1..full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        let s = open(dir.path());
        assert_eq!(state(&s), before, "cut at {cut}");
        assert_eq!(s.recovery().truncated_bytes, (cut - start) as u64);
        assert_eq!(s.recovery().replayed_records, 3);
        assert_eq!(fs::metadata(&path).unwrap().len(), start as u64);
    }
    fs::write(&path, &full).unwrap();
    let s = open(dir.path());
    assert_eq!(
        (s.get("a"), s.get("b"), s.len()),
        (Some("10".into()), None, 3)
    );
}

#[test]
fn flipped_byte_refuses_in_a_middle_record_and_truncates_in_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal_path(dir.path(), 0);
    let mut s = open(dir.path());
    let mut starts = vec![0];
    for key in ["a", "b", "c"] {
        s.put(key, format!("value-{key}")).unwrap();
        starts.push(s.journal_len as usize);
    }
    drop(s);
    let full = fs::read(&path).unwrap();
    let expect = format!("Corrupt {{ file: {path:?}, position: {}, ", starts[1]);
    for at in starts[1]..starts[2] {
        flip(&path, at);
        let e = err(MetaStore::open(dir.path()));
        assert!(e.starts_with(&expect), "byte {at}: {e}");
        fs::write(&path, &full).unwrap();
    }
    for at in starts[2]..starts[3] {
        flip(&path, at);
        let s = open(dir.path());
        assert_eq!((s.len(), s.get("c")), (2, None), "byte {at}");
        assert_eq!(s.recovery().truncated_bytes, (starts[3] - starts[2]) as u64);
        drop(s);
        fs::write(&path, &full).unwrap();
    }
}

#[test]
fn compaction_preserves_state_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    (s.compact_min, s.compact_after) = (256, 256);
    for i in 0..100u8 {
        s.put(format!("cursor/{}", i % 7), vec![i; 20]).unwrap();
    }
    assert!(s.generation() > 0, "automatic compaction never ran");
    s.delete("cursor/3").unwrap();
    s.compact().unwrap();
    s.put("cursor/9", "after").unwrap();
    let (expect, g) = (state(&s), s.generation());
    drop(s);
    let s = open(dir.path());
    assert_eq!((state(&s), s.generation()), (expect, g));
    assert_eq!(s.recovery().replayed_records, 1);
    assert!(journal_path(dir.path(), g).exists());
    assert!(!journal_path(dir.path(), g - 1).exists());
}

#[test]
fn compaction_crash_windows_reopen_to_the_right_state() {
    let dir = tempfile::tempdir().unwrap();
    let (j0, j1) = (journal_path(dir.path(), 0), journal_path(dir.path(), 1));
    let mut s = open(dir.path());
    s.put("a", "1").unwrap();
    s.put("b", "2").unwrap();
    let (expect, old) = (state(&s), fs::read(&j0).unwrap());
    drop(s);
    // Crash after compaction pre-created journal 1 but before snapshot 1 landed.
    File::create(&j1).unwrap();
    let mut s = open(dir.path());
    assert_eq!((state(&s), s.generation()), (expect.clone(), 0));
    assert_eq!(s.recovery().removed_journals, 1);
    s.compact().unwrap();
    drop(s);
    // Crash after snapshot 1 was renamed in but before journal 1 existed: journal 0 is
    // still there and stale.
    fs::remove_file(&j1).unwrap();
    fs::write(&j0, &old).unwrap();
    let mut s = open(dir.path());
    assert_eq!((state(&s), s.generation()), (expect, 1));
    assert!(j1.exists() && !j0.exists());
    s.put("c", "3").unwrap();
    drop(s);
    // Crash before journal 0 was unlinked, with commits already in journal 1.
    fs::write(&j0, &old).unwrap();
    assert_eq!(open(dir.path()).len(), 3);
    // Snapshot 1 lost while journal 1 holds commits: refuse rather than start over.
    fs::remove_file(dir.path().join(SNAPSHOT_FILE)).unwrap();
    let e = err(MetaStore::open(dir.path()));
    assert!(e.starts_with(&format!("Corrupt {{ file: {j1:?}")), "{e}");
}

#[test]
fn damaged_snapshot_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join(SNAPSHOT_FILE);
    let mut s = open(dir.path());
    s.put("a", "1").unwrap();
    s.compact().unwrap();
    drop(s);
    let good = fs::read(&snap).unwrap();
    let expect = format!("Corrupt {{ file: {snap:?}");
    for at in [0, 9, 14, good.len() / 2, good.len() - 1] {
        flip(&snap, at);
        let e = err(MetaStore::open(dir.path()));
        assert!(e.starts_with(&expect), "byte {at}: {e}");
        fs::write(&snap, &good).unwrap();
    }
    fs::write(&snap, &good[..good.len() - 3]).unwrap();
    assert!(err(MetaStore::open(dir.path())).starts_with(&expect));
}

#[test]
fn second_open_while_first_is_alive_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    assert!(err(MetaStore::open(dir.path())).starts_with("Locked"));
    drop(first);
    open(dir.path());
}

#[test]
fn invalid_keys_and_values_are_rejected_with_nothing_changed() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = open(dir.path());
    s.put("keep", "1").unwrap();
    let len = s.journal_len;
    assert!(err(s.put("", "x")).starts_with("InvalidConfig"));
    let e = err(s.put("k".repeat(MAX_KEY_BYTES + 1), "x"));
    assert!(e.starts_with("TooLarge { what: \"meta key\""), "{e}");
    let mut batch = MetaBatch::new();
    let big = vec![0u8; MAX_VALUE_BYTES + 1];
    batch.put("ok", "fine").delete("keep").put("bad", big);
    let e = err(s.commit(batch));
    assert!(e.starts_with("TooLarge { what: \"meta value\""), "{e}");
    let mut batch = MetaBatch::new();
    for i in 0..5 {
        batch.put(format!("big{i}"), vec![0u8; MAX_VALUE_BYTES]);
    }
    let e = err(s.commit(batch));
    assert!(e.starts_with("TooLarge { what: \"meta batch\""), "{e}");
    let on_disk = fs::metadata(journal_path(dir.path(), 0)).unwrap().len();
    assert_eq!((s.journal_len, on_disk), (len, len));
    assert_eq!((s.len(), s.get("keep")), (1, Some("1".into())));
    drop(s);
    assert_eq!(open(dir.path()).len(), 1);
}

/// A single op goes through `put`/`delete`, several (or none) through `commit`.
#[derive(Debug, Clone)]
enum Step {
    Ops(Vec<(u8, Option<Vec<u8>>)>),
    Reopen,
    Compact,
}

fn key(k: u8) -> String {
    format!("{}/{k}", ["sub", "topic"][k as usize % 2])
}

fn step() -> impl Strategy<Value = Step> {
    let op = (
        0..8u8,
        prop::option::weighted(0.7, prop::collection::vec(any::<u8>(), 0..48)),
    );
    prop_oneof![
        8 => prop::collection::vec(op, 0..5).prop_map(Step::Ops),
        1 => Just(Step::Reopen),
        1 => Just(Step::Compact),
    ]
}

fn open_small(dir: &Path) -> MetaStore {
    let mut s = open(dir);
    (s.compact_min, s.compact_after) = (512, 512);
    s
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn model_matches_btreemap(steps in prop::collection::vec(step(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open_small(dir.path());
        let mut model = Map::new();
        for step in steps {
            match step {
                Step::Ops(ops) => {
                    let result = match ops.as_slice() {
                        [(k, Some(v))] => store.put(key(*k), v.clone()),
                        [(k, None)] => store.delete(key(*k)),
                        _ => {
                            let mut batch = MetaBatch::new();
                            for (k, v) in &ops {
                                match v {
                                    Some(v) => batch.put(key(*k), v.clone()),
                                    None => batch.delete(key(*k)),
                                };
                            }
                            store.commit(batch)
                        }
                    };
                    result.unwrap();
                    for (k, v) in ops {
                        match v {
                            Some(v) => model.insert(key(k), v.into()),
                            None => model.remove(&key(k)),
                        };
                    }
                }
                Step::Reopen => {
                    drop(store);
                    store = open_small(dir.path());
                    prop_assert_eq!(store.recovery().truncated_bytes, 0);
                }
                Step::Compact => store.compact().unwrap(),
            }
            for k in 0..8 {
                prop_assert_eq!(store.get(&key(k)), model.get(&key(k)).cloned());
            }
            prop_assert_eq!(state(&store), model.clone());
        }
    }
}
