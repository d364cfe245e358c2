//! `POST /v1/topics/{topic}/groups/{group}/offsets`: moving a consumer group's committed
//! offsets — of one partition or of all — to the start, the end, an offset or a time, as
//! an operator does to replay or to skip a backlog.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use bytes::Bytes;
use ferry_broker::Position;
use serde::Deserialize;

use super::error::ApiError;
use super::message::GroupInfo;
use super::path::ApiPath;
use super::{Shared, parse};
use crate::auth::Action;
use crate::convert;

/// `"earliest"`, `"latest"`, `{"offset": n}` or `{"timestamp_ms": t}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum To {
    Earliest,
    Latest,
    Offset(u64),
    TimestampMs(i64),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Reset {
    /// Absent or `null`: every partition.
    #[serde(default)]
    partition: Option<u32>,
    to: To,
}

/// As resetting offsets over gRPC needs: `admin` on the topic. Answers the group as
/// `GET /v1/topics/{topic}/groups/{group}` does, after the reset.
pub async fn reset_offsets(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath((topic, group)): ApiPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<GroupInfo>, ApiError> {
    s.allow(&headers, Action::Admin, &topic)?;
    let r: Reset = parse(&body?)?;
    let to = match r.to {
        To::Earliest => Position::Earliest,
        To::Latest => Position::Latest,
        To::Offset(o) => Position::Offset(o),
        To::TimestampMs(t) => Position::Timestamp(t),
    };
    s.broker
        .reset_group_offsets(&topic, &group, r.partition, to)?;
    let info = s.broker.describe_group(&topic, &group)?;
    Ok(Json(convert::group_info(info).into()))
}
