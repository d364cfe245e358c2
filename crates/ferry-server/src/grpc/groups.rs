//! `ferry.v1.Groups`: Kafka-style consumer groups over topics, and reads by position.

use std::sync::Arc;
use std::time::Duration;

use ferry_broker::{Broker, GroupJoin, ReadLimit, StartAt};
use ferry_proto::v1::{self, groups_server::Groups};
use tonic::{Request, Response, Status};

use super::allow;
use crate::auth::{Action, Gate};
use crate::convert::{self, ConvertError};
use crate::status::{from_broker, from_convert};

pub struct GroupsService {
    pub broker: Broker,
    pub gate: Arc<Gate>,
    /// The most message bytes one poll or read answers with (see
    /// [`crate::Server::max_read_bytes`]).
    pub max_read_bytes: usize,
}

type Reply<T> = Result<Response<T>, Status>;

/// Records one poll or read returns at most, whatever is asked.
const MAX_RECORDS: usize = 10_000;

fn records_wanted(max: u32) -> usize {
    if max == 0 {
        500
    } else {
        (max as usize).min(MAX_RECORDS)
    }
}

impl GroupsService {
    /// `max_records` as asked (within [`MAX_RECORDS`]), and the server's bytes.
    fn limit(&self, max_records: u32) -> ReadLimit {
        ReadLimit {
            messages: records_wanted(max_records),
            bytes: self.max_read_bytes,
        }
    }
}

#[tonic::async_trait]
impl Groups for GroupsService {
    async fn join(&self, r: Request<v1::JoinGroupRequest>) -> Reply<v1::Membership> {
        allow(&self.gate, &r, Action::Consume, &r.get_ref().topic)?;
        let r = r.into_inner();
        let mut join = GroupJoin {
            member_id: r.member_id,
            instance_id: r.instance_id,
            ..GroupJoin::default()
        };
        if let Some(ms) = r.session_timeout_ms {
            join.session_timeout = Duration::from_millis(ms);
        }
        join.start = match v1::GroupStart::try_from(r.start) {
            Ok(v1::GroupStart::Unspecified | v1::GroupStart::Earliest) => StartAt::Earliest,
            Ok(v1::GroupStart::Latest) => StartAt::Latest,
            Err(_) => {
                return Err(from_convert(ConvertError::UnknownEnum {
                    field: "start",
                    value: r.start,
                }));
            }
        };
        let membership = self
            .broker
            .join_group(&r.topic, &r.group, join)
            .await
            .map_err(from_broker)?;
        Ok(Response::new(convert::membership(membership)))
    }

    async fn heartbeat(&self, r: Request<v1::HeartbeatRequest>) -> Reply<v1::Membership> {
        allow(&self.gate, &r, Action::Consume, &r.get_ref().topic)?;
        let r = r.into_inner();
        let membership = self
            .broker
            .heartbeat(&r.topic, &r.group, &r.member_id)
            .map_err(from_broker)?;
        Ok(Response::new(convert::membership(membership)))
    }

    async fn leave(&self, r: Request<v1::LeaveGroupRequest>) -> Reply<v1::LeaveGroupResponse> {
        allow(&self.gate, &r, Action::Consume, &r.get_ref().topic)?;
        let r = r.into_inner();
        self.broker
            .leave_group(&r.topic, &r.group, &r.member_id)
            .map_err(from_broker)?;
        Ok(Response::new(v1::LeaveGroupResponse {}))
    }

    async fn poll(&self, r: Request<v1::PollRequest>) -> Reply<v1::PollResponse> {
        allow(&self.gate, &r, Action::Consume, &r.get_ref().topic)?;
        let r = r.into_inner();
        let records = self
            .broker
            .poll_group_within(&r.topic, &r.group, &r.member_id, self.limit(r.max_records))
            .map_err(from_broker)?;
        Ok(Response::new(v1::PollResponse {
            records: records.into_iter().map(convert::record).collect(),
        }))
    }

    async fn commit(&self, r: Request<v1::CommitRequest>) -> Reply<v1::CommitResponse> {
        allow(&self.gate, &r, Action::Consume, &r.get_ref().topic)?;
        let r = r.into_inner();
        self.broker
            .commit_offset(&r.topic, &r.group, &r.member_id, r.partition, r.offset)
            .map_err(from_broker)?;
        Ok(Response::new(v1::CommitResponse {}))
    }

    async fn read_topic(&self, r: Request<v1::ReadTopicRequest>) -> Reply<v1::ReadTopicResponse> {
        allow(&self.gate, &r, Action::Consume, &r.get_ref().topic)?;
        let r = r.into_inner();
        let from = convert::position(r.from).map_err(from_convert)?;
        let records = self
            .broker
            .read_topic_within(&r.topic, r.partition, from, self.limit(r.max_records))
            .map_err(from_broker)?;
        Ok(Response::new(v1::ReadTopicResponse {
            records: records.into_iter().map(convert::record).collect(),
        }))
    }
}
