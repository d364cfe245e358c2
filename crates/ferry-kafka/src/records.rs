//! Kafka record batches ↔ Ferry messages.
//!
//! **Produce.** Record batch v2 (magic 2), uncompressed or gzip, snappy, lz4 or zstd (zstd
//! from Produce v7, as Kafka), each decompressed within bounds by `decompress.rs`; a legacy
//! message set (magic 0 and 1, Produce v0–2 only) goes to `legacy.rs`. Transactional and
//! control batches are refused with INVALID_RECORD (no transactions). A record's key is the
//! message key, its value the payload (a null value is stored as an empty payload), its
//! headers the message headers — whose values must be UTF-8, as Ferry's headers are
//! strings, and whose names must not be in Ferry's `ferry-` namespace; a header repeated in
//! one record keeps its last value.
//!
//! **Timestamps.** A producer's CreateTime is kept as the message's `ferry-created-at`
//! header ([`header::CREATED_AT`], decimal ms), the one reserved header the broker takes
//! from a publisher; the message's `published_at` stays the time Ferry stored it. A
//! fetched record's timestamp is its CreateTime when it has one (the header itself is not
//! repeated among the record's Kafka headers), else its `published_at` — for a message
//! published through Ferry's own APIs, or written before CreateTimes were kept. A header
//! rather than a new field of the broker's message model: the storage format is unchanged
//! (records without it read as before), and every API shows it alike among the headers.
//!
//! **Fetch.** Records read from a partition are encoded as one uncompressed batch v2 whose
//! base offset is the first record's Ferry offset.

use crate::decompress::{Codec, Failure, decompress};
use crate::legacy;
use bytes::{Bytes, BytesMut};
use ferry_broker::{OutgoingMessage, TopicRecord, header};
use kafka_protocol::ResponseError;
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

/// Why a produced partition's records were refused: the Kafka code and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RecordsRefused {
    pub code: ResponseError,
    pub message: String,
}

impl RecordsRefused {
    fn new(code: ResponseError, message: impl Into<String>) -> Self {
        RecordsRefused {
            code,
            message: message.into(),
        }
    }
}

/// The idempotent producer that wrote a batch and the sequence of its first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerOfBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
}

/// One produced batch as Ferry messages.
#[derive(Debug)]
pub struct ProducedBatch {
    pub producer: Option<ProducerOfBatch>,
    pub messages: Vec<OutgoingMessage>,
}

// Offsets inside a v2 batch header (Kafka's DefaultRecordBatch).
const BATCH_LENGTH_AT: usize = 8;
const MAGIC_AT: usize = 16;
const ATTRIBUTES_AT: usize = 21;
const RECORD_COUNT_AT: usize = 57;
const BATCH_HEADER_LEN: usize = 61;
const COMPRESSION_MASK: i16 = 0x07;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;

