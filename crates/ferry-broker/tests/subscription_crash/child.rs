//! The child: a broker under load (producers, consumers of each subscription, the group's
//! static member, housekeeping) that says each step on stdout and checks on its own what it
//! can: deliveries are published messages its filter takes, one lease per key of `keyed`
//! and for the whole of `solo`, no failover of `solo` while its consumer keeps asking, no
//! gap in the group's records.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_broker::{
    Acked, Broker, BrokerError, Checkpoint, GroupJoin, OrderingMode, OutgoingMessage,
    ReceivedMessage,
};
use ferry_testkit::killed_child::{fail, now_ms, say, splitmix};

use crate::scenario::{
    GROUP, GROUP_INSTANCE, Id, LEASE, PRODUCERS, SUBS, Sub, TOPIC, config, derive,
    identify_delivery, identify_record, subscription_spec, topic_spec,
};
use crate::{CHILD_DIR_ENV, CHILD_MAX_RUN, CHILD_ROUND_ENV, CHILD_SEED_ENV};

pub fn env_u64(name: &str) -> u64 {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is set for the child"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a number"))
}

pub async fn produce(broker: Broker, round: u32, producer: u32, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut n = 0u64;
    loop {
        let count = 1 + rng.u64(..4);
        let ids: Vec<Id> = (n..n + count).map(|n| Id { round, producer, n }).collect();
        let messages: Vec<OutgoingMessage> = ids.iter().map(|&id| derive(id)).collect();
        match broker.publish_to_topic(TOPIC, messages).await {
            Ok(got) if got.len() == ids.len() => {
                for (id, at) in ids.iter().zip(&got) {
                    say(&format!("PUB {} {} {id}\n", at.partition, at.offset));
                }
            }
            Ok(got) => fail(&format!("publish of {ids:?} returned {got:?}")),
            Err(e) => fail(&format!("publish of {ids:?}: {e}")),
        }
        n += count;
        tokio::time::sleep(Duration::from_millis(rng.u64(..4))).await;
    }
}

/// Deliveries that must not overlap: (subscription, key or none for the whole of it).
pub type Slot = (usize, Option<Vec<u8>>);

/// What the consumers of one child share: the deliveries that must not overlap (per key of
/// `keyed`, the whole of `solo`) and when each consumer last asked to receive.
#[derive(Default)]
pub struct Held {
    /// (subscription, key or none) → (id, lease end, consumer).
    pub leases: HashMap<Slot, (Id, i64, String)>,
    /// The consumer `solo` delivered to last in this child.
    pub solo_active: Option<String>,
    pub asked_ms: HashMap<String, i64>,
}

pub async fn consume(
    broker: Broker,
    sub: usize,
    consumer: String,
    held: Arc<Mutex<Held>>,
    seed: u64,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let s = &SUBS[sub];
    loop {
        held.lock()
            .unwrap()
            .asked_ms
            .insert(consumer.clone(), now_ms());
        let max = 1 + rng.usize(..8);
        let got = match broker
            .receive(
                s.name,
                &consumer,
                max,
                None,
                Some(Duration::from_millis(100)),
            )
            .await
        {
            Ok(got) => got,
            Err(e) => fail(&format!("{consumer} receive from {}: {e}", s.name)),
        };
        let mut ids = Vec::with_capacity(got.len());
        for m in &got {
            let id = identify_delivery(s, m)
                .unwrap_or_else(|problem| fail(&format!("{} delivered {problem}", s.name)));
            say(&format!("RECV {} {id}\n", s.name));
            check_exclusive(s, sub, &consumer, id, m, &held);
            ids.push(id);
        }
        for (m, id) in got.iter().zip(ids) {
            // The broker may hand out the next message of the slot as soon as it settles
            // this one, before the settlement is durable and the call returns.
            if let Some(slot) = slot_of(s, m) {
                let mut held = held.lock().unwrap();
                if held.leases.get(&(sub, slot.clone())).map(|h| h.0) == Some(id) {
                    held.leases.remove(&(sub, slot));
                }
            }
            if rng.u8(..10) == 0 {
                let delay = Duration::from_millis(rng.u64(..30));
                match broker
                    .nack(s.name, m.seq, m.token, Some(delay), Some("crash test"))
                    .await
                {
                    Ok(_) | Err(BrokerError::StaleLease { .. }) => {}
                    Err(e) => fail(&format!("{consumer} nack {id} on {}: {e}", s.name)),
                }
            } else {
                say(&format!("ACKING {} {id}\n", s.name));
                match broker.ack(s.name, m.seq, m.token).await {
                    Ok(Acked::Settled) => say(&format!("ACK {} {id}\n", s.name)),
                    Ok(Acked::AlreadySettled) => fail(&format!(
                        "{consumer}'s ack of {id} on {} (delivery {}) says it was settled \
                         before",
                        s.name, m.delivery
                    )),
                    Err(BrokerError::StaleLease { .. }) => say(&format!("STALE {} {id}\n", s.name)),
                    Err(e) => fail(&format!("{consumer} ack {id} on {}: {e}", s.name)),
                }
            }
        }
    }
}

