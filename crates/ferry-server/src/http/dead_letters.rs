//! Dead letters: peek at them (filtered, paged, redacted headers masked) and redrive them.

use axum::Json;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use bytes::Bytes;
use ferry_broker::{ReadLimit, RedriveRequest};
use ferry_proto::v1;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::message::Delivery;
use super::path::ApiPath;
use super::{Shared, parse};
use crate::auth::Action;
use crate::convert;
use crate::redaction::Redaction;

type Reply<T> = Result<T, ApiError>;

/// Which dead letters: every condition set must hold. Ages count from when the message
/// was dead-lettered.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// `max_deliveries`, `rejected`, `expired` or `overflow`.
    pub(crate) reason: Option<String>,
    pub(crate) header_name: Option<String>,
    pub(crate) header_value: Option<String>,
    pub(crate) older_than_ms: Option<u64>,
    pub(crate) newer_than_ms: Option<u64>,
}

impl Filter {
    /// The broker's filter, refused if it names a header `redaction` masks.
    pub(crate) fn into_broker(
        self,
        redaction: &Redaction,
    ) -> Result<ferry_broker::RedriveFilter, ApiError> {
        redaction
            .check_filter(self.header_name.as_deref())
            .map_err(|e| ApiError::bad_request("redacted_header", e.to_string()))?;
        Ok(convert::dead_letter_filter(Some(v1::DeadLetterFilter {
            reason: self.reason,
            header_name: self.header_name,
            header_value: self.header_value,
            older_than_ms: self.older_than_ms,
            newer_than_ms: self.newer_than_ms,
        }))?)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peek {
    reason: Option<String>,
    header_name: Option<String>,
    header_value: Option<String>,
    older_than_ms: Option<u64>,
    newer_than_ms: Option<u64>,
    /// Page on: the `next_after_seq` of the previous page.
    after_seq: Option<u64>,
    max: Option<usize>,
}

#[derive(Serialize)]
pub struct Peeked {
    letters: Vec<Delivery>,
    /// Pass as `after_seq` for the next page; absent when this page was empty.
    next_after_seq: Option<u64>,
    /// The page ended at its count or byte limit with letters after it not yet looked
    /// at: ask again from `next_after_seq`.
    more: bool,
}

pub async fn peek(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(dlq): ApiPath<String>,
    query: Result<Query<Peek>, QueryRejection>,
) -> Reply<Json<Peeked>> {
    s.allow_read(&headers, &dlq)?;
    let Query(q) = query?;
    let filter = Filter {
        reason: q.reason,
        header_name: q.header_name,
        header_value: q.header_value,
        older_than_ms: q.older_than_ms,
        newer_than_ms: q.newer_than_ms,
    }
    .into_broker(&s.redaction)?;
    let limit = ReadLimit {
        messages: q.max.unwrap_or(100),
        bytes: s.max_read_bytes,
    };
    let page = s.broker.peek_within(&dlq, q.after_seq, limit, &filter)?;
    let next_after_seq = page.messages.last().map(|l| l.seq);
    Ok(Json(Peeked {
        more: page.more,
        letters: page
            .messages
            .into_iter()
            .map(|l| {
                let mut letter = convert::peeked(l);
                s.redaction.mask(&mut letter.headers);
                letter.into()
            })
            .collect(),
        next_after_seq,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Redrive {
    /// Absent: each message back to the queue it was dead-lettered from.
    target: Option<String>,
    #[serde(default)]
    filter: Filter,
    max_messages: Option<usize>,
    rate_per_sec: Option<u32>,
}

#[derive(Serialize)]
pub struct Redriven {
    moved: usize,
    skipped: usize,
}

pub async fn redrive(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(dlq): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Json<Redriven>> {
    let who = s.allow(&headers, Action::DeadLetters, &dlq)?;
    let r: Redrive = parse(&body?)?;
    // A named target is written to as a publish would: publishing there is needed too.
    if let Some(target) = &r.target {
        s.gate.allow(who, Action::Publish, target)?;
    }
    let request = RedriveRequest {
        target: r.target,
        filter: r.filter.into_broker(&s.redaction)?,
        max_messages: r.max_messages,
        rate_per_sec: r.rate_per_sec,
    };
    // In a task of its own: a client that goes away must not cut a redrive between
    // publishing a message into its target and settling it here (it would move again).
    let broker = s.broker.clone();
    let report = tokio::spawn(async move { broker.redrive(&dlq, request).await })
        .await
        .map_err(|e| {
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("the redrive task failed: {e}"),
            )
        })??;
    Ok(Json(Redriven {
        moved: report.moved,
        skipped: report.skipped,
    }))
}
