//! A raw Kafka client for the socket tests: requests encoded and answers decoded by the
//! `kafka-protocol` codec, over a plain TCP connection to a front end on a fresh broker.

#![allow(dead_code)]

use std::net::SocketAddr;

use bytes::{Buf, Bytes, BytesMut};
use ferry_broker::{Broker, BrokerConfig};
use ferry_kafka::{Kafka, KafkaConfig};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct Server {
    pub addr: SocketAddr,
    pub broker: Broker,
    _dir: Option<tempfile::TempDir>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Server {
    /// Stops the front end and waits until it has let go of the broker, so that the broker
    /// closes (and its directory can be opened again) once `self` is dropped.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            served.await.unwrap().unwrap();
        }
    }
}

pub async fn start(config: KafkaConfig) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_in(dir.path(), config).await;
    server._dir = Some(dir);
    server
}

/// A front end on the broker in `dir` (opened, or reopened after a stop).
pub async fn start_in(dir: &std::path::Path, config: KafkaConfig) -> Server {
    let broker = Broker::open(dir, BrokerConfig::default()).await.unwrap();
    serve(broker, config).await
}

/// A front end on `broker`, already open (with what a test put in it first); the broker
/// stays open after [`Server::stop`] for as long as the test holds a clone of it.
pub async fn serve(broker: Broker, config: KafkaConfig) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(
        Kafka::new(broker.clone(), config).serve(listener, async move {
            let _ = stopped.await;
        }),
    );
    Server {
        addr,
        broker,
        _dir: None,
        stop: Some(stop),
        served: Some(served),
    }
}

pub struct Client {
    pub stream: TcpStream,
    correlation: i32,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(addr).await.unwrap(),
            correlation: 0,
        }
    }

    /// Sends `request` at `version` without reading an answer; its correlation id.
    pub async fn send<R: Request>(&mut self, request: &R, version: i16) -> i32 {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("raw-test")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .unwrap();
        request.encode(&mut body, version).unwrap();
        self.send_raw(&body).await;
        self.correlation
    }

    pub async fn send_raw(&mut self, body: &[u8]) {
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        self.stream.write_all(&frame).await.unwrap();
    }

    /// The next frame, `None` when the server closed the connection.
    pub async fn read_frame(&mut self) -> Option<Bytes> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).await.ok()?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut body).await.ok()?;
        Some(Bytes::from(body))
    }

    /// Reads the answer to a request of type `R` sent at `version`, checking the
    /// correlation id.
    pub async fn receive<R: Request>(&mut self, version: i16, correlation: i32) -> R::Response {
        let mut frame = self.read_frame().await.expect("an answer");
        let header = ResponseHeader::decode(
            &mut frame,
            <R::Response as HeaderVersion>::header_version(version),
        )
        .unwrap();
        assert_eq!(header.correlation_id, correlation);
        let response = R::Response::decode(&mut frame, version).unwrap();
        assert_eq!(frame.remaining(), 0, "bytes left after the answer");
        response
    }

    pub async fn call<R: Request>(&mut self, request: &R, version: i16) -> R::Response {
        let correlation = self.send(request, version).await;
        self.receive::<R>(version, correlation).await
    }

    /// Whether the server closed the connection (within two seconds).
    pub async fn closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(
                std::time::Duration::from_secs(2),
                self.stream.read(&mut byte)
            )
            .await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }
}

/// Whether `python3` can import `module` (a client the Python tests drive).
pub fn python_imports(module: &str) -> bool {
    std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `command` (a Python client's check script) off the runtime and returns what it
/// printed; panics with its output unless it exits cleanly saying "every check passed".
pub async fn python_checks(client: &str, mut command: std::process::Command) -> String {
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("every check passed"),
        "{client} failed:\n{stdout}\n{stderr}"
    );
    stdout
}

/// `records` as one record batch v2 (the magic every current client writes).
pub fn encode_batch(
    records: &[kafka_protocol::records::Record],
    compression: kafka_protocol::records::Compression,
) -> Bytes {
    use kafka_protocol::records::{RecordBatchEncoder, RecordEncodeOptions};
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut buf, records, &options).unwrap();
    buf.freeze()
}
