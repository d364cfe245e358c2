//! `GET /v1/queues/{queue}/messages`: looking through any queue's messages without taking
//! them — the broker's peek, which leases nothing and counts no delivery — filtered by
//! key, header, age or dead-letter reason, paged by seq, headers masked as dead-letter
//! peeks mask them.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use bytes::Bytes;
use ferry_broker::{MAX_PEEK, ReadLimit};
use serde::{Deserialize, Serialize};

use super::Shared;
use super::dead_letters::Filter;
use super::error::ApiError;
use super::message::Delivery;
use super::path::ApiPath;
use crate::convert;

/// Messages per page unless asked.
const DEFAULT_MAX: usize = 100;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Browse {
    /// Messages whose key is exactly this UTF-8 text.
    key: Option<String>,
    header_name: Option<String>,
    header_value: Option<String>,
    older_than_ms: Option<u64>,
    newer_than_ms: Option<u64>,
    reason: Option<String>,
    after_seq: Option<u64>,
    max: Option<usize>,
}

/// A message as browsing shows it: a delivery without a lease, and whether a consumer
/// holds it right now.
#[derive(Serialize)]
pub struct Browsed {
    #[serde(flatten)]
    message: Delivery,
    in_flight: bool,
}

#[derive(Serialize)]
pub struct BrowsePage {
    messages: Vec<Browsed>,
    /// Pass as `after_seq` for the next page; absent when this page was empty.
    next_after_seq: Option<u64>,
    /// The page ended at its count or byte limit: ask again from `next_after_seq`.
    more: bool,
}

/// As reading the queue needs (`consume`, or `dead_letters` on a dead-letter queue).
pub async fn browse(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(queue): ApiPath<String>,
    query: Result<Query<Browse>, QueryRejection>,
) -> Result<Json<BrowsePage>, ApiError> {
    s.allow_read(&headers, &queue)?;
    let Query(q) = query?;
    let max = q.max.unwrap_or(DEFAULT_MAX);
    if !(1..=MAX_PEEK).contains(&max) {
        return Err(ApiError::bad_request(
            "out_of_range",
            format!("max is 1 to {MAX_PEEK} messages, got {max}"),
        ));
    }
    let mut filter = Filter {
        reason: q.reason,
        header_name: q.header_name,
        header_value: q.header_value,
        older_than_ms: q.older_than_ms,
        newer_than_ms: q.newer_than_ms,
    }
    .into_broker(&s.redaction)?;
    filter.key = q.key.map(Bytes::from);
    let limit = ReadLimit {
        messages: max,
        bytes: s.max_read_bytes,
    };
    let page = s.broker.peek_within(&queue, q.after_seq, limit, &filter)?;
    let next_after_seq = page.messages.last().map(|m| m.seq);
    Ok(Json(BrowsePage {
        more: page.more,
        messages: page
            .messages
            .into_iter()
            .map(|m| {
                let in_flight = m.in_flight;
                let mut message = convert::peeked(m);
                s.redaction.mask(&mut message.headers);
                Browsed {
                    message: message.into(),
                    in_flight,
                }
            })
            .collect(),
        next_after_seq,
    }))
}
