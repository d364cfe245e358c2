//! Fan-out by reference: an SNS subscription of an SQS queue is a broker *link* that
//! attaches the queue to the topic (see `ferry_broker::link`), so a publish writes the
//! message once, to the topic, and each subscribed queue holds a small reference to it.
//!
//! **What the link holds.** Its filter is of kind [`KIND`], evaluated by [`SnsPolicies`]
//! — which `ferry serve` registers in the broker's config, so the broker filters on its
//! own during catch-up after a restart. The policy is a [`Policy`]: the subscription's
//! FilterPolicy and scope, whether delivery is raw, the queue's MaximumMessageSize and the
//! subscription ARN (the size a delivery would have depends on them). Its label is the
//! subscription id and the delivery shape ([`label`]). Nothing else is stored per
//! subscription: the SQS message a consumer receives — the JSON envelope or the raw body
//! with its attributes, with the topic message's MessageId, Timestamp and SequenceNumber —
//! is rendered when it is received ([`render`]), from the topic message and the link.
//!
//! **Keeping links in step** ([`reconcile`]): before a publish writes to the topic, each
//! subscription of the topic whose queue exists gets the link its attributes call for; a
//! changed FilterPolicy, scope, RawMessageDelivery, MaximumMessageSize or DelaySeconds (the
//! link delays what it delivers by the queue's DelaySeconds) detaches the old
//! link (what it delivered stays deliverable, rendered as it was) and attaches a new one,
//! named `sns-<subscription id>-<generation>`. Doing it before the write makes the
//! guarantee: once a publish is acknowledged, the references to it are recovered by the
//! broker's catch-up even if the server is killed before writing them.
//!
//! **Not by reference**: a subscription whose queue does not exist, and a delivery larger
//! than the queue's MaximumMessageSize, which the link's filter leaves out — both go to
//! the subscription's RedrivePolicy dead-letter queue as a copy (`delivery.rs`), as before.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use ferry_broker::link::{FilterEvaluator, FilterEvaluators, LinkFilter, LinkSpec, MessageFilter};
use ferry_broker::{ErrorKind, Headers, Message, Name, SubscriptionStart};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Call;
use super::errors::{SnsError, from_broker};
use super::filter::{self, Scope};
use super::publish::{self, Prepared};
use super::store::SubscriptionRecord;
use crate::message_attributes::{self, DEDUP_HEADER};

/// The filter kind of SNS subscriptions.
pub const KIND: &str = "sns-subscription";
/// The headers the broker adds to a message delivered through a link (`record.rs`).
const LINK_HEADER: &str = "ferry-link";
const LINK_TOPIC_HEADER: &str = "ferry-link-topic";
const LINK_LABEL_HEADER: &str = "ferry-link-label";

/// Registers the SNS subscription filter in `evaluators`: `ferry serve`, and anything
/// else that opens a broker an SNS front end has served, must do so before the open.
pub fn register(evaluators: &mut FilterEvaluators) {
    evaluators.register(KIND, Arc::new(SnsPolicies));
}

/// What a link's filter decides on (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Policy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    filter_policy: Option<String>,
    body_scope: bool,
    raw: bool,
    max_size: usize,
    subscription_arn: String,
}

impl Policy {
    fn of(record: &SubscriptionRecord, subscription_arn: String, max_size: usize) -> Policy {
        let attribute = |name: &str| record.attributes.get(name).map(String::as_str);
        Policy {
            filter_policy: attribute("FilterPolicy").map(str::to_owned),
            body_scope: attribute("FilterPolicyScope").and_then(Scope::parse)
                == Some(Scope::MessageBody),
            raw: attribute("RawMessageDelivery") == Some("true"),
            max_size,
            subscription_arn,
        }
    }

    /// Whether the subscription takes `p` at all: its filter policy.
    pub(super) fn passes(&self, p: &Prepared) -> bool {
        let Some(policy) = &self.filter_policy else {
            return true;
        };
        let scope = if self.body_scope {
            Scope::MessageBody
        } else {
            Scope::MessageAttributes
        };
        match serde_json::from_str::<Value>(policy) {
            Ok(policy) => filter::matches(&policy, scope, &p.attributes, &p.message),
            Err(_) => false,
        }
    }

