//! The on-disk record batch: the unit of append, checksum and read.
//!
//! ```text
//! batch header (48 bytes, little endian)
//!   0  u32  batch length, header included
//!   4  u16  magic 0xFE77
//!   6  u8   format version (1)
//!   7  u8   attributes: bit 0 = last batch of a group write; other bits 0
//!   8  u32  CRC32C over bytes 4..8 then 12..length (all but the length and the CRC)
//!  12  u64  base offset
//!  20  u32  record count
//!  24  i64  first timestamp (ms since the Unix epoch)
//!  32  i64  max timestamp
//!  40  u64  reserved (0)
//! records, `record count` times
//!   u32  record length (bytes after this field)
//!   i64  timestamp delta from the first timestamp
//!   u32  key length, or u32::MAX for no key; key bytes
//!   u16  header count; per header: u16 name length, name, u32 value length, value
//!   u32  value length; value bytes
//! ```
//!
//! Fixed-width integers rather than varints: decoding stays branch-light and the few bytes
//! they cost per record are small next to the 48-byte batch header they share.

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub const HEADER_LEN: usize = 48;
pub const MAGIC: u16 = 0xFE77;
pub const VERSION: u8 = 1;
const NO_KEY: u32 = u32::MAX;
/// Set on the last batch of each group write. Recovery uses it to tell a write torn inside
/// the last, unsynced group (whose pages may reach the disk in any order) from damage to
/// earlier, acknowledged groups.
pub const ATTR_GROUP_END: u8 = 0x01;
/// The attributes of a batch as encoded, before `mark_group_end` may set its bit.
pub const NO_ATTRIBUTES: u8 = 0;
const KNOWN_ATTRIBUTES: u8 = ATTR_GROUP_END;

/// Where the header fields that are read or patched on their own lie (see the layout above).
pub const MAGIC_AT: usize = 4;
pub const VERSION_AT: usize = 6;
pub const ATTRIBUTES_AT: usize = 7;
const CRC_AT: usize = 8;
const CRC_END: usize = CRC_AT + 4;

/// The CRC32C of a batch: magic, version and attributes, then everything after the CRC field.
/// The length is left out (it is checked against the data it frames); nothing else is.
pub fn checksum(batch: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&batch[MAGIC_AT..CRC_AT]), &batch[CRC_END..])
}

/// Marks an encoded batch as the last of its group write, updating its checksum.
pub fn mark_group_end(batch: &mut [u8]) {
    batch[ATTRIBUTES_AT] |= ATTR_GROUP_END;
    let crc = checksum(batch);
    batch[CRC_AT..CRC_END].copy_from_slice(&crc.to_le_bytes());
}

/// One record as the caller hands it to `append`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewRecord {
    pub timestamp: Option<i64>,
    pub key: Option<Bytes>,
    pub headers: Vec<(Bytes, Bytes)>,
    pub value: Bytes,
}

impl NewRecord {
    pub fn new(value: impl Into<Bytes>) -> Self {
        NewRecord {
            value: value.into(),
            ..Default::default()
        }
    }
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }
    pub fn with_header(mut self, name: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    pub fn with_timestamp(mut self, ms: i64) -> Self {
        self.timestamp = Some(ms);
        self
    }

    /// Bytes this record takes inside a batch.
    pub fn encoded_len(&self) -> usize {
        4 + 8
            + 4
            + self.key.as_ref().map_or(0, |k| k.len())
            + 2
            + self
                .headers
                .iter()
                .map(|(n, v)| 2 + n.len() + 4 + v.len())
                .sum::<usize>()
            + 4
            + self.value.len()
    }
}

/// A record read back from the log. Key, header and value buffers share the batch's
/// allocation: reading a batch costs one buffer, not one per field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: u64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub headers: Vec<(Bytes, Bytes)>,
    pub value: Bytes,
}

/// The fixed part of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub length: u32,
    pub attributes: u8,
    pub crc: u32,
    pub base_offset: u64,
    pub record_count: u32,
    pub first_timestamp: i64,
    pub max_timestamp: i64,
}

impl BatchHeader {
    pub fn is_group_end(&self) -> bool {
        self.attributes & ATTR_GROUP_END != 0
    }
    pub fn last_offset(&self) -> u64 {
        self.base_offset + self.record_count as u64 - 1
    }
    pub fn next_offset(&self) -> u64 {
        self.base_offset + self.record_count as u64
    }
}

