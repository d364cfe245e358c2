//! Crash test of the broker with a real SIGKILL.
//!
//! The parent test re-executes this test binary with `FERRY_BROKER_CRASH_CHILD_DIR` set,
//! which turns `crash_child_broker_under_load` into a broker process: it opens a [`Broker`]
//! on that directory (real clock, background timers), creates two `Durability::Fsync` queues
//! if missing (`shared`, and `keyed` with key-shared ordering, each with its `.dlq`), and
//! runs producer, consumer and dead-letter consumer tasks:
//!
//! - producers publish messages (single and batched) whose id, payload, key, header and
//!   occasional delay all derive from an [`Id`] `(round, producer, n)`, and print
//!   `PUB <queue> <id>` once publish returned `Ok`;
//! - consumers receive with a 150 ms lease and ack most messages, printing `ACK <queue> <id>`
//!   only once ack returned `Ok(Settled)` (and `TRY …` before each ack, so an ack made
//!   durable just before the kill is told from a lost message); some they nack, some they
//!   hold past the lease (the late ack is then usually refused as stale), some they drop;
//!   every tenth message is poison and always nacked, so the retry policy dead-letters it
//!   after 3 deliveries;
//! - a dead-letter consumer acks from both `.dlq` queues, printing `DACK <dlq> <id>`.
//!
//! Each line is one write and a flush. The child also checks what it receives: the content
//! matches the id, and no id acknowledged before (by an earlier process on the directory, or
//! at a lower delivery of the same queue in this one) is ever delivered again.
//!
//! The parent SIGKILLs the child at a random moment, then (in some rounds only after a
//! second child has recovered the directory and been killed too) reopens the broker with a
//! manual clock set past every lease, retry and delay of the child, drains all four queues
//! and checks: every published id not acknowledged is delivered exactly once (from its queue
//! or its dead-letter queue) unless its ack was under way at the kill, no acknowledged id is
//! delivered, nothing is delivered twice or more than max deliveries times, and every
//! delivered message is the one its id says. It then acks everything it drained,
//! reopens once more and checks the queues are empty.
//!
//! Replay the random choices of a run with `FERRY_BROKER_CRASH_SEED=<seed it printed>`
//! (thread timing still varies).

use std::collections::{HashMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_broker::{
    Acked, Backoff, Broker, BrokerConfig, BrokerError, Durability, MessageId, OrderingMode,
    OutgoingMessage, QueueSpec, ReceivedMessage, RetryPolicy,
};
use ferry_storage::ManualClock;
use ferry_testkit::killed_child::{
    Kill, Killed, ROUNDS, fail, kill_for, now_ms, run_and_kill, say, seed_from_env, splitmix,
};

const CHILD_DIR_ENV: &str = "FERRY_BROKER_CRASH_CHILD_DIR";
const CHILD_ROUND_ENV: &str = "FERRY_BROKER_CRASH_ROUND";
const CHILD_SEED_ENV: &str = "FERRY_BROKER_CRASH_CHILD_SEED";
const CHILD_PRODUCERS_ENV: &str = "FERRY_BROKER_CRASH_PRODUCERS";
const CHILD_CONSUMERS_ENV: &str = "FERRY_BROKER_CRASH_CONSUMERS";
const CHILD_ACKED_FILE_ENV: &str = "FERRY_BROKER_CRASH_ACKED_FILE";
const SEED_ENV: &str = "FERRY_BROKER_CRASH_SEED";
const CHILD_TEST_NAME: &str = "crash_child_broker_under_load";
/// A child that is never killed stops by itself after this long.
const CHILD_MAX_RUN: Duration = Duration::from_secs(15);

const QUEUES: [&str; 2] = ["shared", "keyed"];
const DEAD_LETTER_QUEUES: [&str; 2] = ["shared.dlq", "keyed.dlq"];
const ID_HEADER: &str = "crash-id";
const LEASE: Duration = Duration::from_millis(150);
const MAX_DELIVERIES: u32 = 3;
const MAX_DELAY_MS: u64 = 300;
/// How far past the kill the parent's clock is set: beyond every lease (150 ms), retry
/// backoff (at most 100 ms) and delay (at most 300 ms) the child can have started.
const PAST_EVERY_DEADLINE_MS: i64 = 1_000;

/// Who published a message: everything about it derives from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Id {
    round: u32,
    producer: u32,
    n: u64,
}

