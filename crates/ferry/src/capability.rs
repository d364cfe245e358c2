//! What each transport can do: natively, emulated by the SDK, or not at all. A declaration
//! or a message that needs something a transport cannot do is refused with
//! [`Error::Unsupported`] before anything changes — never silently ignored.
//!
//! `docs/transports.md` is generated from these tables ([`markdown`]); a test fails when
//! the file drifts from the code.

use std::fmt;

use crate::error::{Error, Result};
use crate::message::Message;
use crate::spec::{DeliveryPolicy, KeyOrdering, QueueDecl, SubscriptionDecl};

/// One guarantee or feature a transport may offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    /// Each message to exactly one of several consumers.
    CompetingConsumers,
    /// Topics whose every subscription gets every message.
    FanOut,
    /// `nack` makes a message come back, its attempt count rising.
    Redelivery,
    /// `nack(delay)` and the retry backoff wait before the message comes back.
    RetryDelay,
    /// After `max_deliveries` a message moves to a dead-letter queue, with its metadata.
    DeadLetters,
    /// A delivery not settled within its lease comes back for another consumer.
    LeaseExpiry,
    /// `extend` keeps a delivery hidden for longer.
    LeaseExtension,
    /// Delayed publishes are not delivered early.
    Delays,
    /// Higher-priority messages are delivered first.
    Priorities,
    /// Per-key order with one message per key in flight, keys in parallel.
    OrderingKeys,
    /// Publishes repeating a dedup id within a window are stored once.
    Deduplication,
    /// Messages expire after their TTL.
    Ttl,
    /// A queue's length is bounded; publishes beyond it are refused.
    MaxLength,
    /// Settling a delivery whose lease ran out and whose message another delivery settled
    /// is refused with [`Error::NotHeld`], so a slow consumer learns its work was redone.
    StaleSettles,
    /// Queues bound to the process that declared them: deleted when it goes (its
    /// connection or stream ends) or after an idle timeout, so a crash leaves none behind.
    TemporaryQueues,
}

impl Feature {
    pub const ALL: [Feature; 15] = [
        Feature::CompetingConsumers,
        Feature::FanOut,
        Feature::Redelivery,
        Feature::RetryDelay,
        Feature::DeadLetters,
        Feature::LeaseExpiry,
        Feature::LeaseExtension,
        Feature::Delays,
        Feature::Priorities,
        Feature::OrderingKeys,
        Feature::Deduplication,
        Feature::Ttl,
        Feature::MaxLength,
        Feature::StaleSettles,
        Feature::TemporaryQueues,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Feature::CompetingConsumers => "competing consumers",
            Feature::FanOut => "fan-out (topics and subscriptions)",
            Feature::Redelivery => "redelivery after nack",
            Feature::RetryDelay => "retry delay and backoff",
            Feature::DeadLetters => "dead-letter queues",
            Feature::LeaseExpiry => "lease expiry",
            Feature::LeaseExtension => "lease extension",
            Feature::Delays => "delayed delivery",
            Feature::Priorities => "priorities",
            Feature::OrderingKeys => "ordering keys",
            Feature::Deduplication => "deduplication",
            Feature::Ttl => "message TTL",
            Feature::MaxLength => "max queue length",
            Feature::StaleSettles => "stale settles refused",
            Feature::TemporaryQueues => "temporary queues",
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a transport offers one feature; the text says how, or why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// The engine does it.
    Native(&'static str),
    /// The SDK does it on top of the engine.
    Emulated(&'static str),
    /// Refused with [`Error::Unsupported`].
    No(&'static str),
}

impl Support {
    pub fn is_supported(self) -> bool {
        !matches!(self, Support::No(_))
    }
    fn label(self) -> &'static str {
        match self {
            Support::Native(_) => "native",
            Support::Emulated(_) => "emulated",
            Support::No(_) => "no",
        }
    }
    fn how(self) -> &'static str {
        match self {
            Support::Native(how) | Support::Emulated(how) | Support::No(how) => how,
        }
    }
}

/// A transport's capability table: one [`Support`] per [`Feature`].
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    pub transport: &'static str,
    /// Indexed in [`Feature::ALL`] order.
    pub table: [(Feature, Support); 15],
}

impl Capabilities {
    pub fn support(&self, feature: Feature) -> Support {
        self.table
            .iter()
            .find(|(f, _)| *f == feature)
            .map(|(_, s)| *s)
            .expect("every table lists every feature")
    }