/// Why a run of bytes is not a valid batch. Recovery tells torn tails from damage with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header or the declared length: a write that did not finish.
    Incomplete { needed: usize, available: usize },
    /// Impossible header fields (bad magic, version, length or count).
    BadHeader(String),
    /// The header parses but the contents do not match the checksum.
    ChecksumMismatch { stored: u32, computed: u32 },
    /// The checksum matches but the records do not fit the declared layout.
    BadRecords(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Incomplete { needed, available } => {
                write!(f, "incomplete batch: {available} of {needed} bytes present")
            }
            DecodeError::BadHeader(why) => write!(f, "invalid batch header: {why}"),
            DecodeError::ChecksumMismatch { stored, computed } => write!(
                f,
                "stored CRC32C {stored:#010x} does not match computed {computed:#010x}"
            ),
            DecodeError::BadRecords(why) => write!(f, "invalid records: {why}"),
        }
    }
}

/// Encodes `records` as one batch at `base_offset` onto `out`. `now_ms` stamps records that
/// carry no timestamp. Returns the header written.
pub fn encode(
    out: &mut BytesMut,
    base_offset: u64,
    records: &[NewRecord],
    now_ms: i64,
) -> BatchHeader {
    debug_assert!(!records.is_empty());
    let start = out.len();
    let first_timestamp = records[0].timestamp.unwrap_or(now_ms);
    let mut max_timestamp = first_timestamp;
    let body_len: usize = records.iter().map(NewRecord::encoded_len).sum();
    out.reserve(HEADER_LEN + body_len);
    out.put_bytes(0, HEADER_LEN);
    for record in records {
        let timestamp = record.timestamp.unwrap_or(now_ms);
        max_timestamp = max_timestamp.max(timestamp);
        out.put_u32_le((record.encoded_len() - 4) as u32);
        out.put_i64_le(timestamp.wrapping_sub(first_timestamp));
        match &record.key {
            Some(key) => {
                out.put_u32_le(key.len() as u32);
                out.put_slice(key);
            }
            None => out.put_u32_le(NO_KEY),
        }
        out.put_u16_le(record.headers.len() as u16);
        for (name, value) in &record.headers {
            out.put_u16_le(name.len() as u16);
            out.put_slice(name);
            out.put_u32_le(value.len() as u32);
            out.put_slice(value);
        }
        out.put_u32_le(record.value.len() as u32);
        out.put_slice(&record.value);
    }
    let length = (out.len() - start) as u32;
    let header = BatchHeader {
        length,
        attributes: NO_ATTRIBUTES,
        crc: 0,
        base_offset,
        record_count: records.len() as u32,
        first_timestamp,
        max_timestamp,
    };
    let buf = &mut out[start..];
    write_header_fields(buf, &header);
    let crc = checksum(buf);
    buf[CRC_AT..CRC_END].copy_from_slice(&crc.to_le_bytes());
    BatchHeader { crc, ..header }
}

fn write_header_fields(buf: &mut [u8], h: &BatchHeader) {
    buf[0..4].copy_from_slice(&h.length.to_le_bytes());
    buf[MAGIC_AT..VERSION_AT].copy_from_slice(&MAGIC.to_le_bytes());
    buf[VERSION_AT] = VERSION;
    buf[ATTRIBUTES_AT] = h.attributes;
    buf[12..20].copy_from_slice(&h.base_offset.to_le_bytes());
    buf[20..24].copy_from_slice(&h.record_count.to_le_bytes());
    buf[24..32].copy_from_slice(&h.first_timestamp.to_le_bytes());
    buf[32..40].copy_from_slice(&h.max_timestamp.to_le_bytes());
    buf[40..48].copy_from_slice(&0u64.to_le_bytes());
}

/// Parses and sanity-checks the fixed header; does not verify the checksum.
/// `max_batch_len` bounds the declared length so a damaged length never makes a reader
/// allocate gigabytes.
pub fn parse_header(bytes: &[u8], max_batch_len: usize) -> Result<BatchHeader, DecodeError> {
    if bytes.len() < HEADER_LEN {
        return Err(DecodeError::Incomplete {
            needed: HEADER_LEN,
            available: bytes.len(),
        });
    }
    let mut b = &bytes[..HEADER_LEN];
    let length = b.get_u32_le();
    let magic = b.get_u16_le();
    let version = b.get_u8();
    let attributes = b.get_u8();
    let crc = b.get_u32_le();
    let base_offset = b.get_u64_le();
    let record_count = b.get_u32_le();
    let first_timestamp = b.get_i64_le();
    let max_timestamp = b.get_i64_le();
    if magic != MAGIC {
        return Err(DecodeError::BadHeader(format!("magic {magic:#06x}")));
    }
    if version != VERSION {
        return Err(DecodeError::BadHeader(format!("version {version}")));
    }
    if attributes & !KNOWN_ATTRIBUTES != 0 {
        return Err(DecodeError::BadHeader(format!(
            "attributes {attributes:#04x}"
        )));
    }
    if (length as usize) < HEADER_LEN || length as usize > max_batch_len {
        return Err(DecodeError::BadHeader(format!("length {length}")));
    }
    // Every record takes at least 22 bytes, so a count that cannot fit is damage.
    if record_count == 0 || record_count as usize > (length as usize - HEADER_LEN) / 22 {
        return Err(DecodeError::BadHeader(format!(
            "record count {record_count}"
        )));
    }
    if base_offset.checked_add(record_count as u64).is_none() {
        return Err(DecodeError::BadHeader(format!("base offset {base_offset}")));
    }
    Ok(BatchHeader {
        length,
        attributes,
        crc,
        base_offset,
        record_count,
        first_timestamp,
        max_timestamp,
    })
}

