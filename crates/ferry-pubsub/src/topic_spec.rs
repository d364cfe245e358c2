//! A Pub/Sub topic's settings as the broker's topic spec, and back.
//!
//! A topic is the broker's topic with its defaults (one partition, so all of a topic's
//! messages keep one order, and ordering keys stay in order per subscription). Pub/Sub's
//! `message_retention_duration` (10 minutes to 31 days) is the broker's retention by age;
//! without it the broker's default applies (7 days, and longer for records a subscription
//! still needs), and a topic shows the retention it has either way. Settings this server
//! does not carry out are refused when set. `schema_settings` is the front end's own
//! record, not the broker's (see `topic_schema`).

use std::time::Duration;

use ferry_broker::TopicSpec;
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tonic::Status;

use crate::convert::{duration, proto_duration};
use crate::status::unsupported;

const MIN_RETENTION: Duration = Duration::from_secs(600);
const MAX_RETENTION: Duration = Duration::from_secs(31 * 24 * 3600);

pub fn to_spec(topic: &pb::Topic) -> Result<TopicSpec, Status> {
    refuse_unsupported(topic)?;
    let mut spec = TopicSpec::default();
    if let Some(d) = &topic.message_retention_duration {
        let d = duration(d, "message_retention_duration")?;
        if !(MIN_RETENTION..=MAX_RETENTION).contains(&d) {
            return Err(Status::invalid_argument(
                "message_retention_duration must be between 10 minutes and 31 days",
            ));
        }
        spec.retention.max_age = Some(d);
    }
    Ok(spec)
}

/// The topic `name` as Pub/Sub describes it.
pub fn from_spec(name: String, spec: &TopicSpec) -> pb::Topic {
    pb::Topic {
        name,
        message_retention_duration: spec.retention.max_age.map(proto_duration),
        state: pb::topic::State::Active as i32,
        ..Default::default()
    }
}

fn refuse_unsupported(t: &pb::Topic) -> Result<(), Status> {
    if !t.labels.is_empty() || !t.tags.is_empty() {
        return Err(unsupported("Keeping labels and tags"));
    }
    if t.message_storage_policy.is_some() {
        return Err(unsupported("A message storage policy"));
    }
    if !t.kms_key_name.is_empty() {
        return Err(unsupported("A KMS key (kms_key_name)"));
    }
    if t.ingestion_data_source_settings.is_some() {
        return Err(unsupported("Ingestion from another source"));
    }
    if !t.message_transforms.is_empty() {
        return Err(unsupported("Message transforms"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_round_trips_and_the_default_is_shown() {
        let spec = to_spec(&pb::Topic::default()).unwrap();
        assert_eq!(
            from_spec("t".into(), &spec).message_retention_duration,
            TopicSpec::default().retention.max_age.map(proto_duration)
        );

        let day = proto_duration(Duration::from_secs(24 * 3600));
        let asked = pb::Topic {
            message_retention_duration: Some(day),
            ..Default::default()
        };
        let spec = to_spec(&asked).unwrap();
        assert_eq!(
            from_spec("t".into(), &spec).message_retention_duration,
            Some(day)
        );
    }

    #[test]
    fn unsupported_settings_are_refused() {
        let keyed = pb::Topic {
            kms_key_name: "k".into(),
            ..Default::default()
        };
        assert_eq!(
            to_spec(&keyed).unwrap_err().code(),
            tonic::Code::Unimplemented
        );
        let short = pb::Topic {
            message_retention_duration: Some(proto_duration(Duration::from_secs(60))),
            ..Default::default()
        };
        assert_eq!(
            to_spec(&short).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
}
