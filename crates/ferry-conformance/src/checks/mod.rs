//! The checks, in the order they run. Each declares its own fresh queues, so checks do not
//! see each other's messages, and each names the capability it needs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry::message::reason;
use ferry::{
    Destination, Error, Feature, Ferry, KeyOrdering, Message, QueueDecl, Source, SubscriptionDecl,
    TopicDecl,
};

mod declared;
mod errors;
mod max_length;
mod priorities;
mod restart;
mod ttl;

use declared::a_consumer_knows_the_declared_max_deliveries_on_any_connection;
use errors::{
    a_dedup_id_on_a_queue_without_a_window_is_invalid_and_stores_nothing,
    a_full_queue_refuses_with_full, a_missing_queue_is_not_found,
    a_subscription_declared_on_another_topic_is_a_conflict, an_invalid_name_is_invalid,
    an_oversized_payload_is_invalid_where_refused,
    declaring_again_with_other_settings_is_a_conflict,
    deleting_a_topic_with_subscriptions_is_a_conflict, settling_a_lease_taken_over_is_not_held,
};
use max_length::a_full_queue_keeps_what_it_holds_and_takes_more_once_drained;
use priorities::{
    a_priority_above_the_queues_levels_is_invalid_and_stores_nothing,
    higher_priorities_are_delivered_first,
};
use restart::restart_check;
use ttl::{
    a_default_ttl_applies_only_to_messages_without_one,
    an_expired_message_is_dead_lettered_not_delivered,
};

use crate::Target;
use crate::report::{Outcome, Report};
use crate::support::{
    CheckResult, Context, OneLeased, consumer, consumer_with, ensure, fresh_name, next,
    nothing_more, one_leased, queue, quick_policy,
};

pub(super) const WAIT: Duration = Duration::from_secs(15);
pub(super) const QUIET: Duration = Duration::from_millis(700);

type CheckFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = CheckResult> + Send + 'a>>;

struct Check {
    name: &'static str,
    needs: &'static [Feature],
    run: Run,
}

enum Run {
    /// A check on the run's connection.
    On(for<'a> fn(&'a Ferry, &'a Target) -> CheckFuture<'a>),
    /// The engine-restart check: it closes the connection and hands back a new one.
    RestartingTheEngine,
}

macro_rules! check {
    ($name:ident, [$($feature:ident),*]) => {
        Check {
            name: stringify!($name),
            needs: &[$(Feature::$feature),*],
            run: Run::On(|ferry, target| Box::pin($name(ferry, target))),
        }
    };
}

fn all_checks() -> Vec<Check> {
    vec![
        check!(round_trip, []),
        check!(unsupported_features_are_refused, []),
        check!(
            competing_consumers_get_each_message_once,
            [CompetingConsumers]
        ),
        check!(fan_out_gives_every_subscription_everything, [FanOut]),
        check!(nack_redelivers_with_a_rising_attempt, [Redelivery]),
        check!(
            max_deliveries_dead_letters_with_metadata,
            [Redelivery, DeadLetters]
        ),
        check!(reject_dead_letters_at_once, [DeadLetters]),
        check!(an_expired_lease_goes_to_another_consumer, [LeaseExpiry]),
        check!(extend_keeps_a_delivery_hidden, [LeaseExtension]),
        check!(a_delay_is_not_delivered_early, [Delays]),
        check!(higher_priorities_are_delivered_first, [Priorities]),
        check!(
            a_priority_above_the_queues_levels_is_invalid_and_stores_nothing,
            [Priorities]
        ),
        check!(
            an_expired_message_is_dead_lettered_not_delivered,
            [Ttl, DeadLetters]
        ),
        check!(a_default_ttl_applies_only_to_messages_without_one, [Ttl]),
        check!(per_key_order_holds_under_concurrency, [OrderingKeys]),
        check!(
            duplicates_within_the_window_are_stored_once,
            [Deduplication]
        ),
        check!(
            a_dedup_id_on_a_queue_without_a_window_is_invalid_and_stores_nothing,
            [Deduplication]
        ),
        check!(ten_thousand_survive_a_consumer_restart, []),
        Check {
            name: "nothing_acked_or_published_is_lost_across_an_engine_restart",
            needs: &[],
            run: Run::RestartingTheEngine,
        },
        check!(close_is_idempotent_and_safe_while_a_handler_runs, []),
        // The same failure is the same `ferry::Error` on every transport.
        check!(a_missing_queue_is_not_found, []),
        check!(declaring_again_with_other_settings_is_a_conflict, []),
        check!(
            a_subscription_declared_on_another_topic_is_a_conflict,
            [FanOut]
        ),
        check!(deleting_a_topic_with_subscriptions_is_a_conflict, [FanOut]),
        check!(
            a_consumer_knows_the_declared_max_deliveries_on_any_connection,
            [FanOut, DeadLetters]
        ),
        check!(
            settling_a_lease_taken_over_is_not_held,
            [LeaseExpiry, StaleSettles]
        ),
        check!(an_invalid_name_is_invalid, []),
        check!(an_oversized_payload_is_invalid_where_refused, []),
        check!(a_full_queue_refuses_with_full, [MaxLength]),
        check!(
            a_full_queue_keeps_what_it_holds_and_takes_more_once_drained,
            [MaxLength]
        ),
    ]
}

