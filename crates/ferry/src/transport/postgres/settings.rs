//! A declaration as the `settings` column keeps it: every field, so a redeclaration with
//! other settings is a `Conflict`, and so publishes and settlements apply the settings the
//! queue was made with.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::declared::Declared;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::{Backoff, DeliveryPolicy, KeyOrdering, QueueDecl};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Settings {
    pub max_deliveries: u32,
    pub backoff_base_us: u64,
    pub backoff_cap_us: u64,
    pub backoff_multiplier: f64,
    pub backoff_jitter: f64,
    pub dead_letter: bool,
    pub lease_us: u64,
    pub default_ttl_us: Option<u64>,
    pub max_delay_us: u64,
    pub priority_levels: u8,
    pub ordered: bool,
    pub dedup_window_us: Option<u64>,
    pub max_length: Option<u64>,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Settings {
    pub fn of_delivery(delivery: &DeliveryPolicy) -> Settings {
        Settings {
            max_deliveries: delivery.max_deliveries,
            backoff_base_us: micros(delivery.backoff.base),
            backoff_cap_us: micros(delivery.backoff.cap),
            backoff_multiplier: delivery.backoff.multiplier,
            backoff_jitter: delivery.backoff.jitter,
            dead_letter: delivery.dead_letter,
            lease_us: micros(delivery.lease),
            default_ttl_us: delivery.default_ttl.map(micros),
            max_delay_us: micros(delivery.max_delay),
            priority_levels: delivery.priority_levels,
            ordered: delivery.ordering == KeyOrdering::PerKey,
            dedup_window_us: None,
            max_length: None,
        }
    }

    pub fn of_queue(decl: &QueueDecl) -> Settings {
        Settings {
            dedup_window_us: decl.dedup_window.map(micros),
            max_length: decl.max_length,
            ..Settings::of_delivery(&decl.delivery)
        }
    }

    /// What dead letters are consumed with: the origin's lease and backoff, never dead-
    /// lettered again (a dead letter nacked comes back until it is acked or rejected).
    pub fn for_dead_letters(&self) -> Settings {
        Settings {
            max_deliveries: u32::MAX,
            dead_letter: false,
            default_ttl_us: None,
            ordered: false,
            dedup_window_us: None,
            max_length: None,
            ..self.clone()
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("settings always encode")
    }

    pub fn from_json(text: &str) -> Result<Settings> {
        serde_json::from_str(text).map_err(|e| Error::Transport {
            transport: "postgres",
            message: format!("a declaration in ferry.queues does not decode: {e}"),
            source: Some(Box::new(e)),
        })
    }

    /// Equal, floats within rounding: jsonb keeps numbers as decimals, so a multiplier may
    /// come back one unit in the last place off.
    pub fn same_as(&self, other: &Settings) -> bool {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        let mut a = self.clone();
        let b = other;
        if !close(a.backoff_multiplier, b.backoff_multiplier)
            || !close(a.backoff_jitter, b.backoff_jitter)
        {
            return false;
        }
        a.backoff_multiplier = b.backoff_multiplier;
        a.backoff_jitter = b.backoff_jitter;
        a.to_json() == b.to_json()
    }

    /// In the SDK's words, for a refused redeclaration.
    pub fn declared(&self) -> Declared {
        let us = Duration::from_micros;
        Declared::default()
            .max_deliveries(self.max_deliveries)
            .backoff(
                us(self.backoff_base_us),
                us(self.backoff_cap_us),
                self.backoff_multiplier,
                self.backoff_jitter,
            )
            .dead_letter(self.dead_letter)
            .lease(us(self.lease_us))
            .default_ttl(self.default_ttl_us.map(us))
            .max_delay(us(self.max_delay_us))
            .priority_levels(self.priority_levels)
            .ordering(self.ordered)
            .dedup_window(self.dedup_window_us.map(us))
            .max_length(self.max_length)
    }

    pub fn lease(&self) -> Duration {
        Duration::from_micros(self.lease_us)
    }

    pub fn max_delay(&self) -> Duration {
        Duration::from_micros(self.max_delay_us)
    }

    pub fn default_ttl(&self) -> Option<Duration> {
        self.default_ttl_us.map(Duration::from_micros)
    }

    pub fn dedup_window(&self) -> Option<Duration> {
        self.dedup_window_us.map(Duration::from_micros)
    }

    /// The wait before the next delivery after `attempt` failed.
    pub fn backoff(&self, attempt: u32) -> Duration {
        Backoff {
            base: Duration::from_micros(self.backoff_base_us),
            cap: Duration::from_micros(self.backoff_cap_us),
            multiplier: self.backoff_multiplier,
            jitter: self.backoff_jitter,
        }
        .delay(attempt, fastrand::f64())
    }

    /// Refuses a message whose priority is above the queue's top level, as the Ferry broker
    /// does: a producer asking for a level the queue does not have has mistaken the queue,
    /// and taking it as the top level would let it overtake every message published at the
    /// levels the queue declares. Checked for a publish to the queue, for the whole batch
    /// before anything is stored; a topic's publish cannot know each subscription's levels,
    /// so there [`priority`](Self::priority) queues it at the subscription's top level.
    pub fn check_priority(&self, queue: &str, message: &Message) -> Result<()> {
        if message.priority < self.priority_levels.max(1) {
            return Ok(());
        }
        let top = self.priority_levels.max(1) - 1;
        Err(Error::invalid(
            format!(
                "priority of message {}",
                message.id.as_deref().unwrap_or("")
            ),
            format!(
                "{} is above the top level of queue `{queue}`, which has {} priority level(s), \
                 0 to {top}; publish with a priority from 0 to {top}, or declare the queue with \
                 more levels",
                message.priority,
                self.priority_levels.max(1)
            ),
        ))
    }

    /// The stored priority: a priority above the declared levels (which only a topic's
    /// publish lets through) counts as the highest level.
    pub fn priority(&self, priority: u8) -> i16 {
        i16::from(priority.min(self.priority_levels.saturating_sub(1)))
    }
}