/// Checks each batch's header before the codec decodes it, so that an unsupported format
/// or compression gets its own error code rather than a generic decode failure.
/// Returns each batch's record count and, for uncompressed batches, checks the records'
/// counts (see [`check_record_counts`]).
fn check_batch_headers(mut data: &[u8], version: i16) -> Result<Vec<usize>, RecordsRefused> {
    let mut counts = Vec::new();
    if data.is_empty() {
        return Err(RecordsRefused::new(
            ResponseError::CorruptMessage,
            "the partition's record set is empty",
        ));
    }
    while !data.is_empty() {
        if data.len() < BATCH_HEADER_LEN {
            return Err(RecordsRefused::new(
                ResponseError::CorruptMessage,
                format!("a record batch is cut short at {} bytes", data.len()),
            ));
        }
        let magic = data[MAGIC_AT] as i8;
        if magic != 2 {
            // Legacy message sets come whole (`legacy.rs`); one mixed with batches v2 is
            // not something any client writes.
            return Err(RecordsRefused::new(
                ResponseError::CorruptMessage,
                format!("a record set mixes record batch v2 with magic {magic}"),
            ));
        }
        let attributes = i16::from_be_bytes([data[ATTRIBUTES_AT], data[ATTRIBUTES_AT + 1]]);
        match Codec::from_attributes(attributes) {
            // Kafka takes zstd from Produce v7 on only (clients older than that cannot
            // read it back).
            Ok(Some(Codec::Zstd)) if version < 7 => {
                return Err(RecordsRefused::new(
                    ResponseError::UnsupportedCompressionType,
                    format!("zstd batches need Produce v7 or later, not v{version}"),
                ));
            }
            Ok(_) => {}
            Err(other) => {
                return Err(RecordsRefused::new(
                    ResponseError::CorruptMessage,
                    format!("unknown compression codec {other}"),
                ));
            }
        }
        if attributes & (TRANSACTIONAL_BIT | CONTROL_BIT) != 0 {
            return Err(RecordsRefused::new(
                ResponseError::InvalidRecord,
                "transactional and control batches are not supported",
            ));
        }
        let length = i32::from_be_bytes(
            data[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4]
                .try_into()
                .expect("four bytes"),
        );
        let total = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_add(BATCH_LENGTH_AT + 4))
            .filter(|&t| t >= BATCH_HEADER_LEN && t <= data.len())
            .ok_or_else(|| {
                RecordsRefused::new(
                    ResponseError::CorruptMessage,
                    format!(
                        "a record batch claims {length} bytes, which the request does not hold"
                    ),
                )
            })?;
        let count = i32::from_be_bytes(
            data[RECORD_COUNT_AT..RECORD_COUNT_AT + 4]
                .try_into()
                .expect("four bytes"),
        );
        let count = usize::try_from(count).map_err(|_| {
            RecordsRefused::new(
                ResponseError::CorruptMessage,
                format!("a record batch claims {count} records"),
            )
        })?;
        if attributes & COMPRESSION_MASK == 0 {
            check_record_counts(&data[BATCH_HEADER_LEN..total], count)?;
        }
        counts.push(count);
        data = &data[total..];
    }
    Ok(counts)
}

/// The codec (`kafka-protocol` 0.18) reserves room for a batch's claimed record count and
/// each record's claimed header count before decoding them, and an allocation that fails
/// aborts the process; so the counts are checked against the bytes that hold them first.
/// Each record takes at least one byte, and each header too.
fn check_record_counts(mut records: &[u8], count: usize) -> Result<(), RecordsRefused> {
    let corrupt = |problem: String| RecordsRefused::new(ResponseError::CorruptMessage, problem);
    if count > records.len() {
        return Err(corrupt(format!(
            "a record batch claims {count} records in {} bytes",
            records.len()
        )));
    }
    for _ in 0..count {
        let length = varint(&mut records).map_err(corrupt)?;
        let length = usize::try_from(length)
            .ok()
            .filter(|&l| l <= records.len())
            .ok_or_else(|| corrupt(format!("a record claims {length} bytes")))?;
        let (mut record, rest) = records.split_at(length);
        records = rest;
        skip(&mut record, 1).map_err(corrupt)?; // attributes
        varint(&mut record).map_err(corrupt)?; // timestamp delta
        varint(&mut record).map_err(corrupt)?; // offset delta
        for _ in 0..2 {
            // key, then value: a length (-1 for null) and the bytes
            let len = varint(&mut record).map_err(corrupt)?;
            skip(&mut record, usize::try_from(len).unwrap_or(0)).map_err(corrupt)?;
        }
        let headers = varint(&mut record).map_err(corrupt)?;
        if usize::try_from(headers).is_ok_and(|h| h > record.len()) {
            return Err(corrupt(format!(
                "a record claims {headers} headers in {} bytes",
                record.len()
            )));
        }
    }
    Ok(())
}

fn skip(buf: &mut &[u8], n: usize) -> Result<(), String> {
    if n > buf.len() {
        return Err(format!(
            "a record field of {n} bytes with {} left",
            buf.len()
        ));
    }
    *buf = &buf[n..];
    Ok(())
}

