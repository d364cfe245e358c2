//! Amazon SNS on the same endpoint as SQS: topics that are Ferry topics, subscriptions of
//! SQS queues, Publish and PublishBatch fanned out to them.
//!
//! **Routing.** SNS speaks only the query protocol (`Action=…&Version=2010-03-31`, XML
//! answers; the service model lists no other). A request without `X-Amz-Target` is SNS's
//! when its SigV4 credential scope names the `sns` service or its `Action` is an SNS
//! action SQS does not have (the two share only AddPermission and RemovePermission);
//! everything else goes to SQS. (STS's requests are told apart first, `sts.rs`.)
//!
//! **What maps to what.**
//! - An SNS topic is a Ferry topic of the same name (one partition), visible to `ferry
//!   topic list`; a Ferry topic is an SNS topic. A `.fifo` name with `FifoTopic=true` is a
//!   FIFO topic.
//! - A subscription of protocol `sqs` delivers to an SQS queue (a Ferry queue) of this
//!   endpoint. Other protocols are refused with `InvalidParameter`.
//! - Publish writes the message to the Ferry topic (for Ferry's own subscriptions), then
//!   delivers to each subscribed queue whose filter policy passes it, as SNS's JSON
//!   envelope or, with `RawMessageDelivery`, as the raw message with its attributes as SQS
//!   message attributes (`publish.rs`).
//! - What a topic spec cannot hold — topic attributes and tags, the subscriptions and
//!   their attributes — is kept in `sns.json` (`store.rs`).

mod delivery;
mod errors;
mod filter;
pub(crate) mod linked;
mod publish;
pub(crate) mod query;
mod store;
mod subscriptions;
mod topics;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{HeaderMap, Response};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::Inner;
use crate::auth::Caller;
pub use errors::{Code, SnsError};

/// The actions of the SNS service model Ferry answers (others are refused, by name).
const ACTIONS: [&str; 17] = [
    "CreateTopic",
    "DeleteTopic",
    "ListTopics",
    "GetTopicAttributes",
    "SetTopicAttributes",
    "Subscribe",
    "Unsubscribe",
    "ListSubscriptions",
    "ListSubscriptionsByTopic",
    "GetSubscriptionAttributes",
    "SetSubscriptionAttributes",
    "ConfirmSubscription",
    "Publish",
    "PublishBatch",
    "TagResource",
    "UntagResource",
    "ListTagsForResource",
];

/// Other SNS actions: known, so routed here and refused as SNS refuses an unknown action.
/// AddPermission and RemovePermission are SQS actions too: they are SNS's only when
/// signed for SNS.
const OTHER_ACTIONS: [&str; 10] = [
    "CreatePlatformApplication",
    "CreatePlatformEndpoint",
    "ListPlatformApplications",
    "ListEndpointsByPlatformApplication",
    "CheckIfPhoneNumberIsOptedOut",
    "ListPhoneNumbersOptedOut",
    "GetDataProtectionPolicy",
    "PutDataProtectionPolicy",
    "GetSMSAttributes",
    "SetSMSAttributes",
];

/// The SNS front end's state beside the SQS front end's.
pub struct Sns {
    store: store::Store,
    /// Each FIFO topic's state (`publish::FifoState`) behind its lock, held by a publish
    /// from its deduplication check to its last delivery, so every queue gets a topic's
    /// messages in the same order and a repeated deduplication id is seen.
    fifo: Mutex<HashMap<String, Arc<tokio::sync::Mutex<publish::FifoState>>>>,
    minted: AtomicU64,
    seed: u64,
}

impl Sns {
    pub fn open(dir: &std::path::Path, topics: &[ferry_broker::Name]) -> std::io::Result<Sns> {
        let store = store::Store::open(dir, |name| topics.iter().any(|t| t.as_str() == name))?;
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        Ok(Sns {
            store,
            fifo: Mutex::new(HashMap::new()),
            minted: AtomicU64::new(0),
            seed: hasher.finish(),
        })
    }

    /// The `Policy` attribute of topic `topic`, if set.
    pub fn topic_policy(&self, topic: &str) -> Option<String> {
        self.store.read(|s| {
            s.topics
                .get(topic)
                .and_then(|t| t.attributes.get("Policy").cloned())
        })
    }

    /// The state of FIFO topic `topic`, behind its lock.
    fn fifo_state(&self, topic: &str) -> Arc<tokio::sync::Mutex<publish::FifoState>> {
        let mut states = self.fifo.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(states.entry(topic.to_owned()).or_default())
    }

    /// Forgets what was kept about a topic that was deleted or made anew.
    fn forget_fifo(&self, topic: &str) {
        self.fifo
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(topic);
    }

