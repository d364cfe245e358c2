//! `google.pubsub.v1.Subscriber`: subscriptions, Pull, StreamingPull and settling.

use std::time::Duration;

use ferry_broker::{Name, SubscriptionSpec};
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::generated::subscriber_server::Subscriber;
use crate::names::{self, Collection, to_broker, to_resource};
use crate::status::{from_broker, unsupported};
use crate::{PubSub, convert, pages, settle, streaming_pull, subscription_spec};

/// How long a Pull without `return_immediately` waits for a first message before it
/// answers with none (the client pulls again).
const PULL_WAIT: Duration = Duration::from_secs(5);
/// Pub/Sub's cap on `max_messages` of one Pull.
const MAX_PULL: usize = 1000;
/// The consumer every Pull receives as: pulls share one consumer's key affinity, so an
/// ordered subscription stays in order across them.
const PULL_CONSUMER: &str = "pubsub-pull";

impl PubSub {
    /// The subscription `resource` names: NOT_FOUND for a name that is no subscription.
    pub(crate) fn subscription(&self, resource: &str) -> Result<(Name, SubscriptionSpec), Status> {
        let name = to_broker(resource, Collection::Subscriptions)?;
        match self.broker().subscription_spec(name.as_str()) {
            Ok(spec) => Ok((name, spec)),
            Err(e) if e.kind() == ferry_broker::ErrorKind::NotFound => Err(not_found(resource)),
            // A queue of that name that is no subscription is not one to Pub/Sub either.
            Err(e) if e.kind() == ferry_broker::ErrorKind::Conflict => Err(not_found(resource)),
            Err(e) => Err(from_broker(e)),
        }
    }
}

/// How long a subscription with `spec` keeps its messages.
pub(crate) fn retention(spec: &SubscriptionSpec) -> Duration {
    spec.delivery.default_ttl.unwrap_or(Duration::MAX)
}

fn store_failed(error: std::io::Error) -> Status {
    Status::internal(format!(
        "keeping the subscription's settings failed: {error}"
    ))
}

fn not_found(resource: &str) -> Status {
    Status::not_found(format!("Resource not found (resource={resource})."))
}

#[tonic::async_trait]
impl Subscriber for PubSub {
    async fn create_subscription(
        &self,
        request: Request<pb::Subscription>,
    ) -> Result<Response<pb::Subscription>, Status> {
        let subscription = request.into_inner();
        let name = to_broker(&subscription.name, Collection::Subscriptions)?;
        let topic = to_broker(&subscription.topic, Collection::Topics)?;
        if self.is_deleted_topic(&topic) {
            return Err(crate::deleted_topics::topic_not_found(&subscription.topic));
        }
        let spec = subscription_spec::to_spec(&subscription, topic)?;
        let record = subscription_spec::record(&subscription, self.broker().now_ms())?;
        if record.retain_acked {
            self.check_retains_acked(&spec.topic, retention(&spec))?;
        }
        if self.broker().describe_subscription(name.as_str()).is_ok() {
            return Err(Status::already_exists(format!(
                "Resource already exists in the project (resource={}).",
                subscription.name
            )));
        }
        // The record first: a crash before the subscription exists leaves a record the
        // next start drops, never a subscription without what was asked of it.
        self.store()
            .set(name.as_str(), Some(record.clone()))
            .map_err(store_failed)?;
        if let Err(e) = self
            .broker()
            .create_subscription(name.as_str(), spec.clone())
            .await
        {
            if self.broker().describe_subscription(name.as_str()).is_err() {
                self.store()
                    .set(name.as_str(), None)
                    .map_err(store_failed)?;
            }
            return Err(from_broker(e));
        }
        Ok(Response::new(self.shown_subscription(
            subscription.name,
            &spec,
            &record,
        )))
    }

    async fn get_subscription(
        &self,
        request: Request<pb::GetSubscriptionRequest>,
    ) -> Result<Response<pb::Subscription>, Status> {
        let resource = request.into_inner().subscription;
        let (name, spec) = self.subscription(&resource)?;
        let record = self.store().get(name.as_str());
        Ok(Response::new(
            self.shown_subscription(resource, &spec, &record),
        ))
    }

    async fn update_subscription(
        &self,
        request: Request<pb::UpdateSubscriptionRequest>,
    ) -> Result<Response<pb::Subscription>, Status> {
        Ok(Response::new(
            self.change_subscription(request.into_inner()).await?,
        ))
    }

    async fn list_subscriptions(
        &self,
        request: Request<pb::ListSubscriptionsRequest>,
    ) -> Result<Response<pb::ListSubscriptionsResponse>, Status> {
        let request = request.into_inner();
        let prefix = names::prefix(names::project(&request.project)?);
        let broker = self.broker();
        let resources = broker
            .list_queues()
            .iter()
            .filter(|q| q.as_str().starts_with(&prefix))
            .filter_map(|q| to_resource(q.as_str(), Collection::Subscriptions))
            .collect();
        let (page, next_page_token) =
            pages::page(resources, request.page_size, &request.page_token)?;
        let subscriptions = page
            .into_iter()
            // Plain queues, and subscriptions deleted since listed, are left out.
            .filter_map(|resource| {
                let (name, spec) = self.subscription(&resource).ok()?;
                let record = self.store().get(name.as_str());
                Some(self.shown_subscription(resource, &spec, &record))
            })
            .collect();
        Ok(Response::new(pb::ListSubscriptionsResponse {
            subscriptions,
            next_page_token,
        }))
    }