/// A zigzag varint (Kafka's signed varint, up to a varlong's ten bytes).
fn varint(buf: &mut &[u8]) -> Result<i64, String> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let Some((&byte, rest)) = buf.split_first() else {
            return Err("a record ends inside a varint".into());
        };
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    Err("a varint longer than ten bytes".into())
}

/// Decompresses a batch's records within `max_bytes` (see `decompress.rs`), and checks
/// their counts before the codec decodes them.
fn decompress_checked(
    compressed: &mut Bytes,
    compression: Compression,
    count: usize,
    max_bytes: usize,
) -> Result<Bytes, RecordsRefused> {
    let data = std::mem::take(compressed);
    let codec = match compression {
        // Checked with the batch's header (`check_batch_headers`).
        Compression::None => return Ok(data),
        Compression::Gzip => Codec::Gzip,
        Compression::Snappy => Codec::Snappy,
        Compression::Lz4 => Codec::Lz4,
        Compression::Zstd => Codec::Zstd,
    };
    let out =
        decompress(codec, &data, max_bytes).map_err(|e| refused_decompressing(e, max_bytes))?;
    check_record_counts(&out, count)?;
    Ok(Bytes::from(out))
}

/// The refusal of records that did not decompress.
pub(crate) fn refused_decompressing(failure: Failure, max_bytes: usize) -> RecordsRefused {
    match failure {
        Failure::TooLarge => RecordsRefused::new(
            ResponseError::RecordListTooLarge,
            format!("a batch decompresses to over {max_bytes} bytes (kafka.max_frame_bytes)"),
        ),
        Failure::Corrupt(problem) => RecordsRefused::new(ResponseError::CorruptMessage, problem),
    }
}

/// Decodes a produced partition's record set into batches of Ferry messages; on any error
/// nothing is taken.
pub fn decode_produced(
    records: &Bytes,
    max_bytes: usize,
    version: i16,
) -> Result<Vec<ProducedBatch>, RecordsRefused> {
    if let Some(&magic @ (0 | 1)) = records.get(MAGIC_AT) {
        // Kafka takes magic 0 and 1 from Produce v0–2 only; from v3 on, batches v2.
        if version >= 3 {
            return Err(RecordsRefused::new(
                ResponseError::InvalidRecord,
                format!("Produce v{version} takes record batch v2 only, not magic {magic}"),
            ));
        }
        let messages = legacy::decode(records, max_bytes)?;
        return Ok(vec![ProducedBatch {
            producer: None,
            messages,
        }]);
    }
    let counts = check_batch_headers(records, version)?;
    let mut buf = records.clone();
    let mut sets = Vec::with_capacity(counts.len());
    for count in counts {
        // The decompressor reports through this: the codec's error type is its own.
        let refused = std::cell::RefCell::new(None);
        let decompress = |compressed: &mut Bytes, compression: Compression| {
            decompress_checked(compressed, compression, count, max_bytes).map_err(|e| {
                let message = e.message.clone();
                *refused.borrow_mut() = Some(e);
                anyhow::Error::msg(message)
            })
        };
        let set = RecordBatchDecoder::decode_with_custom_compression(&mut buf, Some(decompress))
            .map_err(|e| {
                refused.borrow_mut().take().unwrap_or_else(|| {
                    RecordsRefused::new(
                        ResponseError::CorruptMessage,
                        format!("the record batch does not decode: {e}"),
                    )
                })
            })?;
        sets.push(set);
    }
    sets.into_iter()
        .filter(|set| !set.records.is_empty())
        .map(|set| {
            let first = &set.records[0];
            let producer = (first.producer_id >= 0).then_some(ProducerOfBatch {
                producer_id: first.producer_id,
                epoch: first.producer_epoch,
                base_sequence: first.sequence,
            });
            let messages = set
                .records
                .into_iter()
                .map(to_message)
                .collect::<Result<_, _>>()?;
            Ok(ProducedBatch { producer, messages })
        })
        .collect()
}

