//! AddPermission and RemovePermission: statements of the queue's `Policy`, generated as
//! SQS generates them (one statement per label, `Sid` the label). The policy is the one
//! SetQueueAttributes sets, enforced on every request with access keys (`auth/`): a grant
//! lets keys of the named accounts make the named calls from the next request on, and
//! removing it takes that away. Actions SQS keeps to the queue's owner are refused here,
//! as SQS refuses them; the other grantable actions that SQS applies no cross-account
//! permission to (ListQueueTags, the message-move tasks) are written as SQS writes them
//! and, as in SQS, grant nothing to another account.

use serde_json::{Map, Value, json};

use super::{Call, required_string, store_failed, string_list};
use crate::errors::{Code, SqsError, from_broker};

/// SQS's limit on the actions of one statement.
const MAX_ACTIONS: usize = 7;

/// Actions only the queue's owner may call, which no permission can grant.
const OWNER_ONLY: [&str; 7] = [
    "AddPermission",
    "RemovePermission",
    "SetQueueAttributes",
    "CreateQueue",
    "DeleteQueue",
    "TagQueue",
    "UntagQueue",
];

/// Actions a permission can grant (besides `*`).
const GRANTABLE: [&str; 11] = [
    "ChangeMessageVisibility",
    "DeleteMessage",
    "GetQueueAttributes",
    "GetQueueUrl",
    "ListDeadLetterSourceQueues",
    "ListQueueTags",
    "PurgeQueue",
    "ReceiveMessage",
    "SendMessage",
    "StartMessageMoveTask",
    "CancelMessageMoveTask",
];

fn valid_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 80
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn bad_label(label: &str, why: &str) -> SqsError {
    SqsError::invalid(format!(
        "Value {} for parameter Label is invalid. Reason: {why}",
        label.chars().take(100).collect::<String>()
    ))
}

/// One value, or a list of several, as SQS writes a statement's members.
fn one_or_many(mut values: Vec<String>) -> Value {
    if values.len() == 1 {
        Value::String(values.remove(0))
    } else {
        Value::Array(values.into_iter().map(Value::String).collect())
    }
}

/// The queue's current policy document, or a new empty one.
fn policy_of(call: &Call, queue: &str) -> Result<Map<String, Value>, SqsError> {
    let text = call
        .sqs
        .store
        .get(queue)
        .and_then(|r| r.attributes.get("Policy").cloned())
        .unwrap_or_default();
    if text.is_empty() {
        let mut policy = Map::new();
        policy.insert("Version".into(), "2012-10-17".into());
        policy.insert(
            "Id".into(),
            format!("{}/SQSDefaultPolicy", call.sqs.location.arn(queue)).into(),
        );
        policy.insert("Statement".into(), Value::Array(Vec::new()));
        return Ok(policy);
    }
    match serde_json::from_str(&text) {
        Ok(Value::Object(policy)) => Ok(policy),
        _ => Err(SqsError::invalid(
            "The queue's Policy is not a policy document; replace it with SetQueueAttributes.",
        )),
    }
}

fn statements(policy: &mut Map<String, Value>) -> &mut Vec<Value> {
    let entry = policy
        .entry("Statement")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        // A single statement may be written as an object.
        let one = entry.take();
        *entry = Value::Array(if one.is_null() { Vec::new() } else { vec![one] });
    }
    entry.as_array_mut().expect("an array")
}

fn has_label(statement: &Value, label: &str) -> bool {
    statement.get("Sid").and_then(Value::as_str) == Some(label)
}

fn save(call: &Call, queue: &str, policy: Option<Map<String, Value>>) -> Result<(), SqsError> {
    let text = policy.map_or_else(String::new, |p| Value::Object(p).to_string());
    let now = call.now_ms() / 1000;
    call.sqs
        .store
        .update(queue, |record| {
            if record.created == 0 {
                record.created = now;
            }
            record.last_modified = now;
            record.attributes.insert("Policy".into(), text);
        })
        .map_err(store_failed)
}

pub fn add(call: &Call) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    call.sqs
        .broker
        .describe_queue(&queue)
        .map_err(from_broker)?;
    let label = required_string(call.input, "Label")?;
    if !valid_label(label) {
        return Err(bad_label(
            label,
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in \
             length.",
        ));
    }
    let accounts = string_list(call.input, "AWSAccountIds")?;
    let actions = string_list(call.input, "Actions")?;
    if actions.is_empty() {
        return Err(SqsError::missing("Actions"));
    }
    if accounts.is_empty() {
        return Err(SqsError::invalid(
            "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.",
        ));
    }
    if let Some(bad) = accounts
        .iter()
        .find(|a| a.len() != 12 || !a.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(SqsError::invalid(format!(
            "Value {} for parameter PrincipalId is invalid. Reason: Unable to verify.",
            bad.chars().take(100).collect::<String>()
        )));
    }
    if actions.len() > MAX_ACTIONS {
        return Err(SqsError::new(
            Code::OverLimit,
            format!(
                "{} Actions were found, maximum allowed is {MAX_ACTIONS}.",
                actions.len()
            ),
        ));
    }
    for action in &actions {
        let name = action.strip_prefix("SQS:").unwrap_or(action);
        let why = if OWNER_ONLY.contains(&name) {
            "Only the queue owner is allowed to invoke this action."
        } else if name == "*" || GRANTABLE.contains(&name) {
            continue;
        } else {
            "Please refer to the appropriate WSDL for a list of valid actions."
        };
        return Err(SqsError::invalid(format!(
            "Value SQS:{} for parameter ActionName is invalid. Reason: {why}",
            name.chars().take(100).collect::<String>()
        )));
    }
    let mut policy = policy_of(call, &queue)?;
    let list = statements(&mut policy);
    if list.iter().any(|s| has_label(s, label)) {
        return Err(bad_label(label, "Already exists."));
    }
    list.push(json!({
        "Sid": label,
        "Effect": "Allow",
        "Principal": {
            "AWS": one_or_many(accounts.iter().map(|a| format!("arn:aws:iam::{a}:root")).collect()),
        },
        "Action": one_or_many(
            actions
                .iter()
                .map(|a| format!("SQS:{}", a.strip_prefix("SQS:").unwrap_or(a)))
                .collect()
        ),
        "Resource": call.sqs.location.arn(&queue),
    }));
    save(call, &queue, Some(policy))?;
    Ok(json!({}))
}

pub fn remove(call: &Call) -> Result<Value, SqsError> {
    let queue = call.queue()?;
    call.sqs
        .broker
        .describe_queue(&queue)
        .map_err(from_broker)?;
    let label = required_string(call.input, "Label")?;
    let mut policy = policy_of(call, &queue)?;
    let list = statements(&mut policy);
    let before = list.len();
    list.retain(|s| !has_label(s, label));
    if list.len() == before {
        return Err(bad_label(label, "can't find label on existing policy."));
    }
    let empty = list.is_empty();
    save(call, &queue, (!empty).then_some(policy))?;
    Ok(json!({}))
}