    pub fn supports(&self, feature: Feature) -> bool {
        self.support(feature).is_supported()
    }

    /// `Ok` if `feature` is supported, else the `Unsupported` error naming it.
    pub fn require(&self, feature: Feature) -> Result<()> {
        match self.support(feature) {
            Support::No(why) => Err(Error::unsupported(self.transport, feature.name(), why)),
            _ => Ok(()),
        }
    }

    /// The features a delivery policy relies on.
    fn check_delivery(&self, delivery: &DeliveryPolicy) -> Result<()> {
        if delivery.max_deliveries > 1 {
            self.require(Feature::Redelivery)?;
            if !delivery.backoff.base.is_zero() {
                self.require(Feature::RetryDelay)?;
            }
        }
        if delivery.dead_letter {
            self.require(Feature::DeadLetters)?;
        }
        if delivery.default_ttl.is_some() {
            self.require(Feature::Ttl)?;
        }
        // `max_delay` only bounds what a publish may ask for, so it needs nothing here; a
        // delayed publish is refused by `check_message` where delays are unsupported.
        if delivery.priority_levels > 1 {
            self.require(Feature::Priorities)?;
        }
        if delivery.ordering == KeyOrdering::PerKey {
            self.require(Feature::OrderingKeys)?;
        }
        Ok(())
    }

    /// Refuses a queue declaration that promises what this transport cannot keep.
    pub fn check_queue(&self, decl: &QueueDecl) -> Result<()> {
        decl.validate()?;
        self.check_delivery(&decl.delivery)?;
        if decl.dedup_window.is_some() {
            self.require(Feature::Deduplication)?;
        }
        if decl.max_length.is_some() {
            self.require(Feature::MaxLength)?;
        }
        Ok(())
    }

    pub fn check_subscription(&self, decl: &SubscriptionDecl) -> Result<()> {
        decl.validate()?;
        self.require(Feature::FanOut)?;
        self.check_delivery(&decl.delivery)
    }