pub async fn run_all(target: &Target) -> Report {
    let mut report = Report {
        target: target.name.clone(),
        ..Report::default()
    };
    let ferry = match Ferry::connect(&target.url).await {
        Ok(ferry) => ferry,
        Err(e) => {
            report
                .results
                .push(("connect", Outcome::Failed(format!("{}: {e}", target.url))));
            return report;
        }
    };
    // The restart check replaces the connection; later checks use the new one.
    let mut ferry = ferry;
    let checks = all_checks();
    for (name, _) in &target.not_run {
        assert!(
            checks.iter().any(|c| c.name == *name),
            "{}: no check is named {name}",
            target.name
        );
    }
    for check in checks {
        let started = Instant::now();
        if let Some((_, why)) = target.not_run.iter().find(|(name, _)| *name == check.name) {
            report
                .results
                .push((check.name, Outcome::Skipped((*why).to_owned())));
            report.timings.push(started.elapsed());
            continue;
        }
        let capabilities = ferry.capabilities();
        if let Some(missing) = check.needs.iter().find(|f| !capabilities.supports(**f)) {
            report.results.push((
                check.name,
                Outcome::Skipped(format!("{} declares no {missing}", capabilities.transport)),
            ));
            report.timings.push(started.elapsed());
            continue;
        }
        let run = match check.run {
            Run::On(run) => run,
            Run::RestartingTheEngine => {
                let (outcome, reconnected) = restart_check(ferry.clone(), target).await;
                report.results.push((check.name, outcome));
                report.timings.push(started.elapsed());
                match reconnected {
                    Some(f) => ferry = f,
                    None => return report,
                }
                continue;
            }
        };
        let outcome = match tokio::time::timeout(target.check_timeout, run(&ferry, target)).await {
            Ok(Ok(())) => Outcome::Passed,
            Ok(Err(how)) => Outcome::Failed(how),
            Err(_) => Outcome::Failed(format!("timed out after {:?}", target.check_timeout)),
        };
        report.results.push((check.name, outcome));
        report.timings.push(started.elapsed());
    }
    crate::support::delete_declared(&ferry).await;
    let closed = ferry.close().await.and(ferry.close().await);
    report.results.push((
        "close_twice",
        match closed {
            Ok(()) => Outcome::Passed,
            Err(e) => Outcome::Failed(format!("closing the connection twice: {e}")),
        },
    ));
    report
}

