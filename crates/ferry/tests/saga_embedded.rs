//! The saga orchestrator end to end on the embedded broker with its state in SQLite: every
//! step failing in turn, a crash at every point, the deadline, the step timeout, duplicate
//! and late replies, and idempotent starts. Participants keep effect ledgers and
//! deduplicate by command id; each test checks no effect is left over or applied twice.
#![cfg(all(feature = "sqlite", feature = "embedded"))]

mod saga_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ferry::Error;
use ferry::saga::{
    Command, CrashSite, Kind, Orchestrator, Outcome, Point, SagaDefinition, SagaStore,
    SqliteSagaStore, Status, Step, command_id,
};
use saga_support::{Act, Behaviour, ManualClock, Shop, always, assert_status, eventually};
use serde_json::json;
use tempfile::TempDir;

const WAIT: Duration = Duration::from_secs(15);

struct World {
    _dir: TempDir,
    shop: Shop,
    store: SqliteSagaStore,
}

async fn world(what: &str, dedup: bool, behaviour: Behaviour) -> World {
    let dir = tempfile::tempdir().unwrap();
    let (ferry, store) = saga_support::embedded_with_store(dir.path()).await;
    store.install().await.expect("install is idempotent");
    let shop = Shop::open(ferry, what, dedup, behaviour).await;
    World {
        _dir: dir,
        shop,
        store,
    }
}

impl World {
    fn orchestrator(&self) -> Orchestrator {
        Orchestrator::new(
            self.shop.ferry.clone(),
            self.store.clone(),
            self.shop.definition(),
            self.shop.options(),
        )
        .unwrap()
    }
}

/// Declines the step named by the saga id's `decline-<step index>` suffix, if any.
fn decline_by_id() -> Behaviour {
    Arc::new(|command: &Command, _| {
        let declined = command
            .saga_id
            .rsplit_once("decline-")
            .and_then(|(_, i)| i.parse::<usize>().ok());
        if command.kind == Kind::Action && declined == Some(command.step_index) {
            Act::Decline
        } else {
            Act::Do
        }
    })
}

#[tokio::test]
async fn a_fault_at_every_step_compensates_every_completed_step() {
    let world = world("faults", true, decline_by_id()).await;
    let orchestrator = world.orchestrator();
    let running = orchestrator.run().await.unwrap();
    let mut ids = vec![
        orchestrator
            .start_with_id("all-ok", json!({"order": 1}))
            .await
            .unwrap(),
    ];
    for step in 0..3 {
        let id = format!("order-decline-{step}");
        ids.push(
            orchestrator
                .start_with_id(&id, json!({"order": step}))
                .await
                .unwrap(),
        );
    }
    let done = orchestrator.wait(&ids[0], WAIT).await.unwrap();
    assert_status(&done, Status::Completed);
    assert_eq!(done.results["charge"], json!("charge-done"));
    world.shop.ledger().assert_completed(&ids[0]);
    for (step, id) in ids[1..].iter().enumerate() {
        let state = orchestrator.wait(id, WAIT).await.unwrap();
        assert_status(&state, Status::Failed);
        let reason = state.error.clone().unwrap();
        assert!(reason.contains("declined"), "{reason}");
        let undone: Vec<&str> = ["charge", "reserve"][2 - step.min(2)..].to_vec();
        assert_eq!(state.compensated, undone, "{id}");
        world.shop.ledger().assert_failed_at(id, step);
    }
    running.stop().await;
    world.shop.close().await;
}

/// Every place an orchestrator can die, for a saga that completes and for one whose last
/// step declines (so it compensates).
fn crash_sites() -> Vec<(bool, CrashSite)> {
    let site = |point, step, kind| CrashSite { point, step, kind };
    let (a, c) = (Kind::Action, Kind::Compensation);
    let mut sites: Vec<(bool, CrashSite)> = [
        site(Point::Persisted, 0, a),
        site(Point::Sent, 0, a),
        site(Point::Received, 0, a),
        site(Point::Persisted, 1, a),
        site(Point::Sent, 1, a),
        site(Point::Received, 2, a),
        site(Point::Finished, 2, a),
    ]
    .into_iter()
    .map(|s| (false, s))
    .collect();
    sites.extend(
        [
            site(Point::Received, 2, a),
            site(Point::Persisted, 1, c),
            site(Point::Sent, 1, c),
            site(Point::Received, 1, c),
            site(Point::Persisted, 0, c),
            site(Point::Sent, 0, c),
            site(Point::Received, 0, c),
            site(Point::Finished, 0, c),
        ]
        .into_iter()
        .map(|s| (true, s)),
    );
    sites
}

