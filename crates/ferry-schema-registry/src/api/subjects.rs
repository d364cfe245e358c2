//! `/subjects`: listing subjects and versions, registering, looking up, reading and
//! deleting versions.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use serde_json::json;

use super::error::ApiError;
use super::wire::{self, Params, SchemaRequest, change, ok, raw_schema, version_json};
use crate::{SchemaRegistry, VersionSpec};

type Q = Result<Query<HashMap<String, String>>, QueryRejection>;

/// `GET /subjects`: `subject` filters by prefix; `deleted`, `deleted_only`, `offset`,
/// `limit`.
pub(crate) async fn list_subjects(
    State(registry): State<Arc<SchemaRegistry>>,
    query: Q,
) -> Result<Response, ApiError> {
    let params = Params::from(query)?;
    let deleted = params.deleted()?;
    let prefix = params.text("subject").unwrap_or_default().to_owned();
    let names = registry.read(|r| r.subjects(&prefix, deleted));
    Ok(ok(json!(params.page(names)?)))
}

/// `GET /subjects/{subject}/versions`.
pub(crate) async fn list_versions(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
    query: Q,
) -> Result<Response, ApiError> {
    let params = Params::from(query)?;
    let deleted = params.deleted()?;
    let versions = registry.read(|r| r.versions(&subject, deleted))?;
    Ok(ok(json!(params.page(versions)?)))
}

/// `POST /subjects/{subject}/versions`: registers, answering `{"id"}`; the same schema
/// again answers the same id and adds no version.
pub(crate) async fn register(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
    query: Q,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    Params::from(query)?.refuse_normalize()?;
    let new = wire::body::<SchemaRequest>(&headers, &body)?.into_new()?;
    let id = change(&registry, move |r| r.register(&subject, &new)).await?;
    Ok(ok(json!({ "id": id })))
}

/// `POST /subjects/{subject}`: the version holding this schema; `deleted` looks among
/// soft-deleted versions too.
pub(crate) async fn lookup(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
    query: Q,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let params = Params::from(query)?;
    params.refuse_normalize()?;
    params.refuse_format()?;
    let include_deleted = params.flag("deleted")?;
    let new = wire::body::<SchemaRequest>(&headers, &body)?.into_new()?;
    let found = registry.read(|r| r.lookup(&subject, &new, include_deleted))?;
    Ok(ok(version_json(&found)))
}

/// `GET /subjects/{subject}/versions/{version}`: a number, `latest` or -1.
pub(crate) async fn get_version(
    State(registry): State<Arc<SchemaRegistry>>,
    Path((subject, version)): Path<(String, String)>,
    query: Q,
) -> Result<Response, ApiError> {
    let params = Params::from(query)?;
    let format = params.format()?;
    let spec = VersionSpec::parse(&version)?;
    let include_deleted = params.flag("deleted")?;
    let found = registry.read(|r| {
        let mut found = r.version(&subject, spec, include_deleted)?;
        found.schema = wire::formatted(r, found.schema, format)?;
        Ok::<_, crate::RegistryError>(found)
    })?;
    Ok(ok(version_json(&found)))
}

/// `GET /subjects/{subject}/versions/{version}/schema`: the schema's text alone.
pub(crate) async fn get_version_schema(
    State(registry): State<Arc<SchemaRegistry>>,
    Path((subject, version)): Path<(String, String)>,
    query: Q,
) -> Result<Response, ApiError> {
    let params = Params::from(query)?;
    let format = params.format()?;
    let spec = VersionSpec::parse(&version)?;
    let include_deleted = params.flag("deleted")?;
    let schema = registry.read(|r| {
        let found = r.version(&subject, spec, include_deleted)?;
        wire::formatted(r, found.schema, format)
    })?;
    Ok(raw_schema(&schema.schema))
}

/// `DELETE /subjects/{subject}`: soft; `permanent=true` after a soft delete removes it.
/// Answers the versions deleted.
pub(crate) async fn delete_subject(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
    query: Q,
) -> Result<Response, ApiError> {
    let permanent = Params::from(query)?.flag("permanent")?;
    let versions = change(&registry, move |r| r.delete_subject(&subject, permanent)).await?;
    Ok(ok(json!(versions)))
}

/// `DELETE /subjects/{subject}/versions/{version}`: soft; `permanent=true` after a soft
/// delete removes it. Answers the version.
pub(crate) async fn delete_version(
    State(registry): State<Arc<SchemaRegistry>>,
    Path((subject, version)): Path<(String, String)>,
    query: Q,
) -> Result<Response, ApiError> {
    let permanent = Params::from(query)?.flag("permanent")?;
    let spec = VersionSpec::parse(&version)?;
    let deleted = change(&registry, move |r| {
        r.delete_version(&subject, spec, permanent)
    })
    .await?;
    Ok(ok(json!(deleted)))
}

/// `GET /subjects/{subject}/versions/{version}/referencedby`: the ids of the live schemas
/// that reference that version.
pub(crate) async fn referenced_by(
    State(registry): State<Arc<SchemaRegistry>>,
    Path((subject, version)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let spec = VersionSpec::parse(&version)?;
    let ids = registry.read(|r| r.referenced_by(&subject, spec))?;
    Ok(ok(json!(ids)))
}
