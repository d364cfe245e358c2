//! `ferry.v1.Admin`: queues, topics, subscriptions and consumer groups.

use std::sync::Arc;

use ferry_broker::{Broker, QueueSpec};
use ferry_proto::v1::{self, admin_server::Admin};
use tonic::{Request, Response, Status};

use super::{allow, allow_read, caller};
use crate::auth::{Action, Gate};
use crate::convert;
use crate::status::{from_broker, from_convert, from_refusal};
use crate::temporary;

pub struct AdminService {
    pub broker: Broker,
    pub gate: Arc<Gate>,
}

type Reply<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl Admin for AdminService {
    async fn create_queue(
        &self,
        r: Request<v1::CreateQueueRequest>,
    ) -> Reply<v1::CreateQueueResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        let r = r.into_inner();
        let spec = convert::queue_spec(r.spec, QueueSpec::default()).map_err(from_convert)?;
        self.broker
            .create_queue(&r.name, spec)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::CreateQueueResponse {}))
    }

    async fn delete_queue(
        &self,
        r: Request<v1::DeleteQueueRequest>,
    ) -> Reply<v1::DeleteQueueResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        self.broker
            .delete_queue(&r.into_inner().name)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::DeleteQueueResponse {}))
    }

    async fn list_queues(
        &self,
        r: Request<v1::ListQueuesRequest>,
    ) -> Reply<v1::ListQueuesResponse> {
        let who = caller(&self.gate, &r)?;
        let names = self
            .broker
            .list_queues()
            .iter()
            .map(|n| n.to_string())
            .filter(|n| self.gate.may(who, Action::Admin, n))
            .collect();
        Ok(Response::new(v1::ListQueuesResponse { names }))
    }

    async fn describe_queue(&self, r: Request<v1::DescribeQueueRequest>) -> Reply<v1::QueueInfo> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        let info = self
            .broker
            .describe_queue(&r.into_inner().name)
            .map_err(from_broker)?;
        Ok(Response::new(convert::queue_info(info)))
    }

    async fn create_topic(
        &self,
        r: Request<v1::CreateTopicRequest>,
    ) -> Reply<v1::CreateTopicResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        let r = r.into_inner();
        let spec = convert::topic_spec(r.spec).map_err(from_convert)?;
        self.broker
            .create_topic(&r.name, spec)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::CreateTopicResponse {}))
    }

    async fn delete_topic(
        &self,
        r: Request<v1::DeleteTopicRequest>,
    ) -> Reply<v1::DeleteTopicResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        self.broker
            .delete_topic(&r.into_inner().name)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::DeleteTopicResponse {}))
    }

    async fn list_topics(
        &self,
        r: Request<v1::ListTopicsRequest>,
    ) -> Reply<v1::ListTopicsResponse> {
        let who = caller(&self.gate, &r)?;
        let names = self
            .broker
            .list_topics()
            .iter()
            .map(|n| n.to_string())
            .filter(|n| self.gate.may(who, Action::Admin, n))
            .collect();
        Ok(Response::new(v1::ListTopicsResponse { names }))
    }

    async fn describe_topic(&self, r: Request<v1::DescribeTopicRequest>) -> Reply<v1::TopicInfo> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        let info = self
            .broker
            .describe_topic(&r.into_inner().name)
            .map_err(from_broker)?;
        Ok(Response::new(convert::topic_info(info)))
    }

    async fn add_partitions(
        &self,
        r: Request<v1::AddPartitionsRequest>,
    ) -> Reply<v1::AddPartitionsResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        let r = r.into_inner();
        self.broker
            .add_partitions(&r.name, r.partitions)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::AddPartitionsResponse {}))
    }

    async fn update_queue(
        &self,
        r: Request<v1::UpdateQueueRequest>,
    ) -> Reply<v1::UpdateQueueResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        let r = r.into_inner();
        let next = convert::queue_spec(r.spec, QueueSpec::default()).map_err(from_convert)?;
        let now = self
            .broker
            .update_queue(&r.name, |spec| *spec = next)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::UpdateQueueResponse {
            spec: Some(convert::queue_spec_to_proto(&now)),
        }))
    }

    async fn update_topic(
        &self,
        r: Request<v1::UpdateTopicRequest>,
    ) -> Reply<v1::UpdateTopicResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        let r = r.into_inner();
        let keep_partitions = r.spec.as_ref().is_none_or(|s| s.partitions == 0);
        let mut next = convert::topic_spec(r.spec).map_err(from_convert)?;
        let now = self
            .broker
            .update_topic(&r.name, |spec| {
                if keep_partitions {
                    next.partitions = spec.partitions;
                }
                *spec = next;
            })
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::UpdateTopicResponse {
            spec: Some(convert::topic_spec_to_proto(&now)),
        }))
    }

    async fn create_subscription(
        &self,
        r: Request<v1::CreateSubscriptionRequest>,
    ) -> Reply<v1::CreateSubscriptionResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        let r = r.into_inner();
        let spec = convert::subscription_spec(r.spec).map_err(from_convert)?;
        self.broker
            .create_subscription(&r.name, spec)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::CreateSubscriptionResponse {}))
    }

    async fn delete_subscription(
        &self,
        r: Request<v1::DeleteSubscriptionRequest>,
    ) -> Reply<v1::DeleteSubscriptionResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        let name = r.into_inner().name;
        // A subscription is a queue fed by a topic: refuse to delete a plain queue here.
        self.broker
            .describe_subscription(&name)
            .map_err(from_broker)?;
        self.broker.delete_queue(&name).await.map_err(from_broker)?;
        Ok(Response::new(v1::DeleteSubscriptionResponse {}))
    }

    async fn describe_subscription(
        &self,
        r: Request<v1::DescribeSubscriptionRequest>,
    ) -> Reply<v1::SubscriptionInfo> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().name)?;
        let info = self
            .broker
            .describe_subscription(&r.into_inner().name)
            .map_err(from_broker)?;
        Ok(Response::new(convert::subscription_info(info)))
    }

    async fn describe_group(&self, r: Request<v1::DescribeGroupRequest>) -> Reply<v1::GroupInfo> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().topic)?;
        let r = r.into_inner();
        let info = self
            .broker
            .describe_group(&r.topic, &r.group)
            .map_err(from_broker)?;
        Ok(Response::new(convert::group_info(info)))
    }

    async fn list_groups(
        &self,
        r: Request<v1::ListGroupsRequest>,
    ) -> Reply<v1::ListGroupsResponse> {
        let who = caller(&self.gate, &r)?;
        let only = r.get_ref().topic.clone();
        let groups = self
            .broker
            .list_groups()
            .into_iter()
            .filter(|(topic, _)| only.as_deref().is_none_or(|t| t == topic.as_str()))
            .filter(|(topic, _)| self.gate.may(who, Action::Admin, topic.as_str()))
            .map(|(topic, group)| v1::GroupRef {
                topic: topic.to_string(),
                group: group.to_string(),
            })
            .collect();
        Ok(Response::new(v1::ListGroupsResponse { groups }))
    }

    async fn delete_group(
        &self,
        r: Request<v1::DeleteGroupRequest>,
    ) -> Reply<v1::DeleteGroupResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().topic)?;
        let r = r.into_inner();
        self.broker
            .delete_group(&r.topic, &r.group)
            .map_err(from_broker)?;
        Ok(Response::new(v1::DeleteGroupResponse {}))
    }

    async fn reset_group_offsets(
        &self,
        r: Request<v1::ResetGroupOffsetsRequest>,
    ) -> Reply<v1::ResetGroupOffsetsResponse> {
        allow(&self.gate, &r, Action::Admin, &r.get_ref().topic)?;
        let r = r.into_inner();
        let to = convert::position(r.to).map_err(from_convert)?;
        self.broker
            .reset_group_offsets(&r.topic, &r.group, r.partition, to)
            .map_err(from_broker)?;
        Ok(Response::new(v1::ResetGroupOffsetsResponse {}))
    }

    async fn park_key(&self, r: Request<v1::ParkKeyRequest>) -> Reply<v1::ParkKeyResponse> {
        // Parking is for whoever may consume the queue, not for admin: the worker that
        // meets a poison message is the one that knows to hold its key, and parking only
        // withholds what that worker could withhold anyway by not settling — it deletes
        // and moves nothing. On a dead-letter queue that right is `dead_letters`.
        allow_read(&self.gate, &self.broker, &r, &r.get_ref().queue)?;
        let r = r.into_inner();
        let key = convert::parked_key(&r.key).map_err(from_convert)?;
        self.broker.park(&r.queue, key).await.map_err(from_broker)?;
        Ok(Response::new(v1::ParkKeyResponse {}))
    }

    async fn unpark_key(&self, r: Request<v1::UnparkKeyRequest>) -> Reply<v1::UnparkKeyResponse> {
        // The same right as parking: whoever may hold a key may release it.
        allow_read(&self.gate, &self.broker, &r, &r.get_ref().queue)?;
        let r = r.into_inner();
        let key = convert::parked_key(&r.key).map_err(from_convert)?;
        self.broker
            .unpark(&r.queue, key)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::UnparkKeyResponse {}))
    }

    async fn list_parked_keys(
        &self,
        r: Request<v1::ListParkedKeysRequest>,
    ) -> Reply<v1::ListParkedKeysResponse> {
        allow_read(&self.gate, &self.broker, &r, &r.get_ref().queue)?;
        let keys = self
            .broker
            .parked_keys(&r.into_inner().queue)
            .map_err(from_broker)?;
        Ok(Response::new(v1::ListParkedKeysResponse {
            keys: keys.into_iter().map(convert::parked).collect(),
        }))
    }

    async fn create_temporary_queue(
        &self,
        r: Request<v1::CreateTemporaryQueueRequest>,
    ) -> Reply<v1::CreateTemporaryQueueResponse> {
        let who = caller(&self.gate, &r)?;
        temporary::allow_create(&self.gate, who).map_err(from_refusal)?;
        let r = r.into_inner();
        let (name, idle) = temporary::create(&self.broker, &r.owner, r.idle_timeout_ms)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(v1::CreateTemporaryQueueResponse {
            name: name.to_string(),
            idle_timeout_ms: idle.as_millis() as u64,
        }))
    }
}
