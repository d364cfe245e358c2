//! The real `ferry serve` over TLS, from a config file or from flags, with a CA and a
//! certificate made at test time: the CLI with `--tls-ca` (or FERRY_TLS_CA) works, HTTPS
//! answers, and without the CA, or with another one, the CLI fails in one line that says
//! what to check.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::Arc;

mod support;

use ferry_testkit::TestPki;
use rustls::pki_types::{CertificateDer, ServerName};

/// PEM files of a CA and of a certificate it signed for `localhost` and 127.0.0.1.
struct Pki {
    ca: PathBuf,
    ca_der: CertificateDer<'static>,
    cert: PathBuf,
    key: PathBuf,
}

fn pki(dir: &Path, name: &str) -> Pki {
    let pki = TestPki::generate();
    let write = |file: &str, text: String| {
        let path = dir.join(format!("{name}-{file}"));
        std::fs::write(&path, text).unwrap();
        path
    };
    Pki {
        ca: write("ca.pem", pki.ca_pem),
        ca_der: CertificateDer::from(pki.ca_der),
        cert: write("cert.pem", pki.cert_pem),
        key: write("key.pem", pki.key_pem),
    }
}

/// A running `ferry serve` over TLS, killed when dropped.
struct Server {
    child: Child,
    grpc: String,
    http: String,
}

impl Server {
    fn start(data_dir: &Path, extra: &[&str]) -> Server {
        let (child, lines) = support::spawn_serve(data_dir, extra);
        let (grpc, http) = support::listening(
            &lines,
            "ferry: serving gRPC (ferry.v1) over TLS on ",
            "ferry: serving HTTP on https://",
            |line| assert!(!line.contains("http://"), "a plaintext listener: {line}"),
        );
        Server { child, grpc, http }
    }

    /// `ferry ARGS` against this server at `url`, with `FERRY_TLS_CA` as given.
    fn ferry(&self, scheme: &str, ca_env: Option<&Path>, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
        command
            .args(["--server", &format!("{scheme}://{}", self.grpc)])
            .args(args)
            .env_remove("FERRY_TLS_CA")
            .env_remove("FERRY_TOKEN");
        if let Some(ca) = ca_env {
            command.env("FERRY_TLS_CA", ca);
        }
        command.output().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// GET `path` over HTTPS, trusting `ca`: the response, or the handshake's error.
fn https_get(addr: &str, ca: &CertificateDer<'static>, path: &str) -> std::io::Result<String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("localhost").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = std::net::TcpStream::connect(addr)?;
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    match tls.read_to_end(&mut response) {
        // Some servers close without close_notify; what was read is the answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !response.is_empty() => {}
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    Ok(String::from_utf8_lossy(&response).into_owned())
}

#[test]
fn serve_with_tls_from_the_config_file_and_the_cli_with_the_ca() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "server");
    let config = dir.path().join("ferry.toml");
    std::fs::write(
        &config,
        format!(
            "[tls]\ncert = {:?}\nkey = {:?}\n",
            pki.cert.to_str().unwrap(),
            pki.key.to_str().unwrap()
        ),
    )
    .unwrap();
    let check = support::config_check(&config).output().unwrap();
    let text = ok(&check);
    assert!(text.contains("server-cert.pem"), "{text}");
    assert!(!text.contains("PRIVATE KEY"), "{text}");

    let server = Server::start(
        &dir.path().join("data"),
        &["--no-pubsub", "--config", config.to_str().unwrap()],
    );
    let ca = pki.ca.to_str().unwrap();
    ok(&server.ferry("ferrys", None, &["--tls-ca", ca, "queue", "create", "jobs"]));
    ok(&server.ferry("ferry", Some(&pki.ca), &["publish", "jobs", "over", "tls"]));
    let consumed = ok(&server.ferry(
        "ferrys",
        Some(&pki.ca),
        &["consume", "jobs", "--count", "2", "--wait", "2s", "--json"],
    ));
    assert_eq!(consumed.lines().count(), 2, "{consumed}");

    let health = https_get(&server.http, &pki.ca_der, "/healthz").unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let queues = https_get(&server.http, &pki.ca_der, "/v1/queues").unwrap();
    assert!(queues.contains("jobs"), "{queues}");

    // Without the CA the address is plaintext: the server answers nothing it can read.
    let plain = server.ferry("ferry", None, &["queue", "list"]);
    assert!(!plain.status.success());
    let stderr = String::from_utf8_lossy(&plain.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--tls-ca"), "{stderr}");
    // ferrys:// without a CA says what is missing.
    let no_ca = server.ferry("ferrys", None, &["queue", "list"]);
    assert!(!no_ca.status.success());
    let stderr = String::from_utf8_lossy(&no_ca.stderr);
    assert!(
        stderr.contains("CA") && stderr.contains("--tls-ca"),
        "{stderr}"
    );
}

#[test]
fn serve_with_tls_flags_refuses_a_client_trusting_another_ca() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "server");
    let other = self::pki(dir.path(), "other");
    let server = Server::start(
        &dir.path().join("data"),
        &[
            "--no-pubsub",
            "--tls-cert",
            pki.cert.to_str().unwrap(),
            "--tls-key",
            pki.key.to_str().unwrap(),
        ],
    );
    ok(&server.ferry("ferrys", Some(&pki.ca), &["queue", "list"]));
    let untrusted = server.ferry("ferrys", Some(&other.ca), &["queue", "list"]);
    assert!(!untrusted.status.success());
    let stderr = String::from_utf8_lossy(&untrusted.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("certificate") && stderr.contains("--tls-ca"),
        "{stderr}"
    );
    assert!(https_get(&server.http, &other.ca_der, "/healthz").is_err());

