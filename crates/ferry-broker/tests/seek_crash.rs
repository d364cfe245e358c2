//! Crash test of seeking a subscription, with a real SIGKILL.
//!
//! The parent sets up a directory once: a `Durability::Fsync` topic `t` of two partitions,
//! a subscription `s` of it, [`MESSAGES`] messages published and all acknowledged. Then,
//! round after round, it re-executes this test binary with `FERRY_SEEK_CRASH_CHILD_DIR`
//! set, which turns `seek_crash_child` into a broker process that seeks `s` over and over,
//! alternately to the start (every message unacknowledged again: `ALL`) and to a time after
//! every publish (nothing unacknowledged: `NONE`), leasing some messages in between so a
//! seek also voids leases. It says `SEEKING <target>` before each seek and `SOUGHT` once
//! it returned. The parent SIGKILLs it at a random moment, reopens the directory (the open
//! carries out a seek the kill interrupted), peeks at everything `s` holds, leased or not,
//! and checks:
//!
//! - no message is held twice, and what is held is every message or none;
//! - after a `SOUGHT`, exactly what that seek's target counts unacknowledged;
//! - after a `SEEKING` without its `SOUGHT`, that target's state or the state before it
//!   (the kill came before the seek stored its intent), never anything in between.
//!
//! Replay the random choices of a run with `FERRY_SEEK_CRASH_SEED=<seed it printed>`.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use ferry_broker::{
    Broker, BrokerConfig, DeadLetter, Durability, MAX_PEEK, Name, OutgoingMessage, RedriveFilter,
    RetryPolicy, SeekTarget, SubscriptionSpec, SubscriptionStart, TopicSpec,
};
use ferry_testkit::killed_child::{Kill, fail, now_ms, run_and_kill, say, seed_from_env};

const CHILD_DIR: &str = "FERRY_SEEK_CRASH_CHILD_DIR";
const SEED: &str = "FERRY_SEEK_CRASH_SEED";
const CHILD_TEST: &str = "seek_crash_child";
/// Enough that a kill often lands inside a seek, not between two.
const MESSAGES: usize = 5_000;
const ROUNDS: usize = 6;

fn config() -> BrokerConfig {
    BrokerConfig {
        message_segment_bytes: 64 << 10,
        journal_segment_bytes: 64 << 10,
        checkpoint_journal_bytes: 32 << 10,
        housekeeping_interval: Duration::from_millis(20),
        ..BrokerConfig::default()
    }
}

/// The parent's view: no timers, nothing changes while it looks.
fn quiet_config() -> BrokerConfig {
    BrokerConfig {
        background_timers: false,
        ..config()
    }
}

async fn set_up(dir: &Path) {
    let broker = Broker::open(dir, config()).await.unwrap();
    let topic = TopicSpec {
        durability: Durability::Fsync,
        ..TopicSpec::with_partitions(2)
    };
    broker.create_topic("t", topic).await.unwrap();
    let mut spec = SubscriptionSpec::new(Name::new("t").unwrap());
    spec.start = SubscriptionStart::Earliest;
    spec.delivery.durability = Durability::Fsync;
    spec.delivery.dead_letter = DeadLetter::Disabled;
    spec.delivery.retry = RetryPolicy {
        max_deliveries: 1_000,
        ..spec.delivery.retry
    };
    spec.delivery.lease = Duration::from_secs(60);
    broker.create_subscription("s", spec).await.unwrap();
    for batch in 0..MESSAGES / 100 {
        let messages = (batch * 100..batch * 100 + 100)
            .map(|i| OutgoingMessage::new(format!("m{i}")).with_key(format!("k{}", i % 7)))
            .collect();
        broker.publish_to_topic("t", messages).await.unwrap();
    }
    loop {
        let got = broker
            .receive("s", "parent", 500, None, None)
            .await
            .unwrap();
        if got.is_empty() {
            break;
        }
        for m in &got {
            broker.ack("s", m.seq, m.token).await.unwrap();
        }
    }
    // Published strictly before any child's `NONE` time.
    std::thread::sleep(Duration::from_millis(5));
}