/// Verifies a whole batch (header, length, checksum) held at the start of `bytes`.
pub fn verify(bytes: &[u8], max_batch_len: usize) -> Result<BatchHeader, DecodeError> {
    let header = parse_header(bytes, max_batch_len)?;
    let len = header.length as usize;
    if bytes.len() < len {
        return Err(DecodeError::Incomplete {
            needed: len,
            available: bytes.len(),
        });
    }
    let computed = checksum(&bytes[..len]);
    if computed != header.crc {
        return Err(DecodeError::ChecksumMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(header)
}

/// A verified batch, holding its bytes.
#[derive(Debug, Clone)]
pub struct RecordBatch {
    header: BatchHeader,
    bytes: Bytes,
}

impl RecordBatch {
    /// Verifies the checksum and every record's layout before accepting the bytes, so a
    /// caller never iterates over garbage.
    pub fn decode(bytes: Bytes, max_batch_len: usize) -> Result<RecordBatch, DecodeError> {
        let header = verify(&bytes, max_batch_len)?;
        let bytes = bytes.slice(..header.length as usize);
        let batch = RecordBatch { header, bytes };
        let mut count = 0u32;
        for record in batch.iter_raw(Walk::LayoutOnly) {
            record?;
            count += 1;
        }
        if count != header.record_count {
            return Err(DecodeError::BadRecords(format!(
                "header says {} records, found {count}",
                header.record_count
            )));
        }
        Ok(batch)
    }

    pub fn header(&self) -> &BatchHeader {
        &self.header
    }
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }
    pub fn base_offset(&self) -> u64 {
        self.header.base_offset
    }
    pub fn next_offset(&self) -> u64 {
        self.header.next_offset()
    }

    /// The records, in offset order. Layout was checked in `decode`, so this cannot fail.
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        self.iter_raw(Walk::Records).map_while(Result::ok)
    }

    fn iter_raw(&self, walk: Walk) -> RecordIter<'_> {
        RecordIter {
            batch: self,
            pos: HEADER_LEN,
            index: 0,
            walk,
        }
    }
}

/// What a walk over a batch's records is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walk {
    /// The validation walk in `decode`: every field is bounds-checked, nothing is sliced out.
    LayoutOnly,
    /// The records handed to a reader.
    Records,
}

struct RecordIter<'a> {
    batch: &'a RecordBatch,
    pos: usize,
    index: u32,
    walk: Walk,
}

impl RecordIter<'_> {
    fn take(&mut self, n: usize, end: usize) -> Result<Bytes, DecodeError> {
        if self.pos + n > end {
            return Err(DecodeError::BadRecords(format!(
                "field of {n} bytes at {} runs past the record end {end}",
                self.pos
            )));
        }
        // Slicing costs a reference-count round trip: only done for records handed out.
        let out = if self.walk == Walk::Records {
            self.batch.bytes.slice(self.pos..self.pos + n)
        } else {
            Bytes::new()
        };
        self.pos += n;
        Ok(out)
    }
    fn int<const N: usize>(&mut self, end: usize) -> Result<[u8; N], DecodeError> {
        if self.pos + N > end {
            return Err(DecodeError::BadRecords(format!(
                "field of {N} bytes at {} runs past the record end {end}",
                self.pos
            )));
        }
        let out = self.batch.bytes[self.pos..self.pos + N]
            .try_into()
            .expect("range is N bytes");
        self.pos += N;
        Ok(out)
    }

    fn next_record(&mut self) -> Result<Record, DecodeError> {
        let total = self.batch.bytes.len();
        let record_len = u32::from_le_bytes(self.int::<4>(total)?) as usize;
        let end = self.pos + record_len;
        if end > total {
            return Err(DecodeError::BadRecords(format!(
                "record {} of {record_len} bytes runs past the batch",
                self.index
            )));
        }
        let delta = i64::from_le_bytes(self.int::<8>(end)?);
        let key_len = u32::from_le_bytes(self.int::<4>(end)?);
        let key = if key_len == NO_KEY {
            None
        } else {
            Some(self.take(key_len as usize, end)?)
        };
        let header_count = u16::from_le_bytes(self.int::<2>(end)?);
        let mut headers = Vec::with_capacity(if self.walk == Walk::Records {
            header_count as usize
        } else {
            0
        });
        for _ in 0..header_count {
            let name_len = u16::from_le_bytes(self.int::<2>(end)?) as usize;
            let name = self.take(name_len, end)?;
            let value_len = u32::from_le_bytes(self.int::<4>(end)?) as usize;
            let value = self.take(value_len, end)?;
            if self.walk == Walk::Records {
                headers.push((name, value));
            }
        }
        let value_len = u32::from_le_bytes(self.int::<4>(end)?) as usize;
        let value = self.take(value_len, end)?;
        if self.pos != end {
            return Err(DecodeError::BadRecords(format!(
                "record {} declares {record_len} bytes but its fields take {}",
                self.index,
                record_len - (end - self.pos)
            )));
        }
        let record = Record {
            offset: self.batch.header.base_offset + self.index as u64,
            timestamp: self.batch.header.first_timestamp.wrapping_add(delta),
            key,
            headers,
            value,
        };
        self.index += 1;
        Ok(record)
    }
}

