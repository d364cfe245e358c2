//! The order flow: a checkout publishes `OrderPlaced` events to the `orders` queue; a pool of
//! order workers (competing consumers) validates each order — a malformed one is rejected
//! into the dead-letter queue, a payment glitch is retried with backoff — and publishes
//! `OrderAccepted` to the `order-events` topic; `billing` and `shipping` each get every
//! accepted order through their own subscription.
//!
//! The same program runs on every transport; only the URL changes:
//!
//! ```text
//! cargo run -p order-flow -- embedded:./order-flow-data
//! cargo run -p order-flow -- ferry://127.0.0.1:7070
//! cargo run -p order-flow -- nats://127.0.0.1:4222
//! cargo run -p order-flow -- redis://127.0.0.1:6379/0
//! cargo run -p order-flow -- postgres://postgres@127.0.0.1:5432/test
//! cargo run -p order-flow -- amqp://guest:guest@127.0.0.1:5672/%2f
//! ```
//!
//! It exits 0 when every order ended where it should, and prints where each went.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use ferry::{
    Backoff, ConsumerOptions, DeliveryPolicy, Destination, Envelope, Ferry, QueueDecl, Source,
    SubscriptionDecl, TopicDecl,
};
use serde::{Deserialize, Serialize};

const ORDERS: usize = 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct OrderPlaced {
    order: u64,
    customer: String,
    total_cents: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct OrderAccepted {
    order: u64,
    total_cents: i64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "embedded:./order-flow-data".into());
    let ferry = Ferry::connect(&url)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    println!("order-flow on {} ({url})", ferry.capabilities().transport);

    // Names unique to this run, so runs never see each other's messages.
    let run = ferry::message::new_id().to_lowercase();
    let orders = format!("orders-{run}");
    let events = format!("order-events-{run}");
    let subscribers = [format!("billing-{run}"), format!("shipping-{run}")];

    let policy = DeliveryPolicy {
        max_deliveries: 3,
        backoff: Backoff {
            base: Duration::from_millis(200),
            cap: Duration::from_secs(2),
            ..Backoff::default()
        },
        ..DeliveryPolicy::default()
    };
    ferry
        .declare_queue(&QueueDecl::new(&orders).delivery(policy.clone()))
        .await?;
    ferry.declare_topic(&TopicDecl::new(&events)).await?;
    for name in &subscribers {
        ferry
            .declare_subscription(&SubscriptionDecl::new(&events, name).delivery(policy.clone()))
            .await?;
    }

    // The checkout: every seventh order is malformed (a negative total).
    let checkout = ferry.publisher(Destination::queue(&orders));
    let mut placed = Vec::new();
    for order in 1..=ORDERS as u64 {
        let event = Envelope::new(
            "OrderPlaced",
            OrderPlaced {
                order,
                customer: format!("customer-{}", order % 5),
                total_cents: if order.is_multiple_of(7) {
                    -1
                } else {
                    1000 + order as i64
                },
            },
        )
        .source("checkout");
        checkout.send_event(&event).await?;
        placed.push(order);
    }
    let malformed: HashSet<u64> = placed
        .iter()
        .copied()
        .filter(|o| o.is_multiple_of(7))
        .collect();
    println!("checkout: placed {} orders", placed.len());

    // Three order workers compete for the orders until all good ones are accepted.
    let expected = ORDERS - malformed.len();
    let accepted_total = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for worker in 0..3 {
        let mut consumer = ferry
            .consumer(Source::queue(&orders), ConsumerOptions::default())
            .await?;
        let accepted = ferry.publisher(Destination::topic(&events));
        let accepted_total = accepted_total.clone();
        workers.push(tokio::spawn(async move {
            let mut handled = Vec::new();
            while accepted_total.load(Ordering::SeqCst) < expected {
                let Some(delivery) = consumer.next_within(Duration::from_millis(200)).await? else {
                    continue;
                };
                let placed: Envelope<OrderPlaced> = delivery.envelope()?;
                let order = placed.payload;
                if order.total_cents < 0 {
                    delivery.reject("total must not be negative").await?;
                    continue;
                }
                // A payment glitch on the first attempt of every fourth order: retried.
                if order.order.is_multiple_of(4) && delivery.attempt == 1 {
                    delivery
                        .nack_with_error(None, "payment gateway timed out")
                        .await?;
                    continue;
                }
                let event = Envelope::new(
                    "OrderAccepted",
                    OrderAccepted {
                        order: order.order,
                        total_cents: order.total_cents,
                    },
                )
                .source("order-worker")
                .correlation_id(placed.id);
                accepted.send_event(&event).await?;
                delivery.ack().await?;
                handled.push(order.order);
                accepted_total.fetch_add(1, Ordering::SeqCst);
            }
            consumer.close().await?;
            anyhow::Ok((worker, handled))
        }));
    }
    let mut accepted = BTreeMap::new();
    for worker in workers {
        let (worker, handled) = worker.await??;
        println!("order worker {worker}: accepted {} orders", handled.len());
        for order in handled {
            if accepted.insert(order, worker).is_some() {
                bail!("order {order} was accepted twice");
            }
        }
    }
    let want: Vec<u64> = placed
        .iter()
        .copied()
        .filter(|o| !malformed.contains(o))
        .collect();
    ensure!(
        accepted.keys().copied().collect::<Vec<_>>() == want,
        "accepted {:?}, expected {want:?}",
        accepted.keys()
    );

    // Billing and shipping each see every accepted order.
    for name in &subscribers {
        let mut consumer = ferry
            .consumer(
                Source::subscription(&events, name),
                ConsumerOptions::default(),
            )
            .await?;
        let mut seen = Vec::new();
        while seen.len() < want.len() {
            let Some(delivery) = consumer.next_within(Duration::from_secs(10)).await? else {
                bail!(
                    "{name} got {} of {} accepted orders",
                    seen.len(),
                    want.len()
                );
            };
            let event: Envelope<OrderAccepted> = delivery.envelope()?;
            seen.push(event.payload.order);
            delivery.ack().await?;
        }
        consumer.close().await?;
        seen.sort();
        ensure!(seen == want, "{name} saw {seen:?}");
        println!("{}: got all {} accepted orders", name, seen.len());
    }

    // The malformed orders wait in the dead-letter queue, saying why.
    let mut dead = ferry
        .consumer(
            Source::queue(&orders).dead_letters(),
            ConsumerOptions::default(),
        )
        .await?;
    let mut dead_orders = HashSet::new();
    while dead_orders.len() < malformed.len() {
        let Some(delivery) = dead.next_within(Duration::from_secs(10)).await? else {
            bail!(
                "{} of {} malformed orders dead-lettered",
                dead_orders.len(),
                malformed.len()
            );
        };
        let info = delivery
            .dead_letter
            .clone()
            .context("dead letter metadata")?;
        let placed: Envelope<OrderPlaced> = delivery.envelope()?;
        println!(
            "dead letter: order {} ({}, after {} deliveries: {})",
            placed.payload.order,
            info.reason,
            info.deliveries,
            info.last_error.as_deref().unwrap_or("-")
        );
        dead_orders.insert(placed.payload.order);
        delivery.ack().await?;
    }
    dead.close().await?;
    ensure!(dead_orders == malformed, "dead-lettered {dead_orders:?}");

    for name in &subscribers {
        delete_with_dead_letters(&ferry, Source::subscription(&events, name)).await?;
    }
    ferry.delete_topic(&events).await?;
    delete_with_dead_letters(&ferry, Source::queue(&orders)).await?;
    ferry.close().await?;
    println!(
        "order-flow: {} accepted, {} dead-lettered — every order where it belongs",
        want.len(),
        malformed.len()
    );
    Ok(())
}

/// Deletes a source, then its dead-letter queue where the transport keeps that apart (the
/// Ferry broker does; other engines remove it with the source).
async fn delete_with_dead_letters(ferry: &Ferry, source: Source) -> anyhow::Result<()> {
    ferry.delete(&source).await?;
    match ferry.delete(&source.dead_letters()).await {
        Ok(()) | Err(ferry::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