/// The payloads of everything `s` holds, leased or not, in seq order.
fn held(broker: &Broker) -> Vec<String> {
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = broker
            .peek("s", after, MAX_PEEK, &RedriveFilter::default())
            .unwrap();
        let Some(last) = page.last() else {
            return all;
        };
        after = Some(last.seq);
        all.extend(
            page.iter()
                .map(|p| String::from_utf8_lossy(&p.message.payload).into_owned()),
        );
    }
}

#[test]
fn seek_crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let broker = match Broker::open(Path::new(&dir), config()).await {
            Ok(broker) => broker,
            Err(e) => fail(&format!("open: {e}")),
        };
        let after_every_publish = now_ms();
        say("\nREADY\n");
        let mut rng = fastrand::Rng::with_seed(seed_from_env(SEED));
        for round in 0usize.. {
            let (name, target) = if round % 2 == 0 {
                ("ALL", SeekTarget::Time(0))
            } else {
                ("NONE", SeekTarget::Time(after_every_publish))
            };
            say(&format!("SEEKING {name}\n"));
            if let Err(e) = broker.seek_subscription("s", target).await {
                fail(&format!("seek to {name}: {e}"));
            }
            say("SOUGHT\n");
            let lease = rng.usize(..200);
            if let Err(e) = broker.receive("s", "child", lease, None, None).await {
                fail(&format!("receive: {e}"));
            }
        }
    });
}

#[test]
fn seeks_killed_at_random_leave_one_target_or_the_one_before() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    let seed = seed_from_env(SEED);
    println!("{SEED}={seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(set_up(dir.path()));
    let every: HashSet<String> = (0..MESSAGES).map(|i| format!("m{i}")).collect();
    // What `s` held unacknowledged when the round's child started.
    let mut before = "NONE";
    for round in 0..ROUNDS {
        let kill = Kill::AfterReady(Duration::from_millis(30 + rng.u64(..400)));
        let envs = [
            (CHILD_DIR, dir.path().display().to_string()),
            (SEED, rng.u64(..).to_string()),
        ];
        let killed = run_and_kill(CHILD_TEST, &envs, kill);
        assert!(
            !killed.lines.iter().any(|l| l.starts_with("FAIL")),
            "round {round}: {:?}\n{}",
            killed.lines,
            killed.stderr
        );
        assert!(
            killed.lines.iter().any(|l| l == "READY"),
            "round {round}: never ready: {:?} {}",
            killed.lines,
            killed.stderr
        );
        let seeking: Vec<(usize, &str)> = killed
            .lines
            .iter()
            .enumerate()
            .filter_map(|(i, l)| l.strip_prefix("SEEKING ").map(|t| (i, t)))
            .collect();
        let cut_short = seeking
            .last()
            .is_some_and(|&(at, _)| !killed.lines[at + 1..].iter().any(|l| l == "SOUGHT"));
        println!(
            "round {round}: {} seeks, the last cut short: {cut_short}",
            seeking.len()
        );
        let allowed: Vec<&str> = match seeking.as_slice() {
            [] => vec![before],
            [.., (at, target)] if killed.lines[at + 1..].iter().any(|l| l == "SOUGHT") => {
                vec![target]
            }
            [(_, target)] => vec![target, before],
            [.., (_, previous), (_, target)] => vec![target, previous],
        };
        let got = runtime.block_on(async {
            let broker = Broker::open(dir.path(), quiet_config()).await.unwrap();
            held(&broker)
        });
        let unique: HashSet<String> = got.iter().cloned().collect();
        assert_eq!(unique.len(), got.len(), "round {round}: held twice");
        let state = if unique.is_empty() {
            "NONE"
        } else if unique == every {
            "ALL"
        } else {
            panic!(
                "round {round}: {} of {MESSAGES} messages unacknowledged, after {seeking:?}",
                unique.len()
            )
        };
        assert!(
            allowed.contains(&state),
            "round {round}: {state}, expected one of {allowed:?}"
        );
        before = state;
    }
}