    // A key that does not fit the certificate stops `serve` before anything opens.
    let never = dir.path().join("never");
    let refused = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["serve", "--grpc", "127.0.0.1:0", "--no-http"])
        .arg("--tls-cert")
        .arg(&pki.cert)
        .arg("--tls-key")
        .arg(&other.key)
        .arg("--data-dir")
        .arg(&never)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("cannot be used together"), "{stderr}");
    assert!(!never.exists(), "nothing opened");
}

/// The CLI names what is wrong with a TLS connection and how to fix it, in one line; so
/// does `serve` with a certificate no client would accept.
#[test]
fn tls_mistakes_are_named_with_their_fix() {
    let dir = tempfile::tempdir().unwrap();
    // A certificate for another name than the one dialled.
    let elsewhere = TestPki::for_names(&["broker.example"]);
    let write = |file: &str, text: &str| {
        let path = dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        path
    };
    let cert = write("cert.pem", &elsewhere.cert_pem);
    let key = write("key.pem", &elsewhere.key_pem);
    let ca = write("ca.pem", &elsewhere.ca_pem);
    let server = Server::start(
        &dir.path().join("data"),
        &[
            "--no-pubsub",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let port = server.grpc.rsplit(':').next().unwrap();
    let one_line_failure = |address: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["--server", address, "--tls-ca", ca.to_str().unwrap()])
            .args(["queue", "list"])
            .env_remove("FERRY_TOKEN")
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        stderr
    };
    let mismatch = one_line_failure(&format!("ferrys://localhost:{port}"));
    assert!(
        mismatch.contains("not valid for \"localhost\"") && mismatch.contains("broker.example"),
        "{mismatch}"
    );
    // The HTTP port, dialled as if it were the gRPC one.
    let http = one_line_failure(&format!("ferrys://{}", server.http));
    assert!(
        http.contains("may not be a Ferry gRPC port") && http.contains("--server"),
        "{http}"
    );
    drop(server);

    // `serve` with a self-signed CA certificate as its own.
    let (ca_as_leaf, ca_key) = ferry_testkit::pki::ca_as_server_certificate();
    let cert = write("ca-cert.pem", &ca_as_leaf);
    let key = write("ca-key.pem", &ca_key);
    let refused = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["serve", "--grpc", "127.0.0.1:0", "--no-http"])
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .arg("--data-dir")
        .arg(dir.path().join("never"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("server certificate") && stderr.contains("make a CA and a leaf"),
        "{stderr}"
    );
    assert!(!stderr.contains("peer"), "{stderr}");
}

