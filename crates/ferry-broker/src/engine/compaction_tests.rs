//! Topics compacted by key through the broker's API: the latest value per key and nothing
//! older after compaction, tombstones kept for their grace and then removed, keyless
//! publishes refused, group consumers and reads by offset stepping over the gaps, a
//! subscription's unsettled messages kept, and all of it across a reopen.

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_storage::ManualClock;

use super::groups::{GroupJoin, StartAt};
use super::tests::T0;
use super::topic_compaction::COMPACTION_INTERVAL_MS;
use super::topic_tests::{msg, open, read_all, spec};
use super::*;
use crate::subscription::{SubscriptionSpec, SubscriptionStart};
use crate::topic::{Position, TopicCompaction, TopicRecord, TopicSpec};

const KEYS: usize = 5;
const ROUNDS: usize = 40;
/// Unique-key records published after the rounds, so every round lies in sealed segments
/// (a partition's segments hold about 38 records of this size, see `topic_tests.rs`).
const FILLERS: usize = 50;
const DAY_MS: i64 = 24 * 3600 * 1000;

fn compacted(partitions: u32) -> TopicSpec {
    TopicSpec {
        compaction: Some(TopicCompaction::default()),
        ..spec(partitions)
    }
}

fn big(payload: &str) -> String {
    format!("{payload}:{}", "x".repeat(900))
}

fn text(record: &TopicRecord) -> String {
    let payload = String::from_utf8(record.message.payload.to_vec()).unwrap();
    payload.split(':').next().unwrap().to_owned()
}

fn key(record: &TopicRecord) -> String {
    String::from_utf8(record.message.key.clone().unwrap().to_vec()).unwrap()
}

/// `ROUNDS` values of each of `KEYS` keys (`k<key>` = `r<round>`) at offsets
/// `round * KEYS + key`, then `FILLERS` records of their own keys.
async fn publish_rounds(broker: &Broker) {
    for round in 0..ROUNDS {
        for k in 0..KEYS {
            let m = msg(&big(&format!("r{round}"))).with_key(format!("k{k}"));
            broker.publish_to_partition("t", 0, vec![m]).await.unwrap();
        }
    }
    for i in 0..FILLERS {
        let m = msg(&big(&format!("f{i}"))).with_key(format!("filler-{i}"));
        broker.publish_to_partition("t", 0, vec![m]).await.unwrap();
    }
}

const LATEST_ROUND_START: u64 = ((ROUNDS - 1) * KEYS) as u64;
const END: u64 = (ROUNDS * KEYS + FILLERS) as u64;

fn assert_latest_only(records: &[TopicRecord]) {
    let offsets: Vec<u64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (LATEST_ROUND_START..END).collect::<Vec<_>>());
    let last = format!("r{}", ROUNDS - 1);
    let mut seen = BTreeMap::new();
    for r in &records[..KEYS] {
        assert_eq!(text(r), last, "{} at {}", key(r), r.offset);
        assert!(seen.insert(key(r), r.offset).is_none());
    }
    assert_eq!(seen.len(), KEYS);
}

#[tokio::test]
async fn after_compaction_reads_find_the_latest_value_of_each_key_and_nothing_older() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", compacted(1)).await.unwrap();
    publish_rounds(&broker).await;
    let before = broker.describe_topic("t").unwrap().partitions[0].bytes;
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(report.compaction.partitions, 1);
    assert_eq!(
        report.compaction.records_removed, LATEST_ROUND_START,
        "{report:?}"
    );
    assert!(report.compaction.segments_deleted > 0, "{report:?}");
    let info = broker.describe_topic("t").unwrap().partitions[0].clone();
    assert!(info.bytes < before / 2, "{info:?} from {before}");
    assert_eq!(info.end_offset, END);
    // The oldest record kept, even where the one at the start offset was removed.
    assert_eq!(info.oldest_timestamp_ms, Some(T0));
    assert_latest_only(&read_all(&broker, "t", 0));
    // A read at a removed offset returns the next record kept.
    for from in [info.start_offset, 1, 17, LATEST_ROUND_START - 1] {
        let Ok(got) = broker.read_topic("t", 0, Position::Offset(from), 1) else {
            assert!(from < info.start_offset, "read at {from} refused");
            continue;
        };
        assert_eq!(
            got[0].offset,
            LATEST_ROUND_START.max(from),
            "read at {from}"
        );
    }
}

