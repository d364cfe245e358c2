//! `ferry serve` with `[[aws.credentials]]` in its config file: the SQS endpoint is
//! served beside `[auth]` tokens (credentials make it safe to), a request signed with a
//! configured key does what the key's permissions allow, one beyond them is AccessDenied,
//! an unsigned one is MissingAuthenticationToken, and neither the secret nor a signature
//! shows in the server's debug log.

use std::path::Path;

mod support;

// The signer written apart from the verifier, shared with ferry-aws's own tests.
#[path = "../../ferry-aws/tests/auth/signer.rs"]
mod signer;

use signer::{Signer, now_ms};

const ADMIN_KEY: &str = "AKIAFERRYADMIN000001";
const ADMIN_SECRET: &str = "admin-secret-2c9e41b7";
const PUBLISHER_KEY: &str = "AKIAFERRYPUBLISHER01";
const PUBLISHER_SECRET: &str = "publisher-secret-7f3a08d5";

/// A config with a token for Ferry's own API, an admin key whose secret is in the file and
/// a publisher key whose secret comes from the environment.
fn write_config(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("ferry.toml");
    let text = format!(
        "[[auth.tokens]]\nname = \"ops\"\nsha256 = \"{}\"\npermissions = [\"admin:#\"]\n\n\
         [[aws.credentials]]\naccess_key_id = \"{ADMIN_KEY}\"\n\
         secret_access_key = \"{ADMIN_SECRET}\"\npermissions = [\"admin:#\", \"publish:#\"]\n\n\
         [[aws.credentials]]\naccess_key_id = \"{PUBLISHER_KEY}\"\n\
         secret_access_key_env = \"ORDERS_AWS_SECRET\"\nname = \"orders-publisher\"\n\
         permissions = [\"publish:orders\"]\n",
        support::sha256_hex("ops-token-4d2a")
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// An SQS JSON call to `addr`, signed by `signer` (or unsigned).
fn call(addr: &str, signer: Option<&Signer>, action: &str, body: &str) -> (u16, String) {
    let target = format!("AmazonSQS.{action}");
    let headers = [
        ("Content-Type", "application/x-amz-json-1.0"),
        ("X-Amz-Target", target.as_str()),
    ];
    let mut text: String = headers
        .iter()
        .map(|(n, v)| format!("{n}: {v}\r\n"))
        .collect();
    if let Some(signer) = signer {
        let mut signed = headers.to_vec();
        signed.push(("Host", addr));
        for (n, v) in signer.sign("POST", "/", &signed, body.as_bytes(), now_ms()) {
            text.push_str(&format!("{n}: {v}\r\n"));
        }
    }
    support::http(addr, &text, "POST", "/", body)
}

#[test]
fn serve_verifies_signatures_with_the_configured_keys_and_checks_their_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let log_path = dir.path().join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let (mut child, lines) = support::spawn_serve_with(
        &dir.path().join("data"),
        &["--no-pubsub", "--config", config.to_str().unwrap()],
        |command| {
            command
                .env("ORDERS_AWS_SECRET", PUBLISHER_SECRET)
                .env("RUST_LOG", "debug")
                .stderr(log);
        },
    );
    let said_signed = std::cell::Cell::new(false);
    let (_grpc, aws) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) on ",
        "ferry: serving Amazon SQS on http://",
        |line| {
            if line.contains("SigV4 signatures required, 2 access key(s)") {
                said_signed.set(true);
            }
        },
    );
    assert!(
        said_signed.get(),
        "the SQS line says signatures are required"
    );
    let admin = Signer::new(ADMIN_KEY, ADMIN_SECRET, "sqs");
    let publisher = Signer::new(PUBLISHER_KEY, PUBLISHER_SECRET, "sqs");

    let (status, created) = call(
        &aws,
        Some(&admin),
        "CreateQueue",
        r#"{"QueueName": "orders"}"#,
    );
    assert_eq!(status, 200, "{created}");
    let url = format!("http://{aws}/000000000000/orders");
    let send = format!(r#"{{"QueueUrl": "{url}", "MessageBody": "hello"}}"#);
    let (status, sent) = call(&aws, Some(&publisher), "SendMessage", &send);
    assert_eq!(status, 200, "the env secret signs: {sent}");

    let (status, denied) = call(
        &aws,
        Some(&publisher),
        "CreateQueue",
        r#"{"QueueName": "payments"}"#,
    );
    assert_eq!(status, 403, "{denied}");
    assert!(
        denied.contains("x-amzn-query-error: AccessDenied;Sender"),
        "{denied}"
    );
    assert!(denied.contains("user/orders-publisher"), "{denied}");
    let (status, unsigned) = call(&aws, None, "ListQueues", "{}");
    assert_eq!(status, 403, "{unsigned}");
    assert!(
        unsigned.contains("MissingAuthenticationToken"),
        "{unsigned}"
    );
    let (status, listed) = call(&aws, Some(&admin), "ListQueues", "{}");
    assert_eq!(status, 200, "{listed}");
    assert!(
        listed.contains(&url) && !listed.contains("payments"),
        "{listed}"
    );

    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(&log_path).unwrap();
    // Debug logging is on (the refusal above is logged), so the absences below mean
    // something.
    assert!(log.contains("sqs request denied"), "{log}");
    for secret in [ADMIN_SECRET, PUBLISHER_SECRET, "Signature=", "hello"] {
        assert!(!log.contains(secret), "{secret:?} in the log:\n{log}");
    }
}

#[test]
fn serve_refuses_the_unauthenticated_test_reset_route_beside_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let (mut child, _lines) = support::spawn_serve_with(
        &dir.path().join("data"),
        &[
            "--no-pubsub",
            "--config",
            config.to_str().unwrap(),
            "--aws-test-reset",
        ],
        |command| {
            command
                .env("ORDERS_AWS_SECRET", PUBLISHER_SECRET)
                .stderr(std::process::Stdio::piped());
        },
    );
    let status = child.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("--aws-test-reset"), "{stderr}");
    assert!(!stderr.contains(ADMIN_SECRET), "{stderr}");
}
