//! The order saga's world for the saga tests: its queues, participants that keep effect
//! ledgers and deduplicate by command id, and the checks that no effect is left over.
#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(all(feature = "sqlite", feature = "embedded"))]
use ferry::saga::SagaStore;
use ferry::saga::{
    Clock, Command, Kind, Outcome, SagaDefinition, SagaOptions, SagaState, Status, Step,
};
use ferry::{ConsumerOptions, DeliveryPolicy, Ferry, QueueDecl, Source};
use ferry_testkit::fresh;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The embedded broker in `dir/broker` and an installed SQLite saga store in
/// `dir/sagas.db`: the saga tests that need no service.
#[cfg(all(feature = "sqlite", feature = "embedded"))]
pub async fn embedded_with_store(dir: &std::path::Path) -> (Ferry, ferry::saga::SqliteSagaStore) {
    let ferry = Ferry::connect(&format!("embedded:{}", dir.join("broker").display()))
        .await
        .unwrap();
    let store = ferry::saga::SqliteSagaStore::open(dir.join("sagas.db"))
        .await
        .unwrap();
    store.install().await.unwrap();
    (ferry, store)
}

/// The steps of the order saga: (name, has a compensation).
pub const STEPS: [(&str, bool); 3] = [("reserve", true), ("charge", true), ("confirm", false)];

/// What a participant does with a command it has not answered before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Applies the effect and answers `Succeeded`.
    Do,
    /// Applies the effect and answers twice (a duplicate reply).
    DoAndAnswerTwice,
    /// Answers `Failed`, applying nothing.
    Decline,
    /// Acks the command and never answers.
    Silent,
}

/// Decides, from the command and how many times it was delivered, what to do.
pub type Behaviour = Arc<dyn Fn(&Command, u32) -> Act + Send + Sync>;

pub fn always(act: Act) -> Behaviour {
    Arc::new(move |_, _| act)
}

/// What the participants did, across every orchestrator incarnation.
#[derive(Debug, Default)]
pub struct Ledger {
    /// The first answer to each command id, repeated for duplicates.
    answers: HashMap<String, Outcome>,
    /// Deliveries of each command id.
    pub seen: HashMap<String, u32>,
    /// Effects in force: (saga id, step).
    pub effects: BTreeSet<(String, String)>,
    /// Effects applied (done or undone) per command id.
    pub applied: HashMap<String, u32>,
}

impl Ledger {
    pub fn seen(&self, command_id: &str) -> u32 {
        self.seen.get(command_id).copied().unwrap_or(0)
    }

    fn applied(&self, command_id: &str) -> u32 {
        self.applied.get(command_id).copied().unwrap_or(0)
    }

    /// Every step's effect is in force, each applied once, nothing undone.
    pub fn assert_completed(&self, saga: &str) {
        for (i, (step, _)) in STEPS.iter().enumerate() {
            assert!(
                self.effects.contains(&(saga.to_owned(), step.to_string())),
                "{saga}: {step} has no effect"
            );
            assert_eq!(
                self.applied(&format!("{saga}.{i}.action")),
                1,
                "{saga}: {step}"
            );
            assert_eq!(
                self.applied(&format!("{saga}.{i}.compensation")),
                0,
                "{saga}: {step}"
            );
        }
    }

    /// No effect is left, the steps before `failed_at` were each done and undone once (those
    /// with a compensation), and nothing from `failed_at` on was applied.
    pub fn assert_failed_at(&self, saga: &str, failed_at: usize) {
        let left: Vec<_> = self.effects.iter().filter(|(s, _)| s == saga).collect();
        assert!(left.is_empty(), "{saga}: effects left over: {left:?}");
        for (i, (step, compensable)) in STEPS.iter().enumerate() {
            let did = self.applied(&format!("{saga}.{i}.action"));
            let undid = self.applied(&format!("{saga}.{i}.compensation"));
            if i < failed_at {
                assert_eq!(did, 1, "{saga}: {step} done {did} times");
                assert_eq!(
                    undid,
                    u32::from(*compensable),
                    "{saga}: {step} undone {undid} times"
                );
            } else {
                assert_eq!(did, 0, "{saga}: {step} done after the failure");
            }
        }
    }
}

/// The order saga's queues and running participants.
pub struct Shop {
    pub ferry: Ferry,
    pub prefix: String,
    pub reply_queue: String,
    /// Whether the queues have a dedup window.
    pub dedup: bool,
    pub ledger: Arc<Mutex<Ledger>>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// Queue settings for the tests: a short lease so unsettled replies of a killed
/// orchestrator come back soon; a dedup window when `dedup`.
fn decl(name: &str, dedup: bool) -> QueueDecl {
    let mut decl = QueueDecl::new(name).delivery(DeliveryPolicy {
        lease: Duration::from_secs(1),
        max_deliveries: 50,
        ..DeliveryPolicy::default()
    });
    if dedup {
        decl = decl.dedup_window(Duration::from_secs(120));
    }
    decl
}

impl Shop {
    /// Declares the queues (deduplicating ones when `dedup`) and starts the participants.
    pub async fn open(ferry: Ferry, what: &str, dedup: bool, behaviour: Behaviour) -> Shop {
        let prefix = fresh("saga", what);
        let reply_queue = format!("{prefix}.replies");
        ferry
            .declare_queue(&decl(&reply_queue, dedup))
            .await
            .expect("reply queue");
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let (stop, stopping) = watch::channel(false);
        let mut tasks = Vec::new();
        for (step, _) in STEPS {
            let queue = format!("{prefix}.{step}");
            ferry
                .declare_queue(&decl(&queue, dedup))
                .await
                .expect("participant queue");
            let options = ConsumerOptions {
                prefetch: 8,
                poll: Duration::from_millis(50),
                ..ConsumerOptions::default()
            };
            let consumer = ferry
                .consumer(Source::queue(&queue), options)
                .await
                .expect("consumer");
            tasks.push(tokio::spawn(serve(
                ferry.clone(),
                consumer,
                ledger.clone(),
                behaviour.clone(),
                stopping.clone(),
            )));
        }
        Shop {
            ferry,
            prefix,
            reply_queue,
            dedup,
            ledger,
            stop,
            tasks,
        }
    }

