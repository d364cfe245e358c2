//! Crash test of partitioned topics with a real SIGKILL.
//!
//! The parent test re-executes this test binary with `FERRY_TOPIC_CRASH_CHILD_DIR` set,
//! which turns `topic_crash_child_broker_under_load` into a broker process: it opens a
//! [`Broker`] on that directory (real clock, background timers, small segments so that
//! kills also land around segment rolls), creates two `Durability::Fsync` topics if missing
//! (`sticky`: 4 partitions, keyless messages placed by [`KeylessPlacement::StickyBatch`];
//! `spread`: 3 partitions, [`KeylessPlacement::RoundRobin`]) and runs producer tasks:
//!
//! - plain producers publish single messages and batches with `publish_to_topic` (a batch
//!   without keys sometimes with `publish_to_partition`), keyed (one of eight keys) or not,
//!   and now and then begin two to five such publishes (`begin_publish_to_topic`,
//!   `begin_publish_to_partition`) before awaiting any, as a Kafka connection pipelines its
//!   produce requests;
//! - idempotent producers (`idem-0`, `idem-1`, `idem-2`, the same three on every round)
//!   publish batches with `publish_idempotent` to a partition of their topic, numbering
//!   each partition's messages `0, 1, 2, …`. Some batches are sent as two racing copies,
//!   and some earlier batches (or part of one) are retried on purpose; a retry must
//!   answer the positions the first answer gave, and write nothing.
//!
//! Everything about a message — topic, message id, payload, key, header, producer stamp —
//! derives from its [`Id`], so the parent can check what it reads. The child prints
//! `PUB <topic> <partition> <offset> <id>` for every message once its publish returned
//! `Ok` (one write and flush per line), `TRY <slot> <partition> <first> <count>` before an
//! idempotent batch's first attempt, and `DUP …` after an on-purpose retry checked out.
//!
//! **Idempotent producers across restarts.** Each round continues every idempotent
//! producer's sequences from where the parent says it stopped (it does not get fresh
//! producer ids): the parent tracks, per producer and partition, the sequence after the
//! last batch whose every `PUB` line it saw, and the batch under way at the kill (a `TRY`
//! without all its `PUB` lines). The next child first resends that batch, exactly as a
//! producer that lost an answer would: the broker must answer the original positions if
//! the batch was written before the kill (rebuilding what it knows of the producer from the
//! records), or write it now if it was not — never both, never an error.
//!
//! The parent SIGKILLs the child at a random moment, then (in some rounds only after a
//! second child has recovered the directory and been killed too, possibly while still
//! recovering) reopens the broker with a manual clock, reads every partition from the
//! earliest offset and checks:
//!
//! - offsets run from 0 to the partition's end without a hole (recovery cuts a torn tail,
//!   it never leaves a gap), and what an earlier look saw is still there, unchanged;
//! - every record is a message the test published, identical to what its id says, in its
//!   id's topic, with the producer stamp its id says (none for plain producers);
//! - every acknowledged message is at the acknowledged (partition, offset);
//! - no id appears twice (idempotent retries, racing copies and resends after a restart
//!   are written once);
//! - a keyed message is in its key's partition (Kafka's placement, so all of a key's
//!   messages are in one partition), and each producer's messages of one partition — so
//!   those of each key — are in publish order (by the id's counter);
//! - each idempotent producer's sequences in a partition run `0..n` with no gap, and `n` is
//!   where its last acknowledged batch ended, or where the batch under way at the kill would
//!   end (written whole or not at all).
//!
//! Unacknowledged messages (published when the kill came) may be present or absent. The
//! parent then reopens once more and checks the partitions' ends did not move.
//!
//! Replay the random choices of a run with `FERRY_TOPIC_CRASH_SEED=<seed it printed>`
//! (thread timing still varies).
//!
//! The child-process plumbing (start, read lines, kill; `say`, `fail`, `splitmix`) is
//! shared with the other crash tests through `ferry_testkit::killed_child`.
//!
//! Modules: [`scenario`] (what both sides share), [`child`], [`idempotent`] (its producers
//! and the state handed to each child), [`said`] (the parent's record of what children
//! said) and [`lost_or_duplicated`], the checks after each verified round.

