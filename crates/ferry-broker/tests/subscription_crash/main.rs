//! Crash test of subscriptions and consumer groups with a real SIGKILL.
//!
//! The parent test re-executes this test binary with `FERRY_SUB_CRASH_CHILD_DIR` set, which
//! turns `subscription_crash_child_broker_under_load` into a broker process: it opens a
//! [`Broker`] on that directory (real clock, background timers, small segments), creates if
//! missing a `Durability::Fsync` topic `events` of three partitions and three subscriptions
//! of it, all from the earliest record:
//!
//! - `fan`: shared, every message;
//! - `keyed`: key-shared, the messages whose subject is `a.*`;
//! - `solo`: exclusive (one active consumer, one message at a time, in publish order), the
//!   messages whose subject is `b.*`.
//!
//! Then it runs producers (`publish_to_topic`, batches of one to four, most messages keyed
//! by one of six keys, a few delayed by up to 250 ms), two consumers per subscription that
//! receive, ack most messages and nack some (with a short delay), and one static member of
//! the consumer group `audit` that polls every partition and commits each partition's next
//! offset after each poll (most of the time: what it leaves uncommitted must be polled
//! again). Housekeeping runs every 50 ms with small journals and segments, and a task forces
//! checkpoints now and then, so kills also land in checkpoints, saves of the
//! subscriptions' cursors and deletions of settled segments.
//!
//! Everything about a message derives from its [`Id`], so both sides can check what they
//! read. The child says each step on stdout *after* the call returned (one write per line):
//! `PUB <partition> <offset> <id>`, `RECV <sub> <id>`, `ACK <sub> <id>`, `COMMIT <p> <o>`;
//! and *before* a call whose effect may be durable without its answer being seen:
//! `ACKING <sub> <id>`, `COMMITTING <p> <o>`. `GSTART <p> <o>` is the first record the
//! group member of this child polled from partition `p`: where the group resumed.
//!
//! The child checks on its own that every delivery is a message the test published, that a
//! subscription only delivers what its filter takes, that a key of `keyed` and the whole of
//! `solo` never have two unexpired leases at once, that `solo` does not fail over while its
//! active consumer keeps asking, and that the group's records of a partition follow each
//! other without a gap.
//!
//! The parent SIGKILLs the child at a random moment (round plan and timing shared with the
//! other crash tests; `FERRY_SUB_CRASH_PASSES` passes over it, 2 by default) and, after the
//! rounds that verify, reopens the broker with a manual clock and checks:
//!
//! - every acknowledged publish is in the topic at its position, no message twice, and what
//!   an earlier look saw is unchanged;
//! - a message acked (`ACK`) on a subscription is never delivered there again, in this
//!   round or any later one;
//! - the group's committed offsets never go backwards: a child resumes each partition at
//!   the last acknowledged commit or at one under way at the kill, never before (records
//!   not committed are polled again) and never after;
//! - per key on `keyed`, per partition on `solo`, messages are acked in publish order (the
//!   order the acks were made, which is the order the broker settled them in).
//!
//! At the end it reopens each directory an hour later (every lease expired, every retry
//! due), drains every subscription and the group, and checks that each subscription
//! delivered every message of the topic its filter takes exactly once counting acks (none
//! lost, none acked twice), and that the group reads each partition from its committed
//! offset to its end.
//!
//! Replay the random choices of a run with `FERRY_SUB_CRASH_SEED=<seed it printed>`
//! (thread timing still varies).
//!
//! Modules: [`scenario`] (what both sides share), [`child`], [`said`] (the parent's record of
//! what children said) and the checks, named by the failure they catch:
//! [`lost_or_redelivered`] after each verified round, [`lost_or_acked_twice`] at the end,
//! and [`half_created_subscription`] for a kill inside `create_subscription`.

mod child;
mod half_created_subscription;
mod lost_or_acked_twice;
mod lost_or_redelivered;
mod said;
mod scenario;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferry_testkit::killed_child::{ROUNDS, kill_for, seed_from_env};

use crate::lost_or_acked_twice::drain_and_check;
use crate::lost_or_redelivered::verify;
use crate::said::{DirState, run_child};
use crate::scenario::SUBS;

const CHILD_DIR_ENV: &str = "FERRY_SUB_CRASH_CHILD_DIR";
const CHILD_ROUND_ENV: &str = "FERRY_SUB_CRASH_ROUND";
const CHILD_SEED_ENV: &str = "FERRY_SUB_CRASH_CHILD_SEED";
const SEED_ENV: &str = "FERRY_SUB_CRASH_SEED";
const PASSES_ENV: &str = "FERRY_SUB_CRASH_PASSES";
/// The child test, as `--exact` names it in this binary.
const CHILD_TEST_NAME: &str = "child::subscription_crash_child_broker_under_load";
/// A child that is never killed stops by itself after this long.
const CHILD_MAX_RUN: Duration = Duration::from_secs(15);

#[test]
fn sigkill_while_consuming_subscriptions_and_groups_loses_nothing_and_redelivers_no_ack() {
    let seed = seed_from_env(SEED_ENV);
    let passes: usize = std::env::var(PASSES_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    println!(
        "subscription crash test seed {seed} (replay with {SEED_ENV}={seed}), {passes} passes"
    );
    let mut rng = fastrand::Rng::with_seed(seed);
    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3)
        .map(|i| root.path().join(format!("broker-{i}")))
        .collect();
    let mut states: Vec<DirState> = (0..dirs.len()).map(|_| DirState::new()).collect();
    let started = Instant::now();
    let (mut published, mut acks, mut commits) = (0, 0, 0);
    let plan = ROUNDS.iter().cycle().take(ROUNDS.len() * passes);
    for (round, &(d, verify_after, early)) in plan.enumerate() {
        let round = round as u32;
        let kill = kill_for(&mut rng, early);
        let said = run_child(&dirs[d], round, rng.u64(..), kill, &mut states[d]);
        let label = format!(
            "seed {seed} round {round} dir {d} (kill {kill:?}, ready {})",
            said.ready
        );
        published += said.published;
        acks += said.acks;
        commits += said.commits;
        let counts = format!(
            "{} published, {} delivered, {} acked, {} commits, {} checkpoints, {} segments \
             deleted",
            said.published,
            said.deliveries,
            said.acks,
            said.commits,
            said.checkpoints,
            said.deleted_segments
        );
        if verify_after {
            let summary = verify(&dirs[d], &mut states[d], &label);
            println!("{label}: {counts}; {summary}");
        } else {
            println!("{label}: {counts}; not verified yet");
        }
    }
    for (d, dir) in dirs.iter().enumerate() {
        let label = format!("seed {seed} final drain of dir {d}");
        let drained = drain_and_check(dir, &mut states[d], &label);
        let per_sub: Vec<String> = drained
            .per_sub
            .iter()
            .zip(&SUBS)
            .map(|((acked, got, matching), s)| {
                format!("{} {acked} acked + {got} drained of {matching}", s.name)
            })
            .collect();
        println!(
            "{label}: {}; group read {} uncommitted records, resumed {} times; not yet \
             considered at the reopen {:?}, empty receives before the first delivery {:?}",
            per_sub.join(", "),
            drained.group_records,
            states[d].resumes,
            drained.behind_at_open,
            drained.empty_polls_before_first
        );
    }
    println!(
        "{} rounds, {published} published, {acks} acked, {commits} commits, {:?}",
        ROUNDS.len() * passes,
        started.elapsed()
    );
    assert!(
        published > 0 && acks > 0 && commits > 0,
        "no child got as far as an acknowledged publish, ack and commit"
    );
}