    /// The test-only reset's share (`actions/reset.rs`): deletes every topic of `broker`
    /// and forgets every topic and subscription record. Returns how many topics went and
    /// the names of those the broker kept (their records are kept too).
    pub(crate) async fn reset(&self, broker: &ferry_broker::Broker) -> (usize, Vec<String>) {
        let mut deleted = 0;
        let mut left = Vec::new();
        for name in broker.list_topics() {
            match broker.delete_topic(name.as_str()).await {
                Ok(()) => deleted += 1,
                Err(e) if e.kind() == ferry_broker::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(topic = %name, error = %e, "test reset: a topic was kept");
                    left.push(name.as_str().to_owned());
                }
            }
        }
        self.fifo.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let forgotten = self.store.update(|state| {
            state.topics.retain(|name, _| left.contains(name));
            state.subscriptions.retain(|_, s| left.contains(&s.topic));
            Ok::<_, std::convert::Infallible>(())
        });
        if let Err(e) = forgotten {
            tracing::warn!(error = %e, "test reset: forgetting SNS records failed");
        }
        (deleted, left)
    }

    /// A fresh id in UUID form (as SNS's message and subscription ids are).
    fn mint_uuid(&self, salt: &str) -> String {
        let n = self.minted.fetch_add(1, Ordering::Relaxed);
        let mut hash = Sha256::new();
        hash.update(self.seed.to_le_bytes());
        hash.update(n.to_le_bytes());
        hash.update(salt.as_bytes());
        let b = hash.finalize();
        let hex: String = b.iter().take(16).map(|x| format!("{x:02x}")).collect();
        format!(
            "{}-{}-4{}-a{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[13..16],
            &hex[17..20],
            &hex[20..32]
        )
    }
}

/// Whether a request is SNS's (see the module head).
pub fn claims(headers: &HeaderMap, pairs: &[(String, String)]) -> bool {
    if headers.contains_key("x-amz-target") {
        return false;
    }
    let scope_is_sns = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("/sns/aws4_request"));
    scope_is_sns
        || pairs.iter().any(|(k, v)| {
            k == "Action" && (ACTIONS.contains(&v.as_str()) || OTHER_ACTIONS.contains(&v.as_str()))
        })
}

/// The form's parameters, the URL's and the body's: what STS, SNS and SQS's query
/// protocol requests are told apart by.
pub use query::pairs as form_pairs;
pub use query::refuse;

/// Serves an SNS request (see [`claims`]) of an authenticated caller, if its permissions
/// allow it.
pub async fn answer(
    inner: &Inner,
    caller: &Caller<'_>,
    pairs: &[(String, String)],
    host: &str,
    request_id: &str,
) -> Response<Body> {
    let (action, input) = match query::decode(pairs) {
        Ok(decoded) => decoded,
        Err(e) => return query::refuse(&e, request_id),
    };
    let requirement = crate::auth::requirements::sns(&action, &input, &inner.location);
    let context = crate::auth::Context {
        service: crate::auth::Kind::Topic,
        action: &action,
        location: &inner.location,
    };
    if let Err(denied) = crate::auth::check(
        caller,
        &requirement,
        &context,
        |q| inner.broker.is_dead_letter_queue(q),
        |kind, name| inner.policy_text(kind, name),
    ) {
        tracing::debug!(action = %action, key = caller.key_id(), "sns request denied");
        let error = SnsError::new(
            Code::AuthorizationError,
            format!(
                "User: {} is not authorized to perform: SNS:{}: {}.",
                caller.arn(&inner.location.account_id),
                action.chars().take(100).collect::<String>(),
                denied.lacking()
            ),
        );
        return query::refuse(&error, request_id);
    }
    let call = Call {
        inner,
        caller,
        input: &input,
        host,
    };
    let outcome = match action.as_str() {
        "CreateTopic" => topics::create(&call).await,
        "DeleteTopic" => topics::delete(&call).await,
        "ListTopics" => topics::list(&call),
        "GetTopicAttributes" => topics::get_attributes(&call),
        "SetTopicAttributes" => topics::set_attributes(&call),
        "TagResource" => topics::tag(&call),
        "UntagResource" => topics::untag(&call),
        "ListTagsForResource" => topics::list_tags(&call),
        "Subscribe" => subscriptions::subscribe(&call),
        "Unsubscribe" => subscriptions::unsubscribe(&call).await,
        "ListSubscriptions" => subscriptions::list(&call, false),
        "ListSubscriptionsByTopic" => subscriptions::list(&call, true),
        "GetSubscriptionAttributes" => subscriptions::get_attributes(&call),
        "SetSubscriptionAttributes" => subscriptions::set_attributes(&call),
        "ConfirmSubscription" => subscriptions::confirm(&call),
        "Publish" => publish::publish(&call).await,
        "PublishBatch" => publish::publish_batch(&call).await,
        other => Err(SnsError::new(
            Code::InvalidAction,
            format!(
                "The action {} is not supported by Ferry's SNS endpoint.",
                other.chars().take(100).collect::<String>()
            ),
        )),
    };
    match outcome {
        Ok(output) => query::answer(&action, &output, request_id),
        Err(error) => {
            tracing::debug!(action = %action, code = error.code.query_code(), "sns request refused");
            query::refuse(&error, request_id)
        }
    }
}