async fn round_trip(ferry: &Ferry, _: &Target) -> CheckResult {
    let name = queue(ferry, "round-trip", |_| {}).await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    let sent = Message::new(&b"hello \x00 world"[..])
        .with_key("customer-7")
        .with_header("type", "Greeting")
        .with_header("x-trace", "abc");
    let id = publisher.send(sent.clone()).await.during("publish")?;
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    let d = next(&mut c, WAIT).await?;
    ensure!(d.id == id, "id {} came back as {}", id, d.id);
    ensure!(
        d.payload == sent.payload,
        "payload changed: {:?}",
        d.payload
    );
    ensure!(
        d.key.as_deref() == Some(&b"customer-7"[..]),
        "key changed: {:?}",
        d.key
    );
    for (k, v) in &sent.headers {
        ensure!(
            d.header(k) == Some(v.as_str()),
            "header {k} lost: {:?}",
            d.headers
        );
    }
    ensure!(d.attempt == 1, "first delivery has attempt {}", d.attempt);
    ensure!(d.dead_letter.is_none(), "a live message says it is dead");
    let age = d.age();
    ensure!(
        age < Duration::from_secs(60),
        "published_at is off by {age:?}"
    );
    d.ack().await.during("ack")?;
    nothing_more(&mut c, QUIET).await?;
    c.close().await.during("close consumer")?;
    ferry.delete(&Source::queue(&name)).await.during("delete")?;
    match ferry
        .consumer(Source::queue(&name), Default::default())
        .await
    {
        Err(Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(format!("a deleted queue answers {e}, not NotFound")),
        Ok(_) => Err("a deleted queue can still be consumed".into()),
    }
}

async fn unsupported_features_are_refused(ferry: &Ferry, _: &Target) -> CheckResult {
    let caps = *ferry.capabilities();
    let name = fresh_name("unsupported");
    for feature in Feature::ALL {
        if caps.supports(feature) {
            continue;
        }
        let mut decl = QueueDecl::new(&name).delivery(quick_policy());
        let message = match feature {
            Feature::Priorities => {
                decl.delivery.priority_levels = 3;
                Some(Message::new("x").with_priority(2))
            }
            Feature::OrderingKeys => {
                decl.delivery.ordering = KeyOrdering::PerKey;
                None
            }
            Feature::Deduplication => {
                decl.dedup_window = Some(Duration::from_secs(60));
                Some(Message::new("x").with_dedup_id("d"))
            }
            Feature::Ttl => {
                decl.delivery.default_ttl = Some(Duration::from_secs(60));
                Some(Message::new("x").with_ttl(Duration::from_secs(60)))
            }
            Feature::MaxLength => {
                decl.max_length = Some(10);
                None
            }
            Feature::Delays => {
                // `max_delay` is only a bound: the declaration stands, the publish does not.
                let publisher = ferry.publisher(Destination::queue(&name));
                match publisher
                    .send(Message::new("x").with_delay(Duration::from_secs(1)))
                    .await
                {
                    Err(Error::Unsupported { .. }) => continue,
                    other => return Err(format!("publishing with {feature} answered {other:?}")),
                }
            }
            _ => continue,
        };
        match ferry.declare_queue(&decl).await {
            Err(Error::Unsupported { .. }) => {}
            other => return Err(format!("declaring {feature} answered {other:?}")),
        }
        if let Some(message) = message {
            let publisher = ferry.publisher(Destination::queue(&name));
            match publisher.send(message).await {
                Err(Error::Unsupported { .. }) => {}
                other => return Err(format!("publishing with {feature} answered {other:?}")),
            }
        }
    }
    Ok(())
}

async fn competing_consumers_get_each_message_once(ferry: &Ferry, _: &Target) -> CheckResult {
    const MESSAGES: usize = 5000;
    const CONSUMERS: usize = 5;
    let name = queue(ferry, "competing", |_| {}).await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    let mut sent = HashSet::new();
    for chunk in 0..MESSAGES / 250 {
        let batch = (0..250)
            .map(|i| Message::new(format!("m{}", chunk * 250 + i)))
            .collect();
        sent.extend(publisher.send_batch(batch).await.during("publish")?);
    }
    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let per_consumer: Arc<Mutex<Vec<usize>>> = Arc::new(Mutex::new(vec![0; CONSUMERS]));
    let mut tasks = Vec::new();
    for index in 0..CONSUMERS {
        let mut c = consumer_with(ferry, Source::queue(&name), 8).await?;
        let seen = seen.clone();
        let per_consumer = per_consumer.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let done = seen.lock().unwrap().len() >= MESSAGES;
                if done {
                    // Quiet period: anything more would be a duplicate.
                    return match c.next_within(QUIET).await {
                        Ok(Some(d)) => Err(format!("extra delivery {} after all arrived", d.id)),
                        Ok(None) => c.close().await.during("close"),
                        Err(e) => Err(e.to_string()),
                    };
                }
                match c.next_within(Duration::from_millis(200)).await {
                    Ok(Some(d)) => {
                        *seen.lock().unwrap().entry(d.id.clone()).or_default() += 1;
                        per_consumer.lock().unwrap()[index] += 1;
                        d.ack().await.during("ack")?;
                    }
                    Ok(None) => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let seen = seen.lock().unwrap();
    let dupes: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(5).collect();
    ensure!(dupes.is_empty(), "delivered more than once: {dupes:?}");
    ensure!(
        seen.len() == MESSAGES && seen.keys().all(|id| sent.contains(id)),
        "{} distinct deliveries of {MESSAGES} sent",
        seen.len()
    );
    let spread = per_consumer.lock().unwrap().clone();
    ensure!(
        spread.iter().filter(|n| **n > 0).count() >= 2,
        "one consumer took everything: {spread:?}"
    );
    Ok(())
}

async fn fan_out_gives_every_subscription_everything(ferry: &Ferry, _: &Target) -> CheckResult {
    let topic = fresh_name("fan-out");
    ferry
        .declare_topic(&TopicDecl::new(&topic))
        .await
        .during("declare topic")?;
    let mut subscriptions = Vec::new();
    for i in 0..3 {
        let decl = SubscriptionDecl::new(&topic, format!("{topic}-s{i}")).delivery(quick_policy());
        ferry
            .declare_subscription(&decl)
            .await
            .during("declare subscription")?;
        subscriptions.push(Source::subscription(&topic, decl.name));
    }
    let publisher = ferry.publisher(Destination::topic(&topic));
    let batch = (0..100).map(|i| Message::new(format!("e{i}"))).collect();
    let ids = publisher.send_batch(batch).await.during("publish")?;
    for source in subscriptions {
        let mut c = consumer(ferry, source.clone()).await?;
        let mut got = Vec::new();
        while got.len() < ids.len() {
            let d = next(&mut c, WAIT).await?;
            got.push(d.id.clone());
            d.ack().await.during("ack")?;
        }
        nothing_more(&mut c, QUIET).await?;
        got.sort();
        let mut want = ids.clone();
        want.sort();
        ensure!(got == want, "{source} got a different set of messages");
        c.close().await.during("close")?;
        ferry.delete(&source).await.during("delete subscription")?;
    }
    ferry.delete_topic(&topic).await.during("delete topic")?;
    Ok(())
}

async fn nack_redelivers_with_a_rising_attempt(ferry: &Ferry, _: &Target) -> CheckResult {
    let name = queue(ferry, "nack", |_| {}).await?;
    let id = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("again"))
        .await
        .during("publish")?;
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    for attempt in 1..=3 {
        let d = next(&mut c, WAIT).await?;
        ensure!(d.id == id, "a different message came back");
        ensure!(
            d.attempt == attempt,
            "attempt {} where {attempt} was due",
            d.attempt
        );
        if attempt < 3 {
            d.nack(Some(Duration::ZERO)).await.during("nack")?;
        } else {
            d.ack().await.during("ack")?;
        }
    }
    nothing_more(&mut c, QUIET).await
}

async fn max_deliveries_dead_letters_with_metadata(ferry: &Ferry, _: &Target) -> CheckResult {
    let name = queue(ferry, "max-deliveries", |q| q.delivery.max_deliveries = 3).await?;
    let id = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("poison").with_header("x-order", "42"))
        .await
        .during("publish")?;
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    for attempt in 1..=3u32 {
        let d = next(&mut c, WAIT).await?;
        ensure!(
            d.attempt == attempt,
            "attempt {} where {attempt} was due",
            d.attempt
        );
        d.nack_with_error(None, &format!("boom {attempt}"))
            .await
            .during("nack")?;
    }
    nothing_more(&mut c, QUIET).await?;
    let mut dlq = consumer(ferry, Source::queue(&name).dead_letters()).await?;
    let d = next(&mut dlq, WAIT).await?;
    ensure!(d.id == id, "the dead letter has id {} not {id}", d.id);
    ensure!(d.payload == "poison", "the dead letter's payload changed");
    ensure!(
        d.header("x-order") == Some("42"),
        "headers lost: {:?}",
        d.headers
    );
    let info = d
        .dead_letter
        .clone()
        .ok_or("a dead letter without metadata")?;
    ensure!(
        info.reason == reason::MAX_DELIVERIES,
        "reason {}",
        info.reason
    );
    ensure!(
        info.deliveries == 3,
        "{} deliveries recorded",
        info.deliveries
    );
    ensure!(info.origin == name, "origin {} not {name}", info.origin);
    ensure!(
        info.last_error.as_deref() == Some("boom 3"),
        "last error {:?}",
        info.last_error
    );
    d.ack().await.during("ack the dead letter")?;
    nothing_more(&mut dlq, QUIET).await
}

async fn reject_dead_letters_at_once(ferry: &Ferry, _: &Target) -> CheckResult {
    let name = queue(ferry, "reject", |_| {}).await?;
    let id = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new("malformed"))
        .await
        .during("publish")?;
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    next(&mut c, WAIT)
        .await?
        .reject("cannot parse")
        .await
        .during("reject")?;
    nothing_more(&mut c, QUIET).await?;
    let mut dlq = consumer(ferry, Source::queue(&name).dead_letters()).await?;
    let d = next(&mut dlq, WAIT).await?;
    ensure!(d.id == id, "the dead letter has id {} not {id}", d.id);
    let info = d
        .dead_letter
        .clone()
        .ok_or("a dead letter without metadata")?;
    ensure!(info.reason == reason::REJECTED, "reason {}", info.reason);
    ensure!(
        info.deliveries == 1,
        "{} deliveries recorded",
        info.deliveries
    );
    ensure!(
        info.last_error.as_deref() == Some("cannot parse"),
        "last error {:?}",
        info.last_error
    );
    d.ack().await.during("ack the dead letter")
}

