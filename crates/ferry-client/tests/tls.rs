//! The client over TLS: `ferrys://` with the CA that signed the server's certificate
//! works, token included; another CA fails the handshake with the reason in the error;
//! `ferrys://` without a CA is refused before anything is sent.

use ferry_broker::{Broker, BrokerConfig};
use ferry_client::{Client, ClientError, ConnectOptions, Message, TlsFailure};
use ferry_server::{AuthConfig, TlsConfig, TokenGrant};
use ferry_testkit::TestPki;

/// A CA's PEM, and a certificate it signed for `localhost` and 127.0.0.1 with its key.
fn pki() -> (String, String, String) {
    let pki = TestPki::generate();
    (pki.ca_pem, pki.cert_pem, pki.key_pem)
}

const TOKEN: &str = "tls-token-5d1e9a";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferrys_with_the_ca_and_a_token_works_and_another_ca_does_not() {
    let (ca, cert, key) = pki();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let auth = AuthConfig {
        tokens: vec![TokenGrant::new(
            "all",
            TOKEN,
            vec!["admin:#".parse().unwrap(), "publish:#".parse().unwrap()],
        )],
    };
    let server = ferry_server::Server::new(broker)
        .auth(auth)
        .tls(TlsConfig::from_pem(cert.as_bytes(), key.as_bytes()).unwrap())
        .start_local()
        .await
        .unwrap();
    let addr = server.grpc_addr();

    let options = ConnectOptions::new().token(TOKEN).tls_ca_pem(ca.clone());
    let client = Client::connect_with(&format!("ferrys://{addr}"), options.clone())
        .await
        .unwrap();
    client.create_queue("q", Default::default()).await.unwrap();
    client.publish("q", vec![Message::new("x")]).await.unwrap();
    // A `ferry://` address with a CA goes over TLS too; by name works with the domain.
    let by_name = options.clone().tls_domain("localhost");
    let client = Client::connect_with(&format!("ferry://{addr}"), by_name)
        .await
        .unwrap();
    assert_eq!(client.list_queues().await.unwrap(), ["q", "q.dlq"]);

    let (other_ca, _, _) = pki();
    let untrusted = ConnectOptions::new().token(TOKEN).tls_ca_pem(other_ca);
    let e = Client::connect_with(&format!("ferrys://{addr}"), untrusted).await;
    match e {
        Err(ClientError::Tls { source, .. }) => {
            let mut causes = String::new();
            let mut cause = std::error::Error::source(&source);
            while let Some(c) = cause {
                causes.push_str(&c.to_string());
                cause = c.source();
            }
            assert!(causes.contains("certificate"), "{causes}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("connected with an untrusted CA"),
    }
    let plain = Client::connect_with(&format!("ferry://{addr}"), ConnectOptions::new()).await;
    let failed = match plain {
        Err(_) => true,
        Ok(client) => client.list_queues().await.is_err(),
    };
    assert!(failed, "plaintext against a TLS listener");
    let no_ca = Client::connect_with(&format!("ferrys://{addr}"), ConnectOptions::new()).await;
    assert!(matches!(no_ca, Err(ClientError::BadTls(_))));
    let bad_ca = ConnectOptions::new().tls_ca_pem("not a pem");
    let e = Client::connect_with(&format!("ferrys://{addr}"), bad_ca).await;
    assert!(matches!(e, Err(ClientError::BadTls(_))));

    server.stop().await.unwrap();
}

/// A TLS server on a free port that presents `cert_pem` (with `key_pem`) and offers
/// `alpn`, and does nothing but handshake: a stand-in for a misconfigured server, which
/// `ferry serve` itself refuses to be.
fn handshake_only_server(cert_pem: &str, key_pem: &str, alpn: &[u8]) -> std::net::SocketAddr {
    handshake_only_server_at("127.0.0.1:0", cert_pem, key_pem, alpn)
}

/// The same on `addr`.
fn handshake_only_server_at(
    addr: &str,
    cert_pem: &str,
    key_pem: &str,
    alpn: &[u8],
) -> std::net::SocketAddr {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    // Not `with_single_cert`: it parses the certificate, and refuses a v1 one.
    let signer = provider.key_provider.load_private_key(key).unwrap();
    let certified = rustls::sign::CertifiedKey::new(certs, signer);
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(std::sync::Arc::new(rustls::sign::SingleCertAndKey::from(
            certified,
        )));
    config.alpn_protocols = vec![alpn.to_vec()];
    let config = std::sync::Arc::new(config);
    let listener = std::net::TcpListener::bind(addr).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { return };
            let mut connection = rustls::ServerConnection::new(config.clone()).unwrap();
            while connection.is_handshaking() {
                if connection.complete_io(&mut tcp).is_err() {
                    break;
                }
            }
        }
    });
    addr
}

