//! The topic admin APIs' part of [`Access`] (see `authz.rs`): changing a topic's partitions,
//! configs or records needs `admin` on it (TOPIC_AUTHORIZATION_FAILED per topic); reading
//! its configs needs seeing it; the broker resource (node "0") is the cluster's, read or
//! changed with `admin:#` (CLUSTER_AUTHORIZATION_FAILED). Each takes the refused parts out of
//! the request and gives their answers, so a refusal changes nothing.

use ferry_access::Action;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::{
    AlterConfigsRequest, CreatePartitionsRequest, DeleteRecordsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, alter_configs_response, incremental_alter_configs_response,
};
use kafka_protocol::protocol::StrBytes;

use crate::authz::Access;

/// Kafka's resource type of a topic in the config APIs; every other type is the cluster's
/// (the broker, its loggers) as far as permissions go.
const TOPIC_RESOURCE: i8 = 2;

impl Access {
    /// `admin` on the topic, or `admin:#` for a resource of the cluster.
    fn administers(&self, resource_type: i8, name: &str) -> Result<(), ResponseError> {
        if resource_type == TOPIC_RESOURCE {
            self.topic(Action::Admin, name)
        } else {
            self.cluster()
        }
    }

    /// Seeing the topic, or `admin:#` for a resource of the cluster.
    fn reads_config(&self, resource_type: i8, name: &str) -> Result<(), ResponseError> {
        if resource_type == TOPIC_RESOURCE {
            if self.sees(name) {
                Ok(())
            } else {
                Err(ResponseError::TopicAuthorizationFailed)
            }
        } else {
            self.cluster()
        }
    }

    pub fn create_partitions(
        &self,
        request: &mut CreatePartitionsRequest,
    ) -> Vec<CreatePartitionsTopicResult> {
        let (allowed, denied) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| self.may(Action::Admin, t.name.0.as_str()));
        request.topics = allowed;
        denied
            .into_iter()
            .map(|t| {
                CreatePartitionsTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(needs("admin"))
            })
            .collect()
    }

    pub fn describe_configs(
        &self,
        request: &mut DescribeConfigsRequest,
    ) -> Vec<DescribeConfigsResult> {
        refuse_resources(
            &mut request.resources,
            |r| self.reads_config(r.resource_type, r.resource_name.as_str()),
            |r, code| {
                DescribeConfigsResult::default()
                    .with_error_code(code.code())
                    .with_error_message(needs("publish, consume or admin"))
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name)
            },
        )
    }

    pub fn alter_configs(
        &self,
        request: &mut AlterConfigsRequest,
    ) -> Vec<alter_configs_response::AlterConfigsResourceResponse> {
        refuse_resources(
            &mut request.resources,
            |r| self.administers(r.resource_type, r.resource_name.as_str()),
            |r, code| {
                alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(needs("admin"))
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name)
            },
        )
    }

    pub fn incremental_alter_configs(
        &self,
        request: &mut IncrementalAlterConfigsRequest,
    ) -> Vec<incremental_alter_configs_response::AlterConfigsResourceResponse> {
        refuse_resources(
            &mut request.resources,
            |r| self.administers(r.resource_type, r.resource_name.as_str()),
            |r, code| {
                incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(needs("admin"))
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name)
            },
        )
    }

    pub fn delete_records(
        &self,
        request: &mut DeleteRecordsRequest,
    ) -> Vec<DeleteRecordsTopicResult> {
        let (allowed, denied) = std::mem::take(&mut request.topics)
            .into_iter()
            .partition(|t| self.may(Action::Admin, t.name.0.as_str()));
        request.topics = allowed;
        denied
            .into_iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        DeleteRecordsPartitionResult::default()
                            .with_partition_index(p.partition_index)
                            .with_low_watermark(-1)
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    })
                    .collect();
                DeleteRecordsTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(partitions)
            })
            .collect()
    }
}

/// Takes the resources `check` refuses out of `resources`; their answers, made by `answer`
/// with the refusal's code.
fn refuse_resources<R, A>(
    resources: &mut Vec<R>,
    check: impl Fn(&R) -> Result<(), ResponseError>,
    answer: impl Fn(R, ResponseError) -> A,
) -> Vec<A> {
    let mut refused = Vec::new();
    let mut kept = Vec::with_capacity(resources.len());
    for resource in resources.drain(..) {
        match check(&resource) {
            Ok(()) => kept.push(resource),
            Err(code) => refused.push(answer(resource, code)),
        }
    }
    *resources = kept;
    refused
}

fn needs(permission: &str) -> Option<StrBytes> {
    Some(StrBytes::from_string(format!(
        "this needs the {permission} permission on the resource"
    )))
}
