//! The schema registry (`ferry-schema-registry`) under `/schema-registry`, behind the
//! API's tokens. Confluent's clients authenticate to a registry with HTTP Basic
//! (`basic.auth.user.info = user:password`), so besides `Authorization: Bearer <token>`
//! this accepts Basic credentials whose password is the token (the user name is not
//! checked: the token alone says who calls). Refusals come in the registry's own error
//! shape (`{"error_code": 401, "message"}`), which those clients read.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ferry_schema_registry::api::{self, ApiError};

use super::Shared;

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

/// A valid token first, before the body is read, as for `/v1` (see `super::authenticate`).
async fn authenticate(State(s): State<Shared>, request: Request, next: Next) -> Response {
    let bearer = basic_password(request.headers()).map(|password| format!("Bearer {password}"));
    let authorization = bearer.as_deref().or_else(|| {
        request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
    });
    match s.gate.caller(authorization) {
        Ok(_) => next.run(request).await,
        Err(refusal) => {
            refusal.log("schema-registry");
            ApiError::new(StatusCode::UNAUTHORIZED, 401, refusal.to_string()).into_response()
        }
    }
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