async fn an_expired_lease_goes_to_another_consumer(ferry: &Ferry, _: &Target) -> CheckResult {
    let OneLeased {
        id,
        first: _first,
        mut second,
        held,
    } = one_leased(ferry, "lease", "slow").await?;
    let taken_at = Instant::now();
    // The first consumer hangs: it neither settles nor extends.
    let d = next(&mut second, WAIT).await?;
    let waited = taken_at.elapsed();
    ensure!(d.id == id, "another message came back");
    ensure!(
        d.attempt == 2,
        "attempt {} after an expired lease",
        d.attempt
    );
    ensure!(
        waited >= Duration::from_millis(900),
        "redelivered after {waited:?}, before the 1 s lease ended"
    );
    d.ack().await.during("ack")?;
    match held.ack().await {
        Ok(()) | Err(Error::NotHeld { .. }) => {}
        Err(e) => return Err(format!("a late ack of an expired lease answered {e}")),
    }
    nothing_more(&mut second, QUIET).await
}

async fn extend_keeps_a_delivery_hidden(ferry: &Ferry, _: &Target) -> CheckResult {
    let OneLeased {
        first: _first,
        mut second,
        held,
        ..
    } = one_leased(ferry, "extend", "long job").await?;
    for _ in 0..4 {
        held.extend(Duration::from_secs(2)).await.during("extend")?;
        nothing_more(&mut second, Duration::from_millis(600)).await?;
    }
    held.ack().await.during("ack after extending")?;
    nothing_more(&mut second, Duration::from_millis(1500)).await
}

