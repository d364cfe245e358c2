//! A front end on an ephemeral port over a broker in a temporary directory, and the SDK's
//! clients pointed at it: plain HTTP (the SDK's hyper client without a TLS provider),
//! static credentials, region `us-east-1`. The MD5s SQS answers with are computed here
//! from AWS's documented encoding, independently of the crate's own code.

use std::collections::HashMap;
use std::net::SocketAddr;

use aws_sdk_sqs::types::{MessageAttributeValue, MessageSystemAttributeValue};
use ferry_aws::{Sqs, SqsConfig};
use ferry_broker::{Broker, BrokerConfig};

pub const ACCOUNT: &str = "000000000000";
pub const REGION: &str = "us-east-1";

pub struct Served {
    pub addr: SocketAddr,
    pub sqs: aws_sdk_sqs::Client,
    pub sns: aws_sdk_sns::Client,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Served {
    pub async fn start() -> Served {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path().join("data"), served_config())
            .await
            .unwrap();
        let front = Sqs::open(broker, &dir.path().join("aws"), SqsConfig::default()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(front.serve(listener, async move {
            let _ = stopped.await;
        }));
        let endpoint = format!("http://{addr}");
        Served {
            addr,
            sqs: sqs_client(&endpoint),
            sns: sns_client(&endpoint),
            _dir: dir,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops serving; long polls in progress end at once.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }

    /// A queue made through the SDK, by name; its URL.
    pub async fn queue(&self, name: &str, attributes: &[(&str, &str)]) -> String {
        let mut create = self.sqs.create_queue().queue_name(name);
        for (k, v) in attributes {
            create = create.attributes(aws_sdk_sqs::types::QueueAttributeName::from(*k), *v);
        }
        create.send().await.unwrap().queue_url.unwrap()
    }
}

/// The SDK's own HTTP client (hyper 1) with no TLS provider: it speaks plain HTTP only.
fn http_client() -> impl aws_sdk_sqs::config::HttpClient + Clone + 'static {
    aws_smithy_http_client::Builder::new().build_http()
}

fn sqs_client(endpoint: &str) -> aws_sdk_sqs::Client {
    use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .credentials_provider(Credentials::new("test", "test", None, None, "tests"))
        .endpoint_url(endpoint)
        .http_client(http_client())
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

fn sns_client(endpoint: &str) -> aws_sdk_sns::Client {
    use aws_sdk_sns::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_sns::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .credentials_provider(Credentials::new("test", "test", None, None, "tests"))
        .endpoint_url(endpoint)
        .http_client(http_client())
        .build();
    aws_sdk_sns::Client::from_conf(config)
}

pub fn queue_arn(queue: &str) -> String {
    format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}")
}

pub fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    md5::Md5::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// SQS's MD5 of message attributes from AWS's documentation: per attribute sorted by name
/// (bytewise), the length-prefixed (u32 big-endian) name and data type, a transport byte
/// (1 for string and number values, 2 for binary), then the length-prefixed value.
pub fn attributes_md5(attributes: &HashMap<String, MessageAttributeValue>) -> String {
    let mut names: Vec<&String> = attributes.keys().collect();
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let mut buf = Vec::new();
    for name in names {
        let value = &attributes[name];
        push(&mut buf, name.as_bytes());
        push(&mut buf, value.data_type().as_bytes());
        if let Some(binary) = value.binary_value() {
            buf.push(2);
            push(&mut buf, binary.as_ref());
        } else {
            buf.push(1);
            push(
                &mut buf,
                value.string_value().unwrap_or_default().as_bytes(),
            );
        }
    }
    md5_hex(&buf)
}

/// The same digest over message system attributes (only `AWSTraceHeader` can be sent).
pub fn system_attributes_md5(trace_header: &MessageSystemAttributeValue) -> String {
    let mut buf = Vec::new();
    push(&mut buf, b"AWSTraceHeader");
    push(&mut buf, trace_header.data_type().as_bytes());
    buf.push(1);
    push(
        &mut buf,
        trace_header.string_value().unwrap_or_default().as_bytes(),
    );
    md5_hex(&buf)
}

fn push(buf: &mut Vec<u8>, part: &[u8]) {
    buf.extend_from_slice(&(part.len() as u32).to_be_bytes());
    buf.extend_from_slice(part);
}

/// A string attribute (or number, or a custom type over them).
pub fn text(data_type: &str, value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type(data_type)
        .string_value(value)
        .build()
        .unwrap()
}

/// A binary attribute.
pub fn binary(data_type: &str, value: &[u8]) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type(data_type)
        .binary_value(aws_sdk_sqs::primitives::Blob::new(value))
        .build()
        .unwrap()
}

/// One attribute of every type: String, Number, Binary, and each with a custom label.
pub fn every_type() -> HashMap<String, MessageAttributeValue> {
    HashMap::from([
        ("city".to_owned(), text("String", "Zürich <&> \"quoted\"")),
        ("count".to_owned(), text("Number", "-12.5e3")),
        ("blob".to_owned(), binary("Binary", &[0, 1, 2, 0xfe, 0xff])),
        ("kind".to_owned(), text("String.custom", "order")),
        ("weight".to_owned(), text("Number.float", "0.25")),
        ("thumbnail".to_owned(), binary("Binary.png", b"\x89PNG\r\n")),
    ])
}

/// The broker's config as `ferry serve` makes it for this front end: with the SNS
/// subscription filter registered.
fn served_config() -> BrokerConfig {
    let mut config = BrokerConfig::default();
    ferry_aws::register_filter_evaluators(&mut config.filter_evaluators);
    config
}
