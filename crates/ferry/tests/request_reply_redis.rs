//! Request/reply over Redis Streams: the suite's behaviours, with a named reply queue (a
//! stream is a key bound to no connection, so there are no temporary queues). Runs against
//! `FERRY_REDIS_URL` (default: the machine's server); skips loudly when nothing answers,
//! and fails instead under `CI=true`.
#![cfg(feature = "redis")]

mod request_reply_support;

use ferry::Ferry;

async fn connect() -> Option<Ferry> {
    let url = ferry_testkit::url_or_skip("Redis", "FERRY_REDIS_URL", "redis://127.0.0.1:6379/0")?;
    Some(Ferry::connect(&url).await.expect("connect to Redis"))
}

request_reply_tests!(connect());
