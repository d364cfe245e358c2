//! The contract used from another language: a Python program with the official `grpcio`
//! package (stubs generated from `ferry.v1` by `grpcio-tools`) publishes, consumes and
//! acks against the server. CI installs both packages (`.ci/run`); elsewhere, without them,
//! the test says so loudly and skips — under `CI=true` that is a failure.

use std::path::Path;
use std::process::Command;

use ferry_broker::{Broker, BrokerConfig};

fn python_has_grpc() -> bool {
    Command::new("python3")
        .args(["-c", "import grpc, grpc_tools"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_grpcio_client_publishes_consumes_and_acks() {
    if !python_has_grpc() {
        let message = "python3 with grpcio and grpcio-tools is missing \
                       (python3 -m pip install grpcio grpcio-tools)";
        ferry_testkit::skip_or_fail(message);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    let server = ferry_server::Server::new(broker)
        .start_local()
        .await
        .unwrap();
    let addr = server.grpc_addr();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = manifest.join("tests/python/grpc_client.py");
    let protos = manifest.join("../ferry-proto/proto");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(script)
            .arg(addr.to_string())
            .arg(protos)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    server.stop().await.unwrap();
    assert!(
        output.status.success(),
        "the Python client failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("acked 10 messages"));
}
