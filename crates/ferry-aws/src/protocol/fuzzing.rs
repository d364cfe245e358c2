//! The request decoders as the fuzz target (`crates/ferry-aws/fuzz`) calls them: not an
//! API. Each takes what the listener hands the front end (headers, the URL's path and
//! query, the body) and says what the decoder made of it: an action with its input, or
//! the refusal the client is answered with, rendered by the protocol's own `refuse`.

use std::future::Future;

use axum::body::Body;
use axum::http::{HeaderMap, Response};
use serde_json::{Map, Value};

use super::Protocol;

/// What a decoder made of a request.
#[derive(Debug)]
pub enum Decoded {
    /// An action to run, with its input in the service model's shape.
    Action {
        action: String,
        input: Map<String, Value>,
    },
    /// Refused before any action ran.
    Refused(Refusal),
}

/// A refusal as the client gets it.
#[derive(Debug)]
pub struct Refusal {
    /// The error code (the query protocol's, which the JSON protocol repeats in
    /// `x-amzn-query-error`).
    pub code: &'static str,
    /// The code's own HTTP status.
    pub code_status: u16,
    /// The answer's status, content type and body.
    pub status: u16,
    pub content_type: String,
    pub query_error: Option<String>,
    pub body: Vec<u8>,
    /// The protocol answered in: `"json"` or `"query"` (SNS answers in query only).
    pub protocol: &'static str,
}

/// SQS's decoders, chosen by the headers as the endpoint chooses them.
pub fn sqs(headers: &HeaderMap, path: &str, query: Option<&str>, body: &[u8]) -> Decoded {
    match super::decode(headers, path, query, body) {
        Ok(request) => Decoded::Action {
            action: request.action,
            input: request.input,
        },
        Err((protocol, error)) => Decoded::Refused(refusal(
            error.code.query_code(),
            error.code.status(),
            match protocol {
                Protocol::Json => "json",
                Protocol::Query => "query",
            },
            super::refuse(protocol, &error, "fuzz"),
        )),
    }
}

/// SNS's query decoder (the URL's query and a form body).
pub fn sns(query: Option<&str>, body: &[u8]) -> Decoded {
    let pairs = crate::sns::query::pairs(query, body);
    match crate::sns::query::decode(&pairs) {
        Ok((action, input)) => Decoded::Action { action, input },
        Err(error) => Decoded::Refused(refusal(
            error.code.query_code(),
            error.code.status(),
            "query",
            crate::sns::query::refuse(&error, "fuzz"),
        )),
    }
}

fn refusal(
    code: &'static str,
    code_status: u16,
    protocol: &'static str,
    answer: Response<Body>,
) -> Refusal {
    let header = |name: &str| {
        answer
            .headers()
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let content_type = header("content-type").unwrap_or_default();
    let query_error = header("x-amzn-query-error");
    let status = answer.status().as_u16();
    Refusal {
        code,
        code_status,
        status,
        content_type,
        query_error,
        body: body_bytes(answer.into_body()),
        protocol,
    }
}

/// A full body's bytes: the refusals' bodies are in memory, so the first poll has them.
fn body_bytes(body: Body) -> Vec<u8> {
    let mut read = std::pin::pin!(axum::body::to_bytes(body, usize::MAX));
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match read.as_mut().poll(&mut context) {
        std::task::Poll::Ready(Ok(bytes)) => bytes.to_vec(),
        std::task::Poll::Ready(Err(e)) => panic!("an in-memory body failed: {e}"),
        std::task::Poll::Pending => panic!("an in-memory body was not ready"),
    }
}
