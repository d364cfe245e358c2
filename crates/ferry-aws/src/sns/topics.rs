//! CreateTopic, DeleteTopic, ListTopics, Get/SetTopicAttributes and the tag actions.

use std::collections::BTreeMap;

use ferry_broker::TopicSpec;
use serde_json::{Value, json};

use super::errors::{Code, SnsError, from_broker, store_failed};
use super::store::TopicRecord;
use super::{Call, page, required, string, string_map};

/// Topic attributes a client may set (the model's list; delivery-status feedback ones are
/// kept but not acted on).
const SETTABLE: [&str; 11] = [
    "DeliveryPolicy",
    "DisplayName",
    "Policy",
    "TracingConfig",
    "KmsMasterKeyId",
    "SignatureVersion",
    "ContentBasedDeduplication",
    "ArchivePolicy",
    "DataProtectionPolicy",
    "FifoThroughputScope",
    "FifoTopic",
];

const MAX_TAGS: usize = 50;

fn settable(name: &str) -> bool {
    SETTABLE.contains(&name)
        || (name.ends_with("FeedbackRoleArn") || name.ends_with("FeedbackSampleRate"))
            && ["HTTP", "Firehose", "Lambda", "Application", "SQS"]
                .iter()
                .any(|p| name.starts_with(p))
}

fn is_fifo(name: &str) -> bool {
    name.ends_with(".fifo")
}

fn check_name(name: &str) -> Result<(), SnsError> {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    let ok = !base.is_empty()
        && name.len() <= 256
        && base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        return Err(SnsError::parameter(
            "Topic Name Reason: Topic names must be made up of only uppercase and lowercase \
             ASCII letters, numbers, underscores, and hyphens, and must be between 1 and 256 \
             characters long.",
        ));
    }
    if ferry_broker::Name::new(name).is_err() {
        return Err(SnsError::parameter(format!(
            "Topic Name Reason: Ferry's topic names are at most {} characters and do not \
             start with a hyphen.",
            ferry_broker::Name::MAX_LEN
        )));
    }
    Ok(())
}

/// One attribute's value checked; `fifo` is the topic's kind.
fn check_attribute(name: &str, value: &str, fifo: bool) -> Result<(), SnsError> {
    if !settable(name) {
        return Err(SnsError::parameter(format!(
            "AttributeName Reason: Unknown attribute {}",
            name.chars().take(100).collect::<String>()
        )));
    }
    let boolean = || {
        if value == "true" || value == "false" {
            Ok(())
        } else {
            Err(SnsError::parameter(format!(
                "Attributes Reason: {name} must be true or false"
            )))
        }
    };
    match name {
        "FifoTopic" => boolean(),
        "ContentBasedDeduplication" => {
            boolean()?;
            if !fifo && value == "true" {
                return Err(SnsError::parameter(
                    "Attributes Reason: Content-based deduplication can only be set for FIFO \
                     topics",
                ));
            }
            Ok(())
        }
        "FifoThroughputScope" if !["Topic", "MessageGroup"].contains(&value) => Err(
            SnsError::parameter("Attributes Reason: FifoThroughputScope is Topic or MessageGroup"),
        ),
        "Policy" => crate::auth::Policy::parse(value)
            .map(|_| ())
            .map_err(|why| SnsError::parameter(format!("Attributes Reason: Policy: {why}"))),
        "DeliveryPolicy" | "ArchivePolicy" | "DataProtectionPolicy"
            if !value.is_empty() && serde_json::from_str::<Value>(value).is_err() =>
        {
            Err(SnsError::parameter(format!(
                "Attributes Reason: {name} is not valid JSON"
            )))
        }
        _ => Ok(()),
    }
}

fn tags_of(call: &Call, key: &str) -> Result<BTreeMap<String, String>, SnsError> {
    let mut tags = BTreeMap::new();
    match call.input.get(key) {
        // The query protocol sends an empty list as an empty value.
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.is_empty() => {}
        Some(Value::Array(items)) => {
            for item in items {
                let k = item.get("Key").and_then(Value::as_str);
                let v = item.get("Value").and_then(Value::as_str);
                let (Some(k), Some(v)) = (k, v) else {
                    return Err(SnsError::parameter(
                        "Tags Reason: each tag needs a Key and a Value",
                    ));
                };
                if k.is_empty() || k.len() > 128 || v.len() > 256 {
                    return Err(SnsError::parameter(
                        "Tags Reason: keys are 1 to 128 characters, values at most 256",
                    ));
                }
                tags.insert(k.to_owned(), v.to_owned());
            }
        }
        Some(_) => return Err(SnsError::parameter("Tags must be a list")),
    }
    if tags.len() > MAX_TAGS {
        return Err(SnsError::new(
            Code::TagLimitExceeded,
            "Could not complete request: tag quota of per resource exceeded",
        ));
    }
    Ok(tags)
}