    async fn delete_subscription(
        &self,
        request: Request<pb::DeleteSubscriptionRequest>,
    ) -> Result<Response<()>, Status> {
        let (name, spec) = self.subscription(&request.into_inner().subscription)?;
        self.broker()
            .delete_queue(name.as_str())
            .await
            .map_err(from_broker)?;
        self.store()
            .set(name.as_str(), None)
            .map_err(store_failed)?;
        self.forget_topic_if_deleted(&spec.topic).await;
        Ok(Response::new(()))
    }

    async fn modify_ack_deadline(
        &self,
        request: Request<pb::ModifyAckDeadlineRequest>,
    ) -> Result<Response<()>, Status> {
        let request = request.into_inner();
        let name = to_broker(&request.subscription, Collection::Subscriptions)?;
        self.used(name.as_str());
        let settled = settle::modify_deadline(
            self.broker(),
            name.as_str(),
            &request.ack_ids,
            request.ack_deadline_seconds,
        )
        .await?;
        self.open_streams()
            .settled(name.as_str(), &request.ack_ids, &settled);
        if self.store().get(name.as_str()).exactly_once {
            settle::exactly_once_failures(&request.ack_ids, &settled)?;
        }
        Ok(Response::new(()))
    }

    async fn acknowledge(
        &self,
        request: Request<pb::AcknowledgeRequest>,
    ) -> Result<Response<()>, Status> {
        let request = request.into_inner();
        let name = to_broker(&request.subscription, Collection::Subscriptions)?;
        self.used(name.as_str());
        let settled = settle::acknowledge(self.broker(), name.as_str(), &request.ack_ids).await?;
        self.open_streams()
            .settled(name.as_str(), &request.ack_ids, &settled);
        if self.store().get(name.as_str()).exactly_once {
            settle::exactly_once_failures(&request.ack_ids, &settled)?;
        }
        Ok(Response::new(()))
    }

    async fn pull(
        &self,
        request: Request<pb::PullRequest>,
    ) -> Result<Response<pb::PullResponse>, Status> {
        let request = request.into_inner();
        let (name, spec) = self.subscription(&request.subscription)?;
        let counts_attempts = subscription_spec::counts_attempts(&spec);
        self.used(name.as_str());
        let max = match request.max_messages {
            n if n <= 0 => {
                return Err(Status::invalid_argument(format!(
                    "max_messages must be positive (got {n})"
                )));
            }
            n => (n as usize).min(MAX_PULL),
        };
        #[allow(deprecated)]
        let wait = (!request.return_immediately).then_some(PULL_WAIT);
        let received = self
            .broker()
            .receive_unless(
                name.as_str(),
                PULL_CONSUMER,
                max,
                None,
                wait,
                self.closing(),
            )
            .await
            .map_err(from_broker)?;
        Ok(Response::new(pb::PullResponse {
            received_messages: received
                .into_iter()
                .map(|m| convert::received(m, counts_attempts))
                .collect(),
        }))
    }

    type StreamingPullStream = ReceiverStream<Result<pb::StreamingPullResponse, Status>>;

    async fn streaming_pull(
        &self,
        request: Request<Streaming<pb::StreamingPullRequest>>,
    ) -> Result<Response<Self::StreamingPullStream>, Status> {
        let stream = streaming_pull::open(self.clone(), request.into_inner()).await?;
        Ok(Response::new(stream))
    }

    async fn modify_push_config(
        &self,
        _request: Request<pb::ModifyPushConfigRequest>,
    ) -> Result<Response<()>, Status> {
        Err(unsupported("A push subscription (ModifyPushConfig)"))
    }

    async fn get_snapshot(
        &self,
        request: Request<pb::GetSnapshotRequest>,
    ) -> Result<Response<pb::Snapshot>, Status> {
        Ok(Response::new(
            self.find_snapshot(request.into_inner().snapshot)?,
        ))
    }

    async fn list_snapshots(
        &self,
        request: Request<pb::ListSnapshotsRequest>,
    ) -> Result<Response<pb::ListSnapshotsResponse>, Status> {
        Ok(Response::new(self.project_snapshots(request.into_inner())?))
    }

    async fn create_snapshot(
        &self,
        request: Request<pb::CreateSnapshotRequest>,
    ) -> Result<Response<pb::Snapshot>, Status> {
        Ok(Response::new(
            self.make_snapshot(request.into_inner()).await?,
        ))
    }

    async fn update_snapshot(
        &self,
        _request: Request<pb::UpdateSnapshotRequest>,
    ) -> Result<Response<pb::Snapshot>, Status> {
        Err(unsupported("UpdateSnapshot"))
    }

    async fn delete_snapshot(
        &self,
        request: Request<pb::DeleteSnapshotRequest>,
    ) -> Result<Response<()>, Status> {
        self.remove_snapshot(&request.into_inner().snapshot)?;
        Ok(Response::new(()))
    }

    async fn seek(
        &self,
        request: Request<pb::SeekRequest>,
    ) -> Result<Response<pb::SeekResponse>, Status> {
        self.seek_subscription(request.into_inner()).await?;
        Ok(Response::new(pb::SeekResponse {}))
    }
}