    /// Whether the queue takes the delivery of `p`: its size, with the hosts of the
    /// envelope's URLs left out (they depend on the client that receives it).
    fn fits(&self, p: &Prepared, message_id: &str, sequence: Option<&str>, at_ms: i64) -> bool {
        let body = p.for_sqs.as_deref().unwrap_or(&p.message);
        let size = if self.raw {
            body.len()
        } else {
            let identity = Identity {
                topic_arn: topic_arn_of(&self.subscription_arn),
                subscription_arn: &self.subscription_arn,
                host: "",
            };
            super::delivery::envelope(&identity, p, body, message_id, sequence, at_ms).len()
        };
        size <= self.max_size
    }
}

/// The ARNs and host an envelope names.
pub(super) struct Identity<'a> {
    pub topic_arn: &'a str,
    pub subscription_arn: &'a str,
    pub host: &'a str,
}

fn topic_arn_of(subscription_arn: &str) -> &str {
    subscription_arn
        .rsplit_once(':')
        .map_or(subscription_arn, |(topic, _)| topic)
}

/// The SNS subscription filter as the broker runs it.
struct SnsPolicies;

impl FilterEvaluator for SnsPolicies {
    fn compile(&self, policy: &str) -> Result<Arc<dyn MessageFilter>, String> {
        let policy: Policy = serde_json::from_str(policy).map_err(|e| e.to_string())?;
        if let Some(filter_policy) = &policy.filter_policy {
            let scope = if policy.body_scope {
                Scope::MessageBody
            } else {
                Scope::MessageAttributes
            };
            filter::validate(filter_policy, scope)?;
        }
        Ok(Arc::new(policy))
    }
}

impl MessageFilter for Policy {
    fn matches(&self, message: &Message) -> bool {
        let topic = topic_arn_of(&self.subscription_arn)
            .rsplit(':')
            .next()
            .unwrap_or("");
        let Some(p) = publish::prepared_of_message(topic, message) else {
            // Not a message the SNS front end wrote (e.g. one published to the topic through
            // Ferry's own API): SNS subscriptions take only SNS publishes.
            return false;
        };
        let (message_id, sequence) = publish::sns_ids(&message.headers);
        self.passes(&p)
            && self.fits(
                &p,
                message_id.unwrap_or_default(),
                sequence,
                message.published_at,
            )
    }
}

/// The label of a subscription's link: its id and delivery shape.
fn label(id: &str, raw: bool) -> String {
    format!("{id} {}", if raw { "raw" } else { "envelope" })
}

/// The SQS message a message delivered through an SNS link becomes: its body and the
/// headers it is received with (message attributes for raw delivery, a FIFO message's
/// deduplication id). `None` for a message no SNS link delivered.
pub(crate) fn render(
    location: &crate::location::Location,
    host: &str,
    headers: &Headers,
    payload: &[u8],
    published_at: i64,
) -> Option<(Bytes, Headers)> {
    let topic = headers.get(LINK_TOPIC_HEADER)?;
    headers.get(LINK_HEADER)?;
    let (id, shape) = headers.get(LINK_LABEL_HEADER)?.split_once(' ')?;
    let p = publish::prepared_from(topic, headers, payload, None, None)?;
    let body = p.for_sqs.as_deref().unwrap_or(&p.message);
    let mut out = Headers::new();
    if let Some(dedup) = headers.get(DEDUP_HEADER) {
        out.insert(DEDUP_HEADER.into(), dedup.clone());
    }
    if shape == "raw" {
        message_attributes::to_headers(&p.attributes, &mut out);
        return Some((Bytes::copy_from_slice(body.as_bytes()), out));
    }
    let topic_arn = format!(
        "arn:aws:sns:{}:{}:{topic}",
        location.region, location.account_id
    );
    let subscription_arn = format!("{topic_arn}:{id}");
    let identity = Identity {
        topic_arn: &topic_arn,
        subscription_arn: &subscription_arn,
        host,
    };
    let (message_id, sequence) = publish::sns_ids(headers);
    let envelope = super::delivery::envelope(
        &identity,
        &p,
        body,
        message_id.unwrap_or_default(),
        sequence,
        published_at,
    );
    Some((Bytes::from(envelope), out))
}

/// A subscription delivered through a link, with what decides what it takes.
pub(super) struct Linked {
    pub id: String,
    pub policy: Policy,
}

impl Linked {
    /// Whether the broker delivers `p` through the link: it passes the filter and fits.
    pub(super) fn takes(
        &self,
        p: &Prepared,
        message_id: &str,
        sequence: Option<&str>,
        at_ms: i64,
    ) -> bool {
        self.policy.passes(p) && self.policy.fits(p, message_id, sequence, at_ms)
    }
}