async fn a_delay_is_not_delivered_early(ferry: &Ferry, _: &Target) -> CheckResult {
    let name = queue(ferry, "delay", |_| {}).await?;
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    // The consumer takes a message first, so it is known to be receiving before the delay
    // starts: a consumer that only starts (a Kafka group's join, say) after the delay has
    // run out would find both messages due, and their order would say nothing.
    let ready = publisher
        .send(Message::new("ready"))
        .await
        .during("publish")?;
    let d = next(&mut c, WAIT).await?;
    ensure!(d.id == ready, "another message came");
    d.ack().await.during("ack")?;
    let start = Instant::now();
    let delayed = publisher
        .send(Message::new("later").with_delay(Duration::from_secs(2)))
        .await
        .during("publish delayed")?;
    let now = publisher
        .send(Message::new("now"))
        .await
        .during("publish")?;
    let d = next(&mut c, WAIT).await?;
    ensure!(d.id == now, "the delayed message came first");
    d.ack().await.during("ack")?;
    let d = next(&mut c, WAIT).await?;
    let waited = start.elapsed();
    ensure!(d.id == delayed, "another message came");
    ensure!(
        waited >= Duration::from_secs(2),
        "a 2 s delay was delivered after {waited:?}"
    );
    d.ack().await.during("ack")
}

