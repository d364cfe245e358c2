//! Ferry as an Amazon SQS and SNS endpoint: the SQS and SNS APIs over the broker, for the
//! clients people already have (boto3, the AWS CLI, the AWS SDKs).
//!
//! **SNS** shares the listener (`sns/`, its own head comment and `docs/compat/sns.md`): a
//! request without `X-Amz-Target` whose SigV4 scope names `sns` or whose `Action` is an
//! SNS action is SNS's. An SNS topic is a Ferry topic; a subscription delivers to an SQS
//! queue of this endpoint (the only protocol taken), the front end fanning each publish
//! out to the subscribed queues after writing it to the topic — not atomically: a crash
//! in between leaves some queues without it until the client publishes again. Filter
//! policies, raw delivery, RedrivePolicy and FIFO topics work; notifications are not
//! signed.
//!
//! **Protocols.** AWS JSON 1.0 (`X-Amz-Target: AmazonSQS.<Action>`, what current SDKs
//! send) and the query protocol (`Action=…&Version=2012-11-05`, XML answers, what older
//! SDKs send), as two thin codecs (`protocol/`) around one set of actions (`actions/`).
//!
//! **What maps to what.**
//! - An SQS queue is an ordinary Ferry queue of the same name, visible to `ferry queue
//!   list` and every other API, and a Ferry queue is an SQS queue: attributes the broker's
//!   spec holds are read from it (`attributes.rs` has the table).
//! - SendMessage is a publish: MessageGroupId the ordering key, MessageDeduplicationId (or
//!   the body's SHA-256 with ContentBasedDeduplication) the dedup id, message attributes
//!   headers (`message_attributes.rs`), DelaySeconds a delay, MessageRetentionPeriod a TTL.
//! - ReceiveMessage is a receive under a lease: the visibility timeout is the lease,
//!   ApproximateReceiveCount the delivery count, WaitTimeSeconds the long poll. The
//!   receipt handle is an HMAC-signed (queue, seq, lease token) (`receipt.rs`).
//! - DeleteMessage is an ack; ChangeMessageVisibility an extend, or with 0 a nack that
//!   makes the message visible again at once.
//! - A FIFO queue (`.fifo`) is a key-shared queue: one message of a group in flight at a
//!   time, in send order, deduplicated for 5 minutes.
//! - RedrivePolicy is the queue's dead-letter queue and max deliveries.
//! - What the spec cannot hold — tags, Policy, RedriveAllowPolicy, DelaySeconds and the
//!   other front-end attributes, the last purge — the front end keeps itself
//!   (`store.rs`), durably, in its directory beside the broker's data. The broker and
//!   storage know nothing of SQS.
//!
//! **Errors** come from the broker's one classification, [`ferry_broker::ErrorKind`],
//! mapped in one match (`errors.rs`), plus SQS's own input checks; bad input changes
//! nothing.
//!
//! **Authentication is not done yet.** The endpoint is open: a request with an AWS
//! Signature Version 4 `Authorization` header is accepted *without verifying the
//! signature*, as is one without. Serve it on the loopback interface only (the default)
//! until verification comes. The verifier itself is here ([`sigv4::Verifier`], checked
//! against signatures botocore made); requests do not pass through it yet.
//!
//! **Not done yet:** SigV4 verification; enforcing `Policy` (AddPermission /
//! RemovePermission write it, nothing enforces it); the message-move tasks (answered
//! `UnsupportedOperation`); changing RedrivePolicy or FifoQueue after creation;
//! ReceiveRequestAttemptId; KMS. See `docs/compat/sqs.md`.
//!
//! **Test only:** [`Sqs::with_test_reset`] serves `POST /moto-api/reset`, which deletes
//! every queue (`actions/reset.rs`); off unless asked for.

mod actions;
mod attributes;
mod durable_file;
pub mod errors;
mod location;
mod md5;
mod message_attributes;
mod protocol;
mod receipt;
pub mod sigv4;
mod sns;
mod store;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Response, Uri};
use ferry_broker::Broker;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use errors::{Code, SqsError};
pub use md5::of_attributes as md5_of_attributes;
/// The request decoders for the fuzz target (`fuzz/`): not an API.
#[doc(hidden)]
pub use protocol::fuzzing;

