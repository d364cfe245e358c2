//! TLS on both listeners, with a CA and a server certificate made at test time: a client
//! that trusts the CA completes its handshake and its calls (gRPC over `h2`, HTTP/1.1); one
//! that trusts another CA fails the handshake; a plaintext gRPC client gets no answer and
//! plain HTTP a `400` saying to use `https://`; limits still refuse connections, in their
//! own protocol, after the handshake; a client that stalls in its handshake delays no one
//! else; and a certificate every client would refuse stops the server at start.

use std::net::SocketAddr;
use std::sync::Arc;

use ferry_broker::{Broker, BrokerConfig};
use ferry_proto::v1::{self, admin_client::AdminClient};
use ferry_server::{LocalServer, TlsConfig};
use ferry_testkit::TestPki;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// A CA and a certificate it signed for `localhost` and 127.0.0.1, as PEM.
struct Pki {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    cert_pem: String,
    key_pem: String,
}

fn pki() -> Pki {
    let pki = TestPki::generate();
    Pki {
        ca_pem: pki.ca_pem,
        ca_der: CertificateDer::from(pki.ca_der),
        cert_pem: pki.cert_pem,
        key_pem: pki.key_pem,
    }
}

struct Running {
    grpc: SocketAddr,
    http: SocketAddr,
    server: LocalServer,
    _dir: tempfile::TempDir,
}

async fn start(pki: &Pki, max_connections: Option<usize>) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let tls = TlsConfig::from_pem(pki.cert_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap();
    let mut server = ferry_server::Server::new(broker).tls(tls);
    if let Some(n) = max_connections {
        server = server.max_connections(n);
    }
    let server = server.start_local().await.unwrap();
    Running {
        grpc: server.grpc_addr(),
        http: server.http_addr(),
        server,
        _dir: dir,
    }
}

impl Running {
    async fn stop(self) {
        self.server.stop().await.unwrap();
    }
}

async fn grpc_channel(addr: SocketAddr, ca_pem: &str) -> Result<Channel, tonic::transport::Error> {
    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca_pem));
    Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await
}

