//! A small crash-safe key-value store for broker metadata and subscription cursors.
//!
//! Cursors change often, so a write-and-rename per update would cost too much: the store keeps
//! a snapshot plus a journal. The directory holds
//! - `meta.snapshot`: magic `FERRYMS\0`, u32 version (1), u64 generation G, u64 entry count,
//!   then per entry (u32 key length, key, u32 value length, value), then a u32 crc32c of all
//!   the bytes before it;
//! - `meta.journal.<G>`: one record per commit: u32 payload length, u32 crc32c of the payload,
//!   payload = u32 op count, then per op u8 tag (1 put, 2 delete), u32 key length, key and,
//!   for a put, u32 value length, value.
//!
//! All integers are little-endian. Invariant: snapshot G holds every commit of journals < G,
//! so the state is snapshot G replayed with journal G; any other journal is leftover.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::dir_lock::DirLock;
use crate::error::{IoContext, Result, StorageError};
use crate::fs_util::{create_dir_durable, sync_dir, write_atomic};

pub const MAX_KEY_BYTES: usize = 1024;
pub const MAX_VALUE_BYTES: usize = 16 << 20;
/// Bound on one encoded batch, so that replay can reject an implausible length field outright.
pub const MAX_BATCH_BYTES: usize = 64 << 20;
const MIN_COMPACT_BYTES: u64 = 1 << 20;

const SNAPSHOT_FILE: &str = "meta.snapshot";
const JOURNAL_PREFIX: &str = "meta.journal.";
const SNAPSHOT_MAGIC: &[u8; 8] = b"FERRYMS\0";
const SNAPSHOT_VERSION: u32 = 1;
const RECORD_HEADER: usize = 8;
/// The smallest real payload (one delete of a one-byte key). It also makes a zero-filled tail
/// unparseable: length 0 with crc 0 would otherwise pass, as 0 is the crc32c of nothing.
const MIN_PAYLOAD: usize = 4 + 1 + 4 + 1;
const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;

type Map = BTreeMap<String, Bytes>;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Put(String, Bytes),
    Delete(String),
}

/// Puts and deletes that reach the disk, and memory, all together or not at all.
#[derive(Debug, Clone, Default)]
pub struct MetaBatch {
    ops: Vec<Op>,
}

impl MetaBatch {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn put(&mut self, key: impl Into<String>, value: impl Into<Bytes>) -> &mut Self {
        self.ops.push(Op::Put(key.into(), value.into()));
        self
    }

    pub fn delete(&mut self, key: impl Into<String>) -> &mut Self {
        self.ops.push(Op::Delete(key.into()));
        self
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    fn validate(&self) -> Result<()> {
        for op in &self.ops {
            let (Op::Put(key, _) | Op::Delete(key)) = op;
            if key.is_empty() {
                let why = "meta store keys must not be empty";
                return Err(StorageError::InvalidConfig(why.into()));
            }
            if key.len() > MAX_KEY_BYTES {
                return Err(too_large("meta key", key.len(), MAX_KEY_BYTES));
            }
            if let Op::Put(_, value) = op
                && value.len() > MAX_VALUE_BYTES
            {
                return Err(too_large("meta value", value.len(), MAX_VALUE_BYTES));
            }
        }
        Ok(())
    }

    /// The whole journal record, header included.
    fn encode_record(&self) -> Result<Vec<u8>> {
        let mut out = vec![0; RECORD_HEADER];
        out.extend_from_slice(&(self.ops.len() as u32).to_le_bytes());
        for op in &self.ops {
            let (tag, key, value) = match op {
                Op::Put(key, value) => (TAG_PUT, key, Some(value)),
                Op::Delete(key) => (TAG_DELETE, key, None),
            };
            out.push(tag);
            put_blob(&mut out, key.as_bytes());
            if let Some(value) = value {
                put_blob(&mut out, value);
            }
        }
        let len = out.len() - RECORD_HEADER;
        if len > MAX_BATCH_BYTES {
            return Err(too_large("meta batch", len, MAX_BATCH_BYTES));
        }
        let crc = crc32c::crc32c(&out[RECORD_HEADER..]);
        out[..4].copy_from_slice(&(len as u32).to_le_bytes());
        out[4..8].copy_from_slice(&crc.to_le_bytes());
        Ok(out)
    }
}

/// What `open` found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaRecovery {
    /// Generation of the loaded snapshot; 0 when there was none.
    pub generation: u64,
    pub replayed_records: u64,
    /// Bytes of a torn (or damaged) last journal record that were cut off.
    pub truncated_bytes: u64,
    /// Journals of other generations left behind by an interrupted compaction.
    pub removed_journals: u64,
}

