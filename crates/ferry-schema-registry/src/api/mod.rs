//! The REST API of Confluent Schema Registry, as an axum [`Router`] to mount where the
//! host serves HTTP (Ferry's server nests it under `/schema-registry`). Shapes, media type
//! (`application/vnd.schemaregistry.v1+json`; `application/json` is taken too) and error
//! codes are Confluent's, so its clients and serializers work unchanged.
//!
//! | method | path | answer |
//! | --- | --- | --- |
//! | `GET` | `/subjects` | `["name", ..]`; `subject` (prefix), `deleted`, `deleted_only`, `offset`, `limit` |
//! | `POST` | `/subjects/{s}/versions` | register `{"schema", "schemaType"?, "references"?}` (`AVRO` when absent, `JSON`, `PROTOBUF`) → `{"id"}`; the same schema again → the same id |
//! | `GET` | `/subjects/{s}/versions` | `[1, 2, ..]` |
//! | `GET` | `/subjects/{s}/versions/{v}` | `{"subject", "version", "id", "schema", ..}`; `v` is a number, `latest` or -1 |
//! | `GET` | `/subjects/{s}/versions/{v}/schema` | the schema's text |
//! | `GET` | `/subjects/{s}/versions/{v}/referencedby` | `[id, ..]`: the live schemas referencing it |
//! | `POST` | `/subjects/{s}` | look a schema up → its version, as above |
//! | `DELETE` | `/subjects/{s}` | soft delete → `[versions]`; `permanent=true` after a soft delete removes it |
//! | `DELETE` | `/subjects/{s}/versions/{v}` | the same for one version → `version` |
//! | `GET` | `/schemas/ids/{id}` | `{"schema", ..}` |
//! | `GET` | `/schemas/ids/{id}/schema` | the schema's text |
//! | `GET` | `/schemas/ids/{id}/versions` | `[{"subject", "version"}]` |
//! | `GET` | `/schemas/ids/{id}/subjects` | `["name", ..]` |
//! | `GET` | `/schemas/types` | `["JSON", "PROTOBUF", "AVRO"]` |
//! | `POST` | `/compatibility/subjects/{s}/versions/{v}` | `{"is_compatible"}`, `"messages"` with `verbose=true` |
//! | `POST` | `/compatibility/subjects/{s}/versions` | the same, against what the level names |
//! | `GET`, `PUT`, `DELETE` | `/config`, `/config/{s}` | `{"compatibilityLevel"}`; `PUT` takes and answers `{"compatibility"}` |
//! | `GET`, `PUT` | `/mode` | `{"mode"}`: `READWRITE`, `READONLY`, `IMPORT` |
//! | `GET`, `PUT`, `DELETE` | `/mode/{s}` | the subject's own mode, over the global one; `GET` answers 40409 without one unless `defaultToGlobal=true`; `PUT` takes `force` |
//!
//! Failures answer `{"error_code", "message"}` (see [`ApiError`]).

mod compatibility;
mod config;
pub mod error;
mod mode;
mod schemas;
mod subjects;
pub mod wire;

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};

pub use error::ApiError;
pub use wire::CONTENT_TYPE;

use crate::SchemaRegistry;

/// The API over `registry`, with paths from the root (`/subjects`, …).
pub fn router(registry: Arc<SchemaRegistry>) -> Router {
    Router::new()
        .route("/", get(root))
        .route("/subjects", get(subjects::list_subjects))
        .route(
            "/subjects/{subject}",
            post(subjects::lookup).delete(subjects::delete_subject),
        )
        .route(
            "/subjects/{subject}/versions",
            get(subjects::list_versions).post(subjects::register),
        )
        .route(
            "/subjects/{subject}/versions/{version}",
            get(subjects::get_version).delete(subjects::delete_version),
        )
        .route(
            "/subjects/{subject}/versions/{version}/schema",
            get(subjects::get_version_schema),
        )
        .route(
            "/subjects/{subject}/versions/{version}/referencedby",
            get(subjects::referenced_by),
        )
        .route("/schemas/types", get(schemas::types))
        .route("/schemas/ids/{id}", get(schemas::by_id))
        .route("/schemas/ids/{id}/schema", get(schemas::raw_by_id))
        .route("/schemas/ids/{id}/versions", get(schemas::versions))
        .route("/schemas/ids/{id}/subjects", get(schemas::subjects))
        .route(
            "/compatibility/subjects/{subject}/versions",
            post(compatibility::against_level),
        )
        .route(
            "/compatibility/subjects/{subject}/versions/{version}",
            post(compatibility::against_version),
        )
        .route(
            "/config",
            get(config::get_global)
                .put(config::put_global)
                .delete(config::delete_global),
        )
        .route(
            "/config/{subject}",
            get(config::get_subject)
                .put(config::put_subject)
                .delete(config::delete_subject),
        )
        .route("/mode", get(mode::get).put(mode::put))
        .route(
            "/mode/{subject}",
            get(mode::get_subject)
                .put(mode::put_subject)
                .delete(mode::delete_subject),
        )
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .with_state(registry)
}

/// `GET /`: an empty object, as Confluent answers (clients use it as a liveness probe).
async fn root() -> Response {
    wire::ok(serde_json::json!({}))
}

async fn no_route() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        404,
        "no such schema registry endpoint; see docs/schema-registry.md",
    )
}

async fn wrong_method() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        405,
        "this schema registry endpoint does not take that method; see docs/schema-registry.md",
    )
}
