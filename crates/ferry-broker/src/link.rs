//! Links: what ties a queue to a topic so that the topic's records are delivered into the
//! queue as *references* (see [`crate::subscription`] for the reference record). The
//! engine's side is in `engine/subscriptions.rs` (feeding, catch-up, retention pins) and
//! `engine/links.rs` (attaching and detaching); this module holds what needs no engine:
//! the [`LinkSpec`] of a queue attached to a topic, its stored form, and the filter
//! evaluators a link's filter is compiled with.
//!
//! **Two uses of one mechanism.** A subscription is a queue made for one topic: its own
//! link, created with it. An *attached* link ties an existing queue — which also takes
//! direct publishes, may be attached to several topics or twice to one, and keeps its own
//! lease, retry, dead-letter and redrive settings — to a topic, under a name of its own.
//! Both feed references through the same cursors, catch-up and retention pins.
//!
//! **Filters a front end defines.** A link's filter is a *kind* and a *policy* (text).
//! Kind [`FERRY_FILTER`] is the broker's own [`Filter`] language; other kinds are
//! evaluators the embedding program registers in
//! [`BrokerConfig::filter_evaluators`](crate::BrokerConfig). The broker must evaluate a
//! link's filter during catch-up on open, before any front end has been asked anything —
//! so the evaluator is given to the broker, not called back through a front end, and a
//! stored link whose kind is not registered fails the open with
//! [`BrokerError::UnknownFilterEvaluator`] rather than passing everything.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::error::{BrokerError, Result};
use crate::filter::Filter;
use crate::message::Message;
use crate::name::Name;
use crate::subscription::SubscriptionStart;

/// The filter kind of the broker's own filter language ([`Filter`]).
pub const FERRY_FILTER: &str = "ferry";

/// A compiled filter: whether a topic message is delivered through a link.
pub trait MessageFilter: Send + Sync {
    fn matches(&self, message: &Message) -> bool;
}

/// Compiles the policies of one filter kind. Registered in
/// [`BrokerConfig::filter_evaluators`](crate::BrokerConfig) by the program that defines
/// the kind (a front end), so the broker can evaluate it with no front end running.
pub trait FilterEvaluator: Send + Sync {
    /// The compiled policy, or what is wrong with it.
    fn compile(&self, policy: &str) -> std::result::Result<Arc<dyn MessageFilter>, String>;
}

/// The filter evaluators a broker knows, by kind; [`FERRY_FILTER`] is always there.
#[derive(Clone)]
pub struct FilterEvaluators {
    kinds: BTreeMap<String, Arc<dyn FilterEvaluator>>,
}

impl Default for FilterEvaluators {
    fn default() -> Self {
        let mut kinds: BTreeMap<String, Arc<dyn FilterEvaluator>> = BTreeMap::new();
        kinds.insert(FERRY_FILTER.to_owned(), Arc::new(FerryFilters));
        FilterEvaluators { kinds }
    }
}

impl fmt::Debug for FilterEvaluators {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.kinds.keys()).finish()
    }
}

impl FilterEvaluators {
    /// Registers `evaluator` for `kind`, replacing one registered before.
    pub fn register(&mut self, kind: impl Into<String>, evaluator: Arc<dyn FilterEvaluator>) {
        self.kinds.insert(kind.into(), evaluator);
    }

    /// Whether an evaluator of `kind` is registered.
    pub fn is_registered(&self, kind: &str) -> bool {
        self.kinds.contains_key(kind)
    }

    /// Compiles `filter`: [`BrokerError::UnknownFilterEvaluator`] for a kind nobody
    /// registered, [`BrokerError::InvalidFilterPolicy`] for a policy its evaluator refuses.
    pub fn compile(&self, filter: &LinkFilter) -> Result<Arc<dyn MessageFilter>> {
        let evaluator =
            self.kinds
                .get(&filter.kind)
                .ok_or_else(|| BrokerError::UnknownFilterEvaluator {
                    kind: filter.kind.clone(),
                })?;
        evaluator
            .compile(&filter.policy)
            .map_err(|problem| BrokerError::InvalidFilterPolicy {
                kind: filter.kind.clone(),
                problem,
            })
    }
}

