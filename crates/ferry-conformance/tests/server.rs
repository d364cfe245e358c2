//! The conformance suite on a Ferry server: the SDK's `ferry://` transport against
//! `ferry-server` on a real TCP socket, restarted mid-stream from the same directory.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_broker::{Broker, BrokerConfig};
use ferry_conformance::{Restart, Target};

struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<()>,
}

/// Opens the broker in `dir` and serves it on `addr`; the lock of a broker just stopped
/// may take a moment to go.
async fn start(dir: &Path, addr: SocketAddr) -> (SocketAddr, Running) {
    let mut tries = 0;
    let broker = loop {
        match Broker::open(dir, BrokerConfig::default()).await {
            Ok(broker) => break broker,
            Err(e) if tries < 50 => {
                tries += 1;
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("reopen the broker: {e}"),
        }
    };
    let listener = ferry_server::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(async move {
        ferry_server::serve(broker, listener, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    (addr, Running { stop, served })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ferry_server_passes_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let data: PathBuf = dir.path().to_owned();
    let (addr, running) = start(&data, "127.0.0.1:0".parse().unwrap()).await;
    let running = Arc::new(Mutex::new(Some(running)));
    let restart = {
        let running = running.clone();
        Restart::Hook(Arc::new(move || {
            let (running, data) = (running.clone(), data.clone());
            Box::pin(async move {
                let old = running.lock().unwrap().take().expect("a running server");
                let _ = old.stop.send(());
                old.served.await.unwrap();
                let (_, new) = start(&data, addr).await;
                *running.lock().unwrap() = Some(new);
            })
        }))
    };
    let target = Target::new("ferry server", format!("ferry://{addr}")).restart(restart);
    let report = ferry_conformance::run(&target).await;
    report.print();
    report.assert_passed();
    assert!(
        report.skipped().is_empty(),
        "a Ferry server supports everything: {:?}",
        report.skipped()
    );
    let last = running.lock().unwrap().take().unwrap();
    let _ = last.stop.send(());
    last.served.await.unwrap();
}
