//! What a connection may do: each Kafka API mapped onto Ferry's permissions
//! (`ferry-access`), with Kafka's codes for a refusal. Kept apart from the API modules so
//! that each of them stays a translation of its API, and an API added later is authorized
//! by one call here.
//!
//! | API | needs | refused with |
//! |---|---|---|
//! | Produce | `publish` on the topic | TOPIC_AUTHORIZATION_FAILED per partition |
//! | Fetch, ListOffsets | `consume` on the topic | TOPIC_AUTHORIZATION_FAILED per partition |
//! | Metadata (all topics) | — | lists only the topics the user may see: `publish`, `consume` or `admin` on them |
//! | Metadata (named topics) | seeing the topic; auto-creation also `admin` on it | TOPIC_AUTHORIZATION_FAILED; a missing topic the user may see but not create is UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers with Describe but no Create |
//! | CreateTopics, DeleteTopics | `admin` on the topic | TOPIC_AUTHORIZATION_FAILED per topic |
//! | an API on the whole cluster (broker configs, DescribeLogDirs, ListConfigResources, partition reassignments, ElectLeaders) | `admin:#` | CLUSTER_AUTHORIZATION_FAILED |
//! | DescribeTopicPartitions | seeing the topic, as Metadata | TOPIC_AUTHORIZATION_FAILED per named topic; unnamed ones left out |
//! | InitProducerId | some `publish` permission | CLUSTER_AUTHORIZATION_FAILED |
//! | an API on a consumer group | some `consume` permission (Ferry's groups belong to topics, so the offsets committed or fetched are checked per topic with `consume`) | GROUP_AUTHORIZATION_FAILED |
//!
//! **Adding an API.** The handler is given the connection's [`Access`]; one line refuses
//! what the user may not do:
//!
//! ```ignore
//! if let Err(code) = access.topic(Action::Consume, topic) { /* answer the partition with code */ }
//! if let Err(code) = access.group(&group_id) { /* answer the group with code */ }
//! if let Err(code) = access.cluster() { /* answer the request with code */ }
//! ```
//!
//! A refused request is answered, never cut off: the connection stays open, as in Kafka.

use std::sync::Arc;

use ferry_access::Action;
use ferry_broker::Broker;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
    MetadataResponse, ProduceRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::auth::Principal;

/// Who is calling on a connection.
#[derive(Debug, Clone)]
pub enum Access {
    /// The endpoint has no users: everything is allowed.
    Open,
    /// An authenticated user, held to its permissions.
    User(Arc<Principal>),
}

const DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;

impl Access {
    pub fn may(&self, action: Action, name: &str) -> bool {
        match self {
            Access::Open => true,
            Access::User(principal) => principal.may(action, name),
        }
    }

    #[allow(dead_code, reason = "the one-line checks of APIs being added")]
    /// `action` on the topic `name`, or TOPIC_AUTHORIZATION_FAILED.
    pub fn topic(&self, action: Action, name: &str) -> Result<(), ResponseError> {
        if self.may(action, name) {
            Ok(())
        } else {
            Err(DENIED)
        }
    }

    #[allow(dead_code, reason = "the one-line checks of APIs being added")]
    /// An API acting on the whole cluster: `admin` on every name, or
    /// CLUSTER_AUTHORIZATION_FAILED.
    pub fn cluster(&self) -> Result<(), ResponseError> {
        match self {
            Access::Open => Ok(()),
            Access::User(p) if p.may_everywhere(Action::Admin) => Ok(()),
            Access::User(_) => Err(ResponseError::ClusterAuthorizationFailed),
        }
    }

    #[allow(dead_code, reason = "the one-line checks of APIs being added")]
    /// An API on a consumer group: some `consume` permission, or
    /// GROUP_AUTHORIZATION_FAILED. Ferry's groups read topics, so what a group commits or
    /// fetches is checked per topic with [`Access::topic`] as well.
    pub fn group(&self, _group: &str) -> Result<(), ResponseError> {
        match self {
            Access::Open => Ok(()),
            Access::User(p) if p.holds(Action::Consume) => Ok(()),
            Access::User(_) => Err(ResponseError::GroupAuthorizationFailed),
        }
    }

