//! The child: a broker under publish, ack, nack and dead-letter load that says each step
//! on stdout and checks on its own that every delivery is the message its id says.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_broker::{
    Acked, Broker, BrokerConfig, BrokerError, MessageId, OrderingMode, OutgoingMessage,
    ReceivedMessage,
};
use ferry_testkit::killed_child::{fail, now_ms, say, splitmix};

use crate::scenario::{DEAD_LETTER_QUEUES, ID_HEADER, Id, LEASE, QUEUES, derive, mismatch, spec};
use crate::{
    CHILD_ACKED_FILE_ENV, CHILD_CONSUMERS_ENV, CHILD_DIR_ENV, CHILD_MAX_RUN, CHILD_PRODUCERS_ENV,
    CHILD_ROUND_ENV, CHILD_SEED_ENV,
};

pub fn env_u64(name: &str) -> u64 {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is set for the child"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a number"))
}

/// What every task of the child shares.
pub struct ChildCtx {
    pub broker: Broker,
    /// Ids acknowledged by an earlier process on this directory (or its parent's drain).
    pub acked_before: HashSet<Id>,
    /// Ids acknowledged by this process, by queue (a dead letter's deliveries count from 1
    /// again), with the delivery that was acknowledged.
    pub acked_here: std::sync::Mutex<HashMap<(&'static str, Id), u32>>,
    /// What happened to each id in this process, for the failure message.
    pub history: std::sync::Mutex<HashMap<Id, Vec<String>>>,
    pub started: Instant,
}

impl ChildCtx {
    pub fn note(&self, id: Id, what: String) {
        let at = self.started.elapsed().as_micros();
        let mut history = self.history.lock().unwrap();
        history
            .entry(id)
            .or_default()
            .push(format!("{at} us: {what}"));
    }

    pub fn history(&self, id: Id) -> String {
        let history = self.history.lock().unwrap();
        history.get(&id).map(|h| h.join("; ")).unwrap_or_default()
    }

    /// Checks a delivery that `receive` returned at `returned_ms`; returns its id.
    pub fn check(
        &self,
        m: &ReceivedMessage,
        queue: &'static str,
        consumer: &str,
        returned_ms: i64,
    ) -> Id {
        if let Some(problem) = mismatch(m, queue) {
            fail(&format!(
                "BAD delivery from {queue} (seq {}): {problem}",
                m.seq
            ));
        }
        let id = Id::parse(&m.headers[ID_HEADER]).expect("checked");
        self.note(
            id,
            format!(
                "{consumer} received delivery {} of {queue} seq {} token {}, lease until {}",
                m.delivery, m.seq, m.token.0, m.lease_until_ms
            ),
        );
        if self.acked_before.contains(&id) {
            fail(&format!(
                "RESURRECTED {queue} {id}: acknowledged before the crash, delivered again \
                 (seq {}, delivery {})",
                m.seq, m.delivery
            ));
        }
        let late_ms = returned_ms - m.lease_until_ms;
        if late_ms > 0 {
            say(&format!("LATE {queue} {id} {late_ms}\n"));
        }
        let acked = self.acked_here.lock().unwrap().get(&(queue, id)).copied();
        // A receive may return after the lease it took has ended (see `LATE`), and so after
        // a later delivery — or, from the dead-letter queue, the dead letter — was acked;
        // a later delivery from the same queue after the ack is a bug.
        if let Some(acked) = acked
            && m.delivery > acked
        {
            fail(&format!(
                "RESURRECTED {queue} {id}: delivery {} acknowledged, then delivery {} (seq {}); \
                 history: {}",
                acked,
                m.delivery,
                m.seq,
                self.history(id)
            ));
        }
        id
    }