impl Id {
    fn queue(&self) -> &'static str {
        QUEUES[self.producer as usize % QUEUES.len()]
    }

    /// The producer-chosen message id: distinct for every `Id`, never nil.
    fn message_id(&self) -> MessageId {
        let random =
            ((self.round as u128) << 64) | ((self.producer as u128) << 48) | self.n as u128;
        MessageId::from_ulid(ulid::Ulid::from_parts(1_600_000_000_000, random))
    }

    /// Every tenth message fails every delivery.
    fn is_poison(&self) -> bool {
        splitmix(((self.round as u64) << 32) ^ ((self.producer as u64) << 24) ^ self.n)
            .is_multiple_of(10)
    }

    fn parse(s: &str) -> Option<Id> {
        let mut parts = s.split('.');
        let id = Id {
            round: parts.next()?.parse().ok()?,
            producer: parts.next()?.parse().ok()?,
            n: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(id)
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.round, self.producer, self.n)
    }
}

/// The message a producer publishes for `id`: 1..1500 payload bytes, a key on `keyed`
/// (one of five) and sometimes on `shared`, the id header, sometimes a delay.
fn derive(id: Id) -> OutgoingMessage {
    let mut rng = fastrand::Rng::with_seed(splitmix(
        ((id.round as u64) << 48) ^ ((id.producer as u64) << 40) ^ id.n,
    ));
    let size = 1 + rng.usize(..1500);
    let payload: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(size).collect();
    let mut message = OutgoingMessage::new(payload)
        .with_id(id.message_id())
        .with_header(ID_HEADER, id.to_string());
    if id.queue() == "keyed" || rng.bool() {
        message = message.with_key(format!("k{}", rng.u8(..5)));
    }
    if rng.u8(..8) == 0 {
        message = message.with_delay(Duration::from_millis(1 + rng.u64(..MAX_DELAY_MS)));
    }
    message
}

/// Why `got` is not the message published for its id, if it is not.
fn mismatch(got: &ReceivedMessage, queue: &str) -> Option<String> {
    let Some(id) = got.headers.get(ID_HEADER).and_then(|s| Id::parse(s)) else {
        return Some(format!(
            "no or a garbled {ID_HEADER} header: {:?}",
            got.headers
        ));
    };
    let want = derive(id);
    if got.id != id.message_id() {
        return Some(format!("{id}: message id {} is not the producer's", got.id));
    }
    if got.payload != want.payload {
        return Some(format!("{id}: payload differs"));
    }
    if got.key != want.key || got.headers != want.headers {
        return Some(format!(
            "{id}: key/headers {:?}/{:?}, want {:?}/{:?}",
            got.key, got.headers, want.key, want.headers
        ));
    }
    let origin = match queue.strip_suffix(".dlq") {
        Some(origin) => {
            if got.dead_letter.as_ref().map(|d| d.origin_queue.as_str()) != Some(origin) {
                return Some(format!("{id}: dead letter info {:?}", got.dead_letter));
            }
            origin
        }
        None => queue,
    };
    if origin != id.queue() {
        return Some(format!(
            "{id}: published to {}, got from {queue}",
            id.queue()
        ));
    }
    None
}

fn spec(ordering: OrderingMode) -> QueueSpec {
    QueueSpec {
        retry: RetryPolicy {
            max_deliveries: MAX_DELIVERIES,
            backoff: Backoff {
                base: Duration::from_millis(20),
                cap: Duration::from_millis(100),
                multiplier: 2.0,
                jitter: 0.2,
            },
        },
        lease: LEASE,
        ordering,
        durability: Durability::Fsync,
        ..QueueSpec::default()
    }
}

// ---------------------------------------------------------------------------------------
// The child.

fn env_u64(name: &str) -> u64 {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is set for the child"))
        .parse()
        .unwrap_or_else(|_| panic!("{name} is a number"))
}

/// What every task of the child shares.
struct ChildCtx {
    broker: Broker,
    /// Ids acknowledged by an earlier process on this directory (or its parent's drain).
    acked_before: HashSet<Id>,
    /// Ids acknowledged by this process, by queue (a dead letter's deliveries count from 1
    /// again), with the delivery that was acknowledged.
    acked_here: std::sync::Mutex<HashMap<(&'static str, Id), u32>>,
    /// What happened to each id in this process, for the failure message.
    history: std::sync::Mutex<HashMap<Id, Vec<String>>>,
    started: Instant,
}

impl ChildCtx {
    fn note(&self, id: Id, what: String) {
        let at = self.started.elapsed().as_micros();
        let mut history = self.history.lock().unwrap();
        history
            .entry(id)
            .or_default()
            .push(format!("{at} us: {what}"));
    }

