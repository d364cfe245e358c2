//! What the three batch actions share: the checks of the whole batch (none, too many,
//! bad or repeated ids — each refusing the batch whole, changing nothing) and the shape
//! of their per-entry answers.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::errors::{Code, SqsError};

pub const MAX_ENTRIES: usize = 10;

/// The batch's entries, checked; `shape` is the model's name of an entry
/// (`SendMessageBatchRequestEntry`…), which SQS names when there is none.
pub fn entries<'a>(
    input: &'a Map<String, Value>,
    shape: &str,
) -> Result<Vec<&'a Map<String, Value>>, SqsError> {
    let items: &[Value] = match input.get("Entries") {
        None | Some(Value::Null) => &[],
        Some(Value::Array(items)) => items,
        Some(_) => return Err(SqsError::invalid("Entries must be a list.")),
    };
    if items.is_empty() {
        return Err(SqsError::new(
            Code::EmptyBatchRequest,
            format!("There should be at least one {shape} in the request."),
        ));
    }
    if items.len() > MAX_ENTRIES {
        return Err(SqsError::new(
            Code::TooManyEntriesInBatchRequest,
            format!(
                "Maximum number of entries per request are {MAX_ENTRIES}. You have sent {}.",
                items.len()
            ),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Value::Object(entry) = item else {
            return Err(SqsError::invalid("Each entry must be a structure."));
        };
        let id = super::required_string(entry, "Id")?;
        if !valid_id(id) {
            return Err(SqsError::new(
                Code::InvalidBatchEntryId,
                "A batch entry id can only contain alphanumeric characters, hyphens and \
                 underscores. It can be at most 80 letters long.",
            ));
        }
        if !seen.insert(id) {
            return Err(SqsError::new(
                Code::BatchEntryIdsNotDistinct,
                format!("Id {id} repeated."),
            ));
        }
        out.push(entry);
    }
    Ok(out)
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 80
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// One entry's failure, as `BatchResultErrorEntry`.
pub fn failed(id: &str, error: &SqsError) -> Value {
    json!({
        "Id": id,
        "SenderFault": error.code.fault() == "Sender",
        "Code": error.code.query_code(),
        "Message": error.message,
    })
}

pub fn answer(successful: Vec<Value>, failed: Vec<Value>) -> Value {
    json!({ "Successful": successful, "Failed": failed })
}