/// The store; holds the directory lock for its whole life.
#[derive(Debug)]
pub struct MetaStore {
    dir: PathBuf,
    map: Map,
    generation: u64,
    journal: File,
    journal_len: u64,
    compact_after: u64,
    compact_min: u64,
    poisoned: Option<String>,
    recovery: MetaRecovery,
    _lock: DirLock,
}

impl MetaStore {
    pub fn open(dir: &Path) -> Result<MetaStore> {
        create_dir_durable(dir)?;
        let lock = DirLock::acquire(dir)?;
        let snapshot_path = dir.join(SNAPSHOT_FILE);
        // Crash inside write_atomic before its rename: the temp file is garbage and the
        // snapshot it was meant to replace is still whole.
        let tmp = snapshot_path.with_extension("tmp");
        if let Err(e) = fs::remove_file(&tmp)
            && e.kind() != io::ErrorKind::NotFound
        {
            return Err(StorageError::io("remove", &tmp, e));
        }
        let (generation, mut map, snapshot_len) = match fs::read(&snapshot_path) {
            Ok(data) => {
                let (generation, map) = decode_snapshot(&snapshot_path, &data)?;
                (generation, map, data.len() as u64)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => (0, Map::new(), 0),
            Err(e) => return Err(StorageError::io("read", &snapshot_path, e)),
        };
        let mut recovery = MetaRecovery {
            generation,
            ..MetaRecovery::default()
        };

        for entry in fs::read_dir(dir).ctx("list", dir)? {
            let entry = entry.ctx("list", dir)?;
            let name = entry.file_name();
            let Some(Ok(g)) = name
                .to_str()
                .and_then(|n| n.strip_prefix(JOURNAL_PREFIX))
                .map(str::parse::<u64>)
            else {
                continue;
            };
            let path = entry.path();
            if g == generation {
                continue;
            }
            // g > G: crash after compaction pre-created journal G+1 but before snapshot G+1
            // became durable; nothing was ever written to it. A non-empty one means the
            // snapshot that owned it is gone, and dropping it would lose acknowledged commits.
            let len = entry.metadata().ctx("stat", &path)?.len();
            if g > generation && len > 0 {
                let why = format!("{len}-byte journal {g} is newer than snapshot {generation}");
                return Err(corrupt(&path, 0, why));
            }
            // g < G: crash after snapshot G was renamed into place but before the old journal
            // was unlinked. Everything in it is in the snapshot.
            fs::remove_file(&path).ctx("remove stale journal", &path)?;
            recovery.removed_journals += 1;
        }

        let journal_path = journal_path(dir, generation);
        let existed = journal_path.exists();
        let mut journal = open_rw(&journal_path, Existing::Keep)?;
        // A fresh directory, or a crash after snapshot G landed but before journal G existed:
        // the name must be durable before a commit is acknowledged through it.
        if !existed || recovery.removed_journals > 0 {
            sync_dir(dir)?;
        }
        let mut data = Vec::new();
        journal.read_to_end(&mut data).ctx("read", &journal_path)?;
        let valid = replay(&journal_path, &data, &mut map, &mut recovery)?;
        if valid < data.len() {
            journal
                .set_len(valid as u64)
                .and_then(|()| journal.sync_all())
                .ctx("truncate torn tail of", &journal_path)?;
            recovery.truncated_bytes = (data.len() - valid) as u64;
            tracing::warn!(
                journal = %journal_path.display(),
                position = valid,
                truncated_bytes = recovery.truncated_bytes,
                "meta store journal ended in a torn or damaged record; cut it off"
            );
        }
        Ok(MetaStore {
            dir: dir.to_path_buf(),
            map,
            generation,
            journal,
            journal_len: valid as u64,
            compact_after: MIN_COMPACT_BYTES.max(2 * snapshot_len),
            compact_min: MIN_COMPACT_BYTES,
            poisoned: None,
            recovery,
            _lock: lock,
        })
    }

    pub fn get(&self, key: &str) -> Option<Bytes> {
        self.map.get(key).cloned()
    }

    /// Every entry whose key starts with `prefix`, in key order.
    pub fn scan_prefix(&self, prefix: &str) -> Vec<(String, Bytes)> {
        let from = (Bound::Included(prefix), Bound::Unbounded);
        let range = self.map.range::<str, _>(from);
        let matching = range.take_while(|(k, _)| k.starts_with(prefix));
        matching.map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn recovery(&self) -> &MetaRecovery {
        &self.recovery
    }

    /// Generation of the current snapshot and journal.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn put(&mut self, key: impl Into<String>, value: impl Into<Bytes>) -> Result<()> {
        let mut batch = MetaBatch::new();
        batch.put(key, value);
        self.commit(batch)
    }

    pub fn delete(&mut self, key: impl Into<String>) -> Result<()> {
        let mut batch = MetaBatch::new();
        batch.delete(key);
        self.commit(batch)
    }

    /// Appends the batch as one journal record and fdatasyncs it: durable when this returns
    /// `Ok`; on any error neither the file nor memory holds it. An empty batch is a no-op.
    pub fn commit(&mut self, batch: MetaBatch) -> Result<()> {
        batch.validate()?;
        if batch.is_empty() {
            return Ok(());
        }
        self.check_writable()?;
        let record = batch.encode_record()?;
        self.append(&record)?;
        apply(&mut self.map, batch.ops);
        if self.journal_len > self.compact_after
            && let Err(e) = self.compact()
        {
            // The commit is already durable: failing it now would make the caller redo
            // something that happened. Retry after another stretch of journal, not per commit.
            self.compact_after = self.journal_len.saturating_add(self.compact_min);
            tracing::warn!(dir = %self.dir.display(), error = %e, "meta store compaction failed");
        }
        Ok(())
    }

    /// Writes the whole map as snapshot G+1 and switches to the empty journal G+1.
    pub fn compact(&mut self) -> Result<()> {
        self.check_writable()?;
        let next = self.generation + 1;
        let next_path = journal_path(&self.dir, next);
        // The next journal exists before the snapshot names generation G+1, so any failure up
        // to the rename leaves generation G fully in charge with nothing to repair, and a crash
        // leaves only an empty journal G+1, which open removes.
        let next_journal = open_rw(&next_path, Existing::Truncate)?;
        let snapshot = encode_snapshot(next, &self.map);
        let snapshot_path = self.dir.join(SNAPSHOT_FILE);
        let written = sync_dir(&self.dir).and_then(|()| write_atomic(&snapshot_path, &snapshot));
        if let Err(e) = written {
            match snapshot_generation(&snapshot_path) {
                Ok(g) if g != Some(next) => {
                    // The rename never happened: snapshot G and journal G still rule.
                    let _ = fs::remove_file(&next_path);
                    let _ = fs::remove_file(snapshot_path.with_extension("tmp"));
                }
                // Renamed, but the directory fsync failed (or we cannot tell): after a crash
                // either snapshot may win, and commits to the other journal would be lost.
                // Refuse writes until a reopen settles it from what is on disk.
                _ => self.poisoned = Some(format!("compaction to generation {next}: {e}")),
            }
            return Err(e);
        }
        let old_path = journal_path(&self.dir, self.generation);
        self.journal = next_journal;
        self.generation = next;
        self.journal_len = 0;
        self.compact_after = self.compact_min.max(2 * snapshot.len() as u64);
        // Crash (or failure) before this unlink lands: journal G stays beside snapshot G+1
        // and open removes it.
        if let Err(e) = fs::remove_file(&old_path) {
            tracing::warn!(journal = %old_path.display(), error = %e, "stale meta journal left");
        }
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(StorageError::Poisoned {
                dir: self.dir.clone(),
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    fn append(&mut self, record: &[u8]) -> Result<()> {
        let (file, len) = (&self.journal, self.journal_len);
        let written = file
            .write_all_at(record, len)
            .and_then(|()| file.sync_data());
        if let Err(e) = written {
            // Cut the partial (or unsynced) record off so the file never holds a commit that
            // memory lacks: a reopen would otherwise resurrect a batch that returned an error.
            // If even that fails the record may survive, so writes stop until a reopen.
            if let Err(r) = file.set_len(len).and_then(|()| file.sync_data()) {
                let cause = format!("journal append failed ({e}), then its rollback ({r})");
                self.poisoned = Some(cause);
            }
            let path = journal_path(&self.dir, self.generation);
            return Err(StorageError::io("append to", path, e));
        }
        self.journal_len += record.len() as u64;
        Ok(())
    }
}

fn journal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{JOURNAL_PREFIX}{generation}"))
}

/// What opening a journal does to a file already at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Existing {
    /// The current generation's journal: its commits are appended to.
    Keep,
    /// The next generation's journal: it starts empty, whatever a failed compaction left.
    Truncate,
}

fn open_rw(path: &Path, existing: Existing) -> Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true);
    options
        .truncate(existing == Existing::Truncate)
        .open(path)
        .ctx("open", path)
}

