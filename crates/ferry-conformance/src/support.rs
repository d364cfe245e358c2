//! What the checks share: fresh names, a default quick delivery policy, and helpers to take
//! deliveries with a deadline.

use std::time::Duration;

use ferry::{
    Backoff, Consumer, ConsumerOptions, Delivery, DeliveryPolicy, Destination, Ferry, Message,
    QueueDecl, Source,
};

pub type CheckResult = Result<(), String>;

/// Fails the check with a formatted reason unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err(format!($($why)+));
        }
    };
}
pub(crate) use ensure;

/// `?` for SDK errors inside a check: says what was being done.
pub trait Context<T> {
    fn during(self, what: &str) -> Result<T, String>;
}

impl<T> Context<T> for ferry::Result<T> {
    fn during(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

/// A name no earlier run used: engines outside this process keep what earlier runs made.
/// `cf-<ms since the epoch>-...`: the engine tests remove what the suite made by that time.
pub fn fresh_name(check: &str) -> String {
    ferry_testkit::fresh("cf", check).replace('_', "-")
}

/// Delivery settings for checks: quick retries, a short lease, a dead-letter queue.
pub fn quick_policy() -> DeliveryPolicy {
    DeliveryPolicy {
        max_deliveries: 5,
        backoff: Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_millis(200),
            multiplier: 2.0,
            jitter: 0.0,
        },
        lease: Duration::from_secs(30),
        ..DeliveryPolicy::default()
    }
}

/// A queue with [`quick_policy`], declared with `edit` applied to it.
pub async fn queue(
    ferry: &Ferry,
    check: &str,
    edit: impl FnOnce(&mut QueueDecl),
) -> Result<String, String> {
    let mut decl = QueueDecl::new(fresh_name(check)).delivery(quick_policy());
    edit(&mut decl);
    ferry.declare_queue(&decl).await.during("declare queue")?;
    DECLARED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(decl.name.clone());
    Ok(decl.name)
}

/// Queues the checks declared, so a run removes them from engines that outlive it.
static DECLARED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Deletes every queue the checks declared, with its dead letters; what is already gone is
/// fine. Engines outside this process keep what a run leaves, run after run.
pub async fn delete_declared(ferry: &Ferry) {
    let names = std::mem::take(&mut *DECLARED.lock().unwrap_or_else(|e| e.into_inner()));
    for name in names {
        let _ = ferry.delete(&Source::queue(&name)).await;
        let _ = ferry.delete(&Source::queue(&name).dead_letters()).await;
    }
}

pub async fn consumer(ferry: &Ferry, source: Source) -> Result<Consumer, String> {
    consumer_with(ferry, source, 16).await
}

pub async fn consumer_with(
    ferry: &Ferry,
    source: Source,
    prefetch: usize,
) -> Result<Consumer, String> {
    let options = ConsumerOptions {
        prefetch,
        poll: Duration::from_millis(200),
        ..ConsumerOptions::default()
    };
    ferry
        .consumer(source, options)
        .await
        .during("open consumer")
}

/// The next delivery, failing the check if none comes within `within`.
pub async fn next(consumer: &mut Consumer, within: Duration) -> Result<Delivery, String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(format!(
                "no delivery from {} within {within:?}",
                consumer.source()
            ));
        }
        if let Some(d) = consumer
            .next_within(left.min(Duration::from_millis(500)))
            .await
            .during("receive")?
        {
            return Ok(d);
        }
    }
}

/// Fails the check if anything arrives within `window`.
pub async fn nothing_more(consumer: &mut Consumer, window: Duration) -> CheckResult {
    let deadline = tokio::time::Instant::now() + window;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        if let Some(d) = consumer.next_within(left).await.during("receive")? {
            return Err(format!(
                "unexpected delivery {} (attempt {}) from {}",
                d.id,
                d.attempt,
                consumer.source()
            ));
        }
    }
}

/// The start of every check about leases: a queue with a 1 s lease holding one message, two
/// consumers on it, and the first one's delivery of that message.
pub struct OneLeased {
    pub id: String,
    pub first: Consumer,
    pub second: Consumer,
    pub held: Delivery,
}

/// Declares the queue, publishes `payload`, and lets the first consumer take it.
pub async fn one_leased(ferry: &Ferry, check: &str, payload: &str) -> Result<OneLeased, String> {
    let name = queue(ferry, check, |q| q.delivery.lease = Duration::from_secs(1)).await?;
    let id = ferry
        .publisher(Destination::queue(&name))
        .send(Message::new(payload.to_owned()))
        .await
        .during("publish")?;
    let mut first = consumer(ferry, Source::queue(&name)).await?;
    let second = consumer(ferry, Source::queue(&name)).await?;
    let held = next(&mut first, Duration::from_secs(15)).await?;
    Ok(OneLeased {
        id,
        first,
        second,
        held,
    })
}
