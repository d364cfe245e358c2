//! What crosses the wire besides the handlers' own shapes: the media type, request bodies
//! and query parameters read into typed values (or a Confluent-shaped refusal), and the
//! JSON of a schema and of a subject's version.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::error::ApiError;
use crate::model::Registry;
use crate::{NewSchema, Reference, RegisteredVersion, RegistryError, SchemaRegistry, SchemaType};

/// The media type of every answer.
pub const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// The request media types taken: Confluent's two and plain JSON.
const ACCEPTED: [&str; 3] = [
    CONTENT_TYPE,
    "application/vnd.schemaregistry+json",
    "application/json",
];

pub(crate) fn json(status: StatusCode, value: &Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

pub(crate) fn ok(value: Value) -> Response {
    json(StatusCode::OK, &value)
}

/// A schema's own text, as `…/schema` endpoints answer it (not wrapped in an object).
pub(crate) fn raw_schema(text: &str) -> Response {
    let mut response = text.to_owned().into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}

/// A request body of type `T`: a media type this API takes (or none), then JSON of the
/// right shape.
pub(crate) fn body<T: DeserializeOwned>(headers: &HeaderMap, body: &Bytes) -> Result<T, ApiError> {
    if let Some(value) = headers.get(header::CONTENT_TYPE) {
        let media = value
            .to_str()
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim();
        if !ACCEPTED.iter().any(|a| a.eq_ignore_ascii_case(media)) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                415,
                format!(
                    "content type {media:?} is not taken: send {}",
                    ACCEPTED.join(" or ")
                ),
            ));
        }
    }
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
    serde_json::from_value(value).map_err(|e| ApiError::unprocessable(e.to_string()))
}

/// The query string's parameters. Parameters this API does not know are left alone, as
/// Confluent's registry leaves them; the ones it knows are read strictly.
pub(crate) struct Params(HashMap<String, String>);

impl Params {
    pub(crate) fn from(
        query: Result<Query<HashMap<String, String>>, QueryRejection>,
    ) -> Result<Params, ApiError> {
        query
            .map(|Query(map)| Params(map))
            .map_err(|e| ApiError::bad_request(format!("bad query string: {e}")))
    }

    /// `true` or `false` in any case (Python clients send `True`); absent is false.
    pub(crate) fn flag(&self, name: &str) -> Result<bool, ApiError> {
        match self.0.get(name).map(String::as_str) {
            None => Ok(false),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") || v.is_empty() => Ok(false),
            Some(v) => Err(ApiError::bad_request(format!(
                "query parameter {name} is true or false, not {v:?}"
            ))),
        }
    }

    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// `offset` (default 0) and `limit` (default and any negative: no limit) applied to
    /// a listing.
    pub(crate) fn page<T>(&self, items: Vec<T>) -> Result<Vec<T>, ApiError> {
        let number = |name: &str| -> Result<Option<i64>, ApiError> {
            self.text(name)
                .map(|v| {
                    v.parse::<i64>().map_err(|_| {
                        ApiError::bad_request(format!(
                            "query parameter {name} is a number, not {v:?}"
                        ))
                    })
                })
                .transpose()
        };
        let offset = usize::try_from(number("offset")?.unwrap_or(0).max(0)).unwrap_or(usize::MAX);
        let limit = match number("limit")? {
            Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
            _ => usize::MAX,
        };
        Ok(items.into_iter().skip(offset).take(limit).collect())
    }

    /// Refuses `normalize=true`: normalizing a schema before storing it is not done yet,
    /// and taking the flag without doing it would store something else than asked.
    pub(crate) fn refuse_normalize(&self) -> Result<(), ApiError> {
        if self.flag("normalize")? {
            return Err(RegistryError::NotPermitted(
                "normalize=true is not supported yet: register the schema as it should be stored"
                    .to_owned(),
            )
            .into());
        }
        Ok(())
    }

    /// How a schema is served: as registered, or `format=serialized` — a Protobuf schema
    /// as a base64 `FileDescriptorProto`, which Confluent's Protobuf deserializers ask for.
    /// Other formats (`resolved`, `ignore_extensions`) are refused.
    pub(crate) fn format(&self) -> Result<SchemaFormat, ApiError> {
        match self.text("format") {
            None | Some("") | Some("default") => Ok(SchemaFormat::AsRegistered),
            Some("serialized") => Ok(SchemaFormat::Serialized),
            Some(other) => Err(RegistryError::NotPermitted(format!(
                "format={other} is not supported yet: leave it out for the schema as \
                 registered, or ask format=serialized for a Protobuf schema's descriptor"
            ))
            .into()),
        }
    }

    /// Refuses a `format` other than the default: only schemas as registered are served.
    pub(crate) fn refuse_format(&self) -> Result<(), ApiError> {
        match self.text("format") {
            None | Some("") | Some("default") => Ok(()),
            Some(other) => Err(RegistryError::NotPermitted(format!(
                "format={other} is not supported yet: leave it out for the schema as registered"
            ))
            .into()),
        }
    }