fn rustls_client(ca: &CertificateDer<'static>, alpn: &[u8]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One HTTP/1.1 request on `stream`; the whole response.
async fn http_request(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    method: &str,
    path: &str,
    body: &str,
) -> String {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    String::from_utf8_lossy(&response).into_owned()
}

async fn https(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    method: &str,
    path: &str,
    body: &str,
) -> std::io::Result<String> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    let tls = rustls_client(ca, b"http/1.1").connect(name, tcp).await?;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    Ok(http_request(tls, method, path, body).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_over_tls_works_with_the_ca() {
    let pki = pki();
    let server = start(&pki, None).await;
    let channel = grpc_channel(server.grpc, &pki.ca_pem).await.unwrap();
    let mut admin = AdminClient::new(channel);
    admin
        .create_queue(v1::CreateQueueRequest {
            name: "secure".into(),
            spec: None,
        })
        .await
        .unwrap();
    let names = admin
        .list_queues(v1::ListQueuesRequest {})
        .await
        .unwrap()
        .into_inner()
        .names;
    assert!(names.contains(&"secure".to_owned()), "{names:?}");
    // The gRPC listener offers h2.
    let tcp = TcpStream::connect(server.grpc).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let tls = rustls_client(&pki.ca_der, b"h2")
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    drop(tls);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_over_tls_works_with_the_ca() {
    let pki = pki();
    let server = start(&pki, None).await;
    let health = https(server.http, &pki.ca_der, "GET", "/healthz", "")
        .await
        .unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let created = https(
        server.http,
        &pki.ca_der,
        "POST",
        "/v1/queues",
        r#"{"name": "web"}"#,
    )
    .await
    .unwrap();
    assert!(created.starts_with("HTTP/1.1 2"), "{created}");
    let listed = https(server.http, &pki.ca_der, "GET", "/v1/queues", "")
        .await
        .unwrap();
    assert!(listed.contains("web"), "{listed}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_trust_the_ca_fails_the_handshake() {
    let pki = pki();
    let other = self::pki();
    let server = start(&pki, None).await;
    let refused = grpc_channel(server.grpc, &other.ca_pem).await;
    assert!(refused.is_err(), "gRPC with another CA connected");
    let refused = https(server.http, &other.ca_der, "GET", "/healthz", "").await;
    let error = refused.expect_err("HTTPS with another CA connected");
    assert!(
        error.to_string().to_lowercase().contains("certificate"),
        "{error}"
    );
    // The server is unharmed: a trusting client still gets through.
    let health = https(server.http, &pki.ca_der, "GET", "/healthz", "")
        .await
        .unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    server.stop().await;
}

/// `curl http://` at the HTTPS port: the first bytes are a request line, not a TLS
/// ClientHello, so the listener can say in plain HTTP what is wrong instead of closing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_at_the_tls_http_port_is_told_to_use_https() {
    let pki = pki();
    let server = start(&pki, None).await;
    let mut tcp = TcpStream::connect(server.http).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tcp.read_to_end(&mut response),
    )
    .await
    .expect("answered and closed in time")
    .unwrap();
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
    assert!(
        response.contains("HTTPS") && response.contains("https://"),
        "{response}"
    );
    assert!(response.contains("https://localhost/"), "{response}");
    // HTTPS still works on the same port.
    let health = https(server.http, &pki.ca_der, "GET", "/healthz", "")
        .await
        .unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_grpc_client_gets_no_answer_from_a_tls_listener() {
    let pki = pki();
    let server = start(&pki, None).await;
    let plain = async {
        let channel = Endpoint::from_shared(format!("http://{}", server.grpc))
            .unwrap()
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        AdminClient::new(channel)
            .list_queues(v1::ListQueuesRequest {})
            .await
            .map_err(|e| e.to_string())
    };
    let answered = tokio::time::timeout(std::time::Duration::from_secs(15), plain)
        .await
        .expect("the plaintext client is answered or dropped in time");
    assert!(answered.is_err(), "a plaintext gRPC call succeeded");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_limit_is_refused_over_tls() {
    let pki = pki();
    let server = start(&pki, Some(1)).await;
    let tcp = TcpStream::connect(server.http).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let held = rustls_client(&pki.ca_der, b"http/1.1")
        .connect(name, tcp)
        .await
        .unwrap();
    let refused = https(server.http, &pki.ca_der, "GET", "/healthz", "")
        .await
        .unwrap();
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    drop(held);
    server.stop().await;
}

#[test]
fn bad_certificates_and_keys_are_refused_with_what_is_wrong() {
    let pki = pki();
    let other = self::pki();
    let e = |cert: &str, key: &str| {
        TlsConfig::from_pem(cert.as_bytes(), key.as_bytes())
            .unwrap_err()
            .to_string()
    };
    assert!(e("", &pki.key_pem).contains("no `BEGIN CERTIFICATE`"));
    assert!(e(&pki.cert_pem, "").contains("private key"));
    assert!(e(&pki.cert_pem, &other.key_pem).contains("cannot be used together"));

    // Certificates every client refuses stop the server at start, in its own words.
    let (ca_as_leaf, ca_key) = ferry_testkit::pki::ca_as_server_certificate();
    let ca_used = e(&ca_as_leaf, &ca_key);
    assert!(
        ca_used.contains("server certificate is a CA certificate")
            && ca_used.contains("make a CA and a leaf signed by it"),
        "{ca_used}"
    );
    let dir = tempfile::tempdir().unwrap();
    let script = "openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                  -days 2 -subj /CN=ca -keyout ca.key -out ca.pem && \
                  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                  -subj /CN=localhost -keyout key.pem -out server.csr && \
                  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
                  -days 2 -out cert.pem";
    let made = std::process::Command::new("sh")
        .args(["-c", script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
    let v1 = e(&read("cert.pem"), &read("key.pem"));
    assert!(
        v1.contains("server certificate is X.509 v1") && v1.contains("needs v3 extensions"),
        "{v1}"
    );
    for text in [&ca_used, &v1] {
        assert!(!text.contains("peer"), "{text}");
    }
    let missing = TlsConfig::from_pem_files(
        std::path::Path::new("/nonexistent/cert.pem"),
        std::path::Path::new("/nonexistent/key.pem"),
    )
    .unwrap_err();
    // The message with its sources, as `ferry serve` prints it: the OS error once.
    let mut chain = missing.to_string();
    let mut cause = std::error::Error::source(&missing);
    while let Some(c) = cause {
        chain.push_str(&format!(": {c}"));
        cause = c.source();
    }
    assert!(chain.contains("/nonexistent/cert.pem"), "{chain}");
    assert_eq!(chain.matches("os error 2").count(), 1, "{chain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_handshake_does_not_hold_up_other_connections() {
    let pki = pki();
    let server = start(&pki, None).await;
    // Connected, and silent: their handshakes never start.
    let _stalled_grpc = TcpStream::connect(server.grpc).await.unwrap();
    let _stalled_http = TcpStream::connect(server.http).await.unwrap();
    let served = async {
        let channel = grpc_channel(server.grpc, &pki.ca_pem).await.unwrap();
        AdminClient::new(channel)
            .list_queues(v1::ListQueuesRequest {})
            .await
            .unwrap();
        https(server.http, &pki.ca_der, "GET", "/healthz", "")
            .await
            .unwrap()
    };
    let health = tokio::time::timeout(std::time::Duration::from_secs(3), served)
        .await
        .expect("served while other handshakes stall");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_connection_over_the_limit_is_answered_resource_exhausted_over_tls() {
    let pki = pki();
    let server = start(&pki, Some(1)).await;
    let held = grpc_channel(server.grpc, &pki.ca_pem).await.unwrap();
    AdminClient::new(held.clone())
        .list_queues(v1::ListQueuesRequest {})
        .await
        .unwrap();
    let over = grpc_channel(server.grpc, &pki.ca_pem).await.unwrap();
    let refused = AdminClient::new(over)
        .list_queues(v1::ListQueuesRequest {})
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    drop(held);
    server.stop().await;
}
