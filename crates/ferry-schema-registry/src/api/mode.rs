//! `/mode`: READWRITE, READONLY or IMPORT, for the whole registry.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::error::ApiError;
use super::wire::{self, Params, change, ok};
use crate::{Mode, SchemaRegistry};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModeRequest {
    mode: String,
}

/// `GET /mode`: `{"mode"}`.
pub(crate) async fn get(State(registry): State<Arc<SchemaRegistry>>) -> Response {
    ok(json!({ "mode": registry.read(|r| r.mode()).as_str() }))
}

/// `PUT /mode`: `{"mode"}` → the same; `force=true` enters IMPORT on a registry that
/// already holds schemas.
pub(crate) async fn put(
    State(registry): State<Arc<SchemaRegistry>>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let force = Params::from(query)?.flag("force")?;
    let request: ModeRequest = wire::body(&headers, &body)?;
    let mode = Mode::parse(&request.mode)?;
    change(&registry, move |r| r.set_mode(mode, force)).await?;
    Ok(ok(json!({ "mode": mode.as_str() })))
}
