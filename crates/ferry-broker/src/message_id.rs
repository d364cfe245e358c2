//! A message's identity: a ULID, so ids sort roughly by creation time and carry it, and a
//! producer can mint them offline without coordination.

use std::fmt;
use std::str::FromStr;

use ulid::Ulid;

use crate::error::{BrokerError, Result};
use crate::random::RandomSource;

/// A message id. Producers may supply one (then it is what dedup falls back on when no
/// dedup id is given); otherwise the broker generates one at publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(Ulid);

impl MessageId {
    /// All zeros: a placeholder, never generated (its timestamp would be 1970).
    pub const NIL: MessageId = MessageId(Ulid::nil());

    /// Length of the text form (Crockford base32).
    pub const TEXT_LEN: usize = ulid::ULID_LEN;

    /// A new id stamped with `now_ms` and 80 random bits.
    ///
    /// The time is passed in rather than read here so that the engine reads its clock once
    /// per publish and the id's timestamp equals the message's `published_at`. Times before
    /// the epoch or beyond the year 10889 (ULID's 48-bit range) are clamped.
    ///
    /// Ids generated in the same millisecond are not ordered among themselves: publish order
    /// is the log offset's job, not the id's.
    pub(crate) fn generate(now_ms: i64, rng: &mut impl RandomSource) -> MessageId {
        let max_ms = (1u64 << Ulid::TIME_BITS) - 1;
        let timestamp = u64::try_from(now_ms).unwrap_or(0).min(max_ms);
        let random = ((rng.next_u64() as u128) << 64 | rng.next_u64() as u128)
            & ((1u128 << Ulid::RAND_BITS) - 1);
        MessageId(Ulid::from_parts(timestamp, random))
    }

    /// The first id of a run of consecutive ids stamped with `now_ms` (see
    /// [`offset_by`](Self::offset_by)): a random part with its top bit clear, so that
    /// adding any `u32` stays within the 80 random bits and never reaches the timestamp.
    pub(crate) fn generate_run(now_ms: i64, rng: &mut impl RandomSource) -> MessageId {
        let id = Self::generate(now_ms, rng);
        MessageId(Ulid(id.0.0 & !(1u128 << (Ulid::RAND_BITS - 1))))
    }

    /// The id `k` places after this one in a run from [`generate_run`](Self::generate_run).
    pub(crate) fn offset_by(&self, k: u32) -> MessageId {
        MessageId(Ulid(self.0.0 + u128::from(k)))
    }

    /// Parses the 26-character text form, case-insensitively.
    pub fn parse(text: &str) -> Result<MessageId> {
        Ulid::from_string(text)
            .map(MessageId)
            .map_err(|e| BrokerError::InvalidMessageId {
                input: text.chars().take(64).collect(),
                problem: e.to_string(),
            })
    }

    pub const fn from_ulid(ulid: Ulid) -> MessageId {
        MessageId(ulid)
    }

    pub const fn as_ulid(&self) -> Ulid {
        self.0
    }

    /// Milliseconds since the Unix epoch when the id was minted.
    pub const fn timestamp_ms(&self) -> u64 {
        self.0.timestamp_ms()
    }

    /// The all-zero id, which publish refuses: it is what an unset id field looks like, and
    /// accepting it would make unrelated messages duplicates of each other.
    pub const fn is_nil(&self) -> bool {
        self.0.is_nil()
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl FromStr for MessageId {
    type Err = BrokerError;
    fn from_str(s: &str) -> Result<MessageId> {
        MessageId::parse(s)
    }
}

impl From<Ulid> for MessageId {
    fn from(ulid: Ulid) -> MessageId {
        MessageId(ulid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_id_carries_the_clock_time() {
        let mut rng = fastrand::Rng::with_seed(3);
        let id = MessageId::generate(1_700_000_000_123, &mut rng);
        assert_eq!(id.timestamp_ms(), 1_700_000_000_123);
        assert!(!id.is_nil());
    }

    #[test]
    fn generation_is_reproducible_from_a_seed_and_unique_across_draws() {
        let ids = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..1000)
                .map(|_| MessageId::generate(42, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(9), ids(9));
        let unique: std::collections::HashSet<_> = ids(9).into_iter().collect();
        assert_eq!(unique.len(), 1000);
    }

    #[test]
    fn a_run_of_the_largest_length_keeps_its_timestamp() {
        for seed in 0..64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let first = MessageId::generate_run(1_700_000_000_123, &mut rng);
            let last = first.offset_by(u32::MAX);
            assert_eq!(last.timestamp_ms(), 1_700_000_000_123);
            assert!(last > first);
        }
    }

    #[test]
    fn times_outside_the_ulid_range_are_clamped() {
        let mut rng = fastrand::Rng::with_seed(1);
        assert_eq!(MessageId::generate(-5, &mut rng).timestamp_ms(), 0);
        let max = (1u64 << 48) - 1;
        assert_eq!(MessageId::generate(i64::MAX, &mut rng).timestamp_ms(), max);
    }

    #[test]
    fn text_form_round_trips_and_parses_case_insensitively() {
        let mut rng = fastrand::Rng::with_seed(5);
        let id = MessageId::generate(1_700_000_000_000, &mut rng);
        let text = id.to_string();
        assert_eq!(text.len(), MessageId::TEXT_LEN);
        assert_eq!(text.parse::<MessageId>().unwrap(), id);
        assert_eq!(MessageId::parse(&text.to_lowercase()).unwrap(), id);
    }

    #[test]
    fn malformed_id_text_is_rejected_with_the_input() {
        let e = MessageId::parse("not-a-ulid").unwrap_err();
        assert!(matches!(e, BrokerError::InvalidMessageId { .. }));
        assert!(e.to_string().contains("not-a-ulid"), "{e}");
    }
}