fn prefix(id: &str) -> String {
    format!("sns-{id}-")
}

/// Gives each subscription of `topic` whose queue exists the link its attributes call
/// for (see the module doc); returns those linked.
pub(super) async fn reconcile(call: &Call<'_>, topic: &str) -> Result<Vec<Linked>, SnsError> {
    let subscriptions: Vec<(String, SubscriptionRecord)> = call.sns().store.read(|s| {
        s.subscriptions
            .iter()
            .filter(|(_, r)| r.topic == topic)
            .map(|(id, r)| (id.clone(), r.clone()))
            .collect()
    });
    let mut linked = Vec::new();
    for (id, record) in subscriptions {
        let Some(queue) = call.inner.location.queue_of_arn(&record.endpoint) else {
            continue;
        };
        let queue_record = call.inner.store.get(queue);
        let number = |name: &str| {
            queue_record
                .as_ref()
                .and_then(|r| r.attributes.get(name))
                .and_then(|v| v.parse::<u64>().ok())
        };
        let max_size = number("MaximumMessageSize").map_or(1_048_576, |n| n as usize);
        let delay = std::time::Duration::from_secs(number("DelaySeconds").unwrap_or(0));
        let policy = Policy::of(&record, format!("{}:{id}", call.topic_arn(topic)), max_size);
        let spec = LinkSpec {
            topic: Name::new(topic).map_err(from_broker)?,
            filter: LinkFilter {
                kind: KIND.to_owned(),
                policy: serde_json::to_string(&policy).expect("a policy serializes"),
            },
            start: SubscriptionStart::Now,
            label: label(&id, policy.raw),
            delay,
        };
        if !ensure_link(call, queue, &id, spec).await? {
            // Deleted meanwhile: its subscription delivers as to a missing queue.
            continue;
        }
        linked.push(Linked { id, policy });
    }
    Ok(linked)
}

/// Makes `spec` the current link of subscription `id` on `queue`; `false` when the queue
/// does not exist. Publishes to a topic run concurrently: another may attach the same link
/// between this one's look and its attach, which then finds it made and looks again.
async fn ensure_link(
    call: &Call<'_>,
    queue: &str,
    id: &str,
    spec: LinkSpec,
) -> Result<bool, SnsError> {
    let broker = &call.inner.broker;
    let prefix = prefix(id);
    for _ in 0..3 {
        let links = match broker.queue_links(queue) {
            Ok(links) => links,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(from_broker(e)),
        };
        let mine: Vec<_> = links
            .iter()
            .filter(|l| l.name.as_str().starts_with(&prefix))
            .collect();
        let current = mine.iter().find(|l| !l.detached);
        if current.is_some_and(|l| l.spec == spec) {
            return Ok(true);
        }
        if let Some(old) = current {
            detach(call, queue, old.name.as_str()).await?;
        }
        let generation = mine
            .iter()
            .filter_map(|l| l.name.as_str()[prefix.len()..].parse::<u64>().ok())
            .max()
            .map_or(1, |g| g + 1);
        let name = format!("{prefix}{generation}");
        match broker.attach_queue(queue, &name, spec.clone()).await {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(from_broker(e)),
        }
    }
    Err(SnsError::new(
        super::errors::Code::InternalError,
        format!("the subscription's link on queue {queue} kept changing; publish again"),
    ))
}

async fn detach(call: &Call<'_>, queue: &str, link: &str) -> Result<(), SnsError> {
    match call.inner.broker.detach_queue(queue, link).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(from_broker(e)),
    }
}

/// Detaches the links of the subscriptions `ids` (Unsubscribe, DeleteTopic).
pub(super) async fn detach_all(
    call: &Call<'_>,
    subscriptions: &[(String, SubscriptionRecord)],
) -> Result<(), SnsError> {
    let broker = &call.inner.broker;
    let mut seen = HashSet::new();
    for (id, record) in subscriptions {
        let Some(queue) = call.inner.location.queue_of_arn(&record.endpoint) else {
            continue;
        };
        let Ok(links) = broker.queue_links(queue) else {
            continue;
        };
        for link in links {
            if link.name.as_str().starts_with(&prefix(id))
                && !link.detached
                && seen.insert((queue.to_owned(), link.name.clone()))
            {
                detach(call, queue, link.name.as_str()).await?;
            }
        }
    }
    Ok(())
}