    /// InitProducerId: some `publish` permission (a producer id serves only to publish), or
    /// CLUSTER_AUTHORIZATION_FAILED, as Kafka answers without IdempotentWrite.
    pub fn producer_ids(&self) -> Result<(), ResponseError> {
        match self {
            Access::Open => Ok(()),
            Access::User(p) if p.holds(Action::Publish) => Ok(()),
            Access::User(_) => Err(ResponseError::ClusterAuthorizationFailed),
        }
    }

    /// Whether the topic shows in Metadata: the user may publish, consume or administer it.
    pub fn sees(&self, name: &str) -> bool {
        [Action::Publish, Action::Consume, Action::Admin]
            .into_iter()
            .any(|action| self.may(action, name))
    }

    /// Takes the topics the user may not publish to out of `request`; their answers.
    pub fn produce(&self, request: &mut ProduceRequest) -> Vec<TopicProduceResponse> {
        let (allowed, denied) = std::mem::take(&mut request.topic_data)
            .into_iter()
            .partition(|t| self.may(Action::Publish, t.name.0.as_str()));
        request.topic_data = allowed;
        denied
            .into_iter()
            .map(|topic| {
                let partitions = topic
                    .partition_data
                    .iter()
                    .map(|p| {
                        PartitionProduceResponse::default()
                            .with_index(p.index)
                            .with_error_code(DENIED.code())
                            .with_base_offset(-1)
                    })
                    .collect();
                TopicProduceResponse::default()
                    .with_name(topic.name)
                    .with_partition_responses(partitions)
            })
            .collect()
    }

