//! Bounded decompression of produced records: gzip, snappy, lz4 and zstd, each stopped as
//! soon as its output passes a limit (`kafka.max_frame_bytes`), so a small compression bomb
//! cannot make the process allocate without bound. The codec's own decompressors size
//! their output from the input's claims (snappy) or without bound (gzip), and its lz4 and
//! zstd build C libraries, so the endpoint decompresses every batch itself.
//!
//! Kafka's formats: gzip streams; snappy raw or in the xerial framing; lz4 in the LZ4
//! *frame* format (Kafka's `KafkaLZ4BlockOutputStream`); zstd frames. All four decoders
//! are pure Rust (`flate2` over `miniz_oxide`, `snap`, `lz4_flex`, `ruzstd`).

use std::io::Read;

/// A compression codec as Kafka numbers it in a batch's (or a legacy message's) attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    /// The codec of attribute bits `0..=2`; `Ok(None)` for none, `Err` for an unknown value.
    pub fn from_attributes(bits: i16) -> Result<Option<Codec>, i16> {
        match bits & 0x07 {
            0 => Ok(None),
            1 => Ok(Some(Codec::Gzip)),
            2 => Ok(Some(Codec::Snappy)),
            3 => Ok(Some(Codec::Lz4)),
            4 => Ok(Some(Codec::Zstd)),
            other => Err(other),
        }
    }
}

/// Why a compressed record set was not decompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// It decompresses to more than the limit.
    TooLarge,
    /// It does not decompress: what was wrong.
    Corrupt(String),
}

/// `data` decompressed with `codec`, at most `max_bytes` of it.
pub fn decompress(codec: Codec, data: &[u8], max_bytes: usize) -> Result<Vec<u8>, Failure> {
    if data.is_empty() {
        return Err(Failure::Corrupt(format!("the {codec:?} records are empty")));
    }
    let corrupt = |what: &str, e: &dyn std::fmt::Display| {
        Failure::Corrupt(format!("the {what} records do not decompress: {e}"))
    };
    match codec {
        Codec::Gzip => bounded(flate2::read::GzDecoder::new(data), max_bytes)
            .map_err(|e| e.unwrap_or_else(|e| corrupt("gzip", &e))),
        Codec::Snappy => snappy(data, max_bytes),
        Codec::Lz4 => bounded(lz4_flex::frame::FrameDecoder::new(data), max_bytes)
            .map_err(|e| e.unwrap_or_else(|e| corrupt("lz4", &e))),
        Codec::Zstd => zstd(data, max_bytes),
    }
}

/// Reads `reader` to its end within `max_bytes`: `Err(Ok(TooLarge))` past it, `Err(Err(e))`
/// when the reader fails.
fn bounded(
    reader: impl Read,
    max_bytes: usize,
) -> Result<Vec<u8>, Result<Failure, std::io::Error>> {
    let mut out = Vec::new();
    reader
        .take(max_bytes as u64 + 1)
        .read_to_end(&mut out)
        .map_err(Err)?;
    if out.len() > max_bytes {
        return Err(Ok(Failure::TooLarge));
    }
    Ok(out)
}

/// Zstd: one or more frames back to back, as Kafka's decoder reads them.
fn zstd(mut data: &[u8], max_bytes: usize) -> Result<Vec<u8>, Failure> {
    let corrupt = |e: &dyn std::fmt::Display| {
        Failure::Corrupt(format!("the zstd records do not decompress: {e}"))
    };
    let mut out = Vec::new();
    while !data.is_empty() {
        let decoder =
            ruzstd::decoding::StreamingDecoder::new(&mut data).map_err(|e| corrupt(&e))?;
        let left = (max_bytes - out.len()) as u64;
        decoder
            .take(left + 1)
            .read_to_end(&mut out)
            .map_err(|e| corrupt(&e))?;
        if out.len() > max_bytes {
            return Err(Failure::TooLarge);
        }
    }
    Ok(out)
}

