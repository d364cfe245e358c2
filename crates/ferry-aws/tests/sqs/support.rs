//! A front end on an ephemeral port over a broker in a temporary directory, and a client
//! that is a few lines of HTTP/1.1 over a `TcpStream` (`Connection: close`, read to the
//! end): it sends exactly the bytes a test means, in either protocol.

use std::net::SocketAddr;

use ferry_aws::{Sqs, SqsConfig};
use ferry_broker::{Broker, BrokerConfig};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct Served {
    pub addr: SocketAddr,
    pub broker: Broker,
    pub dir: tempfile::TempDir,
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

    /// The JSON protocol's error: the query code from `x-amzn-query-error` and the
    /// `__type`'s shape.
    pub fn error(&self) -> (String, String) {
        let query = self.header("x-amzn-query-error").expect("an error header");
        let code = query.split(';').next().unwrap().to_owned();
        let shape = self.json()["__type"].as_str().unwrap().to_owned();
        (code, shape.rsplit('#').next().unwrap().to_owned())
    }
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
        Served::on_with(broker, dir, false).await
    }

    /// Served with the test-only reset route on.
    pub async fn with_test_reset() -> Served {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path().join("data"), served_config())
            .await
            .unwrap();
        Served::on_with(broker, dir, true).await
    }

    async fn on_with(broker: Broker, dir: tempfile::TempDir, test_reset: bool) -> Served {
        let sqs = Sqs::open(
            broker.clone(),
            &dir.path().join("aws"),
            SqsConfig::default(),
        )
        .unwrap()
        .with_test_reset(test_reset);
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

    /// Stops serving and gives back the broker's directory (the broker is dropped).
    pub async fn stop(mut self) -> tempfile::TempDir {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }

    pub fn url(&self, queue: &str) -> String {
        format!("http://{}/000000000000/{queue}", self.addr)
    }

    pub async fn raw(&self, head: &str, body: &[u8]) -> Reply {
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
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        Reply {
            status,
            head: head.to_owned(),
            body: body.to_owned(),
        }
    }

    /// An AWS JSON 1.0 call, with a (never verified) SigV4 header as SDKs send.
    pub async fn call(&self, action: &str, input: Value) -> Reply {
        let head = format!(
            "POST / HTTP/1.1\r\nX-Amz-Target: AmazonSQS.{action}\r\n\
             Content-Type: application/x-amz-json-1.0\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=00\r\n"
        );
        self.raw(&head, input.to_string().as_bytes()).await
    }

    /// A JSON call that must succeed; its output.
    pub async fn ok(&self, action: &str, input: Value) -> Value {
        let reply = self.call(action, input).await;
        assert_eq!(reply.status, 200, "{action}: {}", reply.body);
        reply.json()
    }

    /// A JSON call that must fail with `status` and the query code `code`.
    pub async fn fails(&self, action: &str, input: Value, status: u16, code: &str) -> String {
        let reply = self.call(action, input).await;
        assert_eq!(reply.status, status, "{action}: {}", reply.body);
        let (query, _) = reply.error();
        assert_eq!(query, code, "{action}: {}", reply.body);
        reply.json()["message"].as_str().unwrap().to_owned()
    }

    /// A query-protocol call, form-encoded in the body.
    pub async fn query(&self, params: &[(&str, &str)]) -> Reply {
        let mut form = form_encode(params);
        form.push_str("&Version=2012-11-05");
        let head = "POST / HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n";
        self.raw(head, form.as_bytes()).await
    }

    /// An SNS call as boto3 sends it (a form with Action and Version, SigV4 scope `sns`)
    /// that must succeed; its XML answer.
    pub async fn sns_ok(&self, action: &str, params: &[(&str, &str)]) -> String {
        let mut pairs = vec![("Action", action), ("Version", "2010-03-31")];
        pairs.extend_from_slice(params);
        let head = "POST / HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/sns/aws4_request, \
             SignedHeaders=host, Signature=00\r\n";
        let reply = self.raw(head, form_encode(&pairs).as_bytes()).await;
        assert_eq!(reply.status, 200, "{action}: {}", reply.body);
        reply.body
    }

    pub async fn create(&self, name: &str, attributes: Value) -> String {
        let out = self
            .ok(
                "CreateQueue",
                serde_json::json!({"QueueName": name, "Attributes": attributes}),
            )
            .await;
        out["QueueUrl"].as_str().unwrap().to_owned()
    }
}

fn form_encode(params: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (k, v) in params {
        if !out.is_empty() {
            out.push('&');
        }
        out.push_str(&encode(k));
        out.push('=');
        out.push_str(&encode(v));
    }
    out
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

/// SQS's MD5 of message attributes, written here from AWS's documentation independently
/// of the crate's: per attribute sorted by name, length-prefixed name, length-prefixed
/// type, a transport byte (1 string/number, 2 binary), length-prefixed value.
pub fn expected_md5(attributes: &[(&str, &str, &[u8])]) -> String {
    let mut sorted = attributes.to_vec();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut buf = Vec::new();
    for (name, data_type, value) in sorted {
        for part in [name.as_bytes(), data_type.as_bytes()] {
            buf.extend_from_slice(&(part.len() as u32).to_be_bytes());
            buf.extend_from_slice(part);
        }
        buf.push(if data_type.starts_with("Binary") {
            2
        } else {
            1
        });
        buf.extend_from_slice(&(value.len() as u32).to_be_bytes());
        buf.extend_from_slice(value);
    }
    md5_hex(&buf)
}

pub fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    md5::Md5::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The broker's config as `ferry serve` makes it for this front end: with the SNS
/// subscription filter registered.
pub fn served_config() -> BrokerConfig {
    let mut config = BrokerConfig::default();
    ferry_aws::register_filter_evaluators(&mut config.filter_evaluators);
    config
}