/// What `ferrys://addr` trusting `ca_pem` fails with.
async fn tls_failure(addr: std::net::SocketAddr, ca_pem: &str) -> (TlsFailure, String) {
    let options = ConnectOptions::new().tls_ca_pem(ca_pem.to_owned());
    match Client::connect_with(&format!("ferrys://{addr}"), options).await {
        Err(e @ ClientError::Tls { .. }) => {
            let text = e.to_string();
            let ClientError::Tls { failure, .. } = e else {
                unreachable!()
            };
            assert!(!text.contains('\n'), "one line: {text}");
            assert!(
                text.contains(&format!("ferrys://{addr}")),
                "the URL given: {text}"
            );
            (failure, text)
        }
        Err(other) => {
            let mut chain = format!("{other:?}");
            let mut cause = std::error::Error::source(&other);
            while let Some(c) = cause {
                chain.push_str(&format!("\n -> {c:?}"));
                cause = c.source();
            }
            panic!("not a TLS failure: {chain}")
        }
        Ok(_) => panic!("connected"),
    }
}

/// A CA and a server certificate made by `openssl` the way many guides do it:
/// `x509 -req` without an extensions file, which makes an X.509 v1 certificate.
fn openssl_v1_pki(dir: &std::path::Path) -> (String, String, String) {
    let script = "openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                  -days 2 -subj /CN=ca -keyout ca.key -out ca.pem && \
                  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                  -subj /CN=localhost -keyout key.pem -out server.csr && \
                  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
                  -days 2 -out cert.pem";
    let out = std::process::Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    (read("ca.pem"), read("cert.pem"), read("key.pem"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_errors_are_named_with_what_fixes_them() {
    // A self-signed CA certificate as the server's, trusted as the CA.
    let (ca_as_leaf, key) = ferry_testkit::pki::ca_as_server_certificate();
    let addr = handshake_only_server(&ca_as_leaf, &key, b"h2");
    let (failure, text) = tls_failure(addr, &ca_as_leaf).await;
    assert_eq!(failure, TlsFailure::CaUsedAsEndEntity, "{text}");
    assert!(
        text.contains("make a CA and a server certificate signed by it"),
        "{text}"
    );

    // An X.509 v1 certificate.
    let dir = tempfile::tempdir().unwrap();
    let (ca, v1, key) = openssl_v1_pki(dir.path());
    let addr = handshake_only_server(&v1, &key, b"h2");
    let (failure, text) = tls_failure(addr, &ca).await;
    assert_eq!(failure, TlsFailure::UnsupportedCertVersion, "{text}");
    assert!(text.contains("needs v3 extensions"), "{text}");

    // A CA that did not sign the server's certificate.
    let pki = TestPki::generate();
    let other = TestPki::generate();
    let addr = handshake_only_server(&pki.cert_pem, &pki.key_pem, b"h2");
    let (failure, text) = tls_failure(addr, &other.ca_pem).await;
    assert_eq!(failure, TlsFailure::UnknownIssuer, "{text}");
    assert!(text.contains("not signed by the CA given"), "{text}");

    // A certificate that does not name the host dialled.
    let elsewhere = TestPki::for_names(&["broker.example"]);
    let addr = handshake_only_server(&elsewhere.cert_pem, &elsewhere.key_pem, b"h2");
    let (failure, text) = tls_failure(addr, &elsewhere.ca_pem).await;
    assert!(
        matches!(&failure, TlsFailure::NotValidForName { host, .. } if host == "127.0.0.1"),
        "{failure:?}"
    );
    assert!(
        text.contains("\"127.0.0.1\"") && text.contains("broker.example"),
        "{text}"
    );

    // A port that speaks another protocol over TLS: a Ferry server's HTTP port.
    let broker_dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(broker_dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let server = ferry_server::Server::new(broker)
        .tls(TlsConfig::from_pem(pki.cert_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap())
        .start_local()
        .await
        .unwrap();
    let (failure, text) = tls_failure(server.http_addr(), &pki.ca_pem).await;
    assert_eq!(failure, TlsFailure::NoApplicationProtocol, "{text}");
    assert!(text.contains("may not be a Ferry gRPC port"), "{text}");
    server.stop().await.unwrap();
}

/// The server comes back on the same address with a certificate of another CA: the
/// client's next call, which reconnects, says why the handshake failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_refused_over_the_certificate_says_why() {
    let pki = TestPki::generate();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let server = ferry_server::Server::new(broker)
        .tls(TlsConfig::from_pem(pki.cert_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap())
        .start_local()
        .await
        .unwrap();
    let addr = server.grpc_addr();
    let options = ConnectOptions::new().tls_ca_pem(pki.ca_pem.clone());
    let client = Client::connect_with(&format!("ferrys://{addr}"), options)
        .await
        .unwrap();
    client.list_queues().await.unwrap();
    server.stop().await.unwrap();

    let other = TestPki::generate();
    handshake_only_server_at(&addr.to_string(), &other.cert_pem, &other.key_pem, b"h2");
    let mut last = None;
    for _ in 0..50 {
        match client.list_queues().await {
            Err(e) if e.to_string().contains("TLS with the server failed") => {
                last = Some(e.to_string());
                break;
            }
            other => last = Some(format!("{other:?}")),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let text = last.unwrap();
    assert!(text.contains("not signed by the CA given"), "{text}");
    assert!(!text.contains('\n'), "{text}");
}