fn to_message(record: Record) -> Result<OutgoingMessage, RecordsRefused> {
    let mut message = OutgoingMessage::new(record.value.unwrap_or_default());
    message.key = record.key;
    for (name, value) in record.headers {
        if header::is_reserved(name.as_str()) {
            // Refused here as well as by the broker: `ferry-created-at`, which the broker
            // takes from a publisher, comes from the record's timestamp alone.
            return Err(RecordsRefused::new(
                ResponseError::InvalidRecord,
                format!(
                    "header {:?} is in Ferry's reserved namespace `ferry-`; rename it",
                    name.as_str()
                ),
            ));
        }
        let value = match value {
            None => String::new(),
            Some(bytes) => String::from_utf8(bytes.to_vec()).map_err(|_| {
                RecordsRefused::new(
                    ResponseError::InvalidRecord,
                    format!(
                        "the value of header {:?} is not UTF-8; Ferry's header values are text",
                        name.as_str()
                    ),
                )
            })?,
        };
        message.headers.insert(name.as_str().to_owned(), value);
    }
    if record.timestamp_type == TimestampType::Creation {
        keep_created_at(&mut message, record.timestamp);
    }
    Ok(message)
}

/// Keeps a producer's CreateTime as [`header::CREATED_AT`] (see the module docs); a
/// negative one (Kafka's "no timestamp", -1) is not a time and is left out.
pub(crate) fn keep_created_at(message: &mut OutgoingMessage, timestamp: i64) {
    if timestamp >= 0 {
        message
            .headers
            .insert(header::CREATED_AT.to_owned(), timestamp.to_string());
    }
}

/// A stored message's Kafka timestamp: the producer's CreateTime when it kept one, else
/// the time Ferry stored it.
pub fn kafka_timestamp(message: &ferry_broker::Message) -> i64 {
    message
        .headers
        .get(header::CREATED_AT)
        .and_then(|t| header::parse_created_at(t))
        .unwrap_or(message.published_at)
}

