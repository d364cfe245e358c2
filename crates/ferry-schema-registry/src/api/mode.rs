//! `/mode` and `/mode/{subject}`: READWRITE, READONLY or IMPORT, for the whole registry
//! or one subject (which then overrides the global mode for that subject).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::error::ApiError;
use super::wire::{self, Params, change, ok};
use crate::{Mode, RegistryError, SchemaRegistry};

type Q = Result<Query<HashMap<String, String>>, QueryRejection>;

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
    query: Q,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let force = Params::from(query)?.flag("force")?;
    let request: ModeRequest = wire::body(&headers, &body)?;
    let mode = Mode::parse(&request.mode)?;
    change(&registry, move |r| r.set_mode(mode, force)).await?;
    Ok(ok(json!({ "mode": mode.as_str() })))
}

/// `GET /mode/{subject}`: the subject's own mode; 40409 when it has none, unless
/// `defaultToGlobal=true`.
pub(crate) async fn get_subject(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
    query: Q,
) -> Result<Response, ApiError> {
    let to_global = Params::from(query)?.flag("defaultToGlobal")?;
    let mode = registry.read(|r| match r.subject_mode(&subject) {
        Some(mode) => Ok(mode),
        None if to_global => Ok(r.mode()),
        None => Err(RegistryError::SubjectModeNotConfigured(subject.clone())),
    })?;
    Ok(ok(json!({ "mode": mode.as_str() })))
}

/// `PUT /mode/{subject}`: `{"mode"}` → the same; `force=true` enters IMPORT on a subject
/// that already has versions.
pub(crate) async fn put_subject(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
    query: Q,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let force = Params::from(query)?.flag("force")?;
    let request: ModeRequest = wire::body(&headers, &body)?;
    let mode = Mode::parse(&request.mode)?;
    change(&registry, move |r| {
        r.set_subject_mode(&subject, mode, force)
    })
    .await?;
    Ok(ok(json!({ "mode": mode.as_str() })))
}

/// `DELETE /mode/{subject}`: the subject follows the global mode again; answers the mode
/// it had.
pub(crate) async fn delete_subject(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
) -> Result<Response, ApiError> {
    let old = change(&registry, move |r| r.delete_subject_mode(&subject)).await?;
    Ok(ok(json!({ "mode": old.as_str() })))
}