fn too_large(what: &'static str, size: usize, max: usize) -> StorageError {
    StorageError::TooLarge { what, size, max }
}

fn corrupt(file: &Path, position: usize, detail: String) -> StorageError {
    StorageError::Corrupt {
        file: file.to_path_buf(),
        position: position as u64,
        offset: 0,
        detail: format!("{detail} (the meta store has no log offsets; offset is unused)"),
    }
}

fn apply(map: &mut Map, ops: Vec<Op>) {
    for op in ops {
        match op {
            Op::Put(k, v) => map.insert(k, v),
            Op::Delete(k) => map.remove(&k),
        };
    }
}

fn put_blob(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn blob(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn string(&mut self) -> Option<String> {
        String::from_utf8(self.blob()?.to_vec()).ok()
    }
}

/// The checksummed payload of the record at `pos` and where the next one starts.
fn frame(data: &[u8], pos: usize) -> Result<(&[u8], usize), String> {
    let mut r = Reader(&data[pos..]);
    let (Some(len), Some(crc)) = (r.u32(), r.u32()) else {
        return Err("record header runs past the end of the file".into());
    };
    let len = len as usize;
    if !(MIN_PAYLOAD..=MAX_BATCH_BYTES).contains(&len) {
        return Err(format!("implausible record length {len}"));
    }
    let Some(payload) = r.take(len) else {
        return Err(format!("{len}-byte record runs past the end of the file"));
    };
    if crc32c::crc32c(payload) != crc {
        return Err("record checksum mismatch".into());
    }
    Ok((payload, pos + RECORD_HEADER + len))
}

fn decode_payload(payload: &[u8]) -> Option<Vec<Op>> {
    let mut r = Reader(payload);
    let count = r.u32()?;
    let mut ops = Vec::with_capacity(count.min(1024) as usize);
    for _ in 0..count {
        let tag = r.take(1)?[0];
        let key = r.string()?;
        ops.push(match tag {
            TAG_PUT => Op::Put(key, Bytes::copy_from_slice(r.blob()?)),
            TAG_DELETE => Op::Delete(key),
            _ => return None,
        });
    }
    (count > 0 && r.0.is_empty()).then_some(ops)
}

/// Applies every intact record and returns the length of the intact prefix.
fn replay(path: &Path, data: &[u8], map: &mut Map, recovery: &mut MetaRecovery) -> Result<usize> {
    let mut pos = 0;
    while pos < data.len() {
        let (payload, next) = match frame(data, pos) {
            Ok(frame) => frame,
            Err(why) => {
                // An intact record after the damage means this is not a torn append (appends
                // are sequential and each is synced before the next) but damage in the middle;
                // cutting there would silently drop acknowledged commits. Scanning every byte
                // rather than trusting this record's length catches a damaged length field too.
                if let Some(q) = (pos + 1..data.len()).find(|&q| frame(data, q).is_ok()) {
                    let why = format!("{why}, yet an intact record follows at byte {q}");
                    return Err(corrupt(path, pos, why));
                }
                // A damaged last record cannot be told apart from a torn append whose commit
                // never returned, so it is cut off (and reported by the caller).
                return Ok(pos);
            }
        };
        let Some(ops) = decode_payload(payload) else {
            let why = "record checksum matches but its contents do not decode";
            return Err(corrupt(path, pos, why.into()));
        };
        apply(map, ops);
        recovery.replayed_records += 1;
        pos = next;
    }
    Ok(pos)
}

fn encode_snapshot(generation: u64, map: &Map) -> Vec<u8> {
    let mut out = SNAPSHOT_MAGIC.to_vec();
    out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&(map.len() as u64).to_le_bytes());
    for (k, v) in map {
        put_blob(&mut out, k.as_bytes());
        put_blob(&mut out, v);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A snapshot that does not check out is a refusal: starting empty (or from part of it) would
/// silently forget every cursor and topic it held.
fn decode_snapshot(path: &Path, data: &[u8]) -> Result<(u64, Map)> {
    let bad = |position: usize, why: &str| corrupt(path, position, format!("snapshot: {why}"));
    let Some((body, crc)) = data.split_last_chunk::<4>() else {
        return Err(bad(0, "too short"));
    };
    if !body.starts_with(SNAPSHOT_MAGIC) {
        return Err(bad(0, "bad magic"));
    }
    if crc32c::crc32c(body) != u32::from_le_bytes(*crc) {
        return Err(bad(body.len(), "checksum mismatch"));
    }
    let mut r = Reader(&body[SNAPSHOT_MAGIC.len()..]);
    if r.u32() != Some(SNAPSHOT_VERSION) {
        return Err(bad(SNAPSHOT_MAGIC.len(), "unsupported version"));
    }
    let parsed = (|| {
        let (generation, count) = (r.u64()?, r.u64()?);
        let mut map = Map::new();
        for _ in 0..count {
            let key = r.string()?;
            map.insert(key, Bytes::copy_from_slice(r.blob()?));
        }
        r.0.is_empty().then_some((generation, map))
    })();
    parsed.ok_or_else(|| bad(body.len() - r.0.len(), "entries do not decode"))
}

/// The generation the snapshot file on disk names, if there is one.
fn snapshot_generation(path: &Path) -> io::Result<Option<u64>> {
    let mut header = [0u8; 20];
    match File::open(path) {
        Ok(mut f) => f.read_exact(&mut header)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let magic_ok = header.starts_with(SNAPSHOT_MAGIC);
    let generation = u64::from_le_bytes(header[12..].try_into().unwrap());
    magic_ok
        .then_some(Some(generation))
        .ok_or_else(|| io::Error::other("bad snapshot magic"))
}

#[cfg(test)]
mod tests;