pub async fn create(call: &Call<'_>) -> Result<Value, SnsError> {
    let name = required(call.input, "Name")?;
    check_name(name)?;
    let mut attributes = string_map(call.input, "Attributes")?;
    if let Some(policy) = string(call.input, "DataProtectionPolicy")? {
        attributes.insert("DataProtectionPolicy".into(), policy.to_owned());
    }
    let fifo_attribute = attributes.get("FifoTopic").map(String::as_str) == Some("true");
    if fifo_attribute != is_fifo(name) {
        return Err(SnsError::parameter(
            "Topic Name Reason: Fifo Topic names must end with .fifo and they must have \
             FifoTopic attribute set to true",
        ));
    }
    for (k, v) in &attributes {
        check_attribute(k, v, is_fifo(name))?;
    }
    // Defaults are not recorded, so a create naming them matches one that does not.
    attributes
        .retain(|k, v| !((k == "FifoTopic" || k == "ContentBasedDeduplication") && v == "false"));
    let tags = tags_of(call, "Tags")?;
    let exists = call.inner.broker.describe_topic(name).is_ok();
    let outcome = call
        .sns()
        .store
        .update(|state| {
            if let Some(record) = state.topics.get_mut(name)
                && exists
            {
                if !attributes.is_empty() && record.attributes != attributes {
                    return Err(SnsError::parameter(
                        "Attributes Reason: Topic already exists with different attributes",
                    ));
                }
                if !tags.is_empty() && record.tags != tags {
                    return Err(SnsError::parameter(
                        "Tags Reason: Topic already exists with different tags",
                    ));
                }
                return Ok(());
            }
            // A topic deleted by Ferry's own API left its records: they were another
            // topic's.
            state.subscriptions.retain(|_, s| s.topic != name);
            state.topics.insert(
                name.to_owned(),
                TopicRecord {
                    attributes: attributes.clone(),
                    tags: tags.clone(),
                },
            );
            Ok(())
        })
        .map_err(store_failed)?;
    outcome?;
    if !exists {
        // A topic of this name deleted earlier (also by Ferry's own API) was another one.
        call.sns().forget_fifo(name);
        match call
            .inner
            .broker
            .create_topic(name, TopicSpec::default())
            .await
        {
            Ok(()) => {}
            // Created meanwhile by another call: the same topic.
            Err(e) if e.kind() == ferry_broker::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(from_broker(e)),
        }
    }
    Ok(json!({ "TopicArn": call.topic_arn(name) }))
}

pub async fn delete(call: &Call<'_>) -> Result<Value, SnsError> {
    let arn = required(call.input, "TopicArn")?;
    let name = match call.topic_of_arn(arn, "TopicArn") {
        Ok(name) => name,
        Err(e) if e.code == Code::NotFound => return Ok(json!({})),
        Err(e) => return Err(e),
    };
    // Its subscriptions' links first: what they delivered is copied into their queues as
    // the broker deletes the topic (see `linked.rs`).
    let subscriptions: Vec<(String, super::store::SubscriptionRecord)> =
        call.sns().store.read(|s| {
            s.subscriptions
                .iter()
                .filter(|(_, r)| r.topic == name)
                .map(|(id, r)| (id.clone(), r.clone()))
                .collect()
        });
    super::linked::detach_all(call, &subscriptions).await?;
    match call.inner.broker.delete_topic(&name).await {
        Ok(()) => {}
        Err(e) if e.kind() == ferry_broker::ErrorKind::NotFound => {}
        Err(e) => return Err(from_broker(e)),
    }
    call.sns().forget_fifo(&name);
    // A record left by a failure here is dropped at the next start.
    let forgotten = call.sns().store.update(|state| {
        state.topics.remove(&name);
        state.subscriptions.retain(|_, s| s.topic != name);
        Ok::<_, SnsError>(())
    });
    if let Err(e) = forgotten {
        tracing::warn!(error = %e, "forgetting a deleted topic's SNS records failed");
    }
    Ok(json!({}))
}

pub fn list(call: &Call) -> Result<Value, SnsError> {
    let names: Vec<String> = call
        .inner
        .broker
        .list_topics()
        .into_iter()
        .map(|n| n.to_string())
        .filter(|n| call.caller.may_see(n))
        .collect();
    let (names, next) = page(call, &names, 100)?;
    let topics: Vec<Value> = names
        .iter()
        .map(|n| json!({ "TopicArn": call.topic_arn(n) }))
        .collect();
    let mut out = serde_json::Map::new();
    out.insert("Topics".into(), Value::Array(topics));
    if let Some(next) = next {
        out.insert("NextToken".into(), next.into());
    }
    Ok(Value::Object(out))
}

/// The policy SNS gives a topic by default: its owner may do everything.
fn default_policy(call: &Call, arn: &str) -> String {
    let account = &call.inner.location.account_id;
    json!({
        "Version": "2008-10-17",
        "Id": "__default_policy_ID",
        "Statement": [{
            "Sid": "__default_statement_ID",
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": [
                "SNS:GetTopicAttributes", "SNS:SetTopicAttributes", "SNS:AddPermission",
                "SNS:RemovePermission", "SNS:DeleteTopic", "SNS:Subscribe",
                "SNS:ListSubscriptionsByTopic", "SNS:Publish"
            ],
            "Resource": arn,
            "Condition": {"StringEquals": {"AWS:SourceOwner": account}}
        }]
    })
    .to_string()
}