/// Which deliveries of subscription `s` must not overlap with `m`: those of its key on a
/// key-shared subscription, all on an exclusive one.
pub fn slot_of(s: &Sub, m: &ReceivedMessage) -> Option<Option<Vec<u8>>> {
    match s.ordering {
        OrderingMode::Shared => None,
        OrderingMode::KeyShared => m.key.as_ref().map(|k| Some(k.to_vec())),
        OrderingMode::Exclusive => Some(None),
    }
}

pub fn check_exclusive(
    s: &Sub,
    sub: usize,
    consumer: &str,
    id: Id,
    m: &ReceivedMessage,
    held: &Mutex<Held>,
) {
    let Some(slot) = slot_of(s, m) else {
        return;
    };
    let now = now_ms();
    let mut held = held.lock().unwrap();
    if let Some((other, until, by)) = held.leases.get(&(sub, slot.clone()))
        && *until > now
    {
        fail(&format!(
            "BROKER BUG: {} delivered {id} to {consumer} while {other} is leased to {by} for \
             {} ms more ({})",
            s.name,
            until - now,
            match &slot {
                Some(key) => format!("key {:?}", String::from_utf8_lossy(key)),
                None => "exclusive".to_owned(),
            }
        ));
    }
    held.leases
        .insert((sub, slot), (id, m.lease_until_ms, consumer.to_owned()));
    if s.ordering == OrderingMode::Exclusive {
        if let Some(active) = held.solo_active.clone()
            && active != consumer
        {
            let asked = held.asked_ms.get(&active).copied().unwrap_or(0);
            // The active consumer asks at least every 100 ms unless it is settling: it
            // holds a lease then, which also keeps it active.
            if now - asked < LEASE.as_millis() as i64 / 2 {
                fail(&format!(
                    "BROKER BUG: {} failed over from {active} (asked {} ms ago) to {consumer}",
                    s.name,
                    now - asked
                ));
            }
        }
        held.solo_active = Some(consumer.to_owned());
    }
}