    /// Takes the topics the user may not consume out of `request`; their answers. A
    /// refusal answers at once, as any failed partition does, so the fetch no longer waits.
    pub fn fetch(&self, request: &mut FetchRequest) -> Vec<FetchableTopicResponse> {
        let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| self.may(Action::Consume, t.topic.0.as_str()));
        request.topics = allowed;
        if !denied.is_empty() {
            request.max_wait_ms = 0;
        }
        denied
            .into_iter()
            .map(|topic| {
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        PartitionData::default()
                            .with_partition_index(p.partition)
                            .with_error_code(DENIED.code())
                            .with_high_watermark(-1)
                            .with_last_stable_offset(-1)
                            .with_log_start_offset(-1)
                    })
                    .collect();
                FetchableTopicResponse::default()
                    .with_topic(topic.topic)
                    .with_topic_id(topic.topic_id)
                    .with_partitions(partitions)
            })
            .collect()
    }

    /// Takes the topics the user may not consume out of `request`; their answers.
    pub fn list_offsets(&self, request: &mut ListOffsetsRequest) -> Vec<ListOffsetsTopicResponse> {
        let (allowed, denied) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| self.may(Action::Consume, t.name.0.as_str()));
        request.topics = allowed;
        denied
            .into_iter()
            .map(|topic| {
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        ListOffsetsPartitionResponse::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(DENIED.code())
                            .with_timestamp(-1)
                            .with_offset(-1)
                    })
                    .collect();
                ListOffsetsTopicResponse::default()
                    .with_name(topic.name)
                    .with_partitions(partitions)
            })
            .collect()
    }

    /// Takes the topics the user may not administer out of `request`; their answers.
    pub fn create_topics(&self, request: &mut CreateTopicsRequest) -> Vec<CreatableTopicResult> {
        let (allowed, denied) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| self.may(Action::Admin, t.name.0.as_str()));
        request.topics = allowed;
        denied
            .into_iter()
            .map(|topic| {
                let message = self.refusal(Action::Admin, topic.name.0.as_str());
                CreatableTopicResult::default()
                    .with_name(topic.name)
                    .with_error_code(DENIED.code())
                    .with_error_message(Some(message))
            })
            .collect()
    }

    /// Takes the topics the user may not administer out of `request`; their answers.
    pub fn delete_topics(&self, request: &mut DeleteTopicsRequest) -> Vec<DeletableTopicResult> {
        let (allowed, denied) = std::mem::take(&mut request.topic_names)
            .into_iter()
            .partition(|name| self.may(Action::Admin, name.0.as_str()));
        request.topic_names = allowed;
        denied
            .into_iter()
            .map(|name| {
                let message = self.refusal(Action::Admin, name.0.as_str());
                DeletableTopicResult::default()
                    .with_name(Some(name))
                    .with_error_code(DENIED.code())
                    .with_error_message(Some(message))
            })
            .collect()
    }

    /// Takes out of `request` the named topics the user may not see, and the missing ones
    /// it may see but not create; [`MetadataCheck::apply`] completes the answer.
    pub fn metadata(
        &self,
        broker: &Broker,
        request: &mut MetadataRequest,
        version: i16,
    ) -> MetadataCheck {
        let mut check = MetadataCheck {
            all: false,
            emptied: false,
            refused: Vec::new(),
            access: self.clone(),
        };
        let Some(topics) = request.topics.as_mut() else {
            check.all = true;
            return check;
        };
        if version == 0 && topics.is_empty() {
            check.all = true;
            return check;
        }
        if matches!(self, Access::Open) {
            return check;
        }
        let before = topics.len();
        topics.retain(|t| {
            // Topics named by id only are answered UNKNOWN_TOPIC_ID by Metadata itself.
            let Some(name) = &t.name else { return true };
            let name = name.0.as_str();
            let code = if !self.sees(name) {
                DENIED
            } else if !self.may(Action::Admin, name) && broker.describe_topic(name).is_err() {
                ResponseError::UnknownTopicOrPartition
            } else {
                return true;
            };
            check.refused.push(
                MetadataResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_error_code(code.code()),
            );
            false
        });
        // An emptied list must not become "every topic" (v0's meaning of an empty list).
        check.emptied = before > 0 && topics.is_empty();
        check
    }

    /// Why a user was refused, for answers that carry a message. It names the user and
    /// the permission that would allow the call — never a secret.
    fn refusal(&self, action: Action, name: &str) -> StrBytes {
        let user = match self {
            Access::Open => "",
            Access::User(p) => &p.name,
        };
        StrBytes::from_string(format!(
            "user {user:?} may not {action} on {name:?}: grant its token a permission like \
             `{action}:{name}`"
        ))
    }
}

/// What [`Access::metadata`] took out of a Metadata request, to complete its answer.
#[derive(Debug)]
pub struct MetadataCheck {
    /// The request asked for every topic: the answer keeps those the user sees.
    all: bool,
    /// Every named topic was refused: the answer lists none but the refusals.
    emptied: bool,
    refused: Vec<MetadataResponseTopic>,
    access: Access,
}

impl MetadataCheck {
    pub fn apply(self, response: &mut MetadataResponse) {
        if self.emptied {
            response.topics.clear();
        }
        if self.all {
            let access = &self.access;
            response
                .topics
                .retain(|t| t.name.as_ref().is_some_and(|n| access.sees(n.0.as_str())));
        }
        response.topics.extend(self.refused);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};

    fn user(permissions: &[&str]) -> Access {
        Access::User(Arc::new(Principal::new(
            "orders-service",
            permissions.iter().map(|p| p.parse().unwrap()).collect(),
        )))
    }

    fn name(n: &str) -> TopicName {
        TopicName(StrBytes::from_string(n.to_owned()))
    }

