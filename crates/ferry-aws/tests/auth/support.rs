//! A front end with access keys on an ephemeral port over a broker in a temporary
//! directory, and a client of a few lines of HTTP/1.1 that signs what it sends with
//! `signer.rs` (or leaves it unsigned, or signs it at another time).

use std::net::SocketAddr;

use ferry_aws::sigv4::AccessKey;
use ferry_aws::{Sqs, SqsConfig};
use ferry_broker::{Broker, BrokerConfig};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub use crate::signer::{Signer, now_ms};

pub const ACCOUNT: &str = "000000000000";

/// Every right on every name.
pub const ADMIN: (&str, &str) = ("AKIDADMIN", "admin-secret");
/// Publishes to the queue `orders` and the topic `news`; an IAM user.
pub const PUBLISHER: (&str, &str) = ("AKIDPUBLISHER", "publisher-secret");
/// Consumes every ordinary queue and topic, and nothing else.
pub const CONSUMER: (&str, &str) = ("AKIDCONSUMER", "consumer-secret");
/// Reads the dead-letter queue `orders-dlq`.
pub const DLQ_READER: (&str, &str) = ("AKIDDLQREADER", "dlq-secret");
/// Consumes the topic `news` and publishes to the queue `inbox`: may subscribe one to
/// the other.
pub const FANOUT: (&str, &str) = ("AKIDFANOUT", "fanout-secret");
/// The account of [`PARTNER`], not the endpoint's.
pub const PARTNER_ACCOUNT: &str = "111111111111";
/// The IAM user `partner` of another account, whose own account lets it publish and
/// consume anything: what this account's queues and topics let it do is up to their
/// policies.
pub const PARTNER: (&str, &str) = ("AKIDPARTNER", "partner-secret");

fn key(id_secret: (&str, &str), name: Option<&str>, permissions: &[&str]) -> AccessKey {
    AccessKey {
        id: id_secret.0.into(),
        secret: id_secret.1.into(),
        name: name.map(str::to_owned),
        account_id: None,
        permissions: permissions.iter().map(|p| p.parse().unwrap()).collect(),
    }
}

pub fn keys() -> Vec<AccessKey> {
    vec![
        key(ADMIN, None, &["admin:#", "publish:#", "consume:#", "dlq:#"]),
        key(
            PUBLISHER,
            Some("orders-publisher"),
            &["publish:orders", "publish:news"],
        ),
        key(CONSUMER, None, &["consume:#"]),
        key(DLQ_READER, None, &["dlq:orders-dlq"]),
        key(FANOUT, None, &["consume:news", "publish:inbox"]),
        AccessKey {
            account_id: Some(PARTNER_ACCOUNT.into()),
            ..key(
                PARTNER,
                Some("partner"),
                &["publish:#", "consume:#", "admin:#"],
            )
        },
    ]
}

/// A signer for one of the keys above, for `service`.
pub fn signer(id_secret: (&str, &str), service: &str) -> Signer {
    Signer::new(id_secret.0, id_secret.1, service)
}

pub struct Served {
    pub addr: SocketAddr,
    pub broker: Broker,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }

    /// The JSON protocol's error code, as SDKs read it (`x-amzn-query-error`).
    pub fn query_error(&self) -> String {
        let header = self
            .header("x-amzn-query-error")
            .unwrap_or_else(|| panic!("no x-amzn-query-error: {} {}", self.status, self.body));
        header.split(';').next().unwrap().to_owned()
    }

    /// The text of the first `<tag>` element.
    pub fn xml(&self, tag: &str) -> String {
        self.all(tag)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no <{tag}> in {}", self.body))
    }

    /// A value of an SNS `<Attributes>` map.
    pub fn attribute(&self, name: &str) -> Option<String> {
        let keys = self.all("key");
        let values = self.all("value");
        keys.iter()
            .position(|k| k == name)
            .map(|i| values[i].clone())
    }

    /// The text of every `<tag>` element.
    pub fn all(&self, tag: &str) -> Vec<String> {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        let mut out = Vec::new();
        let mut rest = self.body.as_str();
        while let Some(start) = rest.find(&open) {
            let after = &rest[start + open.len()..];
            let Some(end) = after.find(&close) else { break };
            out.push(after[..end].replace("&amp;", "&"));
            rest = &after[end + close.len()..];
        }
        out
    }
}

/// How a test request is authenticated.
#[derive(Clone)]
pub enum Auth {
    /// No `Authorization` header at all.
    Unsigned,
    /// Signed now.
    Signed(Signer),
    /// Signed at this time (ms since the epoch), for clock skew.
    SignedAt(Signer, i64),
    /// This `Authorization` header as is, with the `X-Amz-Date` of this time.
    Header(String, i64),
}

impl Served {
    /// A front end with [`keys`].
    pub async fn start() -> Served {
        Served::with_keys(keys()).await
    }

