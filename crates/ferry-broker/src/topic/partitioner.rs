//! Key → partition, exactly as Kafka's default partitioner places keyed records:
//! `(murmur2(key) & 0x7fffffff) % partitions`, with Kafka's murmur2 (seed `0x9747b28c`).
//!
//! Exactly Kafka's, not merely "a stable hash": a producer migrating between Ferry and Kafka
//! (or mirroring one into the other) keeps every key in the partition of the same number,
//! so per-key order and any per-partition state downstream carry over. A hand-written 30
//! lines rather than a crate: what matters is bit-for-bit agreement with Kafka, which the
//! tests check against Kafka's own vectors (`UtilsTest.testMurmur2`).

/// Kafka's seed for `Utils.murmur2`.
const SEED: u32 = 0x9747_b28c;

/// Kafka's `Utils.murmur2`: 32-bit MurmurHash2 over `data`, returned as Java's signed int.
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    // Java's switch falls through from the highest remaining byte down.
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `key` among `partitions` (at least 1), as Kafka's default
/// partitioner computes it (`Utils.toPositive(Utils.murmur2(key)) % numPartitions`).
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    debug_assert!(partitions > 0, "a topic has at least one partition");
    (murmur2(key) as u32 & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafkas_test_vectors() {
        // Kafka's clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java.
        let cases: [(&str, i32); 6] = [
            ("21", -973_932_308),
            ("foobar", -790_332_482),
            ("a-little-bit-long-string", -985_981_536),
            ("a-little-bit-longer-string", -1_486_304_829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            ("abc", 479_470_107),
        ];
        for (key, hash) in cases {
            assert_eq!(murmur2(key.as_bytes()), hash, "{key}");
        }
    }

    #[test]
    fn partition_is_the_positive_hash_modulo_the_partition_count() {
        // "foobar" hashes to -790332482; & 0x7fffffff gives 1357151166.
        assert_eq!(partition_for_key(b"foobar", 1), 0);
        assert_eq!(partition_for_key(b"foobar", 7), 1_357_151_166 % 7);
        assert_eq!(partition_for_key(b"abc", 10), 479_470_107 % 10);
        for partitions in 1..50 {
            assert!(partition_for_key(b"anything", partitions) < partitions);
        }
    }

    #[test]
    fn every_tail_length_is_hashed() {
        // Keys of lengths 0..8 share prefixes; each tail byte must change the hash.
        let hashes: Vec<i32> = (0..8).map(|n| murmur2(&b"abcdefgh"[..n])).collect();
        let mut unique = hashes.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), hashes.len(), "{hashes:?}");
    }
}
