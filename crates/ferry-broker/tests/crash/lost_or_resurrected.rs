//! After each verified round: no acknowledged publish lost, no acked message delivered
//! again, nothing delivered twice or past its max deliveries, every delivery the message
//! its id says.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ferry_broker::{Acked, Broker, BrokerConfig, ReceivedMessage};
use ferry_storage::ManualClock;

use crate::said::DirState;
use crate::scenario::{DEAD_LETTER_QUEUES, ID_HEADER, Id, MAX_DELIVERIES, QUEUES, mismatch};

pub async fn open_at(dir: &Path, at_ms: i64, label: &str) -> Broker {
    let config = BrokerConfig {
        clock: Arc::new(ManualClock::new(at_ms)),
        background_timers: false,
        seed: Some(1),
        ..BrokerConfig::default()
    };
    let broker = Broker::open(dir, config)
        .await
        .unwrap_or_else(|e| panic!("{label}: reopen after SIGKILL failed: {e}"));
    broker
        .tick_now()
        .await
        .unwrap_or_else(|e| panic!("{label}: tick failed: {e}"));
    broker
}

/// Receives everything `queue` holds, acking each batch (a key-shared queue delivers a key's
/// next message only once the previous one is settled); returns the deliveries.
pub async fn drain(broker: &Broker, queue: &str, label: &str) -> Vec<ReceivedMessage> {
    let mut out = Vec::new();
    loop {
        // The manual clock stands still, so no lease of the drain runs out during it.
        let got = broker
            .receive(queue, "verifier", 256, Some(Duration::from_secs(60)), None)
            .await
            .unwrap_or_else(|e| panic!("{label}: receive from {queue}: {e}"));
        if got.is_empty() {
            return out;
        }
        let mut acks = tokio::task::JoinSet::new();
        for m in &got {
            let (broker, queue, seq, token) = (broker.clone(), queue.to_owned(), m.seq, m.token);
            acks.spawn(async move { broker.ack(&queue, seq, token).await });
        }
        while let Some(result) = acks.join_next().await {
            let acked = result
                .expect("ack task")
                .unwrap_or_else(|e| panic!("{label}: ack in {queue}: {e}"));
            assert_eq!(acked, Acked::Settled, "{label}: ack in {queue}");
        }
        out.extend(got);
    }
}

/// Reopens the broker after the kill and checks it against everything the children said.
pub fn verify(dir: &Path, state: &mut DirState, clock_ms: i64, label: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let broker = open_at(dir, clock_ms, label).await;
        let existing: Vec<String> = broker.list_queues().iter().map(|n| n.to_string()).collect();
        let mut seen: HashMap<Id, String> = HashMap::new();
        let mut per_queue = Vec::new();
        // Origins first: their drain cannot dead-letter (the clock stands still), and
        // recovery already moved what was out of deliveries.
        for queue in QUEUES.into_iter().chain(DEAD_LETTER_QUEUES) {
            if !existing.iter().any(|n| n == queue) {
                // The child was killed before it created the queue: it published nothing.
                per_queue.push(format!("{queue} missing"));
                continue;
            }
            let got = drain(&broker, queue, label).await;
            per_queue.push(format!("{queue} {}", got.len()));
            for m in got {
                if let Some(problem) = mismatch(&m, queue) {
                    panic!(
                        "{label}: bad delivery from {queue} (seq {}): {problem}",
                        m.seq
                    );
                }
                let id = Id::parse(&m.headers[ID_HEADER]).expect("checked");
                assert!(
                    state.rounds.contains(&id.round),
                    "{label}: {queue} delivered {id}, from a round not run on this directory"
                );
                assert!(
                    !state.gone.contains(&id),
                    "{label}: {queue} delivered {id} (seq {}, delivery {}) although it was \
                     acknowledged",
                    m.seq,
                    m.delivery
                );
                if !queue.ends_with(".dlq") {
                    assert!(
                        m.delivery <= MAX_DELIVERIES,
                        "{label}: {queue} delivered {id} a {}th time; max deliveries is \
                         {MAX_DELIVERIES}",
                        m.delivery
                    );
                }
                if let Some(first) = seen.insert(id, queue.to_owned()) {
                    panic!("{label}: {id} delivered twice in the drain: from {first} and {queue}");
                }
            }
        }
        let mut missing: Vec<Id> = state
            .outstanding
            .iter()
            .filter(|id| !seen.contains_key(id) && !state.maybe_acked.contains(id))
            .copied()
            .collect();
        missing.sort_unstable();
        assert!(
            missing.is_empty(),
            "{label}: {} published and unacknowledged messages are gone, e.g. {:?}",
            missing.len(),
            &missing[..missing.len().min(10)]
        );
        let acked_at_kill = state
            .outstanding
            .iter()
            .filter(|id| !seen.contains_key(id))
            .count();
        let unannounced = seen.len() + acked_at_kill - state.outstanding.len();
        // The drain acked everything: it is all gone now, and stays gone after a reopen.
        drop(broker);
        let broker = open_at(dir, clock_ms, label).await;
        for queue in QUEUES.into_iter().chain(DEAD_LETTER_QUEUES) {
            if let Ok(info) = broker.describe_queue(queue) {
                assert_eq!(
                    info.stats.state.tracked, 0,
                    "{label}: {queue} holds messages after the drain acked all: {:?}",
                    info.stats
                );
            }
        }
        drop(broker);
        state.gone.extend(seen.keys().copied());
        state.outstanding.clear();
        let maybe_acked = state.maybe_acked.len();
        state.maybe_acked.clear();
        state.rounds.clear();
        state.verified_at_ms = clock_ms;
        format!(
            "drained {} ({}), {unannounced} published without a PUB line, {acked_at_kill} \
             acked without an ACK line (of {} acks under way at a kill)",
            seen.len(),
            per_queue.join(", "),
            maybe_acked
        )
    })
}
