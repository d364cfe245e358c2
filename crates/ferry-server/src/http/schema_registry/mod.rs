//! The schema registry (`ferry-schema-registry`) under `/schema-registry`, behind the
//! API's tokens. Confluent's clients authenticate to a registry with HTTP Basic
//! (`basic.auth.user.info = user:password`), so besides `Authorization: Bearer <token>`
//! this accepts Basic credentials whose password is the token (the user name is not
//! checked: the token alone says who calls). Refusals come in the registry's own error
//! shape (`{"error_code": 401, "message"}`), which those clients read.
//!
//! What a token may do is per subject (`permissions`): `schema_read` / `schema_write` on
//! the subjects a pattern matches; `admin:#`, the operator's token, may do everything.

mod permissions;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ferry_access::Action;
use ferry_schema_registry::api::{self, ApiError};
use serde_json::Value;

use self::permissions::{ListShape, Need};
use super::Shared;
use crate::auth::{Caller, Refusal};

/// The largest list answer cut to readable subjects: every subject's name, far beyond any
/// registry's size.
const MAX_LIST_BODY: usize = 64 << 20;

/// Where the registry is served.
pub const PREFIX: &str = "/schema-registry";

/// The registry's API under [`PREFIX`], or nothing when the server has no registry.
pub(super) fn router(shared: &Shared) -> Router<Shared> {
    let Some(registry) = &shared.schema_registry else {
        return Router::new();
    };
    let service = api::router(registry.clone())
        .layer(middleware::from_fn_with_state(shared.clone(), authenticate));
    Router::new().nest_service(PREFIX, service)
}

/// A valid token first, before the body is read, as for `/v1` (see `super::authenticate`);
/// then what the call needs on its subjects.
async fn authenticate(State(s): State<Shared>, request: Request, next: Next) -> Response {
    let bearer = basic_password(request.headers()).map(|password| format!("Bearer {password}"));
    let authorization = bearer.as_deref().or_else(|| {
        request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
    });
    let caller = match s.gate.caller(authorization) {
        Ok(caller) => caller,
        Err(refusal) => {
            refusal.log("schema-registry");
            return ApiError::new(StatusCode::UNAUTHORIZED, 401, refusal.to_string())
                .into_response();
        }
    };
    if s.gate.may_every(caller, Action::Admin) {
        return next.run(request).await;
    }
    match permissions::need(request.method(), request.uri().path()) {
        Need::Token => next.run(request).await,
        Need::Subject(action, subject) => match s.gate.allow(caller, action, &subject) {
            Ok(()) => next.run(request).await,
            Err(refusal) => forbidden(&refusal),
        },
        Need::EverySubject(action) => {
            if s.gate.may_every(caller, action) {
                next.run(request).await
            } else {
                match s.gate.allow(caller, action, "#") {
                    Ok(()) => next.run(request).await,
                    Err(refusal) => forbidden(&refusal),
                }
            }
        }
        Need::SchemaId(id) => {
            if may_read_schema(&s, caller, id) {
                next.run(request).await
            } else {
                tracing::info!(
                    protocol = "schema-registry",
                    id,
                    "call refused: no subject of the schema is readable"
                );
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    40301,
                    format!(
                        "the token may not read schema {id}: grant it `schema_read` on a \
                         subject that holds it"
                    ),
                )
                .into_response()
            }
        }
        Need::ReadableList(shape) => {
            if s.gate.may_every(caller, Action::SchemaRead) {
                return next.run(request).await;
            }
            let answer = next.run(request).await;
            readable_only(&s, caller, shape, answer).await
        }
    }
}

fn forbidden(refusal: &Refusal) -> Response {
    refusal.log("schema-registry");
    ApiError::new(StatusCode::FORBIDDEN, 40301, refusal.to_string()).into_response()
}

/// Whether some subject holding schema `id` (deleted versions included, as the registry
/// still serves those ids) is readable by `caller`. An unknown id is let through for the
/// registry's own 404.
fn may_read_schema(s: &Shared, caller: Caller, id: u32) -> bool {
    let Some(registry) = &s.schema_registry else {
        return true;
    };
    match registry.read(|r| r.versions_of_id(id, true)) {
        Err(_) => true,
        Ok(holders) => holders
            .iter()
            .any(|(subject, _)| s.gate.may(caller, Action::SchemaRead, subject)),
    }
}

/// `answer` with the list items naming subjects `caller` may not read left out. An error
/// answer, or one that is not a list, passes unchanged.
async fn readable_only(s: &Shared, caller: Caller, shape: ListShape, answer: Response) -> Response {
    if !answer.status().is_success() {
        return answer;
    }
    let (mut parts, body) = answer.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_LIST_BODY).await else {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            50001,
            "the subject list could not be read to filter it".to_owned(),
        )
        .into_response();
    };
    let Ok(Value::Array(items)) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let subject_of = |item: &Value| -> Option<String> {
        match shape {
            ListShape::Names => item.as_str().map(str::to_owned),
            ListShape::SubjectVersions => item.get("subject")?.as_str().map(str::to_owned),
        }
    };
    let kept: Vec<Value> = items
        .into_iter()
        .filter(|item| {
            subject_of(item).is_some_and(|subject| s.gate.may(caller, Action::SchemaRead, &subject))
        })
        .collect();
    let body = serde_json::to_vec(&kept).expect("JSON values serialize");
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

/// The password of `Authorization: Basic base64(user:password)`, if that is what came.
fn basic_password(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(BASE64.decode(encoded.trim()).ok()?).ok()?;
    let (_, password) = decoded.split_once(':')?;
    Some(password.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_password_of_basic_credentials_is_the_token() {
        let mut headers = HeaderMap::new();
        let encoded = BASE64.encode("svc:s3cret:with-colon");
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Basic {encoded}")).unwrap(),
        );
        assert_eq!(
            basic_password(&headers).as_deref(),
            Some("s3cret:with-colon")
        );
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(basic_password(&headers), None);
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic !!"));
        assert_eq!(basic_password(&headers), None);
    }
}
