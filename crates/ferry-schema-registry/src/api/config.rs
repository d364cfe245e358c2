//! `/config`: the compatibility level, global and per subject.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::wire::{self, Params, change, ok};
use crate::{CompatibilityLevel, RegistryError, SchemaRegistry};

type Q = Result<Query<HashMap<String, String>>, QueryRejection>;

/// The level a `PUT /config` body sets: `compatibility` (or `compatibilityLevel`, which
/// some clients send). Other config fields Confluent knows (groups, default metadata and
/// rule sets, normalize, …) are refused by name rather than dropped.
fn level_of(body: Map<String, Value>) -> Result<CompatibilityLevel, RegistryError> {
    let mut level = None;
    for (key, value) in body {
        match (key.as_str(), value) {
            (_, Value::Null) => {}
            ("compatibility" | "compatibilityLevel", Value::String(name)) => {
                let parsed = CompatibilityLevel::parse(&name)?;
                if level.is_some_and(|l| l != parsed) {
                    return Err(RegistryError::InvalidCompatibilityLevel(format!(
                        "{name} (compatibility and compatibilityLevel disagree)"
                    )));
                }
                level = Some(parsed);
            }
            ("compatibility" | "compatibilityLevel", other) => {
                return Err(RegistryError::InvalidCompatibilityLevel(other.to_string()));
            }
            (other, _) => {
                return Err(RegistryError::NotPermitted(format!(
                    "config field {other:?} is not supported yet: only the compatibility level \
                     is set here"
                )));
            }
        }
    }
    level.ok_or_else(|| RegistryError::InvalidCompatibilityLevel("(none given)".to_owned()))
}

/// `GET /config`: `{"compatibilityLevel"}`.
pub(crate) async fn get_global(State(registry): State<Arc<SchemaRegistry>>) -> Response {
    let level = registry.read(|r| r.global_level());
    ok(json!({ "compatibilityLevel": level.as_str() }))
}

/// `PUT /config`: `{"compatibility"}` → the same.
pub(crate) async fn put_global(
    State(registry): State<Arc<SchemaRegistry>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let level = level_of(wire::body(&headers, &body)?)?;
    change(&registry, move |r| {
        r.set_global_level(level);
        Ok(())
    })
    .await?;
    Ok(ok(json!({ "compatibility": level.as_str() })))
}

/// `DELETE /config`: back to the default (BACKWARD); answers the level it replaced.
pub(crate) async fn delete_global(
    State(registry): State<Arc<SchemaRegistry>>,
) -> Result<Response, ApiError> {
    let old = change(&registry, |r| {
        let old = r.global_level();
        r.set_global_level(CompatibilityLevel::default());
        Ok(old)
    })
    .await?;
    Ok(ok(json!({ "compatibilityLevel": old.as_str() })))
}

/// `GET /config/{subject}`: the subject's own level; 40408 when it has none, unless
/// `defaultToGlobal=true`.
pub(crate) async fn get_subject(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
    query: Q,
) -> Result<Response, ApiError> {
    let to_global = Params::from(query)?.flag("defaultToGlobal")?;
    let level = registry.read(|r| match r.subject_level(&subject) {
        Some(level) => Ok(level),
        None if to_global => Ok(r.global_level()),
        None => Err(RegistryError::SubjectLevelNotConfigured(subject.clone())),
    })?;
    Ok(ok(json!({ "compatibilityLevel": level.as_str() })))
}

/// `PUT /config/{subject}`.
pub(crate) async fn put_subject(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let level = level_of(wire::body(&headers, &body)?)?;
    change(&registry, move |r| {
        r.set_subject_level(&subject, level);
        Ok(())
    })
    .await?;
    Ok(ok(json!({ "compatibility": level.as_str() })))
}

/// `DELETE /config/{subject}`: the subject follows the global level again; answers the
/// level it had.
pub(crate) async fn delete_subject(
    State(registry): State<Arc<SchemaRegistry>>,
    Path(subject): Path<String>,
) -> Result<Response, ApiError> {
    let old = change(&registry, move |r| r.delete_subject_level(&subject)).await?;
    Ok(ok(json!({ "compatibilityLevel": old.as_str() })))
}
