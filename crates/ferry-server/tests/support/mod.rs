//! What the server's suites share: a broker served on loopback ports with a gRPC channel to
//! it, and one HTTP/1.1 exchange over a bare socket (lighter than a client crate, and it
//! sends exactly the bytes a test means).

#![allow(dead_code)] // Each suite uses its own part of this.

use std::net::SocketAddr;
use std::time::Duration;

use ferry_broker::{Broker, BrokerConfig};
use ferry_proto::v1::{
    admin_client::AdminClient, consumer_client::ConsumerClient,
    dead_letters_client::DeadLettersClient, groups_client::GroupsClient,
    publisher_client::PublisherClient,
};
use ferry_server::{LocalServer, Server, TokenGrant};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::Channel;

/// A broker in a fresh temporary directory, with the directory (removed when dropped).
pub async fn fresh_broker() -> (Broker, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path(), BrokerConfig::default())
        .await
        .unwrap();
    (broker, dir)
}

/// Opens the broker in `dir` again after a server on it stopped: the stopped server's last
/// stream task may still hold its broker (and so the directory's lock) for a moment, and
/// lets go as soon as that task ends.
pub async fn reopen(dir: &std::path::Path, config: impl Fn() -> BrokerConfig) -> Broker {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match Broker::open(dir, config()).await {
            Err(ferry_broker::BrokerError::Storage(ferry_broker::StorageError::Locked {
                ..
            })) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => return other.unwrap(),
        }
    }
}

/// A broker served over gRPC and HTTP on loopback, and a gRPC channel to it.
pub struct Served {
    pub broker: Broker,
    pub channel: Channel,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    server: LocalServer,
    _dir: Option<TempDir>,
}

impl Served {
    /// Serves `broker` with the server `configure` sets up; `dir`, if given, lives as long
    /// as the server. The channel is plaintext: a TLS server needs a channel of its own.
    pub async fn serve(
        broker: Broker,
        dir: Option<TempDir>,
        configure: impl FnOnce(Server) -> Server,
    ) -> Served {
        let server = configure(Server::new(broker.clone()))
            .start_local()
            .await
            .unwrap();
        let (grpc, http) = (server.grpc_addr(), server.http_addr());
        let channel = Channel::from_shared(format!("http://{grpc}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Served {
            broker,
            channel,
            grpc,
            http,
            server,
            _dir: dir,
        }
    }

    /// Stops the server, lets go of the channel and the broker (so the directory can be
    /// opened again) and checks serving ended cleanly within ten seconds.
    pub async fn stop(self) {
        drop(self.channel);
        drop(self.broker);
        tokio::time::timeout(Duration::from_secs(10), self.server.stop())
            .await
            .expect("the server stops")
            .unwrap();
    }
}

/// The `ferry.v1` clients over a test's gRPC channel.
pub trait GrpcClients {
    fn grpc_channel(&self) -> Channel;

    fn admin(&self) -> AdminClient<Channel> {
        AdminClient::new(self.grpc_channel())
    }

    fn publisher(&self) -> PublisherClient<Channel> {
        PublisherClient::new(self.grpc_channel())
    }

    fn consumer(&self) -> ConsumerClient<Channel> {
        ConsumerClient::new(self.grpc_channel())
    }

    fn dead_letters(&self) -> DeadLettersClient<Channel> {
        DeadLettersClient::new(self.grpc_channel())
    }

    fn groups(&self) -> GroupsClient<Channel> {
        GroupsClient::new(self.grpc_channel())
    }
}

impl GrpcClients for Served {
    fn grpc_channel(&self) -> Channel {
        self.channel.clone()
    }
}

/// A token named `name` with `permissions` in their written form (`"publish:orders.*"`).
pub fn grant(name: &str, token: &str, permissions: &[&str]) -> TokenGrant {
    TokenGrant::new(
        name,
        token,
        permissions.iter().map(|p| p.parse().unwrap()).collect(),
    )
}

/// What came back from one HTTP exchange.
pub struct RawReply {
    pub status: u16,
    /// The status line and headers.
    pub head: String,
    pub body: Vec<u8>,
}

/// One HTTP/1.1 exchange on a connection of its own (`Connection: close`, read to the end),
/// with `headers` (each ending in `\r\n`) added to the request's.
pub async fn exchange(
    addr: SocketAddr,
    headers: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> RawReply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: ferry\r\nConnection: close\r\n{headers}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // A server refusing a body may answer and close before reading all of it.
    let _ = stream.write_all(body).await;
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP reply: {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    RawReply {
        status: head[9..12].parse().unwrap(),
        head,
        body: raw[split + 4..].to_vec(),
    }
}