impl Iterator for RecordIter<'_> {
    type Item = Result<Record, DecodeError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.index >= self.batch.header.record_count || self.pos >= self.batch.bytes.len() {
            if self.index < self.batch.header.record_count {
                self.index = u32::MAX;
                return Some(Err(DecodeError::BadRecords("batch ended early".into())));
            }
            if self.index == self.batch.header.record_count && self.pos != self.batch.bytes.len() {
                self.index = u32::MAX;
                return Some(Err(DecodeError::BadRecords(
                    "trailing bytes after the last record".into(),
                )));
            }
            return None;
        }
        let result = self.next_record();
        if result.is_err() {
            self.index = u32::MAX;
        }
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<NewRecord> {
        vec![
            NewRecord::new("v1")
                .with_key("k1")
                .with_header("type", "order.created")
                .with_timestamp(1_000),
            NewRecord::new(Bytes::new()).with_timestamp(900),
            NewRecord::new(vec![7u8; 300]).with_timestamp(1_500),
        ]
    }

    #[test]
    fn encode_then_decode_returns_identical_records() {
        let mut buf = BytesMut::new();
        let header = encode(&mut buf, 42, &sample(), 5);
        assert_eq!(header.length as usize, buf.len());
        assert_eq!(header.max_timestamp, 1_500);
        let batch = RecordBatch::decode(buf.freeze(), 1 << 20).unwrap();
        let records: Vec<_> = batch.records().collect();
        assert_eq!(records.len(), 3);
        assert_eq!(records[0].offset, 42);
        assert_eq!(records[0].key.as_deref(), Some(&b"k1"[..]));
        assert_eq!(records[0].headers[0].1, Bytes::from("order.created"));
        assert_eq!(records[1].timestamp, 900);
        assert_eq!(records[1].key, None);
        assert_eq!(records[2].value.len(), 300);
        assert_eq!(records[2].offset, 44);
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let mut buf = BytesMut::new();
        encode(&mut buf, 7, &sample(), 5);
        let clean = buf.freeze();
        for byte in 0..clean.len() {
            for bit in 0..8 {
                let mut damaged = clean.to_vec();
                damaged[byte] ^= 1 << bit;
                assert!(
                    RecordBatch::decode(Bytes::from(damaged), 1 << 20).is_err(),
                    "flip at byte {byte} bit {bit} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn truncated_batch_is_incomplete_not_garbage() {
        let mut buf = BytesMut::new();
        encode(&mut buf, 0, &sample(), 5);
        for cut in 0..buf.len() {
            let err = verify(&buf[..cut], 1 << 20).unwrap_err();
            assert!(
                matches!(err, DecodeError::Incomplete { .. }),
                "cut at {cut}: {err}"
            );
        }
    }

    #[test]
    fn fuzz_seed_corpus_holds_valid_batches() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/batch_decoder");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let bytes = Bytes::from(std::fs::read(&path).unwrap());
            RecordBatch::decode(bytes, 1 << 20).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            seen += 1;
        }
        assert!(seen > 0, "no seeds in {dir:?}");
    }

    #[test]
    fn group_end_mark_is_covered_by_the_checksum() {
        let mut buf = BytesMut::new();
        encode(&mut buf, 0, &sample(), 5);
        mark_group_end(&mut buf);
        let batch = RecordBatch::decode(buf.clone().freeze(), 1 << 20).unwrap();
        assert!(batch.header().is_group_end());
        buf[ATTRIBUTES_AT] &= !ATTR_GROUP_END;
        assert!(matches!(
            RecordBatch::decode(buf.freeze(), 1 << 20),
            Err(DecodeError::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn absurd_length_is_rejected_before_any_allocation() {
        let mut buf = BytesMut::new();
        encode(&mut buf, 0, &sample(), 5);
        buf[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            parse_header(&buf, 1 << 20),
            Err(DecodeError::BadHeader(_))
        ));
    }
}