/// `records` (consecutive, of one partition) as one uncompressed record batch v2.
pub fn encode_fetched(records: &[TopicRecord]) -> Result<Bytes, RecordsRefused> {
    let Some(first) = records.first() else {
        return Ok(Bytes::new());
    };
    let base = first.offset as i64;
    let records: Vec<Record> = records
        .iter()
        .map(|r| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: r.offset as i64,
            // The codec groups records into one batch while offset − sequence is
            // constant; without a producer the sequence carries no meaning otherwise.
            sequence: (r.offset as i64 - base) as i32,
            timestamp: kafka_timestamp(&r.message),
            key: r.message.key.clone(),
            value: Some(r.message.payload.clone()),
            headers: r
                .message
                .headers
                .iter()
                .filter(|(k, _)| *k != header::CREATED_AT)
                .map(|(k, v)| {
                    (
                        StrBytes::from_string(k.clone()),
                        Some(Bytes::copy_from_slice(v.as_bytes())),
                    )
                })
                .collect::<IndexMap<_, _>>(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).map_err(|e| {
        RecordsRefused::new(
            ResponseError::UnknownServerError,
            format!("encoding fetched records: {e}"),
        )
    })?;
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(compression: Compression, records: &[Record]) -> Bytes {
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression,
        };
        RecordBatchEncoder::encode(&mut buf, records, &options).unwrap();
        buf.freeze()
    }

    fn record(value: &str) -> Record {
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp: 1,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
            headers: IndexMap::from([(
                StrBytes::from_static_str("h"),
                Some(Bytes::from_static(b"v")),
            )]),
        }
    }

    #[test]
    fn decodes_plain_gzip_and_snappy_batches() {
        for compression in [Compression::None, Compression::Gzip, Compression::Snappy] {
            let batches = decode_produced(&batch(compression, &[record("a")]), 1 << 20, 8).unwrap();
            let m = &batches[0].messages[0];
            assert_eq!(m.payload, &b"a"[..]);
            assert_eq!(m.key.as_deref(), Some(&b"k"[..]));
            assert_eq!(m.headers.get("h").map(String::as_str), Some("v"));
            assert!(batches[0].producer.is_none());
        }
    }

    #[test]
    fn refuses_what_it_cannot_take() {
        // zstd before Produce v7, as Kafka refuses it.
        let mut zstd = BytesMut::from(&batch(Compression::None, &[record("a")])[..]);
        zstd[ATTRIBUTES_AT + 1] |= 4;
        assert_eq!(
            decode_produced(&zstd.freeze(), 1 << 20, 6)
                .unwrap_err()
                .code,
            ResponseError::UnsupportedCompressionType
        );
        // Batches v2 only from Produce v3 on; a legacy set there is refused.
        let legacy = crate::legacy::tests::message(1, 0, 0, None, Some(b"v"));
        assert_eq!(
            decode_produced(&Bytes::from(legacy), 1 << 20, 3)
                .unwrap_err()
                .code,
            ResponseError::InvalidRecord
        );
        let mut corrupt = BytesMut::from(&batch(Compression::None, &[record("a")])[..]);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert_eq!(
            decode_produced(&corrupt.freeze(), 1 << 20, 8)
                .unwrap_err()
                .code,
            ResponseError::CorruptMessage
        );
        let short = batch(Compression::None, &[record("a")]).slice(..30);
        assert_eq!(
            decode_produced(&short, 1 << 20, 8).unwrap_err().code,
            ResponseError::CorruptMessage
        );
        let mut binary = record("a");
        binary.headers.insert(
            StrBytes::from_static_str("bin"),
            Some(Bytes::from_static(&[0xff, 0xfe])),
        );
        assert_eq!(
            decode_produced(&batch(Compression::None, &[binary]), 1 << 20, 8)
                .unwrap_err()
                .code,
            ResponseError::InvalidRecord
        );
        assert_eq!(
            decode_produced(&Bytes::new(), 1 << 20, 8).unwrap_err().code,
            ResponseError::CorruptMessage
        );
    }

    #[test]
    fn refuses_counts_the_bytes_cannot_hold_before_decoding() {
        // A batch claiming i32::MAX records.
        let mut claims = BytesMut::from(&batch(Compression::None, &[record("a")])[..]);
        claims[RECORD_COUNT_AT..RECORD_COUNT_AT + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        let refused = decode_produced(&claims.freeze(), 1 << 20, 8).unwrap_err();
        assert_eq!(refused.code, ResponseError::CorruptMessage);
        assert!(refused.message.contains("records"), "{}", refused.message);

        // A record claiming a billion headers: the last varint of the record is its header
        // count (no headers), replaced by a large one.
        let mut plain = record("a");
        plain.headers.clear();
        let encoded = batch(Compression::None, &[plain]);
        let mut records = encoded[BATCH_HEADER_LEN..].to_vec();
        assert_eq!(records.pop(), Some(0));
        records.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x08]);
        let err = check_record_counts(&records, 1).unwrap_err();
        assert_eq!(err.code, ResponseError::CorruptMessage);
    }

    #[test]
    fn gzip_output_is_bounded() {
        let records: Vec<Record> = (0..50).map(|_| record(&"z".repeat(1000))).collect();
        let mut offsets = records.clone();
        for (i, r) in offsets.iter_mut().enumerate() {
            // One batch: the codec batches records while offset − sequence is constant.
            r.offset = i as i64;
            r.sequence = i as i32;
        }
        let refused = decode_produced(&batch(Compression::Gzip, &offsets), 10_000, 8).unwrap_err();
        assert_eq!(refused.code, ResponseError::RecordListTooLarge);
        let batches = decode_produced(&batch(Compression::Gzip, &offsets), 1 << 20, 8).unwrap();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].messages.len(), 50);
    }
}
