//! The front end on an ephemeral port over a broker in a temporary directory, and a
//! client of a few lines of HTTP/1.1 over a `TcpStream`: SNS calls in the query protocol
//! (as boto3 sends them, SigV4 scope `sns`), SQS calls in the JSON protocol, and a reader
//! of the few XML elements the tests look at.

use std::net::SocketAddr;

use ferry_aws::{Sqs, SqsConfig};
use ferry_broker::{Broker, BrokerConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const ACCOUNT: &str = "000000000000";
pub const REGION: &str = "us-east-1";

pub struct Served {
    pub addr: SocketAddr,
    pub broker: Broker,
    dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    /// The text of every `<tag>` element, unescaped.
    pub fn all(&self, tag: &str) -> Vec<String> {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        let mut out = Vec::new();
        let mut rest = self.body.as_str();
        while let Some(start) = rest.find(&open) {
            let after = &rest[start + open.len()..];
            let Some(end) = after.find(&close) else { break };
            out.push(unescape(&after[..end]));
            rest = &after[end + close.len()..];
        }
        out
    }

    /// The text of the first `<tag>` element.
    pub fn one(&self, tag: &str) -> String {
        self.all(tag)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no <{tag}> in {}", self.body))
    }

    /// An `<Attributes>` map's value.
    pub fn attribute(&self, name: &str) -> Option<String> {
        let keys = self.all("key");
        let values = self.all("value");
        keys.iter()
            .position(|k| k == name)
            .map(|i| values[i].clone())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#xD;", "\r")
        .replace("&amp;", "&")
}

impl Served {
    pub async fn start() -> Served {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path().join("data"), served_config())
            .await
            .unwrap();
        Served::on(broker, dir).await
    }

    pub async fn on(broker: Broker, dir: tempfile::TempDir) -> Served {
        let sqs = Sqs::open(
            broker.clone(),
            &dir.path().join("aws"),
            SqsConfig::default(),
        )
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(sqs.serve(listener, async move {
            let _ = stopped.await;
        }));
        Served {
            addr,
            broker,
            dir,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops serving, reopens the broker on the same directory and serves again.
    pub async fn restart(mut self) -> Served {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        drop(self);
        let broker = Broker::open(dir.path().join("data"), served_config())
            .await
            .unwrap();
        Served::on(broker, dir).await
    }

    async fn raw(&self, head: &str, body: &[u8]) -> Reply {
        let mut stream = TcpStream::connect(self.addr).await.unwrap();
        let request = format!(
            "{head}Host: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        stream.write_all(body).await.unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await.unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        Reply {
            status: head.split(' ').nth(1).unwrap().parse().unwrap(),
            body: body.to_owned(),
        }
    }

    /// A GET of `path_and_query`, as a browser following a link sends it.
    pub async fn get(&self, path_and_query: &str) -> Reply {
        self.raw(&format!("GET {path_and_query} HTTP/1.1\r\n"), b"")
            .await
    }

    /// An SNS call as boto3 sends it: a form with Action and Version, SigV4 scope `sns`.
    pub async fn sns(&self, action: &str, params: &[(&str, &str)]) -> Reply {
        self.sns_signed(action, params, true).await
    }

    /// An SNS call without an Authorization header: only its Action says it is SNS's.
    pub async fn sns_unsigned(&self, action: &str, params: &[(&str, &str)]) -> Reply {
        self.sns_signed(action, params, false).await
    }

    async fn sns_signed(&self, action: &str, params: &[(&str, &str)], signed: bool) -> Reply {
        let mut form = format!("Action={action}&Version=2010-03-31");
        for (k, v) in params {
            form.push('&');
            form.push_str(&encode(k));
            form.push('=');
            form.push_str(&encode(v));
        }
        let mut head =
            "POST / HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded; charset=utf-8\r\n"
                .to_owned();
        if signed {
            head.push_str(
                "Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/sns/aws4_request, \
                 SignedHeaders=host, Signature=00\r\n",
            );
        }
        self.raw(&head, form.as_bytes()).await
    }

    /// An SNS call that must succeed.
    pub async fn sns_ok(&self, action: &str, params: &[(&str, &str)]) -> Reply {
        let reply = self.sns(action, params).await;
        assert_eq!(reply.status, 200, "{action}: {}", reply.body);
        reply
    }

    /// An SNS call that must fail with `status` and `code`; its message.
    pub async fn sns_fails(
        &self,
        action: &str,
        params: &[(&str, &str)],
        status: u16,
        code: &str,
    ) -> String {
        let reply = self.sns(action, params).await;
        assert_eq!(reply.status, status, "{action}: {}", reply.body);
        assert_eq!(reply.one("Code"), code, "{action}: {}", reply.body);
        assert!(reply.body.contains("<ErrorResponse"), "{}", reply.body);
        reply.one("Message")
    }

    /// An SQS call in the JSON protocol that must succeed.
    pub async fn sqs(&self, action: &str, input: Value) -> Value {
        let head = format!(
            "POST / HTTP/1.1\r\nX-Amz-Target: AmazonSQS.{action}\r\n\
             Content-Type: application/x-amz-json-1.0\r\n"
        );
        let reply = self.raw(&head, input.to_string().as_bytes()).await;
        assert_eq!(reply.status, 200, "{action}: {}", reply.body);
        reply.json()
    }

    /// Makes an SQS queue; its URL.
    pub async fn queue(&self, name: &str, attributes: Value) -> String {
        self.sqs(
            "CreateQueue",
            json!({"QueueName": name, "Attributes": attributes}),
        )
        .await["QueueUrl"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Makes a topic; its ARN.
    pub async fn topic(&self, name: &str, attributes: &[(&str, &str)]) -> String {
        let mut params = vec![("Name".to_owned(), name.to_owned())];
        for (i, (k, v)) in attributes.iter().enumerate() {
            params.push((format!("Attributes.entry.{}.key", i + 1), (*k).to_owned()));
            params.push((format!("Attributes.entry.{}.value", i + 1), (*v).to_owned()));
        }
        let params: Vec<(&str, &str)> = params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.sns_ok("CreateTopic", &params).await.one("TopicArn")
    }

    /// Subscribes queue `queue` to `topic` with `attributes`; the subscription's ARN.
    pub async fn subscribe(&self, topic: &str, queue: &str, attributes: &[(&str, &str)]) -> String {
        let endpoint = queue_arn(queue);
        let mut params = vec![
            ("TopicArn".to_owned(), topic.to_owned()),
            ("Protocol".to_owned(), "sqs".to_owned()),
            ("Endpoint".to_owned(), endpoint),
        ];
        for (i, (k, v)) in attributes.iter().enumerate() {
            params.push((format!("Attributes.entry.{}.key", i + 1), (*k).to_owned()));
            params.push((format!("Attributes.entry.{}.value", i + 1), (*v).to_owned()));
        }
        let params: Vec<(&str, &str)> = params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.sns_ok("Subscribe", &params)
            .await
            .one("SubscriptionArn")
    }

    /// Every message the queue has now (each deleted once received), waiting up to
    /// `wait` seconds for the first.
    pub async fn drain(&self, url: &str, wait: u64) -> Vec<Value> {
        let mut out = Vec::new();
        let mut wait = wait;
        loop {
            let got = self
                .sqs(
                    "ReceiveMessage",
                    json!({"QueueUrl": url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": wait,
                           "MessageAttributeNames": ["All"], "AttributeNames": ["All"]}),
                )
                .await;
            let Some(messages) = got["Messages"]
                .as_array()
                .filter(|m| !m.is_empty())
                .cloned()
            else {
                return out;
            };
            for m in messages {
                self.sqs(
                    "DeleteMessage",
                    json!({"QueueUrl": url, "ReceiptHandle": m["ReceiptHandle"]}),
                )
                .await;
                out.push(m);
            }
            wait = 0;
        }
    }
}

pub fn queue_arn(queue: &str) -> String {
    format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}")
}

pub fn topic_arn(topic: &str) -> String {
    format!("arn:aws:sns:{REGION}:{ACCOUNT}:{topic}")
}

fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The broker's config as `ferry serve` makes it for this front end: with the SNS
/// subscription filter registered.
fn served_config() -> BrokerConfig {
    let mut config = BrokerConfig::default();
    ferry_aws::register_filter_evaluators(&mut config.filter_evaluators);
    config
}