#[tokio::test]
async fn a_crash_at_every_point_moving_forward_resumes_with_each_effect_exactly_once() {
    crash_at_each(
        "crashes-forward",
        crash_sites()
            .into_iter()
            .filter(|(declines, _)| !declines)
            .collect(),
    )
    .await;
}

#[tokio::test]
async fn a_crash_at_every_point_compensating_resumes_with_each_effect_exactly_once() {
    crash_at_each(
        "crashes-compensating",
        crash_sites()
            .into_iter()
            .filter(|(declines, _)| *declines)
            .collect(),
    )
    .await;
}

/// Crashes a fresh orchestrator at each site in turn, one saga per site, and checks that
/// an heir on the same store finishes that saga with each effect once. (Two tests, so the
/// harness runs the halves side by side: each site may wait out a one-second lease.)
async fn crash_at_each(what: &str, sites: Vec<(bool, CrashSite)>) {
    let world = world(what, true, decline_by_id()).await;
    for (n, (declines, site)) in sites.into_iter().enumerate() {
        let id = if declines {
            format!("crash{n}-decline-2")
        } else {
            format!("crash{n}-ok")
        };
        let fired = Arc::new(AtomicBool::new(false));
        let hook = {
            let fired = fired.clone();
            Arc::new(move |at: &CrashSite| *at == site && !fired.swap(true, Ordering::SeqCst))
        };
        let doomed = Orchestrator::new(
            world.shop.ferry.clone(),
            world.store.clone(),
            world.shop.definition(),
            world.shop.options().crash_hook(hook),
        )
        .unwrap();
        let running = doomed.run().await.unwrap();
        match doomed.start_with_id(&id, json!({"order": n})).await {
            Ok(_) | Err(Error::Closed) => {}
            Err(e) => panic!("{site:?}: start: {e}"),
        }
        eventually(&format!("the crash at {site:?}"), || doomed.is_crashed()).await;
        running.stopped().await;
        assert!(matches!(doomed.start(json!({})).await, Err(Error::Closed)));

        let heir = world.orchestrator();
        let running = heir.run().await.unwrap();
        let state = heir.wait(&id, WAIT).await.unwrap();
        {
            let ledger = world.shop.ledger();
            if declines {
                assert_status(&state, Status::Failed);
                ledger.assert_failed_at(&id, 2);
            } else {
                assert_status(&state, Status::Completed);
                ledger.assert_completed(&id);
            }
        }
        running.stop().await;
    }
    world.shop.close().await;
}

#[tokio::test]
async fn a_saga_whose_participant_never_answers_is_compensated_at_its_deadline() {
    let silent_charge: Behaviour = Arc::new(|command: &Command, _| {
        if command.step == "charge" && command.kind == Kind::Action {
            Act::Silent
        } else {
            Act::Do
        }
    });
    let world = world("deadline", true, silent_charge).await;
    let clock = ManualClock::new();
    let definition = world.shop.definition().deadline(Duration::from_secs(60));
    let orchestrator = Orchestrator::new(
        world.shop.ferry.clone(),
        world.store.clone(),
        definition,
        world.shop.options().clock(clock.clone()),
    )
    .unwrap();
    let running = orchestrator.run().await.unwrap();
    let id = orchestrator.start(json!({"order": 9})).await.unwrap();
    let charge = command_id(&id, 1, Kind::Action);
    eventually("the charge command", || {
        world.shop.ledger().seen(&charge) == 1
    })
    .await;
    assert_status(
        &orchestrator.status(&id).await.unwrap().unwrap(),
        Status::InProgress,
    );

    clock.advance(Duration::from_secs(61));
    let state = orchestrator.wait(&id, WAIT).await.unwrap();
    assert_status(&state, Status::Failed);
    assert!(
        state.error.as_deref().unwrap().contains("deadline"),
        "{state:?}"
    );
    // The unanswered charge may have been applied, so it is undone too.
    assert_eq!(state.compensated, ["charge", "reserve"]);
    {
        let ledger = world.shop.ledger();
        assert!(ledger.effects.is_empty(), "left over: {:?}", ledger.effects);
        assert_eq!(ledger.seen(&command_id(&id, 0, Kind::Compensation)), 1);
        assert_eq!(ledger.seen(&command_id(&id, 2, Kind::Action)), 0);
    }
    running.stop().await;
    world.shop.close().await;
}

