//! What the front end's tests share: a front end on a fresh broker over loopback, and a
//! run of one of Google's client scripts against it.

#![allow(dead_code)] // Each test file uses its own part of this.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ferry_broker::{Broker, BrokerConfig};
use ferry_pubsub::PubSub;
use tokio::sync::oneshot;

/// A front end serving the broker in a directory, until [`Served::stop`].
pub struct Served {
    pub addr: SocketAddr,
    pub broker: Broker,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    pub async fn start(dir: &Path) -> Served {
        Served::start_with(dir, BrokerConfig::default(), |pubsub| pubsub).await
    }

    /// A front end on a broker opened with `config`, adjusted by `adjust` before it serves.
    pub async fn start_with(
        dir: &Path,
        config: BrokerConfig,
        adjust: impl FnOnce(PubSub) -> PubSub,
    ) -> Served {
        let broker = Broker::open(dir, config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let pubsub = adjust(PubSub::open(broker.clone(), &dir.join("pubsub")).unwrap());
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
/// broker, through `PUBSUB_EMULATOR_HOST`; it must succeed and print "every check passed".
pub async fn run_client(what: &str, mut client: Command) {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(dir.path()).await;
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