pub const DEFAULT_DELIVERY_POLICY: &str = r#"{"http":{"defaultHealthyRetryPolicy":{"minDelayTarget":20,"maxDelayTarget":20,"numRetries":3,"numMaxDelayRetries":0,"numNoDelayRetries":0,"numMinDelayRetries":0,"backoffFunction":"linear"},"disableSubscriptionOverrides":false,"defaultRequestPolicy":{"headerContentType":"text/plain; charset=UTF-8"}}}"#;

pub fn get_attributes(call: &Call) -> Result<Value, SnsError> {
    let arn = required(call.input, "TopicArn")?;
    let name = call.existing_topic(arn, "TopicArn")?;
    let (record, confirmed) = call.sns().store.read(|s| {
        (
            s.topics.get(&name).cloned().unwrap_or_default(),
            s.subscriptions
                .values()
                .filter(|sub| sub.topic == name)
                .count(),
        )
    });
    let arn = call.topic_arn(&name);
    let mut out = serde_json::Map::new();
    out.insert("TopicArn".into(), arn.clone().into());
    out.insert(
        "Owner".into(),
        call.inner.location.account_id.clone().into(),
    );
    out.insert("Policy".into(), default_policy(call, &arn).into());
    out.insert("DisplayName".into(), "".into());
    out.insert(
        "SubscriptionsConfirmed".into(),
        confirmed.to_string().into(),
    );
    out.insert("SubscriptionsPending".into(), "0".into());
    out.insert("SubscriptionsDeleted".into(), "0".into());
    out.insert(
        "EffectiveDeliveryPolicy".into(),
        DEFAULT_DELIVERY_POLICY.into(),
    );
    if is_fifo(&name) {
        out.insert("FifoTopic".into(), "true".into());
        out.insert("ContentBasedDeduplication".into(), "false".into());
    }
    for (k, v) in record.attributes {
        out.insert(k, v.into());
    }
    Ok(json!({ "Attributes": Value::Object(out) }))
}

pub fn set_attributes(call: &Call) -> Result<Value, SnsError> {
    let arn = required(call.input, "TopicArn")?;
    let attribute = required(call.input, "AttributeName")?;
    let value = string(call.input, "AttributeValue")?.unwrap_or("");
    let name = call.existing_topic(arn, "TopicArn")?;
    if attribute == "FifoTopic" {
        return Err(SnsError::parameter(
            "AttributeName Reason: FifoTopic cannot be changed after the topic is created",
        ));
    }
    check_attribute(attribute, value, is_fifo(&name))?;
    call.sns()
        .store
        .update(|state| {
            let record = state.topics.entry(name.clone()).or_default();
            if value.is_empty() {
                record.attributes.remove(attribute);
            } else {
                record
                    .attributes
                    .insert(attribute.to_owned(), value.to_owned());
            }
            Ok::<_, SnsError>(())
        })
        .map_err(store_failed)??;
    Ok(json!({}))
}

/// The topic a tag action's ResourceArn names.
fn resource(call: &Call) -> Result<String, SnsError> {
    let arn = required(call.input, "ResourceArn")?;
    call.existing_topic(arn, "ResourceArn").map_err(|e| {
        if e.code == Code::NotFound {
            SnsError::new(Code::ResourceNotFound, "Resource does not exist")
        } else {
            e
        }
    })
}

pub fn tag(call: &Call) -> Result<Value, SnsError> {
    let name = resource(call)?;
    let tags = tags_of(call, "Tags")?;
    call.sns()
        .store
        .update(|state| {
            let record = state.topics.entry(name.clone()).or_default();
            record.tags.extend(tags.clone());
            if record.tags.len() > MAX_TAGS {
                return Err(SnsError::new(
                    Code::TagLimitExceeded,
                    "Could not complete request: tag quota of per resource exceeded",
                ));
            }
            Ok(())
        })
        .map_err(store_failed)??;
    Ok(json!({}))
}

pub fn untag(call: &Call) -> Result<Value, SnsError> {
    let name = resource(call)?;
    let keys: Vec<String> = match call.input.get("TagKeys") {
        Some(Value::String(s)) if s.is_empty() => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect(),
        _ => return Err(SnsError::missing("TagKeys")),
    };
    call.sns()
        .store
        .update(|state| {
            let record = state.topics.entry(name.clone()).or_default();
            for k in &keys {
                record.tags.remove(k);
            }
            Ok::<_, SnsError>(())
        })
        .map_err(store_failed)??;
    Ok(json!({}))
}

pub fn list_tags(call: &Call) -> Result<Value, SnsError> {
    let name = resource(call)?;
    let tags = call
        .sns()
        .store
        .read(|s| s.topics.get(&name).map(|r| r.tags.clone()))
        .unwrap_or_default();
    let tags: Vec<Value> = tags
        .into_iter()
        .map(|(k, v)| json!({"Key": k, "Value": v}))
        .collect();
    Ok(json!({ "Tags": tags }))
}