    /// Refuses a message whose fields this transport would drop.
    pub fn check_message(&self, message: &Message) -> Result<()> {
        if message.delay.is_some_and(|d| !d.is_zero()) {
            self.require(Feature::Delays)?;
        }
        if message.priority > 0 {
            self.require(Feature::Priorities)?;
        }
        if message.ttl.is_some() {
            self.require(Feature::Ttl)?;
        }
        if message.dedup_id.is_some() {
            self.require(Feature::Deduplication)?;
        }
        Ok(())
    }
}

/// The capability tables of every transport this SDK knows, compiled in or not.
pub fn all() -> Vec<Capabilities> {
    vec![
        crate::transport::embedded_capabilities(),
        crate::transport::server::capabilities(),
        crate::transport::nats_capabilities(),
        crate::transport::redis_capabilities(),
        crate::transport::postgres_capabilities(),
        crate::transport::rabbitmq_capabilities(),
        crate::transport::sqs_capabilities(),
        crate::transport::kafka_capabilities(),
        // Other transports add their tables here.
    ]
}

/// `docs/transports.md`: one table of features × transports, then how each is done.
pub fn markdown(tables: &[Capabilities]) -> String {
    let mut out = String::new();
    out.push_str("# Transports and what they guarantee\n\n");
    out.push_str(
        "Generated from the SDK's capability tables (`crates/ferry/src/transport/*/capabilities.rs`);\n\
         `cargo test -p ferry --test transports_doc` fails when this file drifts from them, and\n\
         `FERRY_BLESS=1 cargo test -p ferry --test transports_doc` rewrites it.\n\n\
         *native*: the engine does it; *emulated*: the SDK does it on top of the engine; *no*:\n\
         declaring or publishing something that needs it is an `Unsupported` error, and the\n\
         conformance suite skips its test for that transport, saying so.\n\n",
    );
    out.push_str("| Feature |");
    for t in tables {
        out.push_str(&format!(" {} |", t.transport));
    }
    out.push_str("\n|---|");
    for _ in tables {
        out.push_str("---|");
    }
    out.push('\n');
    for feature in Feature::ALL {
        out.push_str(&format!("| {feature} |"));
        for t in tables {
            out.push_str(&format!(" {} |", t.support(feature).label()));
        }
        out.push('\n');
    }
    for t in tables {
        out.push_str(&format!("\n## {}\n\n", t.transport));
        for feature in Feature::ALL {
            let support = t.support(feature);
            out.push_str(&format!(
                "- **{feature}** ({}): {}\n",
                support.label(),
                support.how()
            ));
        }
    }
    out.push_str(SAME_EVERYWHERE);
    out.push_str(SETTLING_IN_BULK);
    out
}

/// Rules the SDK keeps the same on every transport, whatever the engine would do alone.
const SAME_EVERYWHERE: &str = "
## The same on every transport

- **A dedup id needs a dedup window.** Publishing a message with a dedup id to a queue
  declared without a dedup window is `Invalid` (`dedup id of message …: queue `q` was
  declared without a dedup window, so a dedup id would do nothing there; …`) and stores
  nothing of the batch: the publisher asks the queue's window before the batch is sent,
  once per publisher when the queue has one. Where the transport has no deduplication at
  all, any dedup id is `Unsupported`, as above. A dedup id published to a topic is passed
  on as the engine does: NATS deduplicates a topic's publishes within its stream's window
  (two minutes); the Ferry broker keeps it on the message and stores each publish; Redis,
  PostgreSQL and SQS refuse it (`Invalid`), as their subscriptions have no window (an SNS
  standard topic does not deduplicate).
- **A declaration with other settings** is a `Conflict` naming each field that differs with
  both values, in the SDK's names: ``queue `orders` conflicts with what exists:
  max_deliveries: declared 7, existing 3``; a subscription declared again on another topic
  says ``topic: declared `b`, existing `a```. A subscription's name names one subscription,
  whatever its topic.
- **A missing queue or topic** is ``NotFound`` saying ``queue `name` does not exist``.
";

/// How each engine takes acks that arrive together: what a busy consumer's settlements
/// cost, which the feature table does not show.
const SETTLING_IN_BULK: &str = "
## Settling in bulk

A consumer's acks that arrive while one is on its way go together in the next call, with no
timer (a lone ack is sent at once), and each still gets its own answer: a stale one is
refused on its own.

- **embedded**: one journal record and fsync for the batch; **ferry server**: the acks a
  consumer's settle stream carries together are one such batch on the server.
- **redis**: one settle script call for every settlement of the batch (acks, nacks, rejects,
  extensions), each checked against the pending entries list, then one XACK (and one XDEL)
  for all it is done with.
- **postgres**: one `DELETE … USING unnest($seqs, $tokens)` per batch of acks, each row
  guarded by its lease token.
- **rabbitmq**: per subscription session's channel, one `basic.ack` with `multiple` up to
  the lowest delivery tag still held, being settled otherwise or received and not yet
  handed out; acks above it go one by one, pipelined on the channel.
- **sqs**: one DeleteMessageBatch (ten at most) for the acks of a connection's consumers of
  one queue that arrive together; nacks and extensions are one ChangeMessageVisibility each.
- **kafka**: one OffsetCommit, per consumer, for the acks that arrive while one is on its
  way, carrying each partition's watermark: the lowest offset still unsettled, so an ack
  above an unsettled delivery is committed once that one is settled.
- **NATS JetStream**: one ack message per delivery: JetStream has no ack of many messages
  for a pull consumer.
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_lists_every_feature_in_order() {
        for caps in all() {
            for (i, feature) in Feature::ALL.iter().enumerate() {
                assert_eq!(caps.table[i].0, *feature, "{}", caps.transport);
            }
        }
    }

    #[test]
    fn declarations_needing_a_missing_feature_are_unsupported() {
        let mut caps = crate::transport::embedded_capabilities();
        caps.table[8] = (Feature::Priorities, Support::No("not on this engine"));
        let mut decl = QueueDecl::new("q");
        decl.delivery.priority_levels = 3;
        let err = caps.check_queue(&decl).unwrap_err();
        assert!(
            matches!(&err, Error::Unsupported { feature, .. } if feature == "priorities"),
            "{err}"
        );
        decl.delivery.priority_levels = 1;
        caps.check_queue(&decl).unwrap();
        assert!(
            caps.check_message(&Message::new("x").with_priority(2))
                .is_err()
        );
        caps.check_message(&Message::new("x")).unwrap();
    }
}
