//! kafka-python (pinned in `scripts/python-packages.sh`) authenticating to the front end:
//! `kafka_python/sasl.py` over SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512,
//! and over SASL_SSL (a test CA's certificate) with SCRAM-SHA-256 — each creates, produces
//! and consumes on a topic its token may use, is refused one it may not
//! (TopicAuthorizationFailedError), and fails to authenticate with a wrong token.
//!
//! Without python3 and kafka-python the test says so loudly and skips — under `CI=true`
//! that is a failure.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use ferry_broker::{Broker, BrokerConfig, TopicSpec};
use ferry_kafka::{KafkaConfig, Security, User, Users, token_hash};

const TOKEN: &str = "orders-token-7f3a9c";

fn server_tls(pki: &ferry_testkit::pki::TestPki) -> Arc<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(pki.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(pki.key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    Arc::new(config)
}

/// Runs `sasl.py` against a fresh endpoint with `tls` (or none); panics with its output
/// when a check fails.
async fn run(protocol: &str, mechanism: &str, tls: Option<&ferry_testkit::pki::TestPki>) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    broker
        .create_topic("payments", TopicSpec::with_partitions(1))
        .await
        .unwrap();
    let users = Users::new(vec![User {
        name: "orders-service".into(),
        sha256: token_hash(TOKEN),
        permissions: ["publish:orders.#", "consume:orders.#", "admin:orders.#"]
            .iter()
            .map(|p| p.parse().unwrap())
            .collect(),
        scram_secret: Some(TOKEN.into()),
    }])
    .unwrap();
    let config = KafkaConfig {
        security: Security {
            users: Some(Arc::new(users)),
            tls: tls.map(server_tls),
        },
        ..KafkaConfig::default()
    };
    let server = common::serve(broker, config).await;
    let ca_file = dir.path().join("ca.pem");
    if let Some(pki) = tls {
        std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kafka_python/sasl.py");
    let mut command = Command::new("python3");
    command
        .arg(script)
        .arg(server.addr.to_string())
        .args([protocol, mechanism]);
    if tls.is_some() {
        command.arg(&ca_file);
    }
    let stdout =
        common::python_checks(&format!("kafka-python {protocol} {mechanism}"), command).await;
    server.stop().await;
    println!("{protocol} {mechanism}:\n{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_authenticates_with_plain_and_scram_over_sasl_plaintext_and_sasl_ssl() {
    if !common::python_imports("kafka") {
        ferry_testkit::skip_or_fail(
            "python3 with kafka-python is missing (bash scripts/python-packages.sh)",
        );
        return;
    }
    run("SASL_PLAINTEXT", "PLAIN", None).await;
    run("SASL_PLAINTEXT", "SCRAM-SHA-256", None).await;
    run("SASL_PLAINTEXT", "SCRAM-SHA-512", None).await;
    let pki = ferry_testkit::pki::TestPki::generate();
    run("SASL_SSL", "SCRAM-SHA-256", Some(&pki)).await;
}
