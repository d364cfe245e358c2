//! `POST /v1/queues/{queue}/purge`: deleting every message of a queue, once the request
//! names the queue again — `{"confirm": "<queue>"}` — so a purge aimed at the wrong queue
//! by a stale page or a slip is refused rather than carried out.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::path::ApiPath;
use super::{Shared, parse};
use crate::auth::Action;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Purge {
    confirm: Option<String>,
}

#[derive(Serialize)]
pub struct Purged {
    purged: u64,
}

/// As deleting the queue needs (`admin`): a purge destroys as much, short of the queue.
pub async fn purge(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(queue): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Purged>, ApiError> {
    s.allow(&headers, Action::Admin, &queue)?;
    let r: Purge = parse(&body?)?;
    if r.confirm.as_deref() != Some(queue.as_str()) {
        return Err(ApiError::bad_request(
            "confirmation_mismatch",
            format!(
                "a purge deletes every message of {queue:?}: send {{\"confirm\": {queue:?}}} \
                 to confirm it"
            ),
        ));
    }
    let purged = s.broker.purge_queue(&queue).await?;
    Ok(Json(Purged { purged }))
}
