//! Ferry as an Amazon SQS and SNS endpoint: the SQS and SNS APIs over the broker (and STS
//! GetCallerIdentity), for the clients people already have (boto3, the AWS CLI, the AWS
//! SDKs).
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
//! - A FIFO queue (`.fifo`) is a key-shared queue: a group's messages go out in send
//!   order, several of a group per receive (the broker's `PerKey::Consecutive`), the group
//!   held while any is in flight; deduplicated for 5 minutes. ReceiveRequestAttemptId
//!   retries answer the same messages (`actions/receive_attempts.rs`, in memory).
//! - RedrivePolicy is the queue's dead-letter queue and max deliveries.
//! - SetQueueAttributes changes what the spec holds (RedrivePolicy, VisibilityTimeout,
//!   MessageRetentionPeriod) through the broker's `update_queue`, for every consumer;
//!   PurgeQueue is the broker's `purge_queue`, in-flight messages included.
//! - Message-move tasks (`actions/move_tasks.rs`) run in the front end on the broker's
//!   redrive; a restart ends a running one as `FAILED`.
//! - What the spec cannot hold — tags, Policy (enforced by `auth/`), RedriveAllowPolicy, DelaySeconds and the
//!   other front-end attributes, the last purge, message-move tasks — the front end keeps
//!   itself (`store.rs`), durably, in its directory beside the broker's data. The broker
//!   and storage know nothing of SQS.
//!
//! **Errors** come from the broker's one classification, [`ferry_broker::ErrorKind`],
//! mapped in one match (`errors.rs`), plus SQS's own input checks; bad input changes
//! nothing.
//!
//! **STS** GetCallerIdentity is answered on the same endpoint (`sts.rs`): clients and test
//! fixtures ask it for the account id.
//!
//! **Authentication** (`auth/`). With access keys configured ([`SqsConfig::access_keys`])
//! every request must carry a valid AWS Signature Version 4 by one of them (an
//! `Authorization` header dated within 15 minutes, or presigned in the query string;
//! [`sigv4::Verifier`], checked against signatures botocore made), and each action is
//! checked against the key's Ferry permissions on the queue or topic it touches
//! (`auth/requirements.rs` has the table); lists show only what the key holds a right on.
//! A queue's or topic's `Policy` (set directly, or by AddPermission / RemovePermission) is
//! enforced as AWS evaluates a resource policy (`auth/policy.rs`): a key of another
//! account (`AccessKey::account_id`) gets what the policy grants its account — and its
//! permissions allow — and no more; an explicit `Deny` refuses any key. Without access
//! keys the endpoint is open — signed or not, a request is served, policies are kept and
//! nothing is enforced — and belongs on the loopback interface only.
//!
//! **Not done yet:** temporary credentials (session tokens) and role principals;
//! resuming a message-move task after a restart; KMS. FifoQueue cannot change after
//! creation, as in SQS. See `docs/compat/sqs.md`.
//!
//! **Test only:** [`Sqs::with_test_reset`] serves `POST /moto-api/reset`, which deletes
//! every queue and topic with the front ends' records of them (`actions/reset.rs`); off
//! unless asked for.

mod actions;
mod attributes;
mod auth;
mod dead_letter_attributes;
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
mod sts;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, Response, Uri};
use ferry_broker::Broker;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use errors::{Code, SqsError};
pub use md5::of_attributes as md5_of_attributes;
/// The request decoders for the fuzz target (`fuzz/`): not an API.
#[doc(hidden)]
pub use protocol::fuzzing;
/// Registers the SNS subscription filter the broker evaluates (see `sns/linked.rs`):
/// whoever opens a broker this front end serves must call it on the broker's config.
pub use sns::linked::register as register_filter_evaluators;

/// The default listen address: LocalStack's port, so tools already pointed at a local AWS
/// endpoint find Ferry there.
pub const DEFAULT_ADDR: &str = "127.0.0.1:4566";

/// The largest request body taken: a batch of 1 MiB of messages, form-encoded.
const MAX_BODY: usize = 8 << 20;

/// Where the front end says its queues are, and who may call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsConfig {
    /// The account in queue URLs and ARNs.
    pub account_id: String,
    /// The region in ARNs.
    pub region: String,
    /// The access keys requests must be signed with, each with its permissions; empty:
    /// the endpoint is open (see the crate head).
    pub access_keys: Vec<sigv4::AccessKey>,
}

impl Default for SqsConfig {
    fn default() -> Self {
        SqsConfig {
            account_id: "000000000000".into(),
            region: "us-east-1".into(),
            access_keys: Vec::new(),
        }
    }
}

/// `keys` with the endpoint's own `account` written as `None`: a key is another account's
/// exactly when its `account_id` is set.
fn own_account_as_none(mut keys: Vec<sigv4::AccessKey>, account: &str) -> Vec<sigv4::AccessKey> {
    for key in &mut keys {
        if key.account_id.as_deref() == Some(account) {
            key.account_id = None;
        }
    }
    keys
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
    /// What recent FIFO receives with a ReceiveRequestAttemptId leased, in memory.
    receive_attempts: actions::receive_attempts::ReceiveAttempts,
    /// The access keys requests are checked against (none: open).
    verifier: sigv4::Verifier,
    /// Set when serving stops: long polls end at once.
    stop: watch::Sender<bool>,
    requests: AtomicU64,
}

