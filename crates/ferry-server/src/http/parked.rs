//! Parked keys of a key-shared queue: park, unpark, list.
//!
//! The key is the last path segment: its UTF-8 text, percent-encoded as a path needs, or
//! with `?encoding=base64` its bytes in standard base64 (for keys that are not text).

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::Shared;
use super::error::ApiError;
use super::message::text_or_base64;
use super::path::ApiPath;
use crate::convert;

type Reply<T> = Result<T, ApiError>;

/// How the path writes the key.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Encoding {
    #[default]
    Text,
    Base64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyQuery {
    #[serde(default)]
    encoding: Encoding,
}

fn key_bytes(key: String, query: Result<Query<KeyQuery>, QueryRejection>) -> Reply<Bytes> {
    let Query(q) = query?;
    let key = match q.encoding {
        Encoding::Text => Bytes::from(key),
        Encoding::Base64 => BASE64
            .decode(key.as_bytes())
            .map(Bytes::from)
            .map_err(|e| {
                ApiError::bad_request(
                    "bad_base64",
                    format!("the key is not standard base64 (encoding=base64): {e}"),
                )
            })?,
    };
    convert::parked_key(&key)?;
    Ok(key)
}

// Parking and unparking take the right to consume the queue, as over gRPC: the worker
// that meets a poison message is the one to hold its key (see the Admin service).

pub async fn park(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath((queue, key)): ApiPath<(String, String)>,
    query: Result<Query<KeyQuery>, QueryRejection>,
) -> Reply<StatusCode> {
    s.allow_read(&headers, &queue)?;
    let key = key_bytes(key, query)?;
    s.broker.park(&queue, &key).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn unpark(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath((queue, key)): ApiPath<(String, String)>,
    query: Result<Query<KeyQuery>, QueryRejection>,
) -> Reply<StatusCode> {
    s.allow_read(&headers, &queue)?;
    let key = key_bytes(key, query)?;
    s.broker.unpark(&queue, &key).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A parked key: `key` when it is UTF-8, `key_base64` otherwise.
#[derive(Debug, Serialize)]
pub struct Parked {
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_base64: Option<String>,
    /// Its messages held back, not counting one in flight.
    held: usize,
}

#[derive(Debug, Serialize)]
pub struct ParkedKeys {
    keys: Vec<Parked>,
}

pub async fn list_parked(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(queue): ApiPath<String>,
) -> Reply<Json<ParkedKeys>> {
    s.allow_read(&headers, &queue)?;
    let keys = s
        .broker
        .parked_keys(&queue)?
        .into_iter()
        .map(|p| {
            let (key, key_base64) = text_or_base64(&p.key);
            Parked {
                key,
                key_base64,
                held: p.held,
            }
        })
        .collect();
    Ok(Json(ParkedKeys { keys }))
}
