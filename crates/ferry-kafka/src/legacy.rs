//! Legacy message sets (message format v0 and v1, "magic" 0 and 1), which Produce v0–2
//! carries: `offset i64, size i32, crc i32, magic i8, attributes i8, [timestamp i64 (v1)],
//! key bytes, value bytes`, each message with its own CRC-32 (IEEE) over everything after
//! the CRC. A compressed message is a wrapper whose value is a whole inner message set,
//! compressed; Kafka nests no deeper than one wrapper.
//!
//! Hand-written because the codec (`kafka-protocol` 0.18) decodes record batch v2 only
//! ("message sets v0/v1 are unsupported"). The layout is small and fixed, and the decoder
//! is bounded: it allocates only for messages whose bytes it has read, decompresses within
//! `max_bytes` (`decompress.rs`), and refuses what it cannot take with a typed error,
//! storing nothing of the partition's records then.

use bytes::Bytes;
use ferry_broker::OutgoingMessage;
use kafka_protocol::ResponseError;

use crate::decompress::{Codec, decompress};
use crate::records::{RecordsRefused, keep_created_at, refused_decompressing};

/// Offset, size, CRC, magic, attributes, key length, value length.
const MIN_MESSAGE_V0: usize = 8 + 4 + 4 + 1 + 1 + 4 + 4;
/// Attribute bit 3 (magic 1): the timestamp is the broker's (LogAppendTime).
const LOG_APPEND_TIME_BIT: u8 = 0x08;

/// One message of a legacy set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyMessage {
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    /// The producer's CreateTime (magic 1 with the CreateTime type); `None` for magic 0.
    pub timestamp: Option<i64>,
}

fn corrupt(problem: impl Into<String>) -> RecordsRefused {
    RecordsRefused {
        code: ResponseError::CorruptMessage,
        message: problem.into(),
    }
}

/// Decodes a legacy message set into Ferry messages (compressed wrappers unwrapped); on any
/// error nothing is taken.
pub fn decode(set: &Bytes, max_bytes: usize) -> Result<Vec<OutgoingMessage>, RecordsRefused> {
    let mut out = Vec::new();
    decode_set(set, max_bytes, false, &mut out)?;
    if out.is_empty() {
        return Err(corrupt("the message set holds no message"));
    }
    Ok(out
        .into_iter()
        .map(|m| {
            let mut message = OutgoingMessage::new(m.value.unwrap_or_default());
            message.key = m.key;
            if let Some(timestamp) = m.timestamp {
                keep_created_at(&mut message, timestamp);
            }
            message
        })
        .collect())
}

/// Decodes the messages of `set` into `out`; `inner` for the set inside a wrapper.
pub fn decode_set(
    set: &Bytes,
    max_bytes: usize,
    inner: bool,
    out: &mut Vec<LegacyMessage>,
) -> Result<(), RecordsRefused> {
    let mut rest = &set[..];
    while !rest.is_empty() {
        if rest.len() < MIN_MESSAGE_V0 {
            // Kafka's clients may cut the last message of a fetch short, never a produce.
            return Err(corrupt(format!(
                "a legacy message is cut short at {} bytes",
                rest.len()
            )));
        }
        let size = i32::from_be_bytes(rest[8..12].try_into().expect("four bytes"));
        let size = usize::try_from(size)
            .ok()
            .filter(|&size| size <= rest.len() - 12)
            .ok_or_else(|| corrupt(format!("a legacy message claims {size} bytes")))?;
        let body = set.slice_ref(&rest[12..12 + size]);
        rest = &rest[12 + size..];
        let message = decode_message(&body)?;
        match message {
            Decoded::Plain(message) => out.push(message),
            Decoded::Wrapper { .. } if inner => {
                return Err(corrupt("a compressed message inside a compressed message"));
            }
            Decoded::Wrapper {
                codec,
                value,
                log_append_time,
            } => {
                let inner_set = decompress(codec, &value, max_bytes)
                    .map_err(|e| refused_decompressing(e, max_bytes))?;
                let start = out.len();
                decode_set(&Bytes::from(inner_set), max_bytes, true, out)?;
                if log_append_time {
                    // The wrapper's LogAppendTime stands for every inner message: the
                    // broker's own time, as for any message without a CreateTime.
                    for m in &mut out[start..] {
                        m.timestamp = None;
                    }
                }
            }
        }
    }
    Ok(())
}

