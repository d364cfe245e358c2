//! `google.pubsub.v1.Publisher`: topics and publishing.

use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tonic::{Request, Response, Status};

use crate::generated::publisher_server::Publisher;
use crate::names::{self, Collection, to_broker, to_resource};
use crate::status::{from_broker, unsupported};
use crate::store::TopicRecord;
use crate::{PubSub, convert, pages, topic_schema, topic_spec};

/// Pub/Sub's limit on messages in one Publish.
const MAX_PUBLISH_MESSAGES: usize = 1000;

impl PubSub {
    /// A topic as Pub/Sub describes it: the broker's spec and the front end's record.
    pub(crate) fn described_topic(
        &self,
        resource: String,
        spec: &ferry_broker::TopicSpec,
    ) -> pb::Topic {
        let mut topic = topic_spec::from_spec(resource, spec);
        if let Ok(name) = to_broker(&topic.name, Collection::Topics)
            && let Some(kept) = self.topic_store().get(name.as_str()).schema
        {
            topic.schema_settings = Some(topic_schema::shown(self.schemas(), &kept));
        }
        topic
    }
}

#[tonic::async_trait]
impl Publisher for PubSub {
    async fn create_topic(
        &self,
        request: Request<pb::Topic>,
    ) -> Result<Response<pb::Topic>, Status> {
        let topic = request.into_inner();
        let name = to_broker(&topic.name, Collection::Topics)?;
        let spec = topic_spec::to_spec(&topic)?;
        let record = TopicRecord {
            schema: topic
                .schema_settings
                .as_ref()
                .map(|settings| topic_schema::checked(self.schemas(), settings))
                .transpose()?,
            deleted: false,
        };
        // The record first, as for subscriptions (see `store`): a crash between the two
        // leaves a record without a topic, never a topic without its schema. A record of
        // a topic that already exists is not touched. A deleted topic whose last
        // subscription went by another front end (Ferry's own API, the CLI) goes for good
        // first: none of Pub/Sub's deletions saw it go.
        self.forget_topic_if_deleted(&name).await;
        if self.is_deleted_topic(&name) {
            return Err(Status::failed_precondition(format!(
                "a topic of this name was deleted and still has subscriptions ({}); delete \
                 them before creating it again",
                self.subscriptions_of(&name)
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if self.broker().describe_topic(name.as_str()).is_err() {
            self.topic_store()
                .set(name.as_str(), Some(record))
                .map_err(|e| Status::internal(format!("saving the topic's settings: {e}")))?;
        }
        self.broker()
            .create_topic(name.as_str(), spec.clone())
            .await
            .map_err(from_broker)?;
        Ok(Response::new(self.described_topic(topic.name, &spec)))
    }

    async fn update_topic(
        &self,
        request: Request<pb::UpdateTopicRequest>,
    ) -> Result<Response<pb::Topic>, Status> {
        Ok(Response::new(
            self.change_topic(request.into_inner()).await?,
        ))
    }

    async fn publish(
        &self,
        request: Request<pb::PublishRequest>,
    ) -> Result<Response<pb::PublishResponse>, Status> {
        let request = request.into_inner();
        let name = to_broker(&request.topic, Collection::Topics)?;
        if request.messages.is_empty() {
            return Err(Status::invalid_argument(
                "A Publish needs at least one message",
            ));
        }
        if request.messages.len() > MAX_PUBLISH_MESSAGES {
            return Err(Status::invalid_argument(format!(
                "A Publish takes at most {MAX_PUBLISH_MESSAGES} messages (got {})",
                request.messages.len()
            )));
        }
        if self.is_deleted_topic(&name) {
            return Err(crate::deleted_topics::topic_not_found(&request.topic));
        }
        let mut messages = request.messages;
        if let Some(schema) = self.topic_store().get(name.as_str()).schema {
            topic_schema::validate(self.schemas(), &schema, &mut messages)?;
        }
        let now_ms = self.broker().now_ms();
        let messages = messages
            .into_iter()
            .map(|m| convert::outgoing(m, now_ms))
            .collect::<Result<Vec<_>, _>>()?;
        let message_ids = messages
            .iter()
            .map(|m| m.id.map(|id| id.to_string()).unwrap_or_default())
            .collect();
        self.broker()
            .publish_to_topic(name.as_str(), messages)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(pb::PublishResponse { message_ids }))
    }

    async fn get_topic(
        &self,
        request: Request<pb::GetTopicRequest>,
    ) -> Result<Response<pb::Topic>, Status> {
        let resource = request.into_inner().topic;
        let name = to_broker(&resource, Collection::Topics)?;
        let info = self.live_topic(&name, &resource)?;
        Ok(Response::new(self.described_topic(resource, &info.spec)))
    }

    async fn list_topics(
        &self,
        request: Request<pb::ListTopicsRequest>,
    ) -> Result<Response<pb::ListTopicsResponse>, Status> {
        let request = request.into_inner();
        let prefix = names::prefix(names::project(&request.project)?);
        let broker = self.broker();
        let resources = broker
            .list_topics()
            .iter()
            .filter(|n| n.as_str().starts_with(&prefix) && !self.is_deleted_topic(n))
            .filter_map(|n| to_resource(n.as_str(), Collection::Topics))
            .collect();
        let (page, next_page_token) =
            pages::page(resources, request.page_size, &request.page_token)?;
        let mut topics = Vec::with_capacity(page.len());
        for resource in page {
            let name = to_broker(&resource, Collection::Topics)?;
            // Deleted since listed: left out, as a later list would.
            if let Ok(info) = broker.describe_topic(name.as_str()) {
                topics.push(self.described_topic(resource, &info.spec));
            }
        }
        Ok(Response::new(pb::ListTopicsResponse {
            topics,
            next_page_token,
        }))
    }

    async fn list_topic_subscriptions(
        &self,
        request: Request<pb::ListTopicSubscriptionsRequest>,
    ) -> Result<Response<pb::ListTopicSubscriptionsResponse>, Status> {
        let request = request.into_inner();
        let topic = to_broker(&request.topic, Collection::Topics)?;
        self.live_topic(&topic, &request.topic)?;
        let resources = self
            .subscriptions_of(&topic)
            .iter()
            .filter_map(|q| to_resource(q.as_str(), Collection::Subscriptions))
            .collect();
        let (subscriptions, next_page_token) =
            pages::page(resources, request.page_size, &request.page_token)?;
        Ok(Response::new(pb::ListTopicSubscriptionsResponse {
            subscriptions,
            next_page_token,
        }))
    }

    async fn list_topic_snapshots(
        &self,
        request: Request<pb::ListTopicSnapshotsRequest>,
    ) -> Result<Response<pb::ListTopicSnapshotsResponse>, Status> {
        let request = request.into_inner();
        let topic = to_broker(&request.topic, Collection::Topics)?;
        self.live_topic(&topic, &request.topic)?;
        let (snapshots, next_page_token) = pages::page(
            self.topic_snapshots(&topic),
            request.page_size,
            &request.page_token,
        )?;
        Ok(Response::new(pb::ListTopicSnapshotsResponse {
            snapshots,
            next_page_token,
        }))
    }

    async fn delete_topic(
        &self,
        request: Request<pb::DeleteTopicRequest>,
    ) -> Result<Response<()>, Status> {
        let resource = request.into_inner().topic;
        let name = to_broker(&resource, Collection::Topics)?;
        self.remove_topic(&name, &resource).await?;
        Ok(Response::new(()))
    }

    async fn detach_subscription(
        &self,
        _request: Request<pb::DetachSubscriptionRequest>,
    ) -> Result<Response<pb::DetachSubscriptionResponse>, Status> {
        Err(unsupported("DetachSubscription"))
    }
}