impl Sqs {
    /// The front end over `broker`, keeping its own state in `dir` (created if missing;
    /// `ferry serve` uses `<data dir>/aws`).
    pub fn open(broker: Broker, dir: &Path, config: SqsConfig) -> std::io::Result<Sqs> {
        // SNS subscriptions are broker links filtered by the SNS evaluator, which the broker
        // needs from its opening on (to catch links up after a restart).
        if !broker.has_filter_evaluator(sns::linked::KIND) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the broker was opened without the SNS filter evaluator: call \
                 ferry_aws::register_filter_evaluators on BrokerConfig::filter_evaluators \
                 before Broker::open",
            ));
        }
        std::fs::create_dir_all(dir)?;
        let receipts = receipt::ReceiptKey::load_or_create(dir)?;
        let queues = broker.list_queues();
        let store = store::Store::open(dir, |name| queues.iter().any(|q| q.as_str() == name))?;
        let sns = sns::Sns::open(dir, &broker.list_topics())?;
        let verifier =
            sigv4::Verifier::new(own_account_as_none(config.access_keys, &config.account_id));
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
                receive_attempts: Default::default(),
                verifier,
                stop: watch::channel(false).0,
                requests: AtomicU64::new(0),
            }),
            test_reset: false,
        })
    }

    /// Test only: also serve `POST /moto-api/reset`, which deletes every queue of the
    /// broker (see `actions/reset.rs`). Never for a real deployment. The route takes no
    /// signature, access keys or not: `ferry serve` refuses it beside credentials.
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
        actions::move_tasks::resume(&self.inner);
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

impl Inner {
    /// The `Policy` attribute of queue or topic `name`, if set.
    fn policy_text(&self, kind: auth::Kind, name: &str) -> Option<String> {
        match kind {
            auth::Kind::Queue => self
                .store
                .get(name)
                .and_then(|r| r.attributes.get("Policy").cloned()),
            auth::Kind::Topic => self.sns.topic_policy(name),
        }
    }
}

/// Which service of the endpoint a request is for.
enum Service {
    Sts,
    Sns,
    Sqs,
}

async fn handle(
    State(sqs): State<Sqs>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let request_id = sqs.request_id();
    let inner = &sqs.inner;
    // The JSON protocol is SQS's alone; a form is STS's, SNS's or SQS's by its parameters
    // and its signature's scope.
    let pairs = if headers.contains_key("x-amz-target") {
        Vec::new()
    } else {
        sns::form_pairs(uri.query(), &body)
    };
    let service = if sts::claims(&headers, &pairs) {
        Service::Sts
    } else if sns::claims(&headers, &pairs) {
        Service::Sns
    } else {
        Service::Sqs
    };
    let signed = sigv4::SignedRequest {
        method: method.as_str(),
        path: uri.path(),
        query: uri.query().unwrap_or(""),
        headers: &headers,
        body: &body,
    };
    let caller = match auth::authenticate(&inner.verifier, &signed, auth::wall_clock_ms()) {
        Ok(caller) => caller,
        Err(error) => {
            // The code only: never a header, a signature or a body.
            tracing::debug!(code = error.code(), "aws request not authenticated");
            return match service {
                Service::Sts => sts::refuse(
                    error.code(),
                    error.status(),
                    &error.to_string(),
                    &request_id,
                ),
                Service::Sns => sns::refuse(&sns::SnsError::from(&error), &request_id),
                Service::Sqs => {
                    protocol::refuse(protocol::of(&headers), &SqsError::from(&error), &request_id)
                }
            };
        }
    };
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or("localhost:4566");
    match service {
        Service::Sts => sts::answer(&inner.location.account_id, &caller, &pairs, &request_id),
        Service::Sns => sns::answer(inner, &caller, &pairs, host, &request_id).await,
        Service::Sqs => {
            let request = match protocol::decode(&headers, uri.path(), uri.query(), &body) {
                Ok(r) => r,
                Err((protocol, error)) => return protocol::refuse(protocol, &error, &request_id),
            };
            answer_sqs(inner, &caller, &request, host, &request_id).await
        }
    }
}

/// Serves a decoded SQS request of an authenticated caller, if its permissions allow it.
async fn answer_sqs(
    inner: &Inner,
    caller: &auth::Caller<'_>,
    request: &protocol::Request,
    host: &str,
    request_id: &str,
) -> Response<Body> {
    let requirement = auth::requirements::sqs(&request.action, &request.input, &inner.location);
    let context = auth::Context {
        service: auth::Kind::Queue,
        action: &request.action,
        location: &inner.location,
    };
    if let Err(denied) = auth::check(
        caller,
        &requirement,
        &context,
        |q| inner.broker.is_dead_letter_queue(q),
        |kind, name| inner.policy_text(kind, name),
    ) {
        tracing::debug!(action = %request.action, key = caller.key_id(), "sqs request denied");
        let resource = denied
            .name
            .as_deref()
            .map_or_else(|| "*".to_owned(), |q| inner.location.arn(q));
        let error = SqsError::new(
            Code::AccessDenied,
            format!(
                "User: {} is not authorized to perform: sqs:{} on resource: {resource}: {}.",
                caller.arn(&inner.location.account_id),
                request.action.chars().take(100).collect::<String>(),
                denied.lacking()
            ),
        );
        return protocol::refuse(request.protocol, &error, request_id);
    }
    let outcome = actions::dispatch(inner, caller, &request.action, &request.input, host).await;
    match outcome {
        Ok(output) => protocol::answer(request.protocol, &request.action, &output, request_id),
        Err(error) => {
            // The action and the code only: never a body, an attribute or a handle.
            tracing::debug!(action = %request.action, code = error.code.query_code(), "sqs request refused");
            protocol::refuse(request.protocol, &error, request_id)
        }
    }
}
