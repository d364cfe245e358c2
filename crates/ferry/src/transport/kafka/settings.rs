//! A declaration as the catalog keeps it: JSON, one record per name, so every process
//! reading a source acts on the same policy and a second declaration is compared with the
//! first.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::capabilities::NAME;
use super::names;
use crate::declared::Declared;
use crate::error::{Error, Result};
use crate::spec::{Backoff, DeliveryPolicy, KeyOrdering};

/// What a name was declared as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(super) enum Entry {
    Queue { policy: Policy },
    Topic { partitions: i32 },
    Subscription { topic: String, policy: Policy },
}

impl Entry {
    pub fn kind(&self) -> &'static str {
        match self {
            Entry::Queue { .. } => "queue",
            Entry::Topic { .. } => "topic",
            Entry::Subscription { .. } => "subscription",
        }
    }
}

/// A delivery policy in the fields this transport keeps (TTL and priorities are refused).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Policy {
    pub max_deliveries: u32,
    pub backoff_base_ms: u64,
    pub backoff_cap_ms: u64,
    pub backoff_multiplier: f64,
    pub backoff_jitter: f64,
    pub dead_letter: bool,
    pub lease_ms: u64,
    pub max_delay_ms: u64,
    pub ordering: bool,
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

impl Policy {
    /// The policy to keep, or `Unsupported` for a delay the ladder cannot hold.
    pub fn of(delivery: &DeliveryPolicy) -> Result<Policy> {
        if delivery.backoff.cap > names::LONGEST {
            return Err(Error::unsupported(
                NAME,
                "retry delay and backoff",
                "the retry topics' ladder ends at 24 h, so a backoff cap above it is refused",
            ));
        }
        if delivery.max_delay > names::LONGEST {
            return Err(Error::unsupported(
                NAME,
                "delayed delivery",
                "the retry topics' ladder ends at 24 h, so a max delay above it is refused",
            ));
        }
        let b = &delivery.backoff;
        Ok(Policy {
            max_deliveries: delivery.max_deliveries,
            backoff_base_ms: ms(b.base),
            backoff_cap_ms: ms(b.cap),
            backoff_multiplier: b.multiplier,
            backoff_jitter: b.jitter,
            dead_letter: delivery.dead_letter,
            lease_ms: ms(delivery.lease),
            max_delay_ms: ms(delivery.max_delay),
            ordering: delivery.ordering == KeyOrdering::PerKey,
        })
    }

    pub fn delivery(&self) -> DeliveryPolicy {
        DeliveryPolicy {
            max_deliveries: self.max_deliveries,
            backoff: Backoff {
                base: Duration::from_millis(self.backoff_base_ms),
                cap: Duration::from_millis(self.backoff_cap_ms),
                multiplier: self.backoff_multiplier,
                jitter: self.backoff_jitter,
            },
            dead_letter: self.dead_letter,
            lease: Duration::from_millis(self.lease_ms),
            default_ttl: None,
            max_delay: Duration::from_millis(self.max_delay_ms),
            priority_levels: 1,
            ordering: if self.ordering {
                KeyOrdering::PerKey
            } else {
                KeyOrdering::None
            },
        }
    }

    pub fn declared(&self) -> Declared {
        Declared::of_delivery(&self.delivery())
    }

    /// The retry topics this source has: enough rungs for its longest backoff and delay.
    pub fn rungs(&self) -> usize {
        let longest = self.backoff_cap_ms.max(self.max_delay_ms);
        names::rungs_for(Duration::from_millis(longest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_as_written() {
        let entry = Entry::Subscription {
            topic: "t".into(),
            policy: Policy::of(&DeliveryPolicy::default()).unwrap(),
        };
        let json = serde_json::to_vec(&entry).unwrap();
        assert_eq!(serde_json::from_slice::<Entry>(&json).unwrap(), entry);
        let Entry::Subscription { policy, .. } = entry else {
            unreachable!()
        };
        assert_eq!(policy.delivery(), DeliveryPolicy::default());
    }

    #[test]
    fn delays_beyond_the_ladder_are_unsupported() {
        let mut p = DeliveryPolicy::default();
        p.backoff.cap = Duration::from_secs(2 * 86_400);
        assert!(matches!(Policy::of(&p), Err(Error::Unsupported { .. })));
    }
}