    /// The order saga over this shop's queues.
    pub fn definition(&self) -> SagaDefinition {
        let mut saga = SagaDefinition::new("order");
        for (step, compensable) in STEPS {
            let queue = format!("{}.{step}", self.prefix);
            let mut s = Step::new(step, &queue);
            if compensable {
                s = s.compensate_with(&queue);
            }
            saga = saga.step(s);
        }
        saga
    }

    /// Quick sweeps and polls; a step timeout long enough not to fire unasked; dedup ids
    /// when the queues deduplicate.
    pub fn options(&self) -> SagaOptions {
        let mut options = SagaOptions::new(&self.reply_queue)
            .step_timeout(Duration::from_secs(20))
            .sweep_interval(Duration::from_millis(50))
            .dedup_ids(self.dedup);
        options.consumer.poll = Duration::from_millis(50);
        options
    }

    pub fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap()
    }

    /// Stops the participants and deletes the queues.
    pub async fn close(mut self) {
        self.stop.send_replace(true);
        for task in self.tasks.drain(..) {
            task.await.expect("participant");
        }
        let mut queues = vec![self.reply_queue.clone()];
        queues.extend(
            STEPS
                .iter()
                .map(|(step, _)| format!("{}.{step}", self.prefix)),
        );
        for queue in queues {
            let _ = self.ferry.delete(&Source::queue(&queue)).await;
            let _ = self
                .ferry
                .delete(&Source::queue(&queue).dead_letters())
                .await;
        }
    }
}

/// One participant: answers each command id once and repeats that answer to duplicates;
/// answers before acking, so a command is never taken without an answer unless `Silent`.
async fn serve(
    ferry: Ferry,
    mut consumer: ferry::Consumer,
    ledger: Arc<Mutex<Ledger>>,
    behaviour: Behaviour,
    stopping: watch::Receiver<bool>,
) {
    while !*stopping.borrow() {
        let delivery = match consumer.next_within(Duration::from_millis(50)).await {
            Ok(Some(delivery)) => delivery,
            Ok(None) => continue,
            Err(e) => panic!("participant: {e}"),
        };
        let command = Command::from_received(delivery.message()).expect("a saga command");
        let (outcome, twice) = {
            let mut ledger = ledger.lock().unwrap();
            let seen = {
                let n = ledger.seen.entry(command.command_id.clone()).or_default();
                *n += 1;
                *n
            };
            match ledger.answers.get(&command.command_id) {
                Some(answer) => (Some(answer.clone()), false),
                None => {
                    let act = behaviour(&command, seen);
                    let outcome = match act {
                        Act::Silent => None,
                        Act::Decline => Some(Outcome::failed(format!("{} declined", command.step))),
                        Act::Do | Act::DoAndAnswerTwice => {
                            let effect = (command.saga_id.clone(), command.step.clone());
                            match command.kind {
                                Kind::Action => ledger.effects.insert(effect),
                                // Undoing what never happened is fine: the deadline may
                                // compensate an action that was never applied.
                                Kind::Compensation => ledger.effects.remove(&effect),
                            };
                            *ledger
                                .applied
                                .entry(command.command_id.clone())
                                .or_default() += 1;
                            Some(Outcome::succeeded(format!("{}-done", command.step)).unwrap())
                        }
                    };
                    // A declined compensation is a passing failure (it must succeed in
                    // the end), so it is not remembered as the answer.
                    let passing = act == Act::Decline && command.kind == Kind::Compensation;
                    if let Some(outcome) = outcome.as_ref().filter(|_| !passing) {
                        ledger
                            .answers
                            .insert(command.command_id.clone(), outcome.clone());
                    }
                    (outcome, act == Act::DoAndAnswerTwice)
                }
            }
        };
        if let Some(outcome) = outcome {
            command.reply(&ferry, &outcome).await.expect("reply");
            if twice {
                command.reply(&ferry, &outcome).await.expect("second reply");
            }
        }
        delivery.ack().await.expect("ack");
    }
    consumer.close().await.expect("close participant");
}

/// A clock the test moves by hand.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new() -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicI64::new(ferry::message::now_ms())))
    }
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

pub use ferry_testkit::eventually;

pub fn assert_status(state: &SagaState, status: Status) {
    assert_eq!(state.status, status, "{state:?}");
}