#[tokio::test]
async fn compaction_runs_at_most_once_a_minute_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", compacted(1)).await.unwrap();
    assert_eq!(
        broker
            .maintain_now(Checkpoint::WhenDue)
            .await
            .unwrap()
            .compaction
            .partitions,
        1
    );
    publish_rounds(&broker).await;
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(report.compaction, CompactionStats::default());
    clock.advance(COMPACTION_INTERVAL_MS);
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(report.compaction.records_removed, LATEST_ROUND_START);
}

#[tokio::test]
async fn a_tombstone_stays_readable_for_its_grace_then_goes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", compacted(1)).await.unwrap();
    let publish = |m: OutgoingMessage| broker.publish_to_partition("t", 0, vec![m]);
    publish(msg(&big("old")).with_key("gone")).await.unwrap();
    publish(msg(&big("kept")).with_key("kept")).await.unwrap();
    publish(msg("").with_key("gone")).await.unwrap();
    for i in 0..FILLERS {
        publish(msg(&big(&format!("f{i}"))).with_key(format!("filler-{i}")))
            .await
            .unwrap();
    }
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(
        (
            report.compaction.records_removed,
            report.compaction.tombstones_removed
        ),
        (1, 0)
    );
    let records = read_all(&broker, "t", 0);
    assert_eq!((records[0].offset, text(&records[0])), (1, "kept".into()));
    assert_eq!(records[1].offset, 2);
    assert!(records[1].message.payload.is_empty(), "the tombstone");
    // Within the day, the tombstone stays.
    clock.advance(DAY_MS - 1);
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(report.compaction.partitions, 1);
    assert_eq!(report.compaction.records_removed, 0);
    clock.advance(COMPACTION_INTERVAL_MS);
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(
        (
            report.compaction.records_removed,
            report.compaction.tombstones_removed
        ),
        (1, 1)
    );
    let offsets: Vec<u64> = read_all(&broker, "t", 0)
        .iter()
        .map(|r| r.offset)
        .take(2)
        .collect();
    assert_eq!(offsets, vec![1, 3]);
}

#[tokio::test]
async fn a_keyless_publish_to_a_compacted_topic_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", compacted(3)).await.unwrap();
    let e = broker
        .publish_to_topic("t", vec![msg("a").with_key("k"), msg("no key")])
        .await
        .unwrap_err();
    assert!(matches!(e, BrokerError::KeyRequired { .. }), "{e}");
    assert!(e.to_string().contains("needs a key"), "{e}");
    let e = broker
        .publish_to_partition("t", 1, vec![msg("no key")])
        .await
        .unwrap_err();
    assert!(
        matches!(e, BrokerError::KeyRequired { partition: 1, .. }),
        "{e}"
    );
    let info = broker.describe_topic("t").unwrap();
    assert!(
        info.partitions.iter().all(|p| p.end_offset == 0),
        "{info:?}"
    );
    // Keyed messages still go, and a topic without compaction still takes keyless ones.
    broker
        .publish_to_topic("t", vec![msg("a").with_key("k")])
        .await
        .unwrap();
    broker.create_topic("plain", spec(1)).await.unwrap();
    broker
        .publish_to_topic("plain", vec![msg("no key")])
        .await
        .unwrap();
}

#[tokio::test]
async fn a_group_consumer_reads_across_the_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", compacted(1)).await.unwrap();
    publish_rounds(&broker).await;
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    let join = GroupJoin {
        session_timeout: Duration::from_secs(10),
        start: StartAt::Earliest,
        ..GroupJoin::default()
    };
    let member = broker.join_group("t", "g", join).await.unwrap().member_id;
    let mut got = Vec::new();
    loop {
        let records = broker.poll_group("t", "g", &member, 7).unwrap();
        if records.is_empty() {
            break;
        }
        let next = records.last().unwrap().offset + 1;
        broker.commit_offset("t", "g", &member, 0, next).unwrap();
        got.extend(records);
    }
    assert_latest_only(&got);
}