    /// Acks, saying so before (an ack durable when the kill comes before its `ACK` line
    /// rightly makes the message disappear) and after: `tag` when the ack settled the
    /// message, `NOTACK` when it did not.
    pub async fn ack(&self, m: &ReceivedMessage, queue: &'static str, id: Id, tag: &str) {
        let delivery = m.delivery;
        say(&format!("TRY {queue} {id} {delivery}\n"));
        let result = self.broker.ack(queue, m.seq, m.token).await;
        self.note(id, format!("ack of token {} -> {result:?}", m.token.0));
        match result {
            Ok(Acked::Settled) => {
                self.acked_here
                    .lock()
                    .unwrap()
                    .insert((queue, id), delivery);
                say(&format!("{tag} {queue} {id} {delivery}\n"));
            }
            Ok(Acked::AlreadySettled) | Err(BrokerError::StaleLease { .. }) => {
                say(&format!("NOTACK {queue} {id} {delivery}\n"));
            }
            Err(e) => fail(&format!("ack {queue} {id}: {e}")),
        }
    }
}

pub async fn produce(ctx: Arc<ChildCtx>, round: u32, producer: u32, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let queue = Id {
        round,
        producer,
        n: 0,
    }
    .queue();
    let mut n = 0u64;
    loop {
        let count = 1 + rng.u64(..3);
        let ids: Vec<Id> = (n..n + count).map(|n| Id { round, producer, n }).collect();
        let messages: Vec<OutgoingMessage> = ids.iter().map(|&id| derive(id)).collect();
        let result = if count == 1 {
            let message = messages.into_iter().next().expect("one");
            ctx.broker.publish(queue, message).await.map(|id| vec![id])
        } else {
            ctx.broker.publish_batch(queue, messages).await
        };
        match result {
            Ok(got) => {
                let want: Vec<MessageId> = ids.iter().map(Id::message_id).collect();
                if got != want {
                    fail(&format!("publish of {ids:?} returned ids {got:?}"));
                }
                let lines: String = ids.iter().map(|id| format!("PUB {queue} {id}\n")).collect();
                say(&lines);
            }
            Err(e) => fail(&format!("publish to {queue}: {e}")),
        }
        n += count;
        // Unthrottled producers outrun the consumers a hundredfold; the test wants acks,
        // nacks and lease expiries as much as a backlog.
        tokio::time::sleep(Duration::from_millis(rng.u64(..4))).await;
    }
}

pub async fn consume(ctx: Arc<ChildCtx>, consumer: u32, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let queue = QUEUES[consumer as usize % QUEUES.len()];
    let name = format!("consumer-{consumer}");
    loop {
        let max = 1 + rng.usize(..4);
        let got = match ctx
            .broker
            .receive(queue, &name, max, None, Some(Duration::from_millis(50)))
            .await
        {
            Ok(got) => got,
            Err(e) => fail(&format!("receive from {queue}: {e}")),
        };
        let returned_ms = now_ms();
        for m in got {
            let id = ctx.check(&m, queue, &name, returned_ms);
            // Poison messages always fail, and reach the dead-letter queue after three tries.
            let roll = if id.is_poison() { 900 } else { rng.u32(..1000) };
            if roll < 8 {
                // Work past the lease: the ack is then usually stale. Rare, as the consumer
                // does nothing else meanwhile.
                tokio::time::sleep(LEASE + Duration::from_millis(30)).await;
            }
            if roll < 850 {
                ctx.ack(&m, queue, id, "ACK").await;
            } else if roll < 950 {
                let result = ctx
                    .broker
                    .nack(queue, m.seq, m.token, None, Some("crash test"))
                    .await;
                ctx.note(id, format!("nack of token {} -> {result:?}", m.token.0));
                match result {
                    Ok(_) | Err(BrokerError::StaleLease { .. }) => {}
                    Err(e) => fail(&format!("nack {queue} {id}: {e}")),
                }
            }
            // Otherwise dropped: the lease runs out and the message comes back.
        }
    }
}

/// Acks everything that reaches the dead-letter queues.
pub async fn consume_dead_letters(ctx: Arc<ChildCtx>) {
    loop {
        for queue in DEAD_LETTER_QUEUES {
            // An explicit short lease: the dead-letter queues' own is 30 s, which a parent
            // verifying right after the kill would still see running.
            let got = match ctx
                .broker
                .receive(
                    queue,
                    "dead-letters",
                    8,
                    Some(LEASE),
                    Some(Duration::from_millis(20)),
                )
                .await
            {
                Ok(got) => got,
                Err(e) => fail(&format!("receive from {queue}: {e}")),
            };
            let returned_ms = now_ms();
            for m in got {
                let id = ctx.check(&m, queue, "dead-letters", returned_ms);
                ctx.ack(&m, queue, id, "DACK").await;
            }
        }
    }
}

/// The child side: does nothing unless the parent started this binary to be crashed.
#[tokio::test]
async fn crash_child_broker_under_load() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let round = env_u64(CHILD_ROUND_ENV) as u32;
    let seed = env_u64(CHILD_SEED_ENV);
    let producers = env_u64(CHILD_PRODUCERS_ENV) as u32;
    let consumers = env_u64(CHILD_CONSUMERS_ENV) as u32;
    let acked_file = std::env::var_os(CHILD_ACKED_FILE_ENV).expect("acked file is set");
    let acked_before: HashSet<Id> = std::fs::read_to_string(acked_file)
        .unwrap_or_default()
        .lines()
        .map(|line| Id::parse(line).expect("acked file holds ids"))
        .collect();
    let config = BrokerConfig {
        seed: Some(splitmix(seed)),
        // Checkpoint the journals many times a second under this load, so kills also land
        // in and around checkpoints and the deletion of the segments before them.
        checkpoint_journal_bytes: 4 << 10,
        housekeeping_interval: Duration::from_millis(20),
        ..BrokerConfig::default()
    };
    let broker = match Broker::open(&dir, config).await {
        Ok(broker) => broker,
        Err(e) => fail(&format!("open: {e}")),
    };
    let existing = broker.list_queues();
    for (queue, ordering) in [
        ("shared", OrderingMode::Shared),
        ("keyed", OrderingMode::KeyShared),
    ] {
        if !existing.iter().any(|n| n.as_str() == queue)
            && let Err(e) = broker.create_queue(queue, spec(ordering)).await
        {
            fail(&format!("create {queue}: {e}"));
        }
    }
    // libtest has printed "test crash_child_broker_under_load ... " without a newline.
    say("\nREADY\n");
    let ctx = Arc::new(ChildCtx {
        broker,
        acked_before,
        acked_here: std::sync::Mutex::new(HashMap::new()),
        history: std::sync::Mutex::new(HashMap::new()),
        started: Instant::now(),
    });
    for producer in 0..producers {
        let seed = splitmix(seed ^ (1 << 32) ^ producer as u64);
        tokio::spawn(produce(ctx.clone(), round, producer, seed));
    }
    for consumer in 0..consumers {
        let seed = splitmix(seed ^ (2 << 32) ^ consumer as u64);
        tokio::spawn(consume(ctx.clone(), consumer, seed));
    }
    tokio::spawn(consume_dead_letters(ctx.clone()));
    tokio::time::sleep(CHILD_MAX_RUN).await;
    // Only reached when the parent never killed us.
    std::process::exit(4);
}