enum Decoded {
    Plain(LegacyMessage),
    Wrapper {
        codec: Codec,
        value: Bytes,
        log_append_time: bool,
    },
}

/// One message: `crc i32, magic i8, attributes i8, [timestamp i64], key, value`.
fn decode_message(body: &Bytes) -> Result<Decoded, RecordsRefused> {
    let crc = u32::from_be_bytes(
        body.get(..4)
            .ok_or_else(|| corrupt("a legacy message without a CRC"))?
            .try_into()
            .expect("four bytes"),
    );
    let checked = &body[4..];
    if crc32fast::hash(checked) != crc {
        return Err(corrupt("a legacy message fails its CRC"));
    }
    let mut at = 4;
    let take = |at: &mut usize, n: usize| -> Result<Bytes, RecordsRefused> {
        if body.len() - *at < n {
            return Err(corrupt("a legacy message ends inside a field"));
        }
        *at += n;
        Ok(body.slice(*at - n..*at))
    };
    let magic = take(&mut at, 1)?[0];
    let attributes = take(&mut at, 1)?[0];
    let timestamp = match magic {
        0 => None,
        1 => Some(i64::from_be_bytes(
            take(&mut at, 8)?[..].try_into().expect("eight bytes"),
        )),
        other => {
            return Err(corrupt(format!(
                "magic {other} inside a legacy message set"
            )));
        }
    };
    let bytes = |at: &mut usize| -> Result<Option<Bytes>, RecordsRefused> {
        let len = i32::from_be_bytes(take(at, 4)?[..].try_into().expect("four bytes"));
        match len {
            -1 => Ok(None),
            len if len >= 0 => take(at, len as usize).map(Some),
            len => Err(corrupt(format!("a legacy field claims {len} bytes"))),
        }
    };
    let key = bytes(&mut at)?;
    let value = bytes(&mut at)?;
    if at != body.len() {
        return Err(corrupt("bytes after a legacy message's value"));
    }
    let log_append_time = magic == 1 && attributes & LOG_APPEND_TIME_BIT != 0;
    match Codec::from_attributes(i16::from(attributes)) {
        Ok(None) => Ok(Decoded::Plain(LegacyMessage {
            key,
            value,
            timestamp: timestamp.filter(|_| !log_append_time).filter(|&t| t >= 0),
        })),
        // Kafka 0.8–0.9 wrote lz4 with magic 0 with a wrong frame header checksum
        // (KAFKA-3160), which a conforming lz4 decoder refuses.
        Ok(Some(Codec::Lz4)) if magic == 0 => Err(RecordsRefused {
            code: ResponseError::UnsupportedCompressionType,
            message: "lz4 with magic 0 (its frame checksum predates KAFKA-3160) is not \
                      taken; use magic 1 or gzip/snappy"
                .into(),
        }),
        // zstd came with record batch v2 and never existed for legacy messages.
        Ok(Some(Codec::Zstd)) => Err(RecordsRefused {
            code: ResponseError::UnsupportedCompressionType,
            message: "zstd needs record batch v2 (Produce v7 or later)".into(),
        }),
        Ok(Some(codec)) => Ok(Decoded::Wrapper {
            codec,
            value: value.ok_or_else(|| corrupt("a compressed legacy message with a null value"))?,
            log_append_time,
        }),
        Err(other) => Err(corrupt(format!("unknown compression codec {other}"))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;

    use super::*;

    /// A legacy message (offset, size, CRC, …) as Kafka's clients write it.
    pub(crate) fn message(
        magic: u8,
        attributes: u8,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut body = vec![magic, attributes];
        if magic == 1 {
            body.extend_from_slice(&timestamp.to_be_bytes());
        }
        for field in [key, value] {
            match field {
                None => body.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(b) => {
                    body.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    body.extend_from_slice(b);
                }
            }
        }
        let mut out = 0i64.to_be_bytes().to_vec();
        out.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(data).unwrap();
        gz.finish().unwrap()
    }

    fn decoded(set: Vec<u8>) -> Result<Vec<LegacyMessage>, RecordsRefused> {
        let mut out = Vec::new();
        decode_set(&Bytes::from(set), 1 << 20, false, &mut out).map(|()| out)
    }

    #[test]
    fn decodes_magic_0_and_1_with_keys_nulls_and_timestamps() {
        let mut set = message(0, 0, 0, Some(b"k"), Some(b"v0"));
        set.extend(message(1, 0, 1_700_000_000_000, None, Some(b"v1")));
        set.extend(message(1, 0, 5, Some(b"k"), None));
        let got = decoded(set).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(got[0].value.as_deref(), Some(&b"v0"[..]));
        assert_eq!(got[0].timestamp, None);
        assert_eq!(got[1].timestamp, Some(1_700_000_000_000));
        assert_eq!(got[1].key, None);
        assert_eq!(got[2].value, None);
    }

    #[test]
    fn unwraps_compressed_wrappers() {
        let mut inner = message(1, 0, 7, None, Some(b"a"));
        inner.extend(message(1, 0, 8, None, Some(b"b")));
        let set = message(1, 1, 8, None, Some(&gzip(&inner)));
        let got = decoded(set).unwrap();
        assert_eq!(
            got.iter().map(|m| m.timestamp).collect::<Vec<_>>(),
            [Some(7), Some(8)]
        );
        let snappy = snap::raw::Encoder::new().compress_vec(&inner).unwrap();
        assert_eq!(
            decoded(message(0, 2, 0, None, Some(&snappy)))
                .unwrap()
                .len(),
            2
        );
        let mut lz4 = lz4_flex::frame::FrameEncoder::new(Vec::new());
        lz4.write_all(&inner).unwrap();
        let lz4 = lz4.finish().unwrap();
        assert_eq!(
            decoded(message(1, 3, 0, None, Some(&lz4))).unwrap().len(),
            2
        );
        // A wrapper stamped LogAppendTime: the inner CreateTimes do not stand.
        let got = decoded(message(
            1,
            1 | LOG_APPEND_TIME_BIT,
            9,
            None,
            Some(&gzip(&inner)),
        ))
        .unwrap();
        assert!(got.iter().all(|m| m.timestamp.is_none()));
    }

    #[test]
    fn refuses_bad_crcs_bad_sizes_nesting_and_bombs_with_typed_errors() {
        let mut bad_crc = message(1, 0, 0, None, Some(b"v"));
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 1;
        assert_eq!(
            decoded(bad_crc).unwrap_err().code,
            ResponseError::CorruptMessage
        );

        let mut too_long = message(1, 0, 0, None, Some(b"v"));
        too_long[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(
            decoded(too_long).unwrap_err().code,
            ResponseError::CorruptMessage
        );

        let cut = message(1, 0, 0, None, Some(b"value"));
        assert_eq!(
            decoded(cut[..cut.len() - 2].to_vec()).unwrap_err().code,
            ResponseError::CorruptMessage
        );

        let inner = message(
            1,
            1,
            0,
            None,
            Some(&gzip(&message(1, 0, 0, None, Some(b"x")))),
        );
        let nested = message(1, 1, 0, None, Some(&gzip(&inner)));
        assert_eq!(
            decoded(nested).unwrap_err().code,
            ResponseError::CorruptMessage
        );

        let big = message(1, 0, 0, None, Some(&vec![b'z'; 200_000]));
        let bomb = message(1, 1, 0, None, Some(&gzip(&big)));
        let mut out = Vec::new();
        let refused = decode_set(&Bytes::from(bomb), 10_000, false, &mut out).unwrap_err();
        assert_eq!(refused.code, ResponseError::RecordListTooLarge);

        let old_lz4 = message(0, 3, 0, None, Some(b"whatever"));
        assert_eq!(
            decoded(old_lz4).unwrap_err().code,
            ResponseError::UnsupportedCompressionType
        );
        let zstd = message(1, 4, 0, None, Some(b"whatever"));
        assert_eq!(
            decoded(zstd).unwrap_err().code,
            ResponseError::UnsupportedCompressionType
        );
        assert_eq!(
            decode(&Bytes::new(), 1 << 20).unwrap_err().code,
            ResponseError::CorruptMessage
        );
    }
}
