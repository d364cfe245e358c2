//! The client over TLS: `ferrys://` with the CA that signed the server's certificate
//! works, token included; another CA fails the handshake with the reason in the error;
//! `ferrys://` without a CA is refused before anything is sent.

use ferry_broker::{Broker, BrokerConfig};
use ferry_client::{Client, ClientError, ConnectOptions, Message};
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
        Err(ClientError::Connect { source, .. }) => {
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
