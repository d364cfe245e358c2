//! `POST /v1/temporary-queues`: a temporary queue for an HTTP client. An HTTP client holds
//! no connection across calls, so its queue lives until its idle timeout (or until a gRPC
//! Consume stream of its owner on it ends, see `crate::temporary`): every receive on it
//! restarts that clock.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::{Shared, parse};
use crate::temporary;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateTemporary {
    owner: String,
    idle_timeout_ms: Option<u64>,
}

#[derive(Serialize)]
pub struct CreatedTemporary {
    name: String,
    idle_timeout_ms: u64,
}

pub async fn create_temporary_queue(
    State(s): State<Shared>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<CreatedTemporary>), ApiError> {
    let r: CreateTemporary = parse(&body?)?;
    let who = s.caller(&headers)?;
    temporary::allow_create(&s.gate, who)?;
    let (name, idle) = temporary::create(&s.broker, &r.owner, r.idle_timeout_ms).await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedTemporary {
            name: name.to_string(),
            idle_timeout_ms: idle.as_millis() as u64,
        }),
    ))
}
