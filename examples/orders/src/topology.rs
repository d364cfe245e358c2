//! Where the shop's messages go: one topic of order events with a subscription per
//! listening service, and a command queue per saga participant — names unique to a run, so
//! runs on a shared engine never see each other's messages.

use std::time::Duration;

use ferry::inbox::DedupWindow;
use ferry::{
    Backoff, DeliveryPolicy, Feature, Ferry, QueueDecl, Source, SubscriptionDecl, TopicDecl,
};

/// Every name one run uses.
#[derive(Debug, Clone)]
pub struct Names {
    pub run: String,
    /// `OrderPlaced`, `OrderConfirmed`, `OrderCancelled`, published by the outbox relay.
    pub events: String,
    /// Subscriptions of `events`.
    pub saga_starter: String,
    pub email: String,
    pub analytics: String,
    /// Command queues of the saga's participants, and its reply queue.
    pub inventory: String,
    pub payment: String,
    pub order_commands: String,
    pub saga_replies: String,
}

impl Names {
    pub fn new(run: &str) -> Names {
        let name = |what: &str| format!("shop-{what}-{run}");
        Names {
            run: run.to_owned(),
            events: name("events"),
            saga_starter: name("saga-starter"),
            email: name("email"),
            analytics: name("analytics"),
            inventory: name("inventory"),
            payment: name("payment"),
            order_commands: name("order-commands"),
            saga_replies: name("saga-replies"),
        }
    }

    pub fn subscriptions(&self) -> [&str; 3] {
        [&self.saga_starter, &self.email, &self.analytics]
    }

    pub fn queues(&self) -> [&str; 4] {
        [
            &self.inventory,
            &self.payment,
            &self.order_commands,
            &self.saga_replies,
        ]
    }

    /// Every source a consumer reads, for dead letters and cleanup.
    pub fn sources(&self) -> Vec<Source> {
        self.subscriptions()
            .iter()
            .map(|s| Source::subscription(&self.events, *s))
            .chain(self.queues().iter().map(|q| Source::queue(*q)))
            .collect()
    }
}

/// The seeds' retry rule for the shop: a few quick retries with backoff and jitter, then the
/// dead-letter queue; a permanent failure goes there at once (the handlers reject it).
pub fn policy() -> DeliveryPolicy {
    DeliveryPolicy {
        max_deliveries: 4,
        backoff: Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
            ..Backoff::default()
        },
        lease: Duration::from_secs(15),
        ..DeliveryPolicy::default()
    }
}

pub async fn declare(ferry: &Ferry, names: &Names) -> ferry::Result<()> {
    ferry.declare_topic(&TopicDecl::new(&names.events)).await?;
    for subscription in names.subscriptions() {
        ferry
            .declare_subscription(
                &SubscriptionDecl::new(&names.events, subscription).delivery(policy()),
            )
            .await?;
    }
    // Saga commands and replies carry dedup ids where the transport keeps a dedup window,
    // so a command re-sent after a restart is stored once; the window follows the seeds'
    // rule (twice the longest redelivery span of the policy).
    let dedups = ferry.capabilities().supports(Feature::Deduplication);
    for queue in names.queues() {
        let mut decl = QueueDecl::new(queue).delivery(policy());
        if dedups {
            decl = decl.dedup_window(DedupWindow::for_policy(&policy()).duration());
        }
        ferry.declare_queue(&decl).await?;
    }
    Ok(())
}

/// Deletes what `declare` made, dead-letter queues included where the transport keeps them
/// apart (the Ferry broker does; other engines remove them with their source).
pub async fn delete(ferry: &Ferry, names: &Names) -> ferry::Result<()> {
    for source in names.sources() {
        ferry.delete(&source).await?;
        match ferry.delete(&source.dead_letters()).await {
            Ok(()) | Err(ferry::Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    ferry.delete_topic(&names.events).await
}
