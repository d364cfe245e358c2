//! AWS JSON 1.0: the input is the body's object as is, the output is written as is;
//! errors carry the modeled exception's shape in `__type` and the query code with its
//! fault in `x-amzn-query-error`, which SDKs of the JSON protocol read to raise the same
//! error codes as the query protocol's (the service is query-compatible).

use axum::body::Body;
use axum::http::{HeaderValue, Response};
use serde_json::{Value, json};

use super::{Protocol, Request, response};
use crate::errors::{Code, SqsError};

const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

pub fn decode(target: &str, body: &[u8]) -> Result<Request, SqsError> {
    let Some(action) = target.strip_prefix("AmazonSQS.") else {
        return Err(SqsError::new(
            Code::InvalidAction,
            format!(
                "X-Amz-Target {:?} is not an SQS action: use AmazonSQS.<Action>",
                target.chars().take(100).collect::<String>()
            ),
        ));
    };
    let input = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Map::new()
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(SqsError::invalid("The request body must be a JSON object.")),
            Err(e) => {
                return Err(SqsError::invalid(format!(
                    "The request body is not valid JSON: {e}"
                )));
            }
        }
    };
    Ok(Request {
        protocol: Protocol::Json,
        action: action.to_owned(),
        input,
    })
}

pub fn answer(output: &Value, request_id: &str) -> Response<Body> {
    response(
        200,
        CONTENT_TYPE,
        request_id,
        output.to_string().into_bytes(),
    )
}

pub fn refuse(error: &SqsError, request_id: &str) -> Response<Body> {
    let body = json!({
        "__type": format!("com.amazonaws.sqs#{}", error.code.shape()),
        "message": error.message,
    });
    let mut response = response(
        error.code.status(),
        CONTENT_TYPE,
        request_id,
        body.to_string().into_bytes(),
    );
    let query_error = format!("{};{}", error.code.query_code(), error.code.fault());
    if let Ok(value) = HeaderValue::from_str(&query_error) {
        response.headers_mut().insert("x-amzn-query-error", value);
    }
    response
}