pub async fn audit(broker: Broker, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let join = GroupJoin {
        instance_id: Some(GROUP_INSTANCE.to_owned()),
        session_timeout: Duration::from_secs(30),
        ..GroupJoin::default()
    };
    let member = match broker.join_group(TOPIC, GROUP, join).await {
        Ok(membership) => membership.member_id,
        Err(e) => fail(&format!("join {GROUP}: {e}")),
    };
    let mut next: HashMap<u32, u64> = HashMap::new();
    loop {
        let records = match broker.poll_group(TOPIC, GROUP, &member, 1 + rng.usize(..32)) {
            Ok(records) => records,
            Err(e) => fail(&format!("poll {GROUP}: {e}")),
        };
        let mut touched = BTreeSet::new();
        for record in &records {
            let p = record.partition;
            if let Err(problem) = identify_record(record) {
                fail(&format!("{GROUP} polled {p}/{}: {problem}", record.offset));
            }
            match next.get(&p) {
                None => say(&format!("GSTART {p} {}\n", record.offset)),
                Some(&want) if want != record.offset => fail(&format!(
                    "BROKER BUG: {GROUP} polled {p}/{} after {p}/{}",
                    record.offset,
                    want - 1
                )),
                Some(_) => {}
            }
            next.insert(p, record.offset + 1);
            touched.insert(p);
        }
        for p in touched {
            let offset = next[&p];
            if rng.u8(..4) == 0 {
                // Left uncommitted for now: polled again after a kill.
                continue;
            }
            say(&format!("COMMITTING {p} {offset}\n"));
            if let Err(e) = broker.commit_offset(TOPIC, GROUP, &member, p, offset) {
                fail(&format!("commit {p}/{offset}: {e}"));
            }
            say(&format!("COMMIT {p} {offset}\n"));
        }
        tokio::time::sleep(Duration::from_millis(5 + rng.u64(..20))).await;
    }
}

/// Housekeeping on top of the timer task's, sometimes forced: checkpoints of every queue.
pub async fn maintain(broker: Broker, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    loop {
        tokio::time::sleep(Duration::from_millis(20 + rng.u64(..80))).await;
        match broker
            .maintain_now(if rng.bool() {
                Checkpoint::Always
            } else {
                Checkpoint::WhenDue
            })
            .await
        {
            Ok(report) => say(&format!(
                "MAINT {} {}\n",
                report.checkpoints, report.deleted_segments
            )),
            Err(e) => fail(&format!("housekeeping: {e}")),
        }
    }
}

/// The child side: does nothing unless the parent started this binary to be crashed.
#[tokio::test]
async fn subscription_crash_child_broker_under_load() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let round = env_u64(CHILD_ROUND_ENV) as u32;
    let seed = env_u64(CHILD_SEED_ENV);
    let broker = match Broker::open(&dir, config(splitmix(seed))).await {
        Ok(broker) => broker,
        Err(e) => fail(&format!("open: {e}")),
    };
    if !broker.list_topics().iter().any(|n| n.as_str() == TOPIC)
        && let Err(e) = broker.create_topic(TOPIC, topic_spec()).await
    {
        fail(&format!("create {TOPIC}: {e}"));
    }
    let queues = broker.list_queues();
    for sub in &SUBS {
        if queues.iter().any(|n| n.as_str() == sub.name) {
            // A kill in the middle of create_subscription must not leave a plain queue.
            if let Err(e) = broker.describe_subscription(sub.name) {
                fail(&format!(
                    "BROKER BUG: {} exists as a queue but not as a subscription: {e}",
                    sub.name
                ));
            }
        } else if let Err(e) = broker
            .create_subscription(sub.name, subscription_spec(sub))
            .await
        {
            fail(&format!("create subscription {}: {e}", sub.name));
        }
    }
    // libtest has printed "test subscription_crash_child_broker_under_load ... " without a
    // newline.
    say("\nREADY\n");
    for producer in 0..PRODUCERS {
        let seed = splitmix(seed ^ (1 << 32) ^ producer as u64);
        tokio::spawn(produce(broker.clone(), round, producer, seed));
    }
    let held = Arc::new(Mutex::new(Held::default()));
    for (sub, s) in SUBS.iter().enumerate() {
        for c in 0..2 {
            let seed = splitmix(seed ^ (2 << 32) ^ ((sub as u64) << 8) ^ c);
            let consumer = format!("{}-{c}", s.name);
            tokio::spawn(consume(
                broker.clone(),
                sub,
                consumer,
                Arc::clone(&held),
                seed,
            ));
        }
    }
    tokio::spawn(audit(broker.clone(), splitmix(seed ^ (3 << 32))));
    tokio::spawn(maintain(broker.clone(), splitmix(seed ^ (4 << 32))));
    tokio::time::sleep(CHILD_MAX_RUN).await;
    // Only reached when the parent never killed us.
    std::process::exit(4);
}