mod child;
mod idempotent;
mod lost_or_duplicated;
mod said;
mod scenario;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferry_testkit::killed_child::{ROUNDS, kill_for, seed_from_env};

use crate::idempotent::write_idempotent_states;
use crate::lost_or_duplicated::verify;
use crate::said::{ChildRun, DirState, run_child};
use crate::scenario::{IDEMPOTENT_PRODUCERS, Id};

const CHILD_DIR_ENV: &str = "FERRY_TOPIC_CRASH_CHILD_DIR";
const CHILD_ROUND_ENV: &str = "FERRY_TOPIC_CRASH_ROUND";
const CHILD_SEED_ENV: &str = "FERRY_TOPIC_CRASH_CHILD_SEED";
const CHILD_PRODUCERS_ENV: &str = "FERRY_TOPIC_CRASH_PRODUCERS";
const CHILD_IDEMPOTENT_FILE_ENV: &str = "FERRY_TOPIC_CRASH_IDEMPOTENT_FILE";
const SEED_ENV: &str = "FERRY_TOPIC_CRASH_SEED";
/// The child test, as `--exact` names it in this binary.
const CHILD_TEST_NAME: &str = "child::topic_crash_child_broker_under_load";
/// A child that is never killed stops by itself after this long.
const CHILD_MAX_RUN: Duration = Duration::from_secs(15);

#[test]
fn sigkill_while_publishing_to_topics_loses_no_acknowledged_message_and_duplicates_none() {
    let seed = seed_from_env(SEED_ENV);
    println!("topic crash test seed {seed} (replay with {SEED_ENV}={seed})");
    let mut rng = fastrand::Rng::with_seed(seed);
    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3)
        .map(|i| root.path().join(format!("broker-{i}")))
        .collect();
    let idempotent_files: Vec<PathBuf> = (0..3)
        .map(|i| root.path().join(format!("idempotent-{i}.txt")))
        .collect();
    let mut states: Vec<DirState> = (0..dirs.len()).map(|_| DirState::new()).collect();
    let started = Instant::now();
    let (mut total_published, mut total_retries) = (0, 0);
    for (round, &(d, verify_after, early)) in ROUNDS.iter().enumerate() {
        let round = round as u32;
        let kill = kill_for(&mut rng, early);
        let run = ChildRun {
            round,
            seed: rng.u64(..),
            producers: 2 + rng.u32(..3),
            kill,
        };
        write_idempotent_states(&states[d].idempotent, &idempotent_files[d]);
        let said = run_child(&dirs[d], &idempotent_files[d], &run);
        let label = format!(
            "seed {seed} round {round} dir {d} ({} plain + {IDEMPOTENT_PRODUCERS} idempotent \
             producers, kill {:?}, ready {})",
            run.producers, run.kill, said.ready
        );
        states[d].absorb(round, &said, &label);
        total_published += said.published.len();
        total_retries += said.retries;
        let idempotent = said
            .published
            .iter()
            .filter(|(id, _)| matches!(id, Id::Idempotent { .. }))
            .count();
        let counts = format!(
            "{} published ({idempotent} idempotent), {} on-purpose retries answered alike",
            said.published.len(),
            said.retries
        );
        if verify_after {
            let summary = verify(&dirs[d], &mut states[d], &label);
            println!("{label}: {counts}; {summary}");
        } else {
            println!("{label}: {counts}; not verified yet");
        }
    }
    println!(
        "{} rounds, {total_published} published, {total_retries} retries, {:?}",
        ROUNDS.len(),
        started.elapsed()
    );
    assert!(
        total_published > 0 && total_retries > 0,
        "no child got as far as an acknowledged publish and a retried idempotent batch"
    );
}
