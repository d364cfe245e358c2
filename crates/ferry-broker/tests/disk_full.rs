//! A full disk at the broker: publishes that would eat into the reserve kept for acks and
//! housekeeping are refused with `DiskFull` and store nothing, while receives, acks and
//! dead letters go on; a write that runs out of space anyway (no reserve) is refused the
//! same way and leaves the queue open; publishing resumes once space is back.
//!
//! The second test mounts a small tmpfs, which needs root (CI and the development machines
//! run as root). Elsewhere it skips with a loud message; under `CI=true` that is a failure.

use std::io::Write;
use std::path::Path;

use ferry_broker::{
    Acked, Broker, BrokerConfig, BrokerError, DeadLetter, OutgoingMessage, QueueSpec, TopicSpec,
};
use ferry_storage::fs_util::available_bytes;
use ferry_testkit::SmallFs;

/// The tests of this file run one at a time: a `mount` forked by one test holds a copy of
/// every descriptor of the process until it execs, including the other test's directory
/// lock, which would then seem held by a live process for a moment.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn open(dir: &Path, reserve: u64) -> Broker {
    let config = BrokerConfig {
        disk_reserve_bytes: reserve,
        ..BrokerConfig::default()
    };
    Broker::open(dir, config).await.unwrap()
}

fn batch(first: usize, count: usize, size: usize) -> Vec<OutgoingMessage> {
    (first..first + count)
        .map(|i| {
            let mut payload = format!("message-{i}-").into_bytes();
            payload.resize(size, b'x');
            OutgoingMessage::new(payload)
        })
        .collect()
}

#[tokio::test]
async fn publishes_that_would_take_the_reserve_are_refused_while_consumers_drain() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = open(dir.path(), 0).await;
        broker
            .create_queue("q", QueueSpec::default())
            .await
            .unwrap();
        broker
            .create_topic("t", TopicSpec::default())
            .await
            .unwrap();
        broker.publish_batch("q", batch(0, 10, 100)).await.unwrap();
    }
    // A reserve larger than the disk: every publish would take from it.
    let reserve = available_bytes(dir.path()).unwrap() + (1 << 40);
    let broker = open(dir.path(), reserve).await;
    let space = broker.disk_space().unwrap();
    assert!(
        space.available < space.reserve && space.refused == 0,
        "{space:?}"
    );
    let refused = broker
        .publish_batch("q", batch(10, 1, 100))
        .await
        .unwrap_err();
    match &refused {
        BrokerError::DiskFull {
            reserve: r,
            available,
            ..
        } => assert!(*r == reserve && available < r, "{refused:?}"),
        other => panic!("expected DiskFull, got {other:?}"),
    }
    assert!(
        refused.to_string().contains("the disk is full"),
        "{refused}"
    );
    let refused = broker.publish_to_topic("t", batch(10, 1, 100)).await;
    assert!(
        matches!(refused, Err(BrokerError::DiskFull { .. })),
        "{refused:?}"
    );
    assert_eq!(broker.describe_queue("q").unwrap().stats.next_seq, 10);
    assert_eq!(broker.disk_space().unwrap().refused, 2);

    // Receives, acks and a dead letter are writes into the reserve: they go on.
    let got = broker.receive("q", "c", 10, None, None).await.unwrap();
    assert_eq!(got.len(), 10);
    for d in &got[..9] {
        assert_eq!(
            broker.ack("q", d.seq, d.token).await.unwrap(),
            Acked::Settled
        );
    }
    broker
        .reject("q", got[9].seq, got[9].token, "bad")
        .await
        .unwrap();
    let stats = broker.describe_queue("q").unwrap().stats;
    assert_eq!((stats.acked, stats.dead_lettered), (9, 1));
    let dead = broker.receive("q.dlq", "c", 10, None, None).await.unwrap();
    assert_eq!(dead.len(), 1);
    drop(broker);

    // With room again, publishing works and nothing acked comes back.
    let broker = open(dir.path(), 0).await;
    broker.publish_batch("q", batch(10, 1, 100)).await.unwrap();
    let got = broker.receive("q", "c", 10, None, None).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(&got[0].payload[..10], b"message-10");
}

#[tokio::test]
async fn a_write_that_runs_out_of_space_is_refused_and_leaves_the_queue_open() {
    let _serial = SERIAL.lock().await;
    let Some(fs) = SmallFs::mount("16m") else {
        return;
    };
    let data = fs.path.join("data");
    let broker = open(&data, 0).await;
    let spec = QueueSpec {
        dead_letter: DeadLetter::Disabled,
        ..QueueSpec::default()
    };
    broker.create_queue("q", spec).await.unwrap();
    // Leave about 3 MiB free.
    let filler = fs.path.join("filler");
    {
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0u8; 64 << 10];
        while available_bytes(&fs.path).unwrap() > 3 << 20 {
            file.write_all(&chunk).unwrap();
        }
        file.sync_all().unwrap();
    }
    let mut accepted = 0;
    let refused = loop {
        match broker.publish_batch("q", batch(accepted, 8, 4096)).await {
            Ok(ids) => accepted += ids.len(),
            Err(e) => break e,
        }
        assert!(accepted < 100_000, "the disk never filled");
    };
    assert!(
        matches!(refused, BrokerError::DiskFull { reserve: 0, .. }),
        "{refused:?}"
    );
    assert!(accepted > 0);
    assert_eq!(broker.disk_space().unwrap().refused, 1);
    // Not poisoned: the queue answers, and holds exactly what was accepted.
    assert_eq!(
        broker.describe_queue("q").unwrap().stats.next_seq,
        accepted as u64
    );

    std::fs::remove_file(&filler).unwrap();
    broker
        .publish_batch("q", batch(accepted, 8, 4096))
        .await
        .unwrap();
    accepted += 8;
    let mut acked = 0;
    loop {
        let got = broker.receive("q", "c", 256, None, None).await.unwrap();
        if got.is_empty() {
            break;
        }
        for d in got {
            broker.ack("q", d.seq, d.token).await.unwrap();
            acked += 1;
        }
    }
    assert_eq!(acked, accepted);
    drop(broker);

    let broker = open(&data, 0).await;
    let stats = broker.describe_queue("q").unwrap().stats;
    assert_eq!(
        (stats.next_seq, stats.acked),
        (accepted as u64, accepted as u64)
    );
    assert!(
        broker
            .receive("q", "c", 10, None, None)
            .await
            .unwrap()
            .is_empty()
    );
}