    #[test]
    fn produce_keeps_the_topics_the_user_may_publish_to_and_refuses_the_rest() {
        let access = user(&["publish:orders.#"]);
        let topic = |n: &str| {
            TopicProduceData::default()
                .with_name(name(n))
                .with_partition_data(vec![
                    PartitionProduceData::default().with_index(0),
                    PartitionProduceData::default().with_index(3),
                ])
        };
        let mut request =
            ProduceRequest::default().with_topic_data(vec![topic("orders.eu"), topic("payments")]);
        let denied = access.produce(&mut request);
        assert_eq!(request.topic_data.len(), 1);
        assert_eq!(request.topic_data[0].name.0.as_str(), "orders.eu");
        assert_eq!(denied.len(), 1);
        assert_eq!(denied[0].name.0.as_str(), "payments");
        let codes: Vec<_> = denied[0]
            .partition_responses
            .iter()
            .map(|p| (p.index, p.error_code))
            .collect();
        assert_eq!(codes, vec![(0, 29), (3, 29)]);
        // Open: nothing is taken out.
        let mut request = ProduceRequest::default().with_topic_data(vec![topic("payments")]);
        assert!(Access::Open.produce(&mut request).is_empty());
        assert_eq!(request.topic_data.len(), 1);
    }

    #[test]
    fn fetch_needs_consume_and_a_refusal_stops_the_long_poll() {
        let access = user(&["publish:orders", "consume:audit"]);
        let topic = |n: &str| {
            FetchTopic::default()
                .with_topic(name(n))
                .with_partitions(vec![FetchPartition::default().with_partition(1)])
        };
        let mut request = FetchRequest::default()
            .with_max_wait_ms(500)
            .with_topics(vec![topic("orders"), topic("audit")]);
        let denied = access.fetch(&mut request);
        assert_eq!(request.topics.len(), 1);
        assert_eq!(request.topics[0].topic.0.as_str(), "audit");
        assert_eq!(denied[0].topic.0.as_str(), "orders");
        assert_eq!(denied[0].partitions[0].error_code, 29);
        assert_eq!(request.max_wait_ms, 0);
    }

    #[test]
    fn cluster_needs_admin_everywhere_and_groups_some_consume() {
        assert_eq!(
            user(&["admin:orders.#"]).cluster(),
            Err(ResponseError::ClusterAuthorizationFailed)
        );
        assert_eq!(user(&["admin:#"]).cluster(), Ok(()));
        assert_eq!(
            user(&["publish:#"]).group("g"),
            Err(ResponseError::GroupAuthorizationFailed)
        );
        assert_eq!(user(&["consume:orders"]).group("g"), Ok(()));
        assert_eq!(Access::Open.cluster(), Ok(()));
    }

    #[test]
    fn admin_apis_need_admin_on_each_topic() {
        use kafka_protocol::messages::create_topics_request::CreatableTopic;
        let access = user(&["admin:orders.#", "publish:#"]);
        let mut request = CreateTopicsRequest::default().with_topics(vec![
            CreatableTopic::default().with_name(name("orders.new")),
            CreatableTopic::default().with_name(name("payments")),
        ]);
        let denied = access.create_topics(&mut request);
        assert_eq!(request.topics.len(), 1);
        assert_eq!(denied[0].name.0.as_str(), "payments");
        assert_eq!(denied[0].error_code, 29);
        let mut request = DeleteTopicsRequest::default().with_topic_names(vec![name("payments")]);
        assert_eq!(access.delete_topics(&mut request).len(), 1);
        assert!(request.topic_names.is_empty());
    }

    #[test]
    fn metadata_lists_only_what_the_user_sees() {
        use kafka_protocol::messages::metadata_response::MetadataResponseTopic as T;
        let access = user(&["consume:orders.#"]);
        let mut response = MetadataResponse::default().with_topics(vec![
            T::default().with_name(Some(name("orders.eu"))),
            T::default().with_name(Some(name("payments"))),
        ]);
        let check = MetadataCheck {
            all: true,
            emptied: false,
            refused: Vec::new(),
            access,
        };
        check.apply(&mut response);
        let names: Vec<_> = response
            .topics
            .iter()
            .map(|t| t.name.as_ref().unwrap().0.as_str())
            .collect();
        assert_eq!(names, vec!["orders.eu"]);
    }
}