/// The server's log says who was refused and why at info level, by the token's name and
/// never the token, and why a client refused its certificate, in the server's words.
#[test]
fn refusals_and_refused_certificates_are_logged_by_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path(), "server");
    let other = self::pki(dir.path(), "other");
    const TOKEN: &str = "reader-token-7f3a91";
    let config = dir.path().join("ferry.toml");
    std::fs::write(
        &config,
        format!(
            "[[auth.tokens]]\nname = \"reader\"\nsha256 = \"{}\"\npermissions = [\"consume:#\"]\n",
            support::sha256_hex(TOKEN)
        ),
    )
    .unwrap();
    let log = dir.path().join("serve.log");
    let log_file = std::fs::File::create(&log).unwrap();
    let (mut child, lines) = support::spawn_serve_with(
        &dir.path().join("data"),
        &[
            "--no-pubsub",
            "--config",
            config.to_str().unwrap(),
            "--tls-cert",
            pki.cert.to_str().unwrap(),
            "--tls-key",
            pki.key.to_str().unwrap(),
        ],
        |command| {
            command
                .env("RUST_LOG", "info")
                .env("NO_COLOR", "1")
                .stderr(log_file);
        },
    );
    let (grpc, http) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) over TLS on ",
        "ferry: serving HTTP on https://",
        |_| {},
    );
    let ferry = |ca: &Path, token: Option<&str>, args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
        command
            .args(["--server", &format!("ferrys://{grpc}")])
            .arg("--tls-ca")
            .arg(ca)
            .args(args)
            .env_remove("FERRY_TOKEN");
        if let Some(token) = token {
            command.args(["--token", token]);
        }
        let out = command.output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
    };
    ferry(&pki.ca, None, &["queue", "list"]);
    ferry(&pki.ca, Some("not-a-token-at-all"), &["queue", "list"]);
    ferry(&pki.ca, Some(TOKEN), &["queue", "create", "jobs"]);
    ferry(&other.ca, Some(TOKEN), &["queue", "list"]);
    let anonymous = https_get(&http, &pki.ca_der, "/v1/queues").unwrap();
    assert!(anonymous.starts_with("HTTP/1.1 401"), "{anonymous}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = child.kill();
    let _ = child.wait();

    let text = std::fs::read_to_string(&log).unwrap();
    let refused: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("call refused"))
        .collect();
    assert!(
        refused.iter().all(|l| l.contains(" INFO ")),
        "at info: {text}"
    );
    assert!(refused.iter().any(|l| l.contains("no token")), "{text}");
    assert!(
        refused
            .iter()
            .any(|l| l.contains("protocol=\"http\"") && l.contains("no token")),
        "{text}"
    );
    assert!(
        refused
            .iter()
            .any(|l| l.contains("not one this server knows")),
        "{text}"
    );
    assert!(
        refused
            .iter()
            .any(|l| l.contains("token=\"reader\"") || l.contains("token=reader")),
        "the grant's name: {text}"
    );
    for secret in [TOKEN, "not-a-token-at-all"] {
        assert!(!text.contains(secret), "a token in the log: {text}");
    }
    let handshake = text
        .lines()
        .find(|l| l.contains("TLS handshake failed"))
        .unwrap_or_else(|| panic!("no handshake line: {text}"));
    assert!(
        handshake.contains(" INFO ") && handshake.contains("server certificate"),
        "{handshake}"
    );
    assert!(!handshake.contains("peer"), "{handshake}");
}
