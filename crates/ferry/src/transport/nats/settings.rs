//! The declaration behind a stream or consumer, kept in its description: JetStream 2.9 has
//! no metadata map, and the SDK needs the delivery policy where it consumes (max deliveries,
//! backoff, whether to dead-letter) and must tell a repeated declaration from a conflicting
//! one.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::declared::Declared;
use crate::error::{Error, Result};
use crate::spec::{DeliveryPolicy, QueueDecl};
use crate::transport::stored_backoff::StoredBackoff;

/// The settings the SDK needs back, in a stable JSON form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// `"ferry-queue"` or `"ferry-subscription"`: what declared it.
    pub kind: String,
    pub max_deliveries: u32,
    #[serde(flatten)]
    pub backoff: StoredBackoff,
    pub dead_letter: bool,
    pub lease_ms: u64,
    pub max_delay_ms: u64,
    #[serde(default)]
    pub dedup_window_ms: Option<u64>,
    #[serde(default)]
    pub max_length: Option<u64>,
    /// The topic of a subscription.
    #[serde(default)]
    pub topic: Option<String>,
}

pub const QUEUE: &str = "ferry-queue";
pub const SUBSCRIPTION: &str = "ferry-subscription";

impl Settings {
    fn from_delivery(kind: &str, delivery: &DeliveryPolicy) -> Settings {
        Settings {
            kind: kind.to_owned(),
            max_deliveries: delivery.max_deliveries,
            backoff: StoredBackoff {
                backoff_base_ms: delivery.backoff.base.as_millis() as u64,
                backoff_cap_ms: delivery.backoff.cap.as_millis() as u64,
                backoff_multiplier: delivery.backoff.multiplier,
                backoff_jitter: delivery.backoff.jitter,
            },
            dead_letter: delivery.dead_letter,
            lease_ms: delivery.lease.as_millis() as u64,
            max_delay_ms: delivery.max_delay.as_millis() as u64,
            dedup_window_ms: None,
            max_length: None,
            topic: None,
        }
    }

    pub fn queue(decl: &QueueDecl) -> Settings {
        Settings {
            dedup_window_ms: decl.dedup_window.map(|w| w.as_millis() as u64),
            max_length: decl.max_length,
            ..Settings::from_delivery(QUEUE, &decl.delivery)
        }
    }

    pub fn subscription(topic: &str, delivery: &DeliveryPolicy) -> Settings {
        Settings {
            topic: Some(topic.to_owned()),
            ..Settings::from_delivery(SUBSCRIPTION, delivery)
        }
    }

    /// In the SDK's words, for a refused redeclaration: the fields this transport keeps.
    pub fn declared(&self) -> Declared {
        let b = self.backoff.to_backoff();
        Declared::default()
            .max_deliveries(self.max_deliveries)
            .backoff(b.base, b.cap, b.multiplier, b.jitter)
            .dead_letter(self.dead_letter)
            .lease(self.lease())
            .max_delay(Duration::from_millis(self.max_delay_ms))
            .dedup_window(self.dedup_window_ms.map(Duration::from_millis))
            .max_length(self.max_length)
    }

    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms)
    }

    pub fn to_description(&self) -> String {
        serde_json::to_string(self).expect("settings serialize")
    }

    /// The settings in `description`; an error when the stream or consumer was not made by
    /// the SDK (or by an incompatible version of it).
    pub fn from_description(what: &str, description: Option<&str>) -> Result<Settings> {
        description
            .and_then(|d| serde_json::from_str(d).ok())
            .ok_or_else(|| {
                Error::invalid(
                    what.to_owned(),
                    "exists in NATS but was not declared through Ferry (its description holds no Ferry settings)",
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_survive_the_description() {
        let decl = QueueDecl::new("q")
            .dedup_window(Duration::from_secs(60))
            .max_length(10);
        let settings = Settings::queue(&decl);
        let back = Settings::from_description("queue", Some(&settings.to_description())).unwrap();
        assert_eq!(back, settings);
        assert_eq!(back.backoff.to_backoff(), decl.delivery.backoff);
        assert!(Settings::from_description("queue", Some("made by hand")).is_err());
        assert!(Settings::from_description("queue", None).is_err());
    }
}
