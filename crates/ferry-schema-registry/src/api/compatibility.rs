//! `/compatibility`: whether a schema could be registered, without registering it.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use serde_json::json;

use super::error::ApiError;
use super::wire::{self, Params, SchemaRequest, ok};
use crate::{SchemaRegistry, VersionSpec};

type Q = Result<Query<HashMap<String, String>>, QueryRejection>;

/// `POST /compatibility/subjects/{subject}/versions/{version}`: against that version, in
/// the directions of the subject's level. `{"is_compatible"}`, with `"messages"` saying
/// why not when `verbose=true`.
pub(crate) async fn against_version(
    State(registry): State<Arc<SchemaRegistry>>,
    Path((subject, version)): Path<(String, String)>,
    query: Q,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let spec = VersionSpec::parse(&version)?;
    answer(&registry, &subject, Some(spec), query, &headers, &body)
}

/// `POST /compatibility/subjects/{subject}/versions`: against the versions the subject's
/// level names, as a registration would be checked.
pub(crate) async fn against_level(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
    query: Q,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    answer(&registry, &subject, None, query, &headers, &body)
}

fn answer(
    registry: &SchemaRegistry,
    subject: &str,
    version: Option<VersionSpec>,
    query: Q,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let params = Params::from(query)?;
    params.refuse_normalize()?;
    let verbose = params.flag("verbose")?;
    let new = wire::body::<SchemaRequest>(headers, body)?.into_new()?;
    let messages = registry.read(|r| r.check(subject, version, &new))?;
    let compatible = messages.is_empty();
    Ok(ok(if verbose {
        json!({ "is_compatible": compatible, "messages": messages })
    } else {
        json!({ "is_compatible": compatible })
    }))
}