async fn per_key_order_holds_under_concurrency(ferry: &Ferry, _: &Target) -> CheckResult {
    const KEYS: usize = 8;
    const PER_KEY: usize = 40;
    let name = queue(ferry, "ordering", |q| {
        q.delivery.ordering = KeyOrdering::PerKey
    })
    .await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    let mut batch = Vec::new();
    for n in 0..PER_KEY {
        for key in 0..KEYS {
            batch.push(Message::new(n.to_string()).with_key(format!("k{key}")));
        }
    }
    publisher.send_batch(batch).await.during("publish")?;
    let order: Arc<Mutex<BTreeMap<String, Vec<usize>>>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let mut c = consumer_with(ferry, Source::queue(&name), 4).await?;
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let total: usize = order.lock().unwrap().values().map(Vec::len).sum();
                if total >= KEYS * PER_KEY {
                    return c.close().await.during("close");
                }
                let Some(d) = c
                    .next_within(Duration::from_millis(200))
                    .await
                    .during("receive")?
                else {
                    continue;
                };
                let key =
                    String::from_utf8_lossy(d.key.as_deref().unwrap_or_default()).into_owned();
                let n: usize = std::str::from_utf8(&d.payload)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or("bad payload")?;
                // A handler that takes a moment, so keys overlap across consumers.
                tokio::time::sleep(Duration::from_millis(fastrand::u64(0..3))).await;
                order.lock().unwrap().entry(key).or_default().push(n);
                d.ack().await.during("ack")?;
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    for (key, seen) in order.lock().unwrap().iter() {
        let want: Vec<usize> = (0..PER_KEY).collect();
        ensure!(*seen == want, "key {key} was handled in the order {seen:?}");
    }
    Ok(())
}

async fn duplicates_within_the_window_are_stored_once(ferry: &Ferry, _: &Target) -> CheckResult {
    let name = queue(ferry, "dedup", |q| {
        q.dedup_window = Some(Duration::from_secs(60))
    })
    .await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    for payload in ["first", "retry of first"] {
        publisher
            .send(Message::new(payload).with_dedup_id("order-7-paid"))
            .await
            .during("publish")?;
    }
    publisher
        .send(Message::new("other").with_dedup_id("order-8-paid"))
        .await
        .during("publish")?;
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    let mut got = Vec::new();
    for _ in 0..2 {
        let d = next(&mut c, WAIT).await?;
        got.push(String::from_utf8_lossy(&d.payload).into_owned());
        d.ack().await.during("ack")?;
    }
    got.sort();
    ensure!(got == ["first", "other"], "got {got:?}");
    nothing_more(&mut c, QUIET).await
}

