//! Subscribe, Unsubscribe, ListSubscriptions(ByTopic), Get/SetSubscriptionAttributes and
//! ConfirmSubscription. Only `sqs` endpoints of this front end are taken; they are
//! confirmed at once, as SNS confirms a queue of the topic's own account.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::errors::{Code, SnsError, store_failed};
use super::filter::{self, Scope};
use super::store::SubscriptionRecord;
use super::topics::DEFAULT_DELIVERY_POLICY;
use super::{Call, page, required, string, string_map};

/// Protocols SNS knows but Ferry does not deliver to.
const REFUSED: [&str; 9] = [
    "http",
    "https",
    "email",
    "email-json",
    "sms",
    "application",
    "lambda",
    "firehose",
    "mobile",
];

const ATTRIBUTES: [&str; 7] = [
    "DeliveryPolicy",
    "FilterPolicy",
    "FilterPolicyScope",
    "RawMessageDelivery",
    "RedrivePolicy",
    "SubscriptionRoleArn",
    "ReplayPolicy",
];

/// The queue a RedrivePolicy sends undeliverable messages to.
pub fn dead_letter_queue(call: &Call, policy: &str) -> Result<String, SnsError> {
    let bad = |why: &str| SnsError::parameter(format!("RedrivePolicy: {why}"));
    let value: Value =
        serde_json::from_str(policy).map_err(|_| bad("Redrive policy is not valid JSON"))?;
    let arn = value
        .get("deadLetterTargetArn")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("deadLetterTargetArn is missing"))?;
    call.inner
        .location
        .queue_of_arn(arn)
        .map(str::to_owned)
        .ok_or_else(|| {
            bad("deadLetterTargetArn must be the ARN of an SQS queue of this account and region")
        })
}

/// Checks one attribute against the others the subscription will have.
fn check(call: &Call, attributes: &BTreeMap<String, String>) -> Result<(), SnsError> {
    for (name, value) in attributes {
        if !ATTRIBUTES.contains(&name.as_str()) {
            return Err(SnsError::parameter(format!(
                "Attributes Reason: Unknown attribute {}",
                name.chars().take(100).collect::<String>()
            )));
        }
        match name.as_str() {
            "RawMessageDelivery" if value != "true" && value != "false" => {
                return Err(SnsError::parameter(format!(
                    "Attributes Reason: RawMessageDelivery: Invalid value [{}]. Must be true or \
                     false.",
                    value.chars().take(50).collect::<String>()
                )));
            }
            "FilterPolicyScope" if Scope::parse(value).is_none() => {
                return Err(SnsError::parameter(
                    "Attributes Reason: FilterPolicyScope: Invalid value. Please use either \
                     MessageBody or MessageAttributes",
                ));
            }
            "RedrivePolicy" if !value.is_empty() => {
                dead_letter_queue(call, value)?;
            }
            "ReplayPolicy" => {
                return Err(SnsError::parameter(
                    "Attributes Reason: ReplayPolicy: message replay is not supported by Ferry",
                ));
            }
            "DeliveryPolicy"
                if !value.is_empty() && serde_json::from_str::<Value>(value).is_err() =>
            {
                return Err(SnsError::parameter("DeliveryPolicy: not valid JSON"));
            }
            _ => {}
        }
    }
    if let Some(policy) = attributes.get("FilterPolicy").filter(|p| !p.is_empty()) {
        let scope = attributes
            .get("FilterPolicyScope")
            .and_then(|s| Scope::parse(s))
            .unwrap_or(Scope::MessageAttributes);
        filter::validate(policy, scope)
            .map_err(|why| SnsError::parameter(format!("FilterPolicy: {why}")))?;
    }
    Ok(())
}

fn subscription_arn(call: &Call, topic: &str, id: &str) -> String {
    format!("{}:{id}", call.topic_arn(topic))
}

