//! Request/reply over PostgreSQL: the suite's behaviours, with a named reply queue (queues
//! are rows in shared tables, bound to no session, so there are no temporary queues). Runs
//! against `FERRY_POSTGRES_URL` (default: the machine's server); skips loudly when nothing
//! answers, and fails instead under `CI=true`.
#![cfg(feature = "postgres")]

mod request_reply_support;

use ferry::Ferry;

async fn connect() -> Option<Ferry> {
    let url = ferry_testkit::url_or_skip(
        "PostgreSQL",
        "FERRY_POSTGRES_URL",
        "postgres://postgres@127.0.0.1:5432/test",
    )?;
    Some(Ferry::connect(&url).await.expect("connect to PostgreSQL"))
}

request_reply_tests!(connect());
