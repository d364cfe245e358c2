//! The README's certificate recipe (between `<!-- tls-recipe:begin -->` and `end`) run as
//! written: its CA and server certificate serve TLS, and the CLI trusting the CA reaches
//! the server by name and by address.

use std::path::Path;
use std::process::Command;

mod support;

/// The shell commands of the recipe: the code block between the markers, fences dropped.
fn recipe() -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let (_, rest) = readme
        .split_once("<!-- tls-recipe:begin -->")
        .expect("the README marks its certificate recipe");
    let (block, _) = rest
        .split_once("<!-- tls-recipe:end -->")
        .expect("the recipe's end is marked");
    let lines: Vec<&str> = block
        .lines()
        .filter(|line| !line.trim_start().starts_with("```"))
        .collect();
    lines.join("\n")
}

#[test]
fn the_readme_certificate_recipe_serves_tls_to_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    std::fs::create_dir(&pki).unwrap();
    let script = recipe();
    for needed in [
        "basicConstraints",
        "CA:FALSE",
        "keyUsage",
        "serverAuth",
        "DNS:localhost",
    ] {
        assert!(
            script.contains(needed),
            "{needed} missing from the recipe:\n{script}"
        );
    }
    let made = Command::new("sh")
        .args(["-e", "-c", &script])
        .current_dir(&pki)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "the recipe failed: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    for file in ["ca.pem", "cert.pem", "key.pem"] {
        assert!(pki.join(file).exists(), "the recipe makes {file}");
    }

    let cert = pki.join("cert.pem");
    let key = pki.join("key.pem");
    let (mut child, lines) = support::spawn_serve(
        &dir.path().join("data"),
        &[
            "--no-pubsub",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let (grpc, _) = support::listening(
        &lines,
        "ferry: serving gRPC (ferry.v1) over TLS on ",
        "ferry: serving HTTP on https://",
        |_| {},
    );
    let port = grpc.rsplit(':').next().unwrap().to_owned();
    let ca = pki.join("ca.pem");
    let ferry = |server: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["--server", server, "--tls-ca", ca.to_str().unwrap()])
            .args(args)
            .env_remove("FERRY_TOKEN")
            .output()
            .unwrap()
    };
    let by_name = format!("ferrys://localhost:{port}");
    let by_address = format!("ferrys://127.0.0.1:{port}");
    let created = ferry(&by_name, &["queue", "create", "jobs"]);
    let listed = ferry(&by_address, &["queue", "list"]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(String::from_utf8_lossy(&listed.stdout).contains("jobs"));
}
