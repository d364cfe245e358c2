//! The `request_decoders` target's input and checks.
//!
//! An input is an HTTP/1.1 request as it reaches the listener, minus the framing hyper
//! does itself:
//!
//! ```text
//! POST /000000000000/queue?Action=… HTTP/1.1      request line: the second word is the target
//! X-Amz-Target: AmazonSQS.SendMessage             headers, one a line (invalid ones dropped,
//! Content-Type: application/x-amz-json-1.0        as hyper would refuse them)
//!                                                 an empty line
//! {"QueueUrl": …}                                 the body, any bytes
//! ```
//!
//! Lines end in `\n` or `\r\n`. A target that is no valid URI is taken as `/` (hyper
//! refuses such a request before the front end sees it). Without an empty line the whole
//! input is the head and the body is empty.
//!
//! Every input goes through SQS's decoders (`ferry_aws::fuzzing::sqs`, which picks JSON
//! 1.0 or query by the headers as the endpoint does) and through SNS's query decoder
//! (`ferry_aws::fuzzing::sns`). Neither may panic, and every refusal must be
//! - a client error (4xx), the status its code has;
//! - in the JSON protocol: `application/x-amz-json-1.0`, a JSON object whose `__type` is
//!   `com.amazonaws.sqs#<shape>` and whose `message` is a string, with
//!   `x-amzn-query-error: <code>;Sender`;
//! - in the query protocol: `text/xml`, an `<ErrorResponse>` naming the code, whose
//!   message holds no markup (whatever of the request it repeats is escaped).

use axum::http::{HeaderMap, HeaderName, HeaderValue, Uri};
use ferry_aws::fuzzing::{self, Decoded, Refusal};

/// A request taken apart as the listener hands it over.
pub struct Request<'a> {
    pub headers: HeaderMap,
    pub uri: Uri,
    pub body: &'a [u8],
}

/// The input format above.
pub fn parse(data: &[u8]) -> Request<'_> {
    let (head, body) = split_head(data);
    let mut lines = head
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let request_line = lines.next().unwrap_or_default();
    let mut words = request_line.split(|b| *b == b' ').filter(|w| !w.is_empty());
    let first = words.next();
    let target = words.next().or(first).unwrap_or(b"/");
    let uri = Uri::try_from(target)
        .ok()
        .filter(|u| u.path().starts_with('/'))
        .unwrap_or_else(|| Uri::from_static("/"));
    let mut headers = HeaderMap::new();
    for line in lines {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let name = HeaderName::from_bytes(line[..colon].trim_ascii());
        let value = HeaderValue::from_bytes(line[colon + 1..].trim_ascii());
        if let (Ok(name), Ok(value)) = (name, value) {
            headers.append(name, value);
        }
    }
    Request { headers, uri, body }
}

fn split_head(data: &[u8]) -> (&[u8], &[u8]) {
    for (i, window) in data.windows(2).enumerate() {
        if window == b"\n\n" {
            return (&data[..i], &data[i + 2..]);
        }
        if window == b"\n\r" && data.get(i + 2) == Some(&b'\n') {
            return (&data[..i], &data[i + 3..]);
        }
    }
    (data, &[])
}

/// The target: both decoders, every refusal checked.
pub fn check(data: &[u8]) {
    let r = parse(data);
    let query = r.uri.query();
    if let Decoded::Refused(refusal) = fuzzing::sqs(&r.headers, r.uri.path(), query, r.body) {
        check_refusal(&refusal, "sqs");
    }
    if let Decoded::Refused(refusal) = fuzzing::sns(query, r.body) {
        assert_eq!(refusal.protocol, "query", "SNS answers in query only");
        check_refusal(&refusal, "sns");
    }
}

fn check_refusal(r: &Refusal, service: &str) {
    assert!(
        (400..500).contains(&r.status),
        "{service}: a decoder refusal is the client's fault: {r:?}"
    );
    assert_eq!(r.status, r.code_status, "{service}: the code's own status");
    let body = std::str::from_utf8(&r.body).expect("a refusal is UTF-8");
    match r.protocol {
        "json" => {
            assert_eq!(r.content_type, "application/x-amz-json-1.0");
            let value: serde_json::Value = serde_json::from_str(body).expect("a JSON refusal");
            let shape = value["__type"].as_str().expect("__type");
            assert!(shape.starts_with("com.amazonaws.sqs#"), "{shape}");
            assert!(value["message"].is_string(), "{body}");
            assert_eq!(
                r.query_error.as_deref(),
                Some(format!("{};Sender", r.code).as_str())
            );
        }
        "query" => {
            assert_eq!(r.content_type, "text/xml");
            assert!(body.starts_with("<?xml"), "{body}");
            assert!(body.contains("<ErrorResponse"), "{body}");
            assert!(body.contains(&format!("<Code>{}</Code>", r.code)), "{body}");
            let message = body
                .split_once("<Message>")
                .and_then(|(_, rest)| rest.split_once("</Message>"))
                .map(|(m, _)| m)
                .expect("a <Message>");
            assert!(
                !message.contains('<') && !message.contains('>'),
                "unescaped markup in the message: {message}"
            );
        }
        other => panic!("an unknown protocol {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every seed through the target, as CI runs it on stable (no fuzzing engine there).
    #[test]
    fn the_seed_corpus_passes_the_checks() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/requests");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            check(&std::fs::read(&path).unwrap());
            seen += 1;
        }
        assert!(seen >= 10, "only {seen} seeds in {}", dir.display());
    }

    #[test]
    fn the_input_format_takes_a_request_apart() {
        let r = parse(
            b"POST /000000000000/q?Action=SendMessage HTTP/1.1\r\nContent-Type: text/plain\r\nBad Header: x\r\n\r\nbody\n\nmore",
        );
        assert_eq!(r.uri.path(), "/000000000000/q");
        assert_eq!(r.uri.query(), Some("Action=SendMessage"));
        assert_eq!(r.headers.len(), 1);
        assert_eq!(r.body, b"body\n\nmore");
        let r = parse(b"no separator at all");
        assert_eq!(r.uri.path(), "/");
        assert!(r.body.is_empty());
    }

    /// Deeply nested parameters, each decoder's worst case: refused, not a stack overflow.
    #[test]
    fn nesting_bombs_are_refused() {
        let deep = "a.".repeat(200_000);
        let sns = format!("POST / HTTP/1.1\n\nAction=Publish&{deep}b=1");
        check(sns.as_bytes());
        let sqs = format!(
            "POST / HTTP/1.1\n\nAction=SendMessageBatch&{}Id=1",
            "SendMessageBatchRequestEntry.1.".repeat(100_000)
        );
        check(sqs.as_bytes());
        let json = format!(
            "POST / HTTP/1.1\nX-Amz-Target: AmazonSQS.SendMessage\n\n{}",
            "[".repeat(100_000)
        );
        check(json.as_bytes());
    }
}
