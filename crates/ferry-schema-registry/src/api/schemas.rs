//! `/schemas`: schemas by global id, and the types this registry takes.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::error::ApiError;
use super::wire::{Params, formatted, ok, raw_schema, schema_json};
use crate::{RegistryError, SchemaRegistry};

type Q = Result<Query<HashMap<String, String>>, QueryRejection>;

/// An id from the path; anything but a number names no schema.
fn id(text: &str) -> Result<u32, ApiError> {
    text.parse::<u32>().map_err(|_| {
        ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            40403,
            format!("Schema {text} not found: a schema id is a positive number"),
        )
    })
}

/// `GET /schemas/ids/{id}`: `{"schema", "schemaType"?, "references"?}`, soft-deleted
/// schemas included (messages written with them still need them). `subject` only picks
/// a schema context, and this registry has one, so it changes nothing; `fetchMaxId=true`
/// adds the highest id in use as `maxId`.
pub(crate) async fn by_id(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(text): Path<String>,
    query: Q,
) -> Result<Response, ApiError> {
    let params = Params::from(query)?;
    let format = params.format()?;
    let id = id(&text)?;
    let max_id = params.flag("fetchMaxId")?;
    let answer = registry.read(|r| -> Result<Value, RegistryError> {
        let mut value = schema_json(&formatted(r, r.schema(id)?.clone(), format)?);
        if max_id {
            value["maxId"] = json!(r.max_id());
        }
        Ok(value)
    })?;
    Ok(ok(answer))
}

/// `GET /schemas/ids/{id}/schema`: the schema's text alone.
pub(crate) async fn raw_by_id(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(text): Path<String>,
    query: Q,
) -> Result<Response, ApiError> {
    let format = Params::from(query)?.format()?;
    let id = id(&text)?;
    let schema = registry.read(|r| formatted(r, r.schema(id)?.clone(), format))?;
    Ok(raw_schema(&schema.schema))
}

/// `GET /schemas/ids/{id}/versions`: `[{"subject", "version"}]`; `deleted` adds the
/// soft-deleted ones.
pub(crate) async fn versions(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(text): Path<String>,
    query: Q,
) -> Result<Response, ApiError> {
    let params = Params::from(query)?;
    let id = id(&text)?;
    let deleted = params.flag("deleted")?;
    let pairs = registry.read(|r| r.versions_of_id(id, deleted))?;
    let pairs: Vec<Value> = pairs
        .into_iter()
        .filter(|(subject, _)| params.text("subject").is_none_or(|s| s == subject))
        .map(|(subject, version)| json!({"subject": subject, "version": version}))
        .collect();
    Ok(ok(json!(params.page(pairs)?)))
}

/// `GET /schemas/ids/{id}/subjects`: the subjects holding the schema.
pub(crate) async fn subjects(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(text): Path<String>,
    query: Q,
) -> Result<Response, ApiError> {
    let params = Params::from(query)?;
    let id = id(&text)?;
    let deleted = params.flag("deleted")?;
    let mut names: Vec<String> = registry
        .read(|r| r.versions_of_id(id, deleted))?
        .into_iter()
        .map(|(subject, _)| subject)
        .filter(|subject| params.text("subject").is_none_or(|s| s == subject))
        .collect();
    names.dedup();
    Ok(ok(json!(params.page(names)?)))
}

/// `GET /schemas/types`: the three formats, in the order Confluent lists them.
pub(crate) async fn types() -> Response {
    ok(json!(["JSON", "PROTOBUF", "AVRO"]))
}