/// The id a subscription ARN names (of a topic of this account and region).
fn id_of_arn(call: &Call, arn: &str) -> Result<Option<String>, SnsError> {
    let Some((topic_arn, id)) = arn.rsplit_once(':') else {
        return Err(SnsError::parameter("SubscriptionArn"));
    };
    if !arn.starts_with("arn:aws:sns:") || topic_arn.split(':').count() != 6 || id.is_empty() {
        return Err(SnsError::parameter(format!(
            "SubscriptionArn Reason: {} is not a subscription ARN",
            arn.chars().take(300).collect::<String>()
        )));
    }
    Ok(call
        .topic_of_arn(topic_arn, "SubscriptionArn")
        .ok()
        .map(|_| id.to_owned()))
}

pub fn subscribe(call: &Call) -> Result<Value, SnsError> {
    let topic_arn = required(call.input, "TopicArn")?;
    let protocol = required(call.input, "Protocol")?;
    let topic = call.existing_topic(topic_arn, "TopicArn")?;
    if protocol != "sqs" {
        let lower = protocol.to_ascii_lowercase();
        return Err(if REFUSED.contains(&lower.as_str()) {
            SnsError::parameter(format!(
                "Protocol Reason: Ferry delivers to sqs endpoints only; the {lower} protocol \
                 is not supported"
            ))
        } else {
            SnsError::parameter(format!(
                "Amazon SNS does not support this protocol string: {}",
                protocol.chars().take(100).collect::<String>()
            ))
        });
    }
    let endpoint = required(call.input, "Endpoint")?;
    let Some(queue) = call.inner.location.queue_of_arn(endpoint) else {
        return Err(SnsError::parameter(
            "SQS endpoint ARN Reason: the endpoint must be the ARN of an SQS queue of this \
             account and region (arn:aws:sqs:<region>:<account>:<queue>)",
        ));
    };
    if queue.ends_with(".fifo") && !topic.ends_with(".fifo") {
        return Err(SnsError::parameter(
            "Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be subscribed to \
             standard SNS topics",
        ));
    }
    let attributes = string_map(call.input, "Attributes")?;
    check(call, &attributes)?;
    let id = call.sns().mint_uuid(&format!("{topic}\n{endpoint}"));
    let id = call
        .sns()
        .store
        .update(|state| {
            let existing = state.subscriptions.iter().find(|(_, s)| {
                s.topic == topic && s.protocol == protocol && s.endpoint == endpoint
            });
            if let Some((id, s)) = existing {
                if !attributes.is_empty() && s.attributes != attributes {
                    return Err(SnsError::parameter(
                        "Attributes Reason: Subscription already exists with different \
                         attributes",
                    ));
                }
                return Ok(id.clone());
            }
            state.subscriptions.insert(
                id.clone(),
                SubscriptionRecord {
                    topic: topic.clone(),
                    protocol: protocol.to_owned(),
                    endpoint: endpoint.to_owned(),
                    attributes: attributes
                        .into_iter()
                        .filter(|(_, v)| !v.is_empty())
                        .collect(),
                },
            );
            Ok(id)
        })
        .map_err(store_failed)??;
    Ok(json!({ "SubscriptionArn": subscription_arn(call, &topic, &id) }))
}

pub async fn unsubscribe(call: &Call<'_>) -> Result<Value, SnsError> {
    let arn = required(call.input, "SubscriptionArn")?;
    if let Some(id) = id_of_arn(call, arn)? {
        let record = call.sns().store.read(|s| s.subscriptions.get(&id).cloned());
        if let Some(record) = record {
            // Its queue keeps what was delivered; nothing more comes (see `linked.rs`).
            super::linked::detach_all(call, &[(id.clone(), record)]).await?;
        }
        call.sns()
            .store
            .update(|state| {
                state.subscriptions.remove(&id);
                Ok::<_, SnsError>(())
            })
            .map_err(store_failed)??;
    }
    Ok(json!({}))
}

