//! The two wire protocols SQS speaks, as thin codecs around one set of actions: a request
//! becomes an action name and a JSON object shaped as the service model's input (the JSON
//! protocol's own shape), and an action's output — a JSON object shaped as the model's
//! output — becomes the protocol's answer.
//!
//! - AWS JSON 1.0 (`json.rs`): `POST /` with `X-Amz-Target: AmazonSQS.<Action>`; errors
//!   as `{"__type", "message"}` with the query code in `x-amzn-query-error`.
//! - Query (`query.rs`): form-encoded `Action=…&Version=2012-11-05` (body or URL), XML
//!   answers, XML `ErrorResponse`s.

#[doc(hidden)]
pub mod fuzzing;
pub mod json;
pub mod query;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode};
use serde_json::{Map, Value};

use crate::errors::{Code, SqsError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Json,
    Query,
}

/// A decoded request.
#[derive(Debug)]
pub struct Request {
    pub protocol: Protocol,
    pub action: String,
    pub input: Map<String, Value>,
}

/// The protocol a request's headers name, to answer it in before it is decoded.
pub fn of(headers: &HeaderMap) -> Protocol {
    let json_content = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/x-amz-json"));
    if headers.contains_key("x-amz-target") || json_content {
        Protocol::Json
    } else {
        Protocol::Query
    }
}

/// Decodes a request by the protocol its headers name. A failure comes with the protocol
/// to answer it in.
pub fn decode(
    headers: &HeaderMap,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> Result<Request, (Protocol, SqsError)> {
    if let Some(target) = headers.get("x-amz-target") {
        let target = target.to_str().unwrap_or("");
        return json::decode(target, body).map_err(|e| (Protocol::Json, e));
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.starts_with("application/x-amz-json") {
        return Err((
            Protocol::Json,
            SqsError::new(
                Code::InvalidAction,
                "The request has no X-Amz-Target header.",
            ),
        ));
    }
    query::decode(path, query, body).map_err(|e| (Protocol::Query, e))
}

/// A successful answer.
pub fn answer(
    protocol: Protocol,
    action: &str,
    output: &Value,
    request_id: &str,
) -> Response<Body> {
    match protocol {
        Protocol::Json => json::answer(output, request_id),
        Protocol::Query => query::answer(action, output, request_id),
    }
}

/// A failed answer.
pub fn refuse(protocol: Protocol, error: &SqsError, request_id: &str) -> Response<Body> {
    match protocol {
        Protocol::Json => json::refuse(error, request_id),
        Protocol::Query => query::refuse(error, request_id),
    }
}

pub(crate) fn response(
    status: u16,
    content_type: &'static str,
    request_id: &str,
    body: Vec<u8>,
) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let headers = response.headers_mut();
    headers.insert("content-type", HeaderValue::from_static(content_type));
    if let Ok(id) = HeaderValue::from_str(request_id) {
        headers.insert("x-amzn-requestid", id);
    }
    response
}
