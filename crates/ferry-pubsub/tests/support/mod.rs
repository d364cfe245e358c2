//! What the front end's tests share: a front end on a fresh broker over loopback, and a
//! run of one of Google's client scripts against it.

#![allow(dead_code)] // Each test file uses its own part of this.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use ferry_broker::{Broker, BrokerConfig};
use ferry_pubsub::PubSub;
use ferry_schema_registry::SchemaRegistry;
use tokio::sync::oneshot;

/// A front end serving the broker in a directory, until [`Served::stop`].
pub struct Served {
    pub addr: SocketAddr,
    pub broker: Broker,
    /// The schema registry, for servers started with one.
    pub registry: Option<Arc<SchemaRegistry>>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    pub async fn start(dir: &Path) -> Served {
        Served::start_with(dir, BrokerConfig::default(), false, |pubsub| pubsub).await
    }

    /// A front end with a schema registry kept in `dir/schema-registry`, as `ferry serve`
    /// keeps it.
    pub async fn start_with_registry(dir: &Path) -> Served {
        Served::start_with(dir, BrokerConfig::default(), true, |pubsub| pubsub).await
    }

    /// A front end on a broker opened with `config`, with a schema registry or not, adjusted
    /// by `adjust` before it serves.
    pub async fn start_with(
        dir: &Path,
        config: BrokerConfig,
        with_registry: bool,
        adjust: impl FnOnce(PubSub) -> PubSub,
    ) -> Served {
        let broker = Broker::open(dir, config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let mut pubsub = PubSub::open(broker.clone(), &dir.join("pubsub")).unwrap();
        let registry = with_registry
            .then(|| Arc::new(SchemaRegistry::open(&dir.join("schema-registry")).unwrap()));
        if let Some(registry) = &registry {
            pubsub = pubsub.with_schema_registry(Arc::clone(registry));
        }
        let pubsub = adjust(pubsub);
        let task = tokio::spawn(async move {
            pubsub
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Served {
            addr,
            broker,
            registry,
            stop,
            task,
        }
    }

    pub async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the server stops")
            .unwrap();
    }
}

/// Runs `client` (one of Google's clients running a script) against a front end on a fresh
/// broker with a schema registry, through `PUBSUB_EMULATOR_HOST`; it must succeed and print "every check passed".
pub async fn run_client(what: &str, mut client: Command) {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start_with_registry(dir.path()).await;
    client.env("PUBSUB_EMULATOR_HOST", served.addr.to_string());
    let output = tokio::task::spawn_blocking(move || client.output().unwrap())
        .await
        .unwrap();
    served.stop().await;
    assert!(
        output.status.success(),
        "the {what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("every check passed"));
}