async fn ten_thousand_survive_a_consumer_restart(ferry: &Ferry, _: &Target) -> CheckResult {
    const MESSAGES: usize = 10_000;
    let name = queue(ferry, "restart-consumer", |_| {}).await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    let mut sent = HashSet::new();
    for chunk in 0..MESSAGES / 500 {
        let batch = (0..500)
            .map(|i| Message::new(format!("{}", chunk * 500 + i)))
            .collect();
        sent.extend(publisher.send_batch(batch).await.during("publish")?);
    }
    let mut acked = HashSet::new();
    let mut c = consumer_with(ferry, Source::queue(&name), 64).await?;
    ack_until(&mut c, &mut acked, MESSAGES / 2).await?;
    // The consumer goes away with deliveries fetched ahead and unsettled.
    c.close().await.during("close")?;
    let mut c = consumer_with(ferry, Source::queue(&name), 64).await?;
    ack_until(&mut c, &mut acked, MESSAGES).await?;
    nothing_more(&mut c, QUIET).await?;
    ensure!(
        acked == sent,
        "the acked set differs from the published one"
    );
    Ok(())
}

/// Takes deliveries until `acked` holds `total` ids, acking up to 32 at once as a handler
/// pool would (so engines that commit acks in groups can), and fails if an acked message
/// comes back. Returns once every ack is done.
async fn ack_until(
    c: &mut ferry::Consumer,
    acked: &mut HashSet<String>,
    total: usize,
) -> CheckResult {
    let mut acks = tokio::task::JoinSet::new();
    while acked.len() < total {
        let d = next(c, WAIT).await?;
        ensure!(
            acked.insert(d.id.clone()),
            "{} came back after its ack",
            d.id
        );
        acks.spawn(d.ack());
        while acks.len() >= 32 {
            acks.join_next()
                .await
                .expect("an ack in flight")
                .map_err(|e| e.to_string())?
                .during("ack")?;
        }
    }
    while let Some(done) = acks.join_next().await {
        done.map_err(|e| e.to_string())?.during("ack")?;
    }
    Ok(())
}

async fn close_is_idempotent_and_safe_while_a_handler_runs(
    ferry: &Ferry,
    _: &Target,
) -> CheckResult {
    let name = queue(ferry, "close", |_| {}).await?;
    let publisher = ferry.publisher(Destination::queue(&name));
    let batch = (0..20).map(|i| Message::new(format!("{i}"))).collect();
    let sent: HashSet<String> = publisher
        .send_batch(batch)
        .await
        .during("publish")?
        .into_iter()
        .collect();
    let mut c = consumer_with(ferry, Source::queue(&name), 8).await?;
    let held = next(&mut c, WAIT).await?;
    let held_id = held.id.clone();
    let (started, mut finish) = (
        Arc::new(tokio::sync::Notify::new()),
        tokio::sync::oneshot::channel::<()>(),
    );
    let handler = {
        let started = started.clone();
        tokio::spawn(async move {
            started.notify_one();
            let _ = (&mut finish.1).await;
            held.ack().await
        })
    };
    started.notified().await;
    c.close().await.during("close while a handler runs")?;
    c.close().await.during("close again")?;
    match c.next_within(Duration::from_millis(10)).await {
        Err(Error::Closed) => {}
        other => return Err(format!("a closed consumer answered {other:?}")),
    }
    let _ = finish.0.send(());
    handler
        .await
        .map_err(|e| e.to_string())?
        .during("ack by the handler after close")?;
    // Everything else — including what the closed consumer had fetched ahead — is still
    // there for the next consumer.
    let mut c = consumer(ferry, Source::queue(&name)).await?;
    let mut rest = HashSet::new();
    while rest.len() < sent.len() - 1 {
        let d = next(&mut c, WAIT).await?;
        ensure!(d.id != held_id, "the acked message came back");
        rest.insert(d.id.clone());
        d.ack().await.during("ack")?;
    }
    nothing_more(&mut c, QUIET).await
}