#[tokio::test]
async fn a_subscriptions_unsettled_messages_survive_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    broker.create_topic("t", compacted(1)).await.unwrap();
    let mut sub = SubscriptionSpec::new(Name::new("t").unwrap());
    sub.start = SubscriptionStart::Earliest;
    sub.delivery.durability = crate::spec::Durability::None;
    sub.delivery.lease = Duration::from_secs(10);
    broker.create_subscription("s", sub).await.unwrap();
    publish_rounds(&broker).await;
    // Settle the first 120 messages; the rest are unsettled (ready or in flight).
    let mut settled = 0;
    while settled < 120 {
        let got = broker
            .receive("s", "c", 120 - settled, None, None)
            .await
            .unwrap();
        assert!(!got.is_empty());
        for m in &got {
            broker.ack("s", m.seq, m.token).await.unwrap();
        }
        settled += got.len();
    }
    let in_flight = broker.receive("s", "c", 10, None, None).await.unwrap();
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert!(report.compaction.records_removed > 0, "{report:?}");
    // Everything from the first unsettled message on is still there.
    let kept = read_all(&broker, "t", 0);
    assert!(
        kept[0].offset > 0,
        "compaction removed nothing before the hold"
    );
    let from_hold: Vec<u64> = kept
        .iter()
        .map(|r| r.offset)
        .filter(|&o| o >= 120)
        .collect();
    assert_eq!(from_hold, (120..END).collect::<Vec<_>>());
    // And the subscription delivers every unsettled message with its contents.
    let mut texts: Vec<String> = in_flight
        .iter()
        .map(|m| String::from_utf8(m.payload.to_vec()).unwrap())
        .collect();
    for m in &in_flight {
        broker.ack("s", m.seq, m.token).await.unwrap();
    }
    loop {
        let got = broker.receive("s", "c", 100, None, None).await.unwrap();
        if got.is_empty() {
            break;
        }
        for m in &got {
            broker.ack("s", m.seq, m.token).await.unwrap();
            texts.push(String::from_utf8(m.payload.to_vec()).unwrap());
        }
    }
    assert_eq!(texts.len(), END as usize - 120);
    assert!(
        texts[0].starts_with(&format!("r{}:", 120 / KEYS)),
        "{}",
        &texts[0][..8]
    );
}

#[tokio::test]
async fn a_compacted_topic_reopens_with_its_setting_and_its_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let spec = TopicSpec {
        compaction: Some(TopicCompaction {
            tombstone_retention: Duration::from_secs(3600),
            min_lag: Duration::ZERO,
        }),
        ..compacted(1)
    };
    broker.create_topic("t", spec.clone()).await.unwrap();
    publish_rounds(&broker).await;
    broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    let before = broker.describe_topic("t").unwrap();
    drop(broker);
    let broker = open(dir.path(), &clock).await;
    assert_eq!(broker.describe_topic("t").unwrap(), before);
    assert_latest_only(&read_all(&broker, "t", 0));
    let e = broker
        .publish_to_partition("t", 0, vec![msg("no key")])
        .await
        .unwrap_err();
    assert!(matches!(e, BrokerError::KeyRequired { .. }), "{e}");
    // New records take offsets after the old end; compacting again removes what they
    // superseded.
    let at = broker
        .publish_to_partition("t", 0, vec![msg(&big("new")).with_key("k0")])
        .await
        .unwrap();
    assert_eq!(at[0].offset, END);
}

#[tokio::test]
async fn min_lag_keeps_young_records_from_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let broker = open(dir.path(), &clock).await;
    let spec = TopicSpec {
        compaction: Some(TopicCompaction {
            min_lag: Duration::from_secs(3600),
            ..TopicCompaction::default()
        }),
        ..compacted(1)
    };
    broker.create_topic("t", spec).await.unwrap();
    publish_rounds(&broker).await;
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(report.compaction.records_removed, 0);
    clock.advance(3600 * 1000);
    let report = broker.maintain_now(Checkpoint::WhenDue).await.unwrap();
    assert_eq!(report.compaction.records_removed, LATEST_ROUND_START);
}
