//! Ferry as a Kafka broker: the Kafka wire protocol over the broker's partitioned topics,
//! for the clients people already have (librdkafka, kafka-python, the Java client, …).
//!
//! **What maps to what.** A Kafka topic is a Ferry topic of the same name, with its
//! partitions; a topic created through Kafka is visible to every Ferry API and the other
//! way round. A Kafka offset is the partition's Ferry offset. A produced record is a Ferry
//! message (key, value as payload, headers), a fetched record a Ferry message read back
//! (`records.rs` says what does not survive). This node is the one broker (node id 0) and
//! the leader of every partition, at its advertised host and port.
//!
//! **Layout.** `framing.rs` reads length-prefixed frames within a maximum size;
//! `connection.rs` decodes each request's header, dispatches it and writes the answers in
//! request order; `guard.rs` checks a request's array counts before the codec sizes
//! allocations from them; `versions.rs` holds the APIs and versions served — ApiVersions
//! advertises exactly those; `api/` has one module per API family; `records.rs` turns
//! record batches into Ferry messages and back; `errors.rs` maps the broker's
//! [`ErrorKind`](ferry_broker::ErrorKind) to Kafka's codes in one match; and `appends.rs`
//! wakes long-polling fetches. The broker and storage know nothing of Kafka.
//!
//! **Security.** `auth/` holds the SASL users (Ferry's API tokens: PLAIN, SCRAM-SHA-256/512)
//! and the listener's [`Security`]; `api/sasl.rs` runs SaslHandshake and SaslAuthenticate;
//! `authz.rs` maps each API onto the user's permissions (`ferry-access`); TLS is rustls
//! with the server configuration Ferry's other listeners use.
//!
//! **Served:** ApiVersions, Metadata (with auto-creation), CreateTopics, DeleteTopics,
//! Produce v0–8 (acks 0, 1, all; none/gzip/snappy/lz4/zstd; legacy message sets in
//! `legacy.rs`, bounded decompression in `decompress.rs`), InitProducerId and idempotent
//! producers (`producers.rs`), Fetch (long poll), ListOffsets, consumer groups
//! (`coordinator/` runs Kafka's classic group protocol, membership in memory, and a
//! group's committed offsets are the broker's group of the same name on each topic,
//! `api/group_offsets.rs`), CreatePartitions, DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs (topic configs as Ferry's topic settings: `topic_config.rs`),
//! DescribeCluster, DeleteRecords, DescribeTopicPartitions, DescribeLogDirs,
//! ListConfigResources, List/AlterPartitionReassignments and ElectLeaders (what one node
//! truly answers to them), SaslHandshake and SaslAuthenticate (`api/sasl.rs`), with every
//! API authorized through `authz.rs`.
//! **Not done yet:** transactions. A request for an
//! API or version not served closes the connection, as Kafka does; see
//! `docs/compat/kafka.md`.

mod admin_authz;
mod api;
mod appends;
pub mod auth;
mod authz;
mod connection;
mod coordinator;
mod decompress;
pub mod errors;
mod framing;
/// The request decode path for the fuzz target (`fuzz/`): not an API.
#[doc(hidden)]
pub mod fuzzing;
mod group_authz;
mod group_id;
mod guard;
mod legacy;
mod pipeline;
mod producers;
mod records;
mod topic_config;
mod versions;

use std::sync::Arc;

use ferry_broker::Broker;
use tokio::net::TcpListener;

pub use auth::{Security, SecurityError, User, Users, token_hash};
pub use framing::FrameError;

/// Where `ferry serve` listens for Kafka clients unless told otherwise: Kafka's own port.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9092";

/// The host and port Metadata tells clients to connect to, `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertised {
    pub host: String,
    pub port: u16,
}

/// Why an advertised address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}; write host:port, such as kafka.internal:9092")]
pub struct BadAdvertised(String);

impl std::str::FromStr for Advertised {
    type Err = BadAdvertised;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| BadAdvertised(format!("{text:?} has no port")))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| BadAdvertised(format!("{port:?} is not a port from 1 to 65535")))?;
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(BadAdvertised(format!("{host:?} is not a host name")));
        }
        Ok(Advertised {
            host: host.to_owned(),
            port,
        })
    }
}

