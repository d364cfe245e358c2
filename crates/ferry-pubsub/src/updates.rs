//! UpdateTopic and UpdateSubscription: the fields the update mask names take the request's
//! values, checked as at creation; every other setting stays as it is (a subscription made
//! through another API keeps its own retry and lease settings where the mask does not name
//! them). Settings Pub/Sub fixes at creation — a subscription's topic, filter and ordering
//! — are INVALID_ARGUMENT, and settings this server does not carry out are UNIMPLEMENTED,
//! as at creation. Nothing changes when any named field is refused.

use std::time::Duration;

use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tonic::Status;

use crate::names::{Collection, to_broker};
use crate::status::{from_broker, unsupported};
use crate::{PubSub, subscription_spec, topic_spec};

impl PubSub {
    pub(crate) async fn change_subscription(
        &self,
        request: pb::UpdateSubscriptionRequest,
    ) -> Result<pb::Subscription, Status> {
        let asked = request
            .subscription
            .ok_or_else(|| Status::invalid_argument("subscription is required"))?;
        let paths = mask_paths(request.update_mask)?;
        let (name, spec) = self.subscription(&asked.name)?;
        let mut record = self.store().get(name.as_str());
        // The asked values, read as a whole subscription would be at creation: the
        // refusals and range checks are those of CreateSubscription.
        let checked = subscription_spec::to_spec(&asked, spec.topic.clone())?;
        crate::labels::check(&asked.labels)?;
        let mut delivery = spec.delivery.clone();
        for path in &paths {
            match path.as_str() {
                "ack_deadline_seconds" => delivery.lease = checked.delivery.lease,
                "retry_policy" => delivery.retry.backoff = checked.delivery.retry.backoff,
                "dead_letter_policy" => {
                    delivery.dead_letter = checked.delivery.dead_letter.clone();
                    delivery.retry.max_deliveries = checked.delivery.retry.max_deliveries;
                }
                "message_retention_duration" => {
                    delivery.default_ttl = checked.delivery.default_ttl;
                }
                "enable_exactly_once_delivery" => {
                    record.exactly_once = asked.enable_exactly_once_delivery;
                }
                "retain_acked_messages" => record.retain_acked = asked.retain_acked_messages,
                "expiration_policy" => {
                    let asked = subscription_spec::record(&asked, self.broker().now_ms())?;
                    record.expiration_ttl_ms = asked.expiration_ttl_ms;
                    record.last_used_ms = record.last_used_ms.max(asked.last_used_ms);
                }
                "labels" => record.labels = asked.labels.clone(),
                // Refused by the checks above when set; cleared, they are already clear.
                "push_config"
                | "bigquery_config"
                | "cloud_storage_config"
                | "message_transforms" => {}
                "filter" | "enable_message_ordering" | "topic" | "name" => {
                    return Err(Status::invalid_argument(format!(
                        "{path} cannot be changed after a subscription is created"
                    )));
                }
                other => return Err(unknown_field(other, "Subscription")),
            }
        }
        if record.retain_acked {
            self.check_retains_acked(&spec.topic, delivery.default_ttl.unwrap_or(Duration::MAX))?;
        }
        let delivery = self
            .broker()
            .update_queue(name.as_str(), |current| *current = delivery)
            .await
            .map_err(from_broker)?;
        self.store()
            .set(name.as_str(), Some(record.clone()))
            .map_err(|e| Status::internal(format!("keeping the subscription's settings: {e}")))?;
        let updated = ferry_broker::SubscriptionSpec { delivery, ..spec };
        Ok(self.shown_subscription(asked.name, &updated, &record))
    }

    pub(crate) async fn change_topic(
        &self,
        request: pb::UpdateTopicRequest,
    ) -> Result<pb::Topic, Status> {
        let asked = request
            .topic
            .ok_or_else(|| Status::invalid_argument("topic is required"))?;
        let paths = mask_paths(request.update_mask)?;
        let name = to_broker(&asked.name, Collection::Topics)?;
        // As at creation: what this server does not carry out is refused.
        let checked = topic_spec::to_spec(&asked)?;
        for path in &paths {
            match path.as_str() {
                "message_retention_duration" => {}
                "labels"
                | "message_storage_policy"
                | "kms_key_name"
                | "schema_settings"
                | "ingestion_data_source_settings"
                | "message_transforms" => {
                    return Err(unsupported(&format!("Changing {path}")));
                }
                "name" => {
                    return Err(Status::invalid_argument(
                        "name cannot be changed after a topic is created",
                    ));
                }
                other => return Err(unknown_field(other, "Topic")),
            }
        }
        if paths.iter().any(|p| p == "message_retention_duration") {
            self.check_topic_retention(
                &name,
                &ferry_broker::TopicRetention {
                    max_age: checked.retention.max_age,
                    ..self
                        .broker()
                        .describe_topic(name.as_str())
                        .map_err(from_broker)?
                        .spec
                        .retention
                },
            )?;
        }
        let spec = self
            .broker()
            .update_topic(name.as_str(), |spec| {
                spec.retention.max_age = checked.retention.max_age;
            })
            .await
            .map_err(from_broker)?;
        Ok(self.described_topic(asked.name, &spec))
    }
}

/// The mask's paths: Pub/Sub requires a mask, and one that names something.
fn mask_paths(mask: Option<prost_types::FieldMask>) -> Result<Vec<String>, Status> {
    match mask {
        Some(mask) if !mask.paths.is_empty() => Ok(mask.paths),
        _ => Err(Status::invalid_argument(
            "update_mask must name at least one field",
        )),
    }
}

fn unknown_field(path: &str, resource: &str) -> Status {
    Status::invalid_argument(format!(
        "{path} is not a field of {resource} that can be updated"
    ))
}