/// Kafka's snappy: the xerial framing (a magic header, then length-prefixed raw blocks) or,
/// without the header, one raw block, as Kafka's own decoder accepts.
pub(crate) fn snappy(data: &[u8], max_bytes: usize) -> Result<Vec<u8>, Failure> {
    const MAGIC: &[u8] = b"\x82SNAPPY\x00";
    const XERIAL_HEADER: usize = 16;
    let corrupt = |e: &dyn std::fmt::Display| {
        Failure::Corrupt(format!("the snappy records do not decompress: {e}"))
    };
    let raw = |block: &[u8], out: &mut Vec<u8>| -> Result<(), Failure> {
        let len = snap::raw::decompress_len(block).map_err(|e| corrupt(&e))?;
        if out.len().saturating_add(len) > max_bytes {
            return Err(Failure::TooLarge);
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new()
            .decompress(block, &mut out[start..])
            .map_err(|e| corrupt(&e))?;
        Ok(())
    };
    let mut out = Vec::new();
    if !data.starts_with(MAGIC) {
        raw(data, &mut out)?;
        return Ok(out);
    }
    let mut rest = data
        .get(XERIAL_HEADER..)
        .ok_or_else(|| corrupt(&"a snappy header cut short"))?;
    while !rest.is_empty() {
        let len = rest
            .get(..4)
            .map(|b| u32::from_be_bytes(b.try_into().expect("four bytes")) as usize)
            .filter(|&len| len <= rest.len() - 4)
            .ok_or_else(|| corrupt(&"a snappy block cut short"))?;
        raw(&rest[4..4 + len], &mut out)?;
        rest = &rest[4 + len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn lz4(data: &[u8]) -> Vec<u8> {
        let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    fn zstd_frame(data: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
    }

    #[test]
    fn lz4_frames_and_zstd_frames_round_trip() {
        let data = b"kafka records ".repeat(100);
        assert_eq!(decompress(Codec::Lz4, &lz4(&data), 1 << 20).unwrap(), data);
        assert_eq!(
            decompress(Codec::Zstd, &zstd_frame(&data), 1 << 20).unwrap(),
            data
        );
        // Two zstd frames back to back are one record set.
        let mut two = zstd_frame(b"first ");
        two.extend(zstd_frame(b"second"));
        assert_eq!(
            decompress(Codec::Zstd, &two, 1 << 20).unwrap(),
            b"first second"
        );
    }

    #[test]
    fn output_past_the_limit_is_refused_for_every_codec() {
        let data = vec![b'z'; 100_000];
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gzip.write_all(&data).unwrap();
        let gzip = gzip.finish().unwrap();
        let snappy = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        for (codec, compressed) in [
            (Codec::Gzip, gzip),
            (Codec::Snappy, snappy),
            (Codec::Lz4, lz4(&data)),
            (Codec::Zstd, zstd_frame(&data)),
        ] {
            assert_eq!(
                decompress(codec, &compressed, 10_000),
                Err(Failure::TooLarge),
                "{codec:?}"
            );
            assert_eq!(decompress(codec, &compressed, 100_000).unwrap(), data);
        }
    }

    #[test]
    fn garbage_is_corrupt_not_a_panic() {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            for garbage in [
                &b""[..],
                b"\x04\x22\x4d\x18garbage",
                b"\x28\xb5\x2f\xfd\x00",
            ] {
                assert!(
                    matches!(
                        decompress(codec, garbage, 1 << 20),
                        Err(Failure::Corrupt(_))
                    ),
                    "{codec:?} {garbage:?}"
                );
            }
        }
        // A snappy block claiming more than the limit is refused before it is allocated.
        assert_eq!(
            snappy(&[0xff, 0xff, 0xff, 0xff, 0x0f], 1 << 20),
            Err(Failure::TooLarge)
        );
    }
}