/// The default listen address: LocalStack's port, so tools already pointed at a local AWS
/// endpoint find Ferry there.
pub const DEFAULT_ADDR: &str = "127.0.0.1:4566";

/// The largest request body taken: a batch of 1 MiB of messages, form-encoded.
const MAX_BODY: usize = 8 << 20;

/// Where the front end says its queues are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsConfig {
    /// The account in queue URLs and ARNs.
    pub account_id: String,
    /// The region in ARNs.
    pub region: String,
}

impl Default for SqsConfig {
    fn default() -> Self {
        SqsConfig {
            account_id: "000000000000".into(),
            region: "us-east-1".into(),
        }
    }
}

/// The SQS front end over one broker; cheap to clone.
#[derive(Clone)]
pub struct Sqs {
    inner: Arc<Inner>,
    /// Whether the test-only reset route is served (`actions/reset.rs`).
    test_reset: bool,
}

struct Inner {
    broker: Broker,
    location: location::Location,
    store: store::Store,
    receipts: receipt::ReceiptKey,
    /// The SNS front end on the same endpoint (`sns/`).
    sns: sns::Sns,
    /// Set when serving stops: long polls end at once.
    stop: watch::Sender<bool>,
    requests: AtomicU64,
}

impl Sqs {
    /// The front end over `broker`, keeping its own state in `dir` (created if missing;
    /// `ferry serve` uses `<data dir>/aws`).
    pub fn open(broker: Broker, dir: &Path, config: SqsConfig) -> std::io::Result<Sqs> {
        std::fs::create_dir_all(dir)?;
        let receipts = receipt::ReceiptKey::load_or_create(dir)?;
        let queues = broker.list_queues();
        let store = store::Store::open(dir, |name| queues.iter().any(|q| q.as_str() == name))?;
        let sns = sns::Sns::open(dir, &broker.list_topics())?;
        Ok(Sqs {
            inner: Arc::new(Inner {
                broker,
                location: location::Location {
                    account_id: config.account_id,
                    region: config.region,
                },
                store,
                receipts,
                sns,
                stop: watch::channel(false).0,
                requests: AtomicU64::new(0),
            }),
            test_reset: false,
        })
    }

    /// Test only: also serve `POST /moto-api/reset`, which deletes every queue of the
    /// broker (see `actions/reset.rs`). Never for a real deployment.
    pub fn with_test_reset(mut self, on: bool) -> Sqs {
        self.test_reset = on;
        self
    }

    /// The HTTP router: every path and method goes to the protocol decoder.
    pub fn router(&self) -> Router {
        let router = Router::new();
        let router = if self.test_reset {
            router.route(
                actions::reset::PATH,
                axum::routing::post(actions::reset::reset),
            )
        } else {
            router
        };
        router
            .fallback(handle)
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(self.clone())
    }

    /// Serves on `listener` until `shutdown` completes; then long polls end at once
    /// (answering no messages) and the calls in progress finish.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let stop = self.inner.stop.clone();
        let router = self.router();
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                shutdown.await;
                let _ = stop.send(true);
            })
            .await
    }

    fn request_id(&self) -> String {
        let n = self.inner.requests.fetch_add(1, Ordering::Relaxed);
        let now = self.inner.broker.now_ms() as u64;
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            (now >> 16) as u32,
            now as u16,
            (n >> 48) & 0xfff,
            (n >> 36) & 0xfff,
            n & 0xffff_ffff_ffff
        )
    }
}

async fn handle(
    State(sqs): State<Sqs>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let request_id = sqs.request_id();
    if let Some(answer) =
        sns::answer_if_sns(&sqs.inner, &headers, uri.query(), &body, &request_id).await
    {
        return answer;
    }
    let request = match protocol::decode(&headers, uri.path(), uri.query(), &body) {
        Ok(r) => r,
        Err((protocol, error)) => return protocol::refuse(protocol, &error, &request_id),
    };
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or("localhost:4566")
        .to_owned();
    let outcome = actions::dispatch(&sqs.inner, &request.action, &request.input, &host).await;
    match outcome {
        Ok(output) => protocol::answer(request.protocol, &request.action, &output, &request_id),
        Err(error) => {
            // The action and the code only: never a body, an attribute or a handle.
            tracing::debug!(action = %request.action, code = error.code.query_code(), "sqs request refused");
            protocol::refuse(request.protocol, &error, &request_id)
        }
    }
}