pub fn list(call: &Call, by_topic: bool) -> Result<Value, SnsError> {
    let topic = if by_topic {
        let arn = required(call.input, "TopicArn")?;
        Some(call.existing_topic(arn, "TopicArn")?)
    } else {
        None
    };
    let all: Vec<(String, SubscriptionRecord)> = call.sns().store.read(|s| {
        s.subscriptions
            .iter()
            .filter(|(_, r)| topic.as_ref().is_none_or(|t| *t == r.topic))
            .filter(|(_, r)| call.caller.may_see(&r.topic))
            .map(|(id, r)| (id.clone(), r.clone()))
            .collect()
    });
    let (items, next) = page(call, &all, 100)?;
    let subscriptions: Vec<Value> = items
        .iter()
        .map(|(id, r)| {
            json!({
                "SubscriptionArn": subscription_arn(call, &r.topic, id),
                "Owner": call.inner.location.account_id,
                "Protocol": r.protocol,
                "Endpoint": r.endpoint,
                "TopicArn": call.topic_arn(&r.topic),
            })
        })
        .collect();
    let mut out = serde_json::Map::new();
    out.insert("Subscriptions".into(), Value::Array(subscriptions));
    if let Some(next) = next {
        out.insert("NextToken".into(), next.into());
    }
    Ok(Value::Object(out))
}

fn existing(call: &Call) -> Result<(String, SubscriptionRecord), SnsError> {
    let arn = required(call.input, "SubscriptionArn")?;
    let id = id_of_arn(call, arn)?.ok_or_else(SnsError::no_subscription)?;
    let record = call
        .sns()
        .store
        .read(|s| s.subscriptions.get(&id).cloned())
        .ok_or_else(SnsError::no_subscription)?;
    Ok((id, record))
}

pub fn get_attributes(call: &Call) -> Result<Value, SnsError> {
    let (id, record) = existing(call)?;
    let mut out = serde_json::Map::new();
    out.insert(
        "SubscriptionArn".into(),
        subscription_arn(call, &record.topic, &id).into(),
    );
    out.insert("TopicArn".into(), call.topic_arn(&record.topic).into());
    out.insert(
        "Owner".into(),
        call.inner.location.account_id.clone().into(),
    );
    out.insert("Protocol".into(), record.protocol.clone().into());
    out.insert("Endpoint".into(), record.endpoint.clone().into());
    out.insert("PendingConfirmation".into(), "false".into());
    out.insert("ConfirmationWasAuthenticated".into(), "true".into());
    out.insert("RawMessageDelivery".into(), "false".into());
    out.insert(
        "EffectiveDeliveryPolicy".into(),
        DEFAULT_DELIVERY_POLICY.into(),
    );
    if record.attributes.contains_key("FilterPolicy") {
        out.insert("FilterPolicyScope".into(), "MessageAttributes".into());
    }
    for (k, v) in record.attributes {
        out.insert(k, v.into());
    }
    Ok(json!({ "Attributes": Value::Object(out) }))
}

pub fn set_attributes(call: &Call) -> Result<Value, SnsError> {
    let (id, record) = existing(call)?;
    let name = required(call.input, "AttributeName")?;
    let value = string(call.input, "AttributeValue")?.unwrap_or("");
    let mut next = record.attributes.clone();
    if value.is_empty() {
        next.remove(name);
    } else {
        next.insert(name.to_owned(), value.to_owned());
    }
    if !ATTRIBUTES.contains(&name) {
        return Err(SnsError::parameter(format!(
            "AttributeName Reason: Unknown attribute {}",
            name.chars().take(100).collect::<String>()
        )));
    }
    check(call, &next)?;
    call.sns()
        .store
        .update(|state| match state.subscriptions.get_mut(&id) {
            Some(s) => {
                s.attributes = next.clone();
                Ok(())
            }
            None => Err(SnsError::no_subscription()),
        })
        .map_err(store_failed)??;
    Ok(json!({}))
}

pub fn confirm(call: &Call) -> Result<Value, SnsError> {
    let arn = required(call.input, "TopicArn")?;
    required(call.input, "Token")?;
    call.existing_topic(arn, "TopicArn")?;
    Err(SnsError::new(
        Code::InvalidParameter,
        "Invalid parameter: Token Reason: Ferry confirms sqs subscriptions when they are made \
         and issues no confirmation tokens",
    ))
}