    fn history(&self, id: Id) -> String {
        let history = self.history.lock().unwrap();
        history.get(&id).map(|h| h.join("; ")).unwrap_or_default()
    }

    /// Checks a delivery that `receive` returned at `returned_ms`; returns its id.
    fn check(
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
    async fn ack(&self, m: &ReceivedMessage, queue: &'static str, id: Id, tag: &str) {
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

async fn produce(ctx: Arc<ChildCtx>, round: u32, producer: u32, seed: u64) {
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

async fn consume(ctx: Arc<ChildCtx>, consumer: u32, seed: u64) {
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
async fn consume_dead_letters(ctx: Arc<ChildCtx>) {
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

// ---------------------------------------------------------------------------------------
// The parent.

struct ChildRun {
    round: u32,
    seed: u64,
    producers: u32,
    consumers: u32,
    kill: Kill,
}

#[derive(Debug, Default)]
struct Said {
    ready: bool,
    published: Vec<Id>,
    acked: Vec<Id>,
    dead_letters_acked: usize,
    /// Acks started and not answered when the kill came: durable or not, either is right.
    acks_in_flight: Vec<Id>,
    /// How late (ms after its lease had ended) each delivery that came back late came.
    late_ms: Vec<i64>,
}

/// Runs one child on `dir` until the kill; returns what it said and the time of the kill.
fn run_child(dir: &Path, acked_file: &Path, run: &ChildRun) -> (Said, i64) {
    let envs = [
        (CHILD_DIR_ENV, dir.display().to_string()),
        (CHILD_ROUND_ENV, run.round.to_string()),
        (CHILD_SEED_ENV, run.seed.to_string()),
        (CHILD_PRODUCERS_ENV, run.producers.to_string()),
        (CHILD_CONSUMERS_ENV, run.consumers.to_string()),
        (CHILD_ACKED_FILE_ENV, acked_file.display().to_string()),
    ];
    let Killed {
        lines,
        stderr,
        status,
        killed_at_ms: killed_at,
    } = run_and_kill(CHILD_TEST_NAME, &envs, run.kill);
    let mut said = Said::default();
    let mut open_acks: HashSet<(Id, u32)> = HashSet::new();
    for line in &lines {
        let mut words = line.split_whitespace();
        let word = words.next();
        let mut id = || {
            let _queue = words.next();
            let id = words
                .next()
                .and_then(Id::parse)
                .unwrap_or_else(|| panic!("child said a garbled line {line:?}"));
            let delivery: u32 = words.next().and_then(|d| d.parse().ok()).unwrap_or(0);
            (id, delivery)
        };
        match word {
            Some("READY") => said.ready = true,
            Some("PUB") => said.published.push(id().0),
            Some("LATE") => {
                let late = line.rsplit(' ').next().and_then(|ms| ms.parse().ok());
                said.late_ms.push(late.unwrap_or(0));
            }
            Some("TRY") => {
                open_acks.insert(id());
            }
            Some("NOTACK") => {
                open_acks.remove(&id());
            }
            Some(tag @ ("ACK" | "DACK")) => {
                let (id, delivery) = id();
                open_acks.remove(&(id, delivery));
                said.acked.push(id);
                said.dead_letters_acked += usize::from(tag == "DACK");
            }
            Some("FAIL") => panic!("round {} child failed: {line}\nstderr: {stderr}", run.round),
            _ => {}
        }
    }
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "round {} child exited on its own ({status:?}) before the kill\nstdout: {lines:?}\n\
         stderr: {stderr}",
        run.round
    );
    if let Kill::AfterReady(_) = run.kill {
        assert!(
            said.ready,
            "round {} child never got ready\nstdout: {lines:?}\nstderr: {stderr}",
            run.round
        );
    }
    said.acks_in_flight = open_acks.into_iter().map(|(id, _)| id).collect();
    (said, killed_at)
}

/// What the parent knows about one directory.
#[derive(Default)]
struct DirState {
    /// Published and not acknowledged, since the last verification.
    outstanding: HashSet<Id>,
    /// Every id ever acknowledged — by a child, or by the parent after a drain.
    gone: HashSet<Id>,
    /// Ids whose ack was under way at a kill since the last verification: they may be gone.
    maybe_acked: HashSet<Id>,
    /// Rounds run on the directory since the last verification.
    rounds: Vec<u32>,
    /// The parent's clock at its last verification: a later child must not start before
    /// the real clock has passed it.
    verified_at_ms: i64,
}

impl DirState {
    fn absorb(&mut self, round: u32, said: &Said) {
        self.rounds.push(round);
        // A consumer may ack a message before its producer gets to print PUB.
        self.outstanding.extend(said.published.iter().copied());
        self.maybe_acked.extend(said.acks_in_flight.iter().copied());
        for id in &said.acked {
            self.outstanding.remove(id);
            self.gone.insert(*id);
        }
    }

    fn write_gone(&self, path: &Path) {
        let text: String = self.gone.iter().map(|id| format!("{id}\n")).collect();
        std::fs::write(path, text).unwrap();
    }
}

async fn open_at(dir: &Path, at_ms: i64, label: &str) -> Broker {
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
async fn drain(broker: &Broker, queue: &str, label: &str) -> Vec<ReceivedMessage> {
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
fn verify(dir: &Path, state: &mut DirState, clock_ms: i64, label: &str) -> String {
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

#[test]
fn sigkill_under_publish_and_ack_load_loses_no_published_message_and_resurrects_no_acked_one() {
    let seed = seed_from_env(SEED_ENV);
    println!("broker crash test seed {seed} (replay with {SEED_ENV}={seed})");
    let mut rng = fastrand::Rng::with_seed(seed);
    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3)
        .map(|i| root.path().join(format!("broker-{i}")))
        .collect();
    let acked_files: Vec<PathBuf> = (0..3)
        .map(|i| root.path().join(format!("acked-{i}.txt")))
        .collect();
    let mut states: Vec<DirState> = (0..dirs.len()).map(|_| DirState::default()).collect();
    let started = Instant::now();
    let (mut total_published, mut total_acked) = (0, 0);
    let mut checkpointed_journals = 0;
    for (round, &(d, verify_after, early)) in ROUNDS.iter().enumerate() {
        let round = round as u32;
        let kill = kill_for(&mut rng, early);
        let run = ChildRun {
            round,
            seed: rng.u64(..),
            producers: 2 + rng.u32(..3),
            consumers: 2 + rng.u32(..3),
            kill,
        };
        // The parent's last look ran its clock ahead; let real time catch up so the child
        // does not see the parent's journal entries in its future.
        let wait = states[d].verified_at_ms - now_ms();
        if wait > 0 {
            std::thread::sleep(Duration::from_millis(wait as u64 + 1));
        }
        states[d].write_gone(&acked_files[d]);
        let (said, killed_at) = run_child(&dirs[d], &acked_files[d], &run);
        total_published += said.published.len();
        total_acked += said.acked.len();
        states[d].absorb(round, &said);
        checkpointed_journals += usize::from(journal_was_trimmed(&dirs[d]));
        let label = format!(
            "seed {seed} round {round} dir {d} ({} producers, {} consumers, kill {:?}, ready {})",
            run.producers, run.consumers, run.kill, said.ready
        );
        let counts = format!(
            "{} published, {} acked ({} from dead-letter queues), {} deliveries returned after \
             their lease ended (by up to {} ms)",
            said.published.len(),
            said.acked.len(),
            said.dead_letters_acked,
            said.late_ms.len(),
            said.late_ms.iter().max().unwrap_or(&0)
        );
        if verify_after {
            let clock_ms = killed_at + PAST_EVERY_DEADLINE_MS;
            let summary = verify(&dirs[d], &mut states[d], clock_ms, &label);
            println!("{label}: {counts}; {summary}");
        } else {
            println!("{label}: {counts}; not verified yet");
        }
    }
    println!(
        "{} rounds, {total_published} published, {total_acked} acked, {:?}",
        ROUNDS.len(),
        started.elapsed()
    );
    assert!(
        total_published > 0 && total_acked > 0,
        "no child got as far as an acknowledged publish and ack"
    );
    assert!(
        checkpointed_journals > 0,
        "no child checkpointed a journal and deleted the segments before it"
    );
}

/// Whether the `shared` queue's journal no longer starts at offset 0: a checkpoint was
/// written and the segments before it deleted.
fn journal_was_trimmed(dir: &Path) -> bool {
    let journal = dir.join("queues").join("shared").join("journal");
    let Ok(entries) = std::fs::read_dir(&journal) else {
        return false;
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".log")?.parse::<u64>().ok()
        })
        .min()
        .is_some_and(|base| base > 0)
}