    /// Which deleted things a listing shows: `deleted_only` wins over `deleted`.
    pub(crate) fn deleted(&self) -> Result<crate::Deleted, ApiError> {
        Ok(if self.flag("deleted_only")? {
            crate::Deleted::Only
        } else if self.flag("deleted")? {
            crate::Deleted::Include
        } else {
            crate::Deleted::Exclude
        })
    }
}

/// How a schema's text is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchemaFormat {
    AsRegistered,
    /// Protobuf only: the compiled file as a base64 `FileDescriptorProto`.
    Serialized,
}

/// `schema` as `format` asks, its references resolved in `registry` when it must be
/// compiled.
pub(crate) fn formatted(
    registry: &Registry,
    mut schema: crate::StoredSchema,
    format: SchemaFormat,
) -> Result<crate::StoredSchema, RegistryError> {
    if format == SchemaFormat::AsRegistered {
        return Ok(schema);
    }
    if schema.schema_type != SchemaType::Protobuf {
        return Err(RegistryError::NotPermitted(format!(
            "format=serialized is for PROTOBUF schemas; this one is {}",
            schema.schema_type.as_str()
        )));
    }
    let references = registry.resolve_references(&schema.references)?;
    let compiled = crate::protobuf::parse(&schema.schema, &references)
        .map_err(|e| RegistryError::Store(format!("a stored schema no longer compiles: {e}")))?;
    schema.schema = crate::protobuf::serialized(&compiled);
    Ok(schema)
}

/// A schema in a register, lookup or compatibility request.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SchemaRequest {
    schema: Option<String>,
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<ReferenceRequest>,
    metadata: Option<Value>,
    rule_set: Option<Value>,
    id: Option<i64>,
    version: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReferenceRequest {
    name: String,
    subject: String,
    version: i64,
}

impl SchemaRequest {
    pub(crate) fn into_new(self) -> Result<NewSchema, RegistryError> {
        let schema_type = SchemaType::parse(self.schema_type.as_deref())?;
        let schema = self
            .schema
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| {
                RegistryError::InvalidSchema("Empty schema: send it in \"schema\"".to_owned())
            })?;
        if self.metadata.as_ref().is_some_and(|v| !v.is_null())
            || self.rule_set.as_ref().is_some_and(|v| !v.is_null())
        {
            return Err(RegistryError::NotPermitted(
                "schema metadata and rule sets are not supported yet: register the schema \
                 without them"
                    .to_owned(),
            ));
        }
        let references = self
            .references
            .into_iter()
            .map(|r| {
                let version = u32::try_from(r.version)
                    .ok()
                    .filter(|v| (1..=i32::MAX as u32).contains(v))
                    .ok_or_else(|| RegistryError::InvalidVersion(r.version.to_string()))?;
                Ok(Reference {
                    name: r.name,
                    subject: r.subject,
                    version,
                })
            })
            .collect::<Result<_, RegistryError>>()?;
        let positive = |n: Option<i64>, what: &str| -> Result<Option<u32>, RegistryError> {
            n.map(|n| {
                u32::try_from(n)
                    .ok()
                    .filter(|v| (1..=i32::MAX as u32).contains(v))
                    .ok_or_else(|| {
                        RegistryError::InvalidSchema(format!(
                            "{what} {n} is out of range: 1 to 2^31-1"
                        ))
                    })
            })
            .transpose()
        };
        Ok(NewSchema {
            schema_type,
            schema,
            references,
            id: positive(self.id, "id")?,
            version: positive(self.version, "version")?,
        })
    }
}

/// `schemaType` and `references` beside a schema, left out when they are the defaults
/// (AVRO, none), as Confluent leaves them out.
fn schema_fields(map: &mut Map<String, Value>, schema: &crate::StoredSchema) {
    map.insert("schema".into(), Value::String(schema.schema.clone()));
    if schema.schema_type != SchemaType::Avro {
        map.insert("schemaType".into(), json!(schema.schema_type.as_str()));
    }
    if !schema.references.is_empty() {
        let refs: Vec<Value> = schema
            .references
            .iter()
            .map(|r| json!({"name": r.name, "subject": r.subject, "version": r.version}))
            .collect();
        map.insert("references".into(), Value::Array(refs));
    }
}

pub(crate) fn schema_json(schema: &crate::StoredSchema) -> Value {
    let mut map = Map::new();
    schema_fields(&mut map, schema);
    Value::Object(map)
}

pub(crate) fn version_json(v: &RegisteredVersion) -> Value {
    let mut map = Map::new();
    map.insert("subject".into(), json!(v.subject));
    map.insert("version".into(), json!(v.version));
    map.insert("id".into(), json!(v.id));
    schema_fields(&mut map, &v.schema);
    Value::Object(map)
}

/// Runs a change on the blocking pool: it fsyncs the store.
pub(crate) async fn change<T: Send + 'static>(
    registry: &Arc<SchemaRegistry>,
    f: impl FnOnce(&mut Registry) -> Result<T, RegistryError> + Send + 'static,
) -> Result<T, ApiError> {
    let registry = Arc::clone(registry);
    tokio::task::spawn_blocking(move || registry.change(f))
        .await
        .map_err(|e| {
            ApiError::from(RegistryError::Store(format!(
                "the change did not finish: {e}"
            )))
        })?
        .map_err(ApiError::from)
}
