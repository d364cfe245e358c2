//! `retain_acked_messages`: Pub/Sub keeps a subscription's acknowledged messages for its
//! `message_retention_duration`, so that a Seek back in time can bring them again. Here
//! every subscription's messages stay in its topic for the topic's retention whether
//! acknowledged or not, and a Seek reads them from there; so the setting holds exactly when
//! the topic keeps messages at least that long, by age alone. It is accepted then, refused
//! otherwise (FAILED_PRECONDITION, saying what the topic keeps), and UpdateTopic refuses to
//! shorten a topic's retention below what a subscription retaining acknowledged messages
//! was promised.

use std::time::Duration;

use ferry_broker::{Name, TopicRetention};
use tonic::Status;

use crate::PubSub;

/// Whether a topic with `retention` keeps every message for `needed`.
fn keeps_for(retention: &TopicRetention, needed: Duration) -> bool {
    retention.max_bytes.is_none() && retention.max_age.is_none_or(|age| age >= needed)
}

fn describe(retention: &TopicRetention) -> String {
    match (retention.max_age, retention.max_bytes) {
        (_, Some(bytes)) => format!("at most {bytes} bytes per partition"),
        (Some(age), None) => format!("messages for {} s", age.as_secs()),
        (None, None) => "messages without end".to_owned(),
    }
}

impl PubSub {
    /// Refuses `retain_acked_messages` on a subscription of `topic` whose messages are kept
    /// for `needed`, unless the topic keeps them that long.
    pub(crate) fn check_retains_acked(&self, topic: &Name, needed: Duration) -> Result<(), Status> {
        let retention = self
            .broker()
            .describe_topic(topic.as_str())
            .map_err(crate::status::from_broker)?
            .spec
            .retention;
        if keeps_for(&retention, needed) {
            return Ok(());
        }
        Err(Status::failed_precondition(format!(
            "retain_acked_messages keeps acknowledged messages for the subscription's \
             message_retention_duration ({} s) in its topic, which keeps {}: give the topic \
             a message_retention_duration at least that long",
            needed.as_secs(),
            describe(&retention)
        )))
    }

    /// Refuses a topic retention that would drop messages a subscription retaining
    /// acknowledged messages was promised.
    pub(crate) fn check_topic_retention(
        &self,
        topic: &Name,
        retention: &TopicRetention,
    ) -> Result<(), Status> {
        for queue in self.broker().list_queues() {
            let Ok(spec) = self.broker().subscription_spec(queue.as_str()) else {
                continue;
            };
            if &spec.topic != topic || !self.store().get(queue.as_str()).retain_acked {
                continue;
            }
            let needed = spec.delivery.default_ttl.unwrap_or(Duration::MAX);
            if !keeps_for(retention, needed) {
                return Err(Status::failed_precondition(format!(
                    "subscription {queue} retains acknowledged messages for {} s, longer \
                     than the topic would keep them ({}); lower its \
                     message_retention_duration or turn retain_acked_messages off first",
                    needed.as_secs(),
                    describe(retention)
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_keeps_acknowledged_messages_only_by_age_and_long_enough() {
        let week = Duration::from_secs(7 * 24 * 3600);
        let default = TopicRetention::default();
        assert!(keeps_for(&default, week));
        assert!(!keeps_for(&default, week * 2));
        let forever = TopicRetention {
            max_age: None,
            ..TopicRetention::default()
        };
        assert!(keeps_for(&forever, Duration::MAX));
        let by_size = TopicRetention {
            max_bytes: Some(1 << 30),
            ..TopicRetention::default()
        };
        assert!(!keeps_for(&by_size, Duration::from_secs(60)));
    }
}