/// The broker's own filter language as an evaluator: it matches headers.
struct FerryFilters;

impl FilterEvaluator for FerryFilters {
    fn compile(&self, policy: &str) -> std::result::Result<Arc<dyn MessageFilter>, String> {
        Filter::parse(policy)
            .map(|f| Arc::new(f) as Arc<dyn MessageFilter>)
            .map_err(|e| e.to_string())
    }
}

impl MessageFilter for Filter {
    fn matches(&self, message: &Message) -> bool {
        Filter::matches(self, &message.headers)
    }
}

/// A link's filter: an evaluator kind and the policy it compiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkFilter {
    pub kind: String,
    pub policy: String,
}

impl LinkFilter {
    /// The broker's own filter.
    pub fn ferry(filter: &Filter) -> LinkFilter {
        LinkFilter {
            kind: FERRY_FILTER.to_owned(),
            policy: filter.to_string(),
        }
    }

    /// Takes every message.
    pub fn all() -> LinkFilter {
        LinkFilter::ferry(&Filter::all())
    }
}

/// A queue attached to a topic: which topic, which of its messages, from where, and a
/// label the broker keeps for whoever attached it (a front end's identity of the link, e.g.
/// what it renders into a delivery) and hands back with each message delivered through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSpec {
    pub topic: Name,
    pub filter: LinkFilter,
    pub start: SubscriptionStart,
    pub label: String,
    /// How long after its publish a message delivered through the link becomes
    /// receivable (a queue's own delivery delay, e.g. SQS's DelaySeconds); zero for none.
    pub delay: std::time::Duration,
}

impl LinkSpec {
    /// Everything from `topic`, from now, with an empty label.
    pub fn new(topic: Name) -> LinkSpec {
        LinkSpec {
            topic,
            filter: LinkFilter::all(),
            start: SubscriptionStart::Now,
            label: String::new(),
            delay: std::time::Duration::ZERO,
        }
    }
}

/// Where a message delivered through a link came from: what the `ferry-link`,
/// `ferry-link-topic` and `ferry-link-label` headers of a received, peeked or
/// dead-lettered message carry (see `record.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkOrigin {
    /// The link's name, unique per queue.
    pub link: Name,
    pub topic: Name,
    /// The label given at attach.
    pub label: String,
}

/// What the broker stores of an attached link: its spec, the id its references carry, and
/// whether it was detached (its references still pending).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredLink {
    pub id: u32,
    pub spec: LinkSpec,
    pub detached: bool,
}

/// `ferry-link 1`, then `id=`, `topic=`, `start=`, `detached=`, `delay-ms=`,
/// `filter-kind=` and `label=` lines, then `policy=` and the policy to the end (a policy may span lines; a
/// label may not).
pub(crate) fn encode(link: &StoredLink) -> String {
    let start = match link.spec.start {
        SubscriptionStart::Now => "now",
        SubscriptionStart::Earliest => "earliest",
    };
    format!(
        "ferry-link 1\nid={}\ntopic={}\nstart={start}\ndetached={}\ndelay-ms={}\nfilter-kind={}\n\
         label={}\npolicy={}",
        link.id,
        link.spec.topic,
        u8::from(link.detached),
        link.spec.delay.as_millis(),
        link.spec.filter.kind,
        link.spec.label,
        link.spec.filter.policy,
    )
}

