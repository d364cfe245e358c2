//! Ferry's dead-letter metadata as SQS message attributes: why a message was
//! dead-lettered, after how many deliveries, from which queue, with which last error.
//!
//! SQS itself tells a dead letter's consumer only its source queue
//! (`DeadLetterQueueSourceArn`); Ferry keeps the reason with every dead letter, and an SQS
//! consumer of a dead-letter queue reads it as attributes named `Ferry.DeadLetter.*`,
//! returned like any other message attribute when asked for (`All`, `.*`,
//! `Ferry.DeadLetter.*` or by name) and covered by `MD5OfMessageAttributes`. They are not
//! stored with the message: they are derived from the broker's record on each receive, so
//! a message redriven out of the dead-letter queue no longer carries them.

use ferry_broker::DeadLetterInfo;

use crate::message_attributes::{Attribute, AttributeValue, Attributes};

/// The prefix of every dead-letter attribute name.
pub const PREFIX: &str = "Ferry.DeadLetter.";

/// The attributes of a dead letter's metadata; absent parts are left out.
pub fn of(info: &DeadLetterInfo) -> Attributes {
    let mut out = Attributes::new();
    let mut put = |name: &str, data_type: &str, value: String| {
        out.insert(
            format!("{PREFIX}{name}"),
            Attribute {
                data_type: data_type.to_owned(),
                value: AttributeValue::String(value),
            },
        );
    };
    put("Reason", "String", info.reason.clone());
    put("Deliveries", "Number", info.deliveries.to_string());
    put("OriginQueue", "String", info.origin_queue.clone());
    if let Some(error) = info.last_error.as_ref().filter(|e| !e.is_empty()) {
        put("LastError", "String", error.clone());
    }
    if let Some(ms) = info.first_failure_ms {
        put("FirstFailureTimestamp", "Number", ms.to_string());
    }
    if let Some(ms) = info.last_failure_ms {
        put("LastFailureTimestamp", "Number", ms.to_string());
    }
    if let Some(consumer) = info.consumer.as_ref().filter(|c| !c.is_empty()) {
        put("Consumer", "String", consumer.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message_attributes::valid_name;

    fn info() -> DeadLetterInfo {
        DeadLetterInfo {
            reason: "max_deliveries".into(),
            deliveries: 3,
            origin_queue: "payments".into(),
            origin_seq: 7,
            origin_published_at: 1_000,
            last_error: Some("card declined".into()),
            first_failure_ms: Some(2_000),
            last_failure_ms: None,
            consumer: None,
        }
    }

    #[test]
    fn every_part_present_is_an_attribute_with_a_valid_name() {
        let attributes = of(&info());
        let names: Vec<&str> = attributes.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "Ferry.DeadLetter.Deliveries",
                "Ferry.DeadLetter.FirstFailureTimestamp",
                "Ferry.DeadLetter.LastError",
                "Ferry.DeadLetter.OriginQueue",
                "Ferry.DeadLetter.Reason",
            ]
        );
        assert!(attributes.keys().all(|n| valid_name(n)));
        let reason = &attributes["Ferry.DeadLetter.Reason"];
        assert_eq!(
            reason.value,
            AttributeValue::String("max_deliveries".into())
        );
        assert_eq!(
            attributes["Ferry.DeadLetter.Deliveries"].data_type,
            "Number"
        );
    }
}