#[tokio::test]
async fn an_unanswered_command_is_sent_again_after_the_step_timeout() {
    // Without a dedup window the re-send is stored again, as on a transport that does
    // not deduplicate; the participant's first take of the charge gets no answer.
    let first_charge_lost: Behaviour = Arc::new(|command: &Command, seen| {
        if command.step == "charge" && seen == 1 {
            Act::Silent
        } else {
            Act::Do
        }
    });
    let world = world("step-timeout", false, first_charge_lost).await;
    let orchestrator = Orchestrator::new(
        world.shop.ferry.clone(),
        world.store.clone(),
        world.shop.definition(),
        world
            .shop
            .options()
            .step_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let running = orchestrator.run().await.unwrap();
    let id = orchestrator.start(json!({"order": 3})).await.unwrap();
    let state = orchestrator.wait(&id, WAIT).await.unwrap();
    assert_status(&state, Status::Completed);
    {
        let ledger = world.shop.ledger();
        assert_eq!(ledger.seen(&command_id(&id, 1, Kind::Action)), 2);
        ledger.assert_completed(&id);
    }
    running.stop().await;
    world.shop.close().await;
}

#[tokio::test]
async fn a_declined_compensation_is_sent_again_until_it_succeeds() {
    // The confirmation declines; the first try at releasing the reservation fails.
    let behaviour: Behaviour =
        Arc::new(
            |command: &Command, seen| match (command.step.as_str(), command.kind) {
                ("confirm", Kind::Action) => Act::Decline,
                ("reserve", Kind::Compensation) if seen == 1 => Act::Decline,
                _ => Act::Do,
            },
        );
    let world = world("compensation-retry", false, behaviour).await;
    let orchestrator = Orchestrator::new(
        world.shop.ferry.clone(),
        world.store.clone(),
        world.shop.definition(),
        world
            .shop
            .options()
            .step_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let running = orchestrator.run().await.unwrap();
    let id = orchestrator.start(json!({"order": 6})).await.unwrap();
    let state = orchestrator.wait(&id, WAIT).await.unwrap();
    assert_status(&state, Status::Failed);
    assert_eq!(state.compensated, ["charge", "reserve"]);
    {
        let ledger = world.shop.ledger();
        assert_eq!(ledger.seen(&command_id(&id, 0, Kind::Compensation)), 2);
        ledger.assert_failed_at(&id, 2);
    }
    running.stop().await;
    world.shop.close().await;
}

#[tokio::test]
async fn duplicate_and_late_replies_change_nothing() {
    // No dedup window, so every duplicate reply reaches the orchestrator; the hook never
    // crashes, it counts the replies read.
    let world = world("replies", false, always(Act::DoAndAnswerTwice)).await;
    let read = Arc::new(AtomicUsize::new(0));
    let counting = {
        let read = read.clone();
        Arc::new(move |at: &CrashSite| {
            if at.point == Point::Received {
                read.fetch_add(1, Ordering::SeqCst);
            }
            false
        })
    };
    let orchestrator = Orchestrator::new(
        world.shop.ferry.clone(),
        world.store.clone(),
        world.shop.definition(),
        world.shop.options().crash_hook(counting),
    )
    .unwrap();
    let running = orchestrator.run().await.unwrap();
    let id = orchestrator.start(json!({"order": 4})).await.unwrap();
    let done = orchestrator.wait(&id, WAIT).await.unwrap();
    assert_status(&done, Status::Completed);
    eventually("both replies to every step", || {
        read.load(Ordering::SeqCst) == 6
    })
    .await;
    // One write per step: the duplicate of every reply moved nothing.
    assert_eq!(orchestrator.status(&id).await.unwrap().unwrap(), done);
    assert_eq!(done.version, 3, "{done:?}");
    world.shop.ledger().assert_completed(&id);

    // Late replies for the finished saga, and one for a saga nobody started.
    let late = |saga: &str, step: usize, kind: Kind| Command {
        saga_id: saga.to_owned(),
        saga_type: "order".into(),
        step: "reserve".into(),
        step_index: step,
        kind,
        command_id: command_id(saga, step, kind),
        message_id: ferry::message::new_id(),
        dedup: false,
        reply_to: world.shop.reply_queue.clone(),
        payload: json!(null),
        results: Default::default(),
    };
    let ferry = &world.shop.ferry;
    late(&id, 0, Kind::Action)
        .reply(ferry, &Outcome::failed("late"))
        .await
        .unwrap();
    late(&id, 1, Kind::Compensation)
        .reply(ferry, &Outcome::succeeded(1).unwrap())
        .await
        .unwrap();
    late("nobody", 0, Kind::Action)
        .reply(ferry, &Outcome::failed("x"))
        .await
        .unwrap();
    eventually("the late replies", || read.load(Ordering::SeqCst) == 9).await;
    // Read and acked: a reply left unsettled would be read again after its lease.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(read.load(Ordering::SeqCst), 9);
    assert_eq!(orchestrator.status(&id).await.unwrap().unwrap(), done);
    assert!(orchestrator.status("nobody").await.unwrap().is_none());
    running.stop().await;
    world.shop.close().await;
}

#[tokio::test]
async fn starting_the_same_saga_id_twice_starts_one_saga() {
    // No dedup window: a second send of the first command would reach the participant.
    let world = world("start-once", false, always(Act::Do)).await;
    let orchestrator = world.orchestrator();
    // Running first: a run resumes unfinished sagas by re-sending their commands, which
    // would show as a second delivery here.
    let running = orchestrator.run().await.unwrap();
    let (a, b) = tokio::join!(
        orchestrator.start_with_id("order-77", json!({"order": 77})),
        orchestrator.start_with_id("order-77", json!({"order": 77})),
    );
    assert_eq!(
        (a.unwrap(), b.unwrap()),
        ("order-77".into(), "order-77".into())
    );
    let state = orchestrator.wait("order-77", WAIT).await.unwrap();
    assert_status(&state, Status::Completed);
    orchestrator
        .start_with_id("order-77", json!({"order": 77}))
        .await
        .unwrap();
    assert_eq!(
        orchestrator.status("order-77").await.unwrap().unwrap(),
        state
    );
    {
        let ledger = world.shop.ledger();
        assert_eq!(ledger.seen(&command_id("order-77", 0, Kind::Action)), 1);
        ledger.assert_completed("order-77");
    }

    let refunds = Orchestrator::new(
        world.shop.ferry.clone(),
        world.store.clone(),
        SagaDefinition::new("refund").step(Step::new("pay-back", "payments")),
        world.shop.options(),
    )
    .unwrap();
    let clash = refunds
        .start_with_id("order-77", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(clash, Error::Conflict { .. }), "{clash}");
    running.stop().await;
    world.shop.close().await;
}

#[tokio::test]
async fn bad_definitions_options_and_ids_are_refused_before_anything_runs() {
    let world = world("refusals", true, always(Act::Do)).await;
    let new = |definition: SagaDefinition, reply_queue: &str| {
        Orchestrator::new(
            world.shop.ferry.clone(),
            world.store.clone(),
            definition,
            ferry::saga::SagaOptions::new(reply_queue),
        )
    };
    assert!(new(SagaDefinition::new("empty"), "replies").is_err());
    assert!(new(world.shop.definition(), "bad queue!").is_err());
    let orchestrator = world.orchestrator();
    for id in ["", "has space", &"x".repeat(129)] {
        let err = orchestrator.start_with_id(id, json!({})).await.unwrap_err();
        assert!(matches!(err, Error::Invalid { .. }), "{id:?}: {err}");
    }
    let missing = Orchestrator::new(
        world.shop.ferry.clone(),
        world.store.clone(),
        world.shop.definition(),
        ferry::saga::SagaOptions::new("no-such-replies"),
    )
    .unwrap();
    assert!(
        missing.run().await.is_err(),
        "a missing reply queue fails at run"
    );
    world.shop.close().await;
}

#[tokio::test]
async fn malformed_and_misrouted_replies_are_dead_lettered() {
    let world = world("misrouted", false, always(Act::Do)).await;
    let orchestrator = world.orchestrator();
    let running = orchestrator.run().await.unwrap();
    let ferry = &world.shop.ferry;
    let replies = ferry::Destination::queue(&world.shop.reply_queue);
    ferry
        .publisher(replies.clone())
        .send(ferry::Message::new("not a reply"))
        .await
        .unwrap();
    let refund = Command {
        saga_id: "r-1".into(),
        saga_type: "refund".into(),
        step: "pay-back".into(),
        step_index: 0,
        kind: Kind::Action,
        command_id: command_id("r-1", 0, Kind::Action),
        message_id: ferry::message::new_id(),
        dedup: false,
        reply_to: world.shop.reply_queue.clone(),
        payload: json!(null),
        results: Default::default(),
    };
    refund
        .reply(ferry, &Outcome::succeeded(1).unwrap())
        .await
        .unwrap();

    let dead = ferry::Source::queue(&world.shop.reply_queue).dead_letters();
    let mut consumer = ferry
        .consumer(dead, ferry::ConsumerOptions::default())
        .await
        .unwrap();
    let mut reasons = Vec::new();
    while reasons.len() < 2 {
        let delivery = consumer
            .next_within(WAIT)
            .await
            .unwrap()
            .expect("a dead letter");
        let info = delivery.dead_letter.clone().expect("dead-letter metadata");
        reasons.push(info.last_error.unwrap_or_default());
        delivery.ack().await.unwrap();
    }
    reasons.sort();
    assert!(reasons[0].contains("`refund` saga"), "{reasons:?}");
    assert!(reasons[1].contains("not a saga reply"), "{reasons:?}");
    consumer.close().await.unwrap();
    running.stop().await;
    world.shop.close().await;
}
