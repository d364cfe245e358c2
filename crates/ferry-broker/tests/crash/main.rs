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
//!
//! Modules: [`scenario`] (what both sides share), [`child`], [`said`] (the parent's record of
//! what children said) and [`lost_or_resurrected`], the checks after each verified round.

mod child;
mod lost_or_resurrected;
mod said;
mod scenario;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferry_testkit::killed_child::{ROUNDS, kill_for, now_ms, seed_from_env};

use crate::lost_or_resurrected::verify;
use crate::said::{ChildRun, DirState, run_child};
use crate::scenario::PAST_EVERY_DEADLINE_MS;

const CHILD_DIR_ENV: &str = "FERRY_BROKER_CRASH_CHILD_DIR";
const CHILD_ROUND_ENV: &str = "FERRY_BROKER_CRASH_ROUND";
const CHILD_SEED_ENV: &str = "FERRY_BROKER_CRASH_CHILD_SEED";
const CHILD_PRODUCERS_ENV: &str = "FERRY_BROKER_CRASH_PRODUCERS";
const CHILD_CONSUMERS_ENV: &str = "FERRY_BROKER_CRASH_CONSUMERS";
const CHILD_ACKED_FILE_ENV: &str = "FERRY_BROKER_CRASH_ACKED_FILE";
const SEED_ENV: &str = "FERRY_BROKER_CRASH_SEED";
/// The child test, as `--exact` names it in this binary.
const CHILD_TEST_NAME: &str = "child::crash_child_broker_under_load";
/// A child that is never killed stops by itself after this long.
const CHILD_MAX_RUN: Duration = Duration::from_secs(15);

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
