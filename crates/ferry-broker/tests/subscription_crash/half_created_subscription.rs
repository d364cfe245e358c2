//! A kill while a subscription is being created leaves the whole subscription or nothing,
//! never a plain queue under its name.

use std::time::{Duration, Instant};

use ferry_broker::Broker;
use ferry_testkit::killed_child::{Kill, Killed, fail, now_ms, run_and_kill, say, seed_from_env};

use crate::lost_or_redelivered::open_at;
use crate::scenario::{SUBS, TOPIC, config, subscription_spec, topic_spec};
use crate::{CHILD_MAX_RUN, SEED_ENV};

const CREATE_DIR_ENV: &str = "FERRY_SUB_CRASH_CREATE_DIR";
/// The child test, as `--exact` names it in this binary.
const CREATE_TEST_NAME: &str =
    "half_created_subscription::subscription_crash_child_creating_a_subscription";

/// The child side: creates subscription `fan` of the existing topic, saying `READY` just
/// before and `CREATED <µs it took>` after.
#[tokio::test]
async fn subscription_crash_child_creating_a_subscription() {
    let Some(dir) = std::env::var_os(CREATE_DIR_ENV) else {
        return;
    };
    let broker = match Broker::open(&dir, config(1)).await {
        Ok(broker) => broker,
        Err(e) => fail(&format!("open: {e}")),
    };
    say("\nREADY\n");
    let started = Instant::now();
    if let Err(e) = broker
        .create_subscription(SUBS[0].name, subscription_spec(&SUBS[0]))
        .await
    {
        fail(&format!("create subscription: {e}"));
    }
    say(&format!("CREATED {}\n", started.elapsed().as_micros()));
    tokio::time::sleep(CHILD_MAX_RUN).await;
    std::process::exit(4);
}

/// A SIGKILL at a random moment of `create_subscription` leaves the whole subscription or
/// nothing: never a plain queue under the subscription's name (which would not be a
/// subscription after the reopen, receive nothing from the topic, and refuse a second
/// create with `QueueExists`). The queue and what makes it a subscription are one metadata
/// commit; when they were two, a kill landed between them within the first twenty attempts
/// in every run. `FERRY_SUB_CRASH_CREATE_ATTEMPTS` sets how many kills, 60 by default.
#[test]
fn sigkill_while_creating_a_subscription_leaves_it_whole_or_absent() {
    let seed = seed_from_env(SEED_ENV);
    let attempts: usize = std::env::var("FERRY_SUB_CRASH_CREATE_ATTEMPTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    println!("seed {seed} (replay with {SEED_ENV}={seed}), {attempts} attempts");
    let mut rng = fastrand::Rng::with_seed(seed);
    let root = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    // How long a creation takes, from the children that finished one.
    let mut took_us: Vec<u64> = Vec::new();
    let (mut absent, mut whole) = (0, 0);
    for attempt in 0..attempts {
        let dir = root.path().join(format!("broker-{attempt}"));
        rt.block_on(async {
            let broker = open_at(&dir, now_ms(), "setup").await;
            broker.create_topic(TOPIC, topic_spec()).await.unwrap();
        });
        // Spread the kills over the creation as the children so far timed it.
        let span = took_us.iter().copied().max().unwrap_or(40_000).max(200);
        let kill = Kill::AfterReady(Duration::from_micros(rng.u64(..span * 3 / 2)));
        let Killed { lines, stderr, .. } = run_and_kill(
            CREATE_TEST_NAME,
            &[(CREATE_DIR_ENV, dir.display().to_string())],
            kill,
        );
        if let Some(failed) = lines.iter().find(|l| l.starts_with("FAIL")) {
            panic!("attempt {attempt}: child failed: {failed}\nstderr: {stderr}");
        }
        let created = lines.iter().find_map(|l| l.strip_prefix("CREATED "));
        took_us.extend(created.and_then(|us| us.parse::<u64>().ok()));
        let label = format!("seed {seed} attempt {attempt} ({kill:?}, created: {created:?})");
        rt.block_on(async {
            let broker = open_at(&dir, now_ms(), &label).await;
            let exists = broker
                .list_queues()
                .iter()
                .any(|n| n.as_str() == SUBS[0].name);
            if !exists {
                assert!(
                    created.is_none(),
                    "{label}: BROKER BUG: the acknowledged subscription is gone"
                );
                absent += 1;
                return;
            }
            match broker.describe_subscription(SUBS[0].name) {
                Ok(_) => whole += 1,
                Err(e) => {
                    let again = broker
                        .create_subscription(SUBS[0].name, subscription_spec(&SUBS[0]))
                        .await;
                    panic!(
                        "{label}: BROKER BUG: {} is a queue but not a subscription after the \
                         kill: {e}; creating it again: {again:?}",
                        SUBS[0].name
                    )
                }
            }
        });
    }
    println!(
        "{attempts} attempts: {absent} left no subscription, {whole} a whole one; creation took \
         {:?} µs",
        took_us
    );
}