/// One request being served.
pub struct Call<'a> {
    pub inner: &'a Inner,
    /// Who asked: lists show only the topics it holds a right on.
    pub caller: &'a Caller<'a>,
    pub input: &'a Map<String, Value>,
    pub host: &'a str,
}

impl Call<'_> {
    fn sns(&self) -> &Sns {
        &self.inner.sns
    }

    fn topic_arn(&self, topic: &str) -> String {
        let l = &self.inner.location;
        format!("arn:aws:sns:{}:{}:{topic}", l.region, l.account_id)
    }

    /// The topic an ARN names, if it is well formed; `NotFound` when it is of another
    /// account or region, or does not exist.
    fn topic_of_arn(&self, arn: &str, parameter: &str) -> Result<String, SnsError> {
        let bad = || {
            SnsError::parameter(format!(
                "{parameter} Reason: An ARN must have at least 6 elements, not {}",
                arn.split(':').count()
            ))
        };
        let rest = arn.strip_prefix("arn:aws:sns:").ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let [region, account, name] = parts.as_slice() else {
            return Err(bad());
        };
        let l = &self.inner.location;
        if *region != l.region || *account != l.account_id || name.is_empty() {
            return Err(SnsError::no_topic());
        }
        Ok((*name).to_owned())
    }

    /// A topic that exists: the broker has it.
    fn existing_topic(&self, arn: &str, parameter: &str) -> Result<String, SnsError> {
        let name = self.topic_of_arn(arn, parameter)?;
        if ferry_broker::Name::new(&name).is_err()
            || self.inner.broker.describe_topic(&name).is_err()
        {
            return Err(SnsError::no_topic());
        }
        Ok(name)
    }

    fn now_ms(&self) -> i64 {
        self.inner.broker.now_ms()
    }
}

pub fn string<'a>(input: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, SnsError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(SnsError::parameter(format!("{key} must be a string"))),
    }
}

pub fn required<'a>(input: &'a Map<String, Value>, key: &str) -> Result<&'a str, SnsError> {
    string(input, key)?.ok_or_else(|| SnsError::missing(key))
}

/// A map of strings (Attributes).
pub fn string_map(
    input: &Map<String, Value>,
    key: &str,
) -> Result<std::collections::BTreeMap<String, String>, SnsError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(Default::default()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Null => Ok((k.clone(), String::new())),
                _ => Err(SnsError::parameter(format!(
                    "{key} must map names to strings"
                ))),
            })
            .collect(),
        Some(_) => Err(SnsError::parameter(format!("{key} must be a map"))),
    }
}

/// One page of `items` after `NextToken` (an index), `max` long.
fn page<T: Clone>(
    call: &Call,
    items: &[T],
    max: usize,
) -> Result<(Vec<T>, Option<String>), SnsError> {
    let start = match string(call.input, "NextToken")? {
        None => 0,
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|i| *i <= items.len())
            .ok_or_else(|| SnsError::parameter("NextToken"))?,
    };
    let end = (start + max).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

/// Milliseconds since the Unix epoch as ISO 8601 (`2026-01-02T03:04:05.678Z`).
pub fn iso8601(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = crate::sigv4::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso8601_in_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_709_251_199_999), "2024-02-29T23:59:59.999Z");
        assert_eq!(iso8601(951_782_400_123), "2000-02-29T00:00:00.123Z");
    }

    #[test]
    fn sns_requests_are_told_from_sqs_ones() {
        let mut headers = HeaderMap::new();
        let pairs = |action: &str| vec![("Action".to_owned(), action.to_owned())];
        assert!(claims(&headers, &pairs("Publish")));
        assert!(!claims(&headers, &pairs("SendMessage")));
        // Named by both APIs: SQS's unless signed for SNS.
        assert!(!claims(&headers, &pairs("AddPermission")));
        headers.insert(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=t/20260101/us-east-1/sns/aws4_request, Signature=0"
                .parse()
                .unwrap(),
        );
        assert!(claims(&headers, &pairs("Bogus")));
        assert!(claims(&headers, &pairs("AddPermission")));
        headers.insert("x-amz-target", "AmazonSQS.SendMessage".parse().unwrap());
        assert!(!claims(&headers, &pairs("Publish")));
    }
}
