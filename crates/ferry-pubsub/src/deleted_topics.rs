//! DeleteTopic of a topic that still has subscriptions. Pub/Sub deletes the topic and keeps
//! its subscriptions: they show `_deleted-topic_` as their topic, keep their backlog for
//! their subscribers, and receive nothing new. Here a subscription's messages stay in its
//! topic, so the broker's topic stays too, hidden: the front end records it deleted (in
//! its `TopicRecord`, durably), answers for it as for no topic — GetTopic, Publish,
//! ListTopics, ListTopicSubscriptions, ListTopicSnapshots, CreateSubscription — and deletes
//! it for good when its last subscription goes (DeleteSubscription, or expiration).
//!
//! Differences: creating a topic of the same name while the hidden one has subscriptions
//! is refused with FAILED_PRECONDITION (Pub/Sub creates a new, unrelated topic), and
//! Ferry's other APIs still see the hidden topic under its name.

use ferry_broker::{ErrorKind, Name};
use tonic::Status;

use crate::PubSub;
use crate::status::from_broker;

/// What a subscription of a deleted topic shows as its topic, as in Pub/Sub.
pub const DELETED_TOPIC: &str = "_deleted-topic_";

impl PubSub {
    /// Whether the broker's topic `name` is one Pub/Sub deleted while it had subscriptions.
    pub(crate) fn is_deleted_topic(&self, name: &Name) -> bool {
        self.topic_store().get(name.as_str()).deleted
    }

    /// The topic `name` (of `resource`) as Pub/Sub sees it: NOT_FOUND when there is none or
    /// it was deleted.
    pub(crate) fn live_topic(
        &self,
        name: &Name,
        resource: &str,
    ) -> Result<ferry_broker::TopicInfo, Status> {
        if self.is_deleted_topic(name) {
            return Err(topic_not_found(resource));
        }
        self.broker()
            .describe_topic(name.as_str())
            .map_err(from_broker)
    }

    /// The subscription `resource` as Pub/Sub describes it: with `_deleted-topic_` as its
    /// topic once that was deleted.
    pub(crate) fn shown_subscription(
        &self,
        resource: String,
        spec: &ferry_broker::SubscriptionSpec,
        record: &crate::store::SubscriptionRecord,
    ) -> googleapis_tonic_google_pubsub_v1::google::pubsub::v1::Subscription {
        let mut shown = crate::subscription_spec::from_spec(resource, spec, record);
        if self.is_deleted_topic(&spec.topic) {
            shown.topic = DELETED_TOPIC.to_owned();
        }
        shown
    }

    /// The subscriptions of the broker's topic `name`.
    pub(crate) fn subscriptions_of(&self, name: &Name) -> Vec<Name> {
        self.broker()
            .list_queues()
            .into_iter()
            .filter(|q| {
                self.broker()
                    .subscription_spec(q.as_str())
                    .is_ok_and(|spec| &spec.topic == name)
            })
            .collect()
    }

    /// DeleteTopic: deleted for good without subscriptions, hidden with some.
    pub(crate) async fn remove_topic(&self, name: &Name, resource: &str) -> Result<(), Status> {
        let mut record = self.topic_store().get(name.as_str());
        if record.deleted {
            return Err(topic_not_found(resource));
        }
        if self.subscriptions_of(name).is_empty() {
            return self.delete_for_good(name).await;
        }
        self.broker()
            .describe_topic(name.as_str())
            .map_err(from_broker)?;
        record.deleted = true;
        self.topic_store()
            .set(name.as_str(), Some(record))
            .map_err(|e| Status::internal(format!("keeping the topic's deletion: {e}")))
    }

    /// After a subscription of `topic` went: a hidden topic with none left goes for good.
    pub(crate) async fn forget_topic_if_deleted(&self, topic: &Name) {
        if !self.is_deleted_topic(topic) || !self.subscriptions_of(topic).is_empty() {
            return;
        }
        if let Err(e) = self.delete_for_good(topic).await {
            tracing::warn!(topic = %topic, error = %e.message(), "deleting a deleted topic's storage failed; the next subscription deletion retries");
        }
    }

    async fn delete_for_good(&self, name: &Name) -> Result<(), Status> {
        match self.broker().delete_topic(name.as_str()).await {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound && self.is_deleted_topic(name) => {}
            Err(e) => return Err(from_broker(e)),
        }
        // A crash before this leaves a record of no topic, which the next open drops.
        self.topic_store()
            .set(name.as_str(), None)
            .map_err(|e| Status::internal(format!("removing the topic's settings: {e}")))
    }
}

pub(crate) fn topic_not_found(resource: &str) -> Status {
    Status::not_found(format!("Resource not found (resource={resource})."))
}
