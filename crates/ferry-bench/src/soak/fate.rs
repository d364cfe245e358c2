//! What each soak message is to suffer, fixed by its number so a run's traffic mix is the
//! same every time and every message's expected end can be checked.

/// The header carrying a message's fate.
pub const FATE_HEADER: &str = "soak-fate";

/// How the consumers treat a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fate {
    /// Acked on its first delivery.
    Ok,
    /// Nacked on its first delivery (the broker's backoff applies), acked on the next.
    RetryOnce,
    /// Nacked on every delivery: dead-lettered when it runs out of deliveries.
    Poison,
    /// Rejected at once: dead-lettered on its first delivery.
    Reject,
}

impl Fate {
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Ok => "ok",
            Fate::RetryOnce => "retry-once",
            Fate::Poison => "poison",
            Fate::Reject => "reject",
        }
    }

    pub fn parse(text: &str) -> Option<Fate> {
        [Fate::Ok, Fate::RetryOnce, Fate::Poison, Fate::Reject]
            .into_iter()
            .find(|f| f.as_str() == text)
    }

    /// Whether the message should end in the dead-letter queue.
    pub fn dies(self) -> bool {
        matches!(self, Fate::Poison | Fate::Reject)
    }
}

/// The share of each fate, in messages per thousand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    pub retry_per_mille: u32,
    pub poison_per_mille: u32,
    pub reject_per_mille: u32,
}

impl Default for Mix {
    /// 5 % retried once, 0.5 % poison and 0.5 % rejected: steady retry and dead-letter
    /// traffic without the dead-letter queue dominating.
    fn default() -> Mix {
        Mix {
            retry_per_mille: 50,
            poison_per_mille: 5,
            reject_per_mille: 5,
        }
    }
}

impl Mix {
    /// The fate of message `n`. Multiplying by a prime coprime to 1000 walks every bucket of
    /// each thousand consecutive messages once, so each fate is spread evenly through the
    /// run instead of coming in bursts.
    pub fn fate(&self, n: u64) -> Fate {
        let bucket = (n.wrapping_mul(7919) % 1000) as u32;
        let poison = self.poison_per_mille;
        let reject = poison + self.reject_per_mille;
        let retry = reject + self.retry_per_mille;
        if bucket < poison {
            Fate::Poison
        } else if bucket < reject {
            Fate::Reject
        } else if bucket < retry {
            Fate::RetryOnce
        } else {
            Fate::Ok
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        let total = self.retry_per_mille + self.poison_per_mille + self.reject_per_mille;
        if total > 1000 {
            return Err(format!("the fates add up to {total} per mille, above 1000"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thousand_messages_hold_each_fate_exactly_its_share() {
        let mix = Mix::default();
        for start in [0u64, 1_000, 7_000_000] {
            let mut counts = std::collections::HashMap::new();
            for n in start..start + 1000 {
                *counts.entry(mix.fate(n)).or_insert(0u32) += 1;
            }
            assert_eq!(counts[&Fate::Poison], 5);
            assert_eq!(counts[&Fate::Reject], 5);
            assert_eq!(counts[&Fate::RetryOnce], 50);
            assert_eq!(counts[&Fate::Ok], 940);
        }
    }

    #[test]
    fn fates_round_trip_through_their_header_text() {
        for fate in [Fate::Ok, Fate::RetryOnce, Fate::Poison, Fate::Reject] {
            assert_eq!(Fate::parse(fate.as_str()), Some(fate));
        }
        assert_eq!(Fate::parse("lost"), None);
    }

    #[test]
    fn a_mix_above_the_whole_is_refused() {
        let mix = Mix {
            retry_per_mille: 900,
            poison_per_mille: 100,
            reject_per_mille: 1,
        };
        assert!(mix.validate().is_err());
        assert!(Mix::default().validate().is_ok());
    }
}