impl std::fmt::Display for Advertised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// How the front end behaves.
#[derive(Debug, Clone)]
pub struct KafkaConfig {
    /// The host and port clients are told to connect to in Metadata; the listener's
    /// address when `None`.
    pub advertised: Option<Advertised>,
    /// Partitions of a topic created by Metadata's auto-creation or by CreateTopics with
    /// `num_partitions = -1`.
    pub default_partitions: u32,
    /// Whether Metadata creates a topic it is asked about that does not exist (when the
    /// client allows it).
    pub auto_create_topics: bool,
    /// The largest request frame taken; a larger one closes the connection.
    pub max_frame_bytes: usize,
    /// SASL users and TLS; open (Kafka's PLAINTEXT) by default.
    pub security: Security,
    /// The session timeouts a consumer group member may ask for: Kafka's
    /// `group.min.session.timeout.ms` and `group.max.session.timeout.ms` (6 s and 30 min by
    /// default); outside them a join is INVALID_SESSION_TIMEOUT.
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    /// How long the first rebalance of an empty group waits for more members: Kafka's
    /// `group.initial.rebalance.delay.ms` (3 s by default; 0: no wait).
    pub group_initial_rebalance_delay_ms: i32,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            advertised: None,
            default_partitions: 1,
            auto_create_topics: true,
            // Kafka's socket.request.max.bytes.
            max_frame_bytes: 100 * 1024 * 1024,
            security: Security::default(),
            group_min_session_timeout_ms: coordinator::Limits::default().min_session_timeout_ms,
            group_max_session_timeout_ms: coordinator::Limits::default().max_session_timeout_ms,
            group_initial_rebalance_delay_ms: coordinator::Limits::default()
                .initial_rebalance_delay_ms,
        }
    }
}

/// The Kafka front end over one broker.
#[derive(Clone)]
pub struct Kafka {
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub broker: Broker,
    pub config: KafkaConfig,
    pub appends: appends::Appends,
    pub coordinator: coordinator::Coordinator,
    pub producers: producers::Producers,
}

impl Kafka {
    pub fn new(broker: Broker, config: KafkaConfig) -> Kafka {
        let producers = producers::Producers::new(broker.clone());
        let limits = coordinator::Limits {
            min_session_timeout_ms: config.group_min_session_timeout_ms,
            max_session_timeout_ms: config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms,
            ..coordinator::Limits::default()
        };
        Kafka {
            shared: Arc::new(Shared {
                broker,
                config,
                appends: appends::Appends::default(),
                coordinator: coordinator::Coordinator::new(limits),
                producers,
            }),
        }
    }

    /// How the endpoint is secured.
    pub fn security(&self) -> &Security {
        &self.shared.config.security
    }

    /// Serves on `listener` until `shutdown` completes; then stops accepting and ends the
    /// open connections (a fetch waiting in a long poll is cut short with them).
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let local = listener.local_addr()?;
        let (host, port) = match &self.shared.config.advertised {
            Some(advertised) => (advertised.host.clone(), advertised.port),
            None => (local.ip().to_string(), local.port()),
        };
        let node = Arc::new(connection::Node {
            host,
            port,
            listener: local,
        });
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let ticker = tokio::spawn(tick_groups(Arc::clone(&self.shared), stop_rx.clone()));
        let mut shutdown = std::pin::pin!(shutdown);
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(accepted) => accepted,
                        Err(e) => {
                            // A peer that reset before accept, or out of descriptors:
                            // the listener itself is fine, so keep accepting.
                            tracing::warn!(error = %e, "kafka: accepting a connection failed");
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let shared = Arc::clone(&self.shared);
                    let node = Arc::clone(&node);
                    let mut stop = stop_rx.clone();
                    connections.spawn(async move {
                        tokio::select! {
                            _ = stop.wait_for(|s| *s) => {}
                            _ = connection::serve(shared, node, stream, peer) => {}
                        }
                    });
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        let _ = stop_tx.send(true);
        while connections.join_next().await.is_some() {}
        let _ = ticker.await;
        Ok(())
    }
}

/// Checks the groups' session and rebalance timeouts, by the broker's clock, until the
/// server stops.
async fn tick_groups(shared: Arc<Shared>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut every = tokio::time::interval(coordinator::TICK);
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = every.tick() => shared.coordinator.tick(shared.broker.now_ms()),
        }
    }
}
