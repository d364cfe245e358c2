//! Arbitrary requests into the HTTP API's router, in process, against a broker of its own
//! in a temporary directory: every request body is decoded and converted into broker
//! types by the real handlers. Whatever the input,
//! - no request is answered 500, nor any other 5xx but 501 (a valid request for what
//!   the broker does not do): bad input is the caller's error, and the broker's storage
//!   is healthy here;
//! - every failure has the API's error shape, `{"error": "...", "code": "..."}`;
//! - nothing panics or hangs.
//!
//! Input: up to MAX_REQUESTS requests, separated by a line `---`; each is a line
//! `METHOD /path` and then the body, e.g.
//!     POST /v1/queues
//!     {"name": "jobs"}
//!     ---
//!     POST /v1/queues/jobs/messages
//!     {"messages": [{"payload": "hi"}]}
//!
//! Run (from crates/ferry-server; nightly):
//!     cargo fuzz run http_api -- -max_total_time=600 -timeout=10

#![no_main]

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use ferry_broker::{Broker, BrokerConfig};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

const MAX_REQUESTS: usize = 8;
/// Bodies are small here; the limit itself is the server's to enforce.
const MAX_BODY: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let requests: Vec<(Method, String, Vec<u8>)> = split(data)
        .into_iter()
        .filter_map(|chunk| {
            let (head, body) = match chunk.iter().position(|&b| b == b'\n') {
                Some(at) => (&chunk[..at], &chunk[at + 1..]),
                None => (chunk, &[][..]),
            };
            let head = std::str::from_utf8(head).ok()?;
            let (method, path) = head.trim_end().split_once(' ')?;
            let method = Method::from_bytes(method.as_bytes()).ok()?;
            Some((method, path.to_owned(), body.to_vec()))
        })
        .take(MAX_REQUESTS)
        .collect();
    if requests.is_empty() {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(run(requests));
});

async fn run(requests: Vec<(Method, String, Vec<u8>)>) {
    let dir = tempfile::Builder::new()
        .prefix("ferry-http-fuzz")
        .tempdir_in(scratch())
        .expect("a temporary directory");
    let config = BrokerConfig {
        background_timers: false,
        seed: Some(7),
        ..BrokerConfig::default()
    };
    let broker = Broker::open(dir.path(), config)
        .await
        .expect("a broker in a new directory");
    // No tokens, the default batch limit and the default redaction list, as `ferry serve`
    // runs: masking is on the peek path fuzzed here.
    let app = ferry_server::Server::new(broker)
        .max_http_body(MAX_BODY)
        .into_http_router();
    for (method, path, body) in requests {
        // A path the HTTP layer itself would refuse never reaches the router.
        let Ok(request) = Request::builder()
            .method(method.clone())
            .uri(&path)
            .body(Body::from(body.clone()))
        else {
            continue;
        };
        let response = app.clone().oneshot(request).await.expect("infallible");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a whole body");
        let shown = || {
            format!(
                "{method} {path} {:?} -> {status} {}",
                String::from_utf8_lossy(&body),
                String::from_utf8_lossy(&bytes)
            )
        };
        assert!(
            !status.is_server_error() || status == StatusCode::NOT_IMPLEMENTED,
            "{}",
            shown()
        );
        if status.is_client_error() || status.is_server_error() {
            let error: serde_json::Value = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("an error that is not JSON ({e}): {}", shown()));
            assert!(
                error["error"].is_string() && error["code"].is_string(),
                "{}",
                shown()
            );
        }
    }
}

/// The input's requests: chunks between lines of `---`.
fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(at) = find(rest, b"\n---\n") {
        out.push(&rest[..at]);
        rest = &rest[at + 5..];
    }
    out.push(rest);
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A RAM-backed directory when there is one: the broker fsyncs every change.
fn scratch() -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}
