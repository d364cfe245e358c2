//! Failures as HTTP responses: the status from the kind of failure, and a JSON body
//! `{"error": "<what went wrong and what to do>", "code": "<snake_case kind>"}`. The code
//! of a broker error is its variant's name (`queue_not_found`, `stale_lease`), so a client
//! program can tell failures apart without parsing the message. A payload refused by its
//! channel's schema subject (`schema_violation`, 422) also names the failing field's path
//! in `"field"` when the refusal is about one field rather than the whole payload.

use axum::Json;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ferry_broker::BrokerError;
use serde::Serialize;

use crate::auth::Refusal;
use crate::convert::ConvertError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: String,
    pub message: String,
    /// The failing field of a schema violation.
    pub field: Option<String>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: &'a str,
    code: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: &self.message,
            code: &self.code,
            field: self.field.as_deref(),
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 9110: a 401 names the scheme that would be accepted.
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code: code.to_owned(),
            message: message.into(),
            field: None,
        }
    }

    pub fn bad_request(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn malformed_json(error: serde_json::Error) -> ApiError {
        ApiError::bad_request(
            "malformed_json",
            format!("the request body is not the JSON this endpoint takes: {error}"),
        )
    }
}

/// `QueueNotFound { .. }` → `queue_not_found`: the variant's name, from its `Debug` form.
fn variant_code(error: &BrokerError) -> String {
    let debug = format!("{error:?}");
    let name = debug
        .split(|c: char| !c.is_ascii_alphanumeric())
        .next()
        .unwrap_or("broker_error");
    let mut code = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                code.push('_');
            }
            code.push(c.to_ascii_lowercase());
        } else {
            code.push(c);
        }
    }
    code
}

impl From<BrokerError> for ApiError {
    fn from(error: BrokerError) -> ApiError {
        // A write that ran out of space is the same condition to a client as a publish
        // the broker refused for it: one code.
        let code = match &error {
            BrokerError::Storage(e) if e.is_resource_exhausted() => "disk_full".to_owned(),
            other => variant_code(other),
        };
        let mut api = ApiError::new(crate::status::http(&error), &code, error.to_string());
        if let BrokerError::SchemaViolation { field, .. } = &error
            && !field.is_empty()
        {
            api.field = Some(field.clone());
        }
        api
    }
}

impl From<ConvertError> for ApiError {
    fn from(error: ConvertError) -> ApiError {
        let bad = |code: &str, e: ConvertError| ApiError::bad_request(code, e.to_string());
        match error {
            ConvertError::Broker(e) => e.into(),
            e @ ConvertError::Unsupported { .. } => {
                ApiError::new(StatusCode::NOT_IMPLEMENTED, "unsupported", e.to_string())
            }
            e @ ConvertError::UnknownEnum { .. } => bad("unknown_value", e),
            e @ ConvertError::Missing { .. } => bad("missing_field", e),
            e @ ConvertError::OutOfRange { .. } => bad("out_of_range", e),
            e @ ConvertError::Conflict { .. } => bad("conflicting_fields", e),
        }
    }
}

impl From<Refusal> for ApiError {
    /// Every HTTP refusal passes here, so it is logged here.
    fn from(refusal: Refusal) -> ApiError {
        refusal.log("http");
        let (status, code) = crate::status::http_refusal(&refusal);
        ApiError::new(status, code, refusal.to_string())
    }
}

impl From<BytesRejection> for ApiError {
    fn from(r: BytesRejection) -> ApiError {
        let code = if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            "body_too_large"
        } else {
            "unreadable_body"
        };
        ApiError::new(r.status(), code, r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> ApiError {
        ApiError::new(r.status(), "bad_query", r.body_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_errors_get_their_status_and_variant_code() {
        let missing: ApiError = BrokerError::QueueNotFound { queue: "q".into() }.into();
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
        assert_eq!(missing.code, "queue_not_found");
        let stale: ApiError = BrokerError::StaleLease { seq: 1, token: 2 }.into();
        assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
        assert_eq!(stale.code, "stale_lease");
        let bad: ApiError = ferry_broker::Name::new("").unwrap_err().into();
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
        assert_eq!(bad.code, "empty_name");
        let refused: ApiError = BrokerError::DiskFull {
            path: "/data".into(),
            available: 0,
            reserve: 1,
        }
        .into();
        assert_eq!(refused.status, StatusCode::INSUFFICIENT_STORAGE);
        assert_eq!(refused.code, "disk_full");
        let failed: ApiError = BrokerError::Storage(ferry_broker::StorageError::DiskFull {
            path: "/data".into(),
        })
        .into();
        assert_eq!(failed.status, StatusCode::INSUFFICIENT_STORAGE);
        assert_eq!(failed.code, "disk_full");
    }
}
