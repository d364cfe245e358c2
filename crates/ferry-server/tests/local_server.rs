//! `Server::start_local`: both listeners on loopback ports of their own, served until `stop`,
//! which waits for the end; dropping the handle shuts the server down too.

use std::time::Duration;

use ferry_broker::{Broker, BrokerConfig};
use ferry_proto::v1::{self, admin_client::AdminClient};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::Channel;

async fn fresh_broker() -> (Broker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    (broker, dir)
}

async fn healthz(addr: std::net::SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = "GET /healthz HTTP/1.1\r\nHost: ferry\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.unwrap();
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_local_serves_grpc_and_http_on_loopback_until_stopped() {
    let (broker, _dir) = fresh_broker().await;
    let server = ferry_server::Server::new(broker.clone())
        .start_local()
        .await
        .unwrap();
    let (grpc, http) = (server.grpc_addr(), server.http_addr());
    assert!(grpc.ip().is_loopback() && http.ip().is_loopback());
    assert_ne!(grpc.port(), 0);
    assert_ne!(grpc, http);

    let channel = Channel::from_shared(format!("http://{grpc}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut admin = AdminClient::new(channel);
    admin
        .create_queue(v1::CreateQueueRequest {
            name: "jobs".into(),
            spec: None,
        })
        .await
        .unwrap();
    assert!(broker.describe_queue("jobs").is_ok(), "served this broker");
    assert!(healthz(http).await.starts_with("HTTP/1.1 200"));
    drop(admin);

    tokio::time::timeout(Duration::from_secs(10), server.stop())
        .await
        .expect("stop waits only for the end of serving")
        .unwrap();
    assert!(TcpStream::connect(grpc).await.is_err(), "gRPC stopped");
    assert!(TcpStream::connect(http).await.is_err(), "HTTP stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_local_keeps_the_servers_settings_and_dropping_it_shuts_down() {
    let (broker, _dir) = fresh_broker().await;
    let server = ferry_server::Server::new(broker)
        .max_connections(1)
        .start_local()
        .await
        .unwrap();
    let http = server.http_addr();
    let held = TcpStream::connect(http).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        healthz(http).await.starts_with("HTTP/1.1 429"),
        "the connection limit applies"
    );
    drop(held);

    drop(server);
    let mut closed = false;
    for _ in 0..100 {
        if TcpStream::connect(http).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(closed, "a dropped server stops listening");
}