pub(crate) fn decode(bytes: &[u8]) -> std::result::Result<StoredLink, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
    let (head, policy) = text
        .split_once("\npolicy=")
        .ok_or_else(|| "policy is missing".to_owned())?;
    let mut lines = head.lines();
    if lines.next() != Some("ferry-link 1") {
        return Err("not a link record of a known version".into());
    }
    let mut field = |name: &str| -> std::result::Result<String, String> {
        let line = lines.next().ok_or_else(|| format!("{name} is missing"))?;
        line.strip_prefix(&format!("{name}="))
            .map(str::to_owned)
            .ok_or_else(|| format!("expected {name}=, found {line:?}"))
    };
    let id = field("id")?
        .parse()
        .map_err(|_| "id is not a number".to_owned())?;
    let topic = Name::new(field("topic")?).map_err(|e| e.to_string())?;
    let start = match field("start")?.as_str() {
        "now" => SubscriptionStart::Now,
        "earliest" => SubscriptionStart::Earliest,
        other => return Err(format!("unknown start {other:?}")),
    };
    let detached = match field("detached")?.as_str() {
        "0" => false,
        "1" => true,
        other => return Err(format!("detached is {other:?}, not 0 or 1")),
    };
    let delay = field("delay-ms")?
        .parse()
        .map(std::time::Duration::from_millis)
        .map_err(|_| "delay-ms is not a number".to_owned())?;
    let kind = field("filter-kind")?;
    let label = field("label")?;
    Ok(StoredLink {
        id,
        detached,
        spec: LinkSpec {
            topic,
            filter: LinkFilter {
                kind,
                policy: policy.to_owned(),
            },
            start,
            label,
            delay,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_form_round_trips_a_policy_over_several_lines_and_refuses_damage() {
        let link = StoredLink {
            id: 7,
            detached: true,
            spec: LinkSpec {
                topic: Name::new("orders").unwrap(),
                filter: LinkFilter {
                    kind: "json-policy".into(),
                    policy: "{\n  \"a\": [1]\n}\npolicy=x".into(),
                },
                start: SubscriptionStart::Earliest,
                label: "arn:x:y".into(),
                delay: std::time::Duration::from_secs(3),
            },
        };
        assert_eq!(decode(encode(&link).as_bytes()).unwrap(), link);
        let good = encode(&link);
        for bad in [
            good.replace("ferry-link 1", "ferry-link 2"),
            good.replace("id=7", "id=x"),
            good.replace("delay-ms=3000", "delay-ms=soon"),
            good.replace("detached=1", "detached=2"),
            good.replace("start=earliest", "start=later"),
            good.replace("\npolicy=", "\n"),
            good.replace("topic=orders", "topic=a/b"),
        ] {
            assert!(decode(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_unregistered_kind_is_a_typed_error_and_a_bad_policy_another() {
        let evaluators = FilterEvaluators::default();
        let unknown = LinkFilter {
            kind: "sns".into(),
            policy: "{}".into(),
        };
        assert!(matches!(
            evaluators.compile(&unknown),
            Err(BrokerError::UnknownFilterEvaluator { kind }) if kind == "sns"
        ));
        let bad = LinkFilter {
            kind: FERRY_FILTER.into(),
            policy: "x ==".into(),
        };
        assert!(matches!(
            evaluators.compile(&bad),
            Err(BrokerError::InvalidFilterPolicy { .. })
        ));
    }

    #[test]
    fn a_registered_evaluator_sees_the_whole_message() {
        struct PayloadContains;
        struct Contains(String);
        impl MessageFilter for Contains {
            fn matches(&self, message: &Message) -> bool {
                std::str::from_utf8(&message.payload).is_ok_and(|p| p.contains(&self.0))
            }
        }
        impl FilterEvaluator for PayloadContains {
            fn compile(&self, policy: &str) -> std::result::Result<Arc<dyn MessageFilter>, String> {
                Ok(Arc::new(Contains(policy.to_owned())))
            }
        }
        let mut evaluators = FilterEvaluators::default();
        evaluators.register("contains", Arc::new(PayloadContains));
        let filter = evaluators
            .compile(&LinkFilter {
                kind: "contains".into(),
                policy: "eu".into(),
            })
            .unwrap();
        let mut rng = fastrand::Rng::with_seed(1);
        let mut message = |body: &str| {
            crate::OutgoingMessage::new(body.to_owned())
                .into_message(&crate::Limits::default(), 1, &mut rng)
                .unwrap()
        };
        assert!(filter.matches(&message("to eu-west")));
        assert!(!filter.matches(&message("to us-east")));
    }
}