    pub async fn with_keys(access_keys: Vec<AccessKey>) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path().join("data"), served_config())
            .await
            .unwrap();
        let config = SqsConfig {
            access_keys,
            ..SqsConfig::default()
        };
        let sqs = Sqs::open(broker.clone(), &dir.path().join("aws"), config).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(sqs.serve(listener, async move {
            let _ = stopped.await;
        }));
        Served {
            addr,
            broker,
            _dir: dir,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub fn url(&self, queue: &str) -> String {
        format!("http://{}/{ACCOUNT}/{queue}", self.addr)
    }

    /// `POST path` with `headers` (Host is added) and `body`, authenticated by `auth`.
    pub async fn post(
        &self,
        auth: &Auth,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        let host = self.addr.to_string();
        let mut all: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect();
        all.push(("Host".into(), host.clone()));
        let signable: Vec<(&str, &str)> =
            all.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let added = match auth {
            Auth::Unsigned => Vec::new(),
            Auth::Signed(signer) => signer.sign("POST", path, &signable, body, now_ms()),
            Auth::SignedAt(signer, at) => signer.sign("POST", path, &signable, body, *at),
            Auth::Header(value, at) => {
                let date = Signer::new("k", "s", "sqs").sign("POST", path, &[], b"", *at);
                vec![date[0].clone(), ("Authorization".into(), value.clone())]
            }
        };
        all.extend(added);
        let mut head = format!("POST {path} HTTP/1.1\r\n");
        for (n, v) in &all {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        ));
        let mut stream = TcpStream::connect(self.addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body).await.unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await.unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        Reply {
            status: head.split(' ').nth(1).unwrap().parse().unwrap(),
            head: head.to_owned(),
            body: body.to_owned(),
        }
    }

    /// An SQS call in AWS JSON 1.0.
    pub async fn sqs(&self, auth: &Auth, action: &str, input: Value) -> Reply {
        let target = format!("AmazonSQS.{action}");
        let headers = [
            ("Content-Type", "application/x-amz-json-1.0"),
            ("X-Amz-Target", target.as_str()),
        ];
        self.post(auth, "/", &headers, input.to_string().as_bytes())
            .await
    }

    /// An SQS JSON call signed with `key` that must succeed; its output.
    pub async fn sqs_ok(&self, key: (&str, &str), action: &str, input: Value) -> Value {
        let reply = self
            .sqs(&Auth::Signed(signer(key, "sqs")), action, input)
            .await;
        assert_eq!(reply.status, 200, "{action}: {}", reply.body);
        reply.json()
    }

    /// An SQS JSON call signed with `key` that must be refused with AccessDenied, 403.
    pub async fn sqs_denied(&self, key: (&str, &str), action: &str, input: Value) -> String {
        let reply = self
            .sqs(&Auth::Signed(signer(key, "sqs")), action, input)
            .await;
        assert_eq!(reply.status, 403, "{action}: {}", reply.body);
        assert_eq!(
            reply.query_error(),
            "AccessDenied",
            "{action}: {}",
            reply.body
        );
        reply.json()["message"].as_str().unwrap().to_owned()
    }

    /// A query-protocol call (`service`'s: the form's `Version` is the caller's), form
    /// encoded in the body.
    pub async fn form(&self, auth: &Auth, params: &[(&str, &str)]) -> Reply {
        let body = form_encode(params);
        let headers = [(
            "Content-Type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )];
        self.post(auth, "/", &headers, body.as_bytes()).await
    }

    /// An SNS call signed with `key`.
    pub async fn sns(&self, key: (&str, &str), params: &[(&str, &str)]) -> Reply {
        let mut all = params.to_vec();
        all.push(("Version", "2010-03-31"));
        self.form(&Auth::Signed(signer(key, "sns")), &all).await
    }

    /// A queue's messages (visible, in flight), as the admin key reads them.
    pub async fn messages(&self, queue: &str) -> (u64, u64) {
        let names = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
        ];
        let input = serde_json::json!({"QueueUrl": self.url(queue), "AttributeNames": names});
        let out = self.sqs_ok(ADMIN, "GetQueueAttributes", input).await;
        let read = |name: &str| out["Attributes"][name].as_str().unwrap().parse().unwrap();
        (read(names[0]), read(names[1]))
    }

    /// Whether the broker has a queue of this name.
    pub fn has_queue(&self, queue: &str) -> bool {
        self.broker
            .list_queues()
            .iter()
            .any(|q| q.as_str() == queue)
    }

    /// Whether the broker has a topic of this name.
    pub fn has_topic(&self, topic: &str) -> bool {
        self.broker
            .list_topics()
            .iter()
            .any(|t| t.as_str() == topic)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn form_encode(params: &[(&str, &str)]) -> String {
    let encode = |s: &str| -> String {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    params
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The broker's config as `ferry serve` makes it for this front end: with the SNS
/// subscription filter registered.
fn served_config() -> BrokerConfig {
    let mut config = BrokerConfig::default();
    ferry_aws::register_filter_evaluators(&mut config.filter_evaluators);
    config
}
