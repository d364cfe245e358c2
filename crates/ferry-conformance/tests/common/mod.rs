//! A front end Ferry serves itself (its gRPC server, its AWS endpoint, its Kafka listener),
//! run in this process over a broker in a directory and restarted in place from that
//! directory: the harness the `ferry://`, `sqs://` and `kafka://` suites share.

#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_broker::{Broker, BrokerConfig};
use ferry_conformance::Restart;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// Serves what `dir` holds on `listener` until `stopped` fires, panicking if serving fails.
pub type Start = Arc<
    dyn Fn(PathBuf, TcpListener, oneshot::Receiver<()>) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

struct Running {
    stop: oneshot::Sender<()>,
    served: tokio::task::JoinHandle<()>,
}

/// One front end on a fixed address, restartable from its directory.
pub struct Served {
    pub addr: SocketAddr,
    dir: PathBuf,
    start: Start,
    running: Arc<Mutex<Option<Running>>>,
}

impl Served {
    /// Starts `start` over `dir` on a free port of 127.0.0.1.
    pub async fn start(dir: &Path, start: Start) -> Served {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let running = spawn(&start, dir, listener);
        Served {
            addr,
            dir: dir.to_owned(),
            start,
            running: Arc::new(Mutex::new(Some(running))),
        }
    }

    /// The suite's restart: stop, wait until everything is let go, serve again on the
    /// same address from the same directory.
    pub fn restart_hook(&self) -> Restart {
        let (running, start, dir, addr) = (
            self.running.clone(),
            self.start.clone(),
            self.dir.clone(),
            self.addr,
        );
        Restart::Hook(Arc::new(move || {
            let (running, start, dir) = (running.clone(), start.clone(), dir.clone());
            Box::pin(async move { restart(&running, &start, &dir, addr).await })
        }))
    }

    /// Stops and serves again, as the suite's restart does.
    pub async fn restart(&self) {
        restart(&self.running, &self.start, &self.dir, self.addr).await;
    }

    /// Stops serving and waits until the front end has let go of the broker.
    pub async fn stop(&self) {
        stop(&self.running).await;
    }
}

async fn stop(running: &Mutex<Option<Running>>) {
    let old = running.lock().unwrap().take();
    if let Some(old) = old {
        let _ = old.stop.send(());
        old.served.await.unwrap();
    }
}

async fn restart(running: &Mutex<Option<Running>>, start: &Start, dir: &Path, addr: SocketAddr) {
    stop(running).await;
    let listener = TcpListener::bind(addr).await.unwrap();
    *running.lock().unwrap() = Some(spawn(start, dir, listener));
}

fn spawn(start: &Start, dir: &Path, listener: TcpListener) -> Running {
    let (stop, stopped) = oneshot::channel();
    let served = tokio::spawn(start(dir.to_owned(), listener, stopped));
    Running { stop, served }
}

/// Opens the broker in `dir` with `config()`; the lock of a broker just stopped may take a
/// moment to go, so a failure is retried for up to five seconds.
pub async fn open_broker(dir: &Path, config: impl Fn() -> BrokerConfig) -> Broker {
    let mut tries = 0;
    loop {
        match Broker::open(dir, config()).await {
            Ok(broker) => return broker,
            Err(_) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("reopen the broker: {e}"),
        }
    }
}
