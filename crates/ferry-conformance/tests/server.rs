//! The conformance suite on a Ferry server: the SDK's `ferry://` transport against
//! `ferry-server` on a real TCP socket, restarted mid-stream from the same directory; and
//! one consumer living through a restart, which the suite (reconnecting from scratch)
//! does not cover.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry::{
    ConsumerOptions, DeliveryPolicy, Destination, Error, Ferry, Message, QueueDecl, Source,
};
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
    // A Ferry server supports every feature and the harness restarts it.
    report.assert_skipped_exactly(&[]);
    let last = running.lock().unwrap().take().unwrap();
    let _ = last.stop.send(());
    last.served.await.unwrap();
}

/// A consumer opened before a restart goes on after it: its stream reconnects, what it
/// held comes back, and a settle of a delivery from before the restart answers `NotHeld`
/// rather than hanging or settling the new delivery's lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_keeps_going_across_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, running) = start(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let ferry = Ferry::connect(&format!("ferry://{addr}")).await.unwrap();
    let delivery = DeliveryPolicy {
        lease: Duration::from_secs(2),
        ..DeliveryPolicy::default()
    };
    let queue = "across-restart";
    ferry
        .declare_queue(&QueueDecl::new(queue).delivery(delivery))
        .await
        .unwrap();
    let publisher = ferry.publisher(Destination::queue(queue));
    let batch = |from: usize| {
        (from..from + 10)
            .map(|i| Message::new(format!("{i}")))
            .collect()
    };
    let mut sent: HashSet<String> = publisher
        .send_batch(batch(0))
        .await
        .unwrap()
        .into_iter()
        .collect();
    let options = ConsumerOptions {
        prefetch: 4,
        ..ConsumerOptions::default()
    };
    let mut c = ferry.consumer(Source::queue(queue), options).await.unwrap();
    let wait = Duration::from_secs(10);
    let mut acked = HashSet::new();
    for _ in 0..3 {
        let d = c.next_within(wait).await.unwrap().expect("a delivery");
        acked.insert(d.id.clone());
        d.ack().await.unwrap();
    }
    let mut held = Some(c.next_within(wait).await.unwrap().expect("a delivery"));

    let _ = running.stop.send(());
    running.served.await.unwrap();
    let (_, running) = start(dir.path(), addr).await;
    sent.extend(publisher.send_batch(batch(10)).await.unwrap());

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while acked.len() < sent.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {} acked after the restart",
            acked.len(),
            sent.len()
        );
        let Some(d) = c.next_within(Duration::from_millis(500)).await.unwrap() else {
            continue;
        };
        if let Some(old) = held.take_if(|old| old.id == d.id) {
            match old.ack().await {
                Err(Error::NotHeld { .. }) => {}
                other => panic!("an ack from before the restart answered {other:?}"),
            }
        }
        let id = d.id.clone();
        match d.ack().await {
            Ok(()) => assert!(acked.insert(id.clone()), "{id} came back after its ack"),
            // Fetched ahead before the restart: the server gave it back, and it comes again.
            Err(Error::NotHeld { .. }) => {}
            Err(e) => panic!("ack after the restart: {e}"),
        }
    }
    assert!(
        held.is_none(),
        "the delivery held at the restart never came back"
    );
    assert_eq!(acked, sent);
    c.close().await.unwrap();
    let _ = running.stop.send(());
    running.served.await.unwrap();
}
