//! Message attributes — String, Number, Binary and custom `Type.suffix` types — checked
//! as SQS checks them, and carried as Ferry headers so a Ferry consumer sees them and a
//! Ferry publisher's headers reach an SQS consumer as String attributes.
//!
//! A header `name` holds an attribute's value (Binary ones in base64); an attribute whose
//! type is not plain `String` also has a header `aws:type:<name>` with its data type. The
//! front end's own metadata (`aws:dedup-id`, `aws:trace-header`) lives under the same
//! `aws:` prefix: a colon is not allowed in an SQS attribute name, so no attribute can
//! collide with it.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ferry_broker::Headers;
use serde_json::{Map, Value};

use crate::errors::SqsError;

/// Prefix of the headers the front end keeps for itself.
pub const HEADER_PREFIX: &str = "aws:";
const TYPE_PREFIX: &str = "aws:type:";
/// The MessageDeduplicationId a FIFO message was sent with.
pub const DEDUP_HEADER: &str = "aws:dedup-id";
/// The AWSTraceHeader system attribute.
pub const TRACE_HEADER: &str = "aws:trace-header";

/// The most attributes one message may carry.
pub const MAX_ATTRIBUTES: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttributeValue {
    String(String),
    Binary(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    pub data_type: String,
    pub value: AttributeValue,
}

/// Attributes by name, in the byte order of the names (the order MD5s are taken in).
pub type Attributes = BTreeMap<String, Attribute>;

/// Whether `name` may name a message attribute: 1 to 256 of `A-Za-z0-9_-.`, no leading,
/// trailing or doubled `.`, not in the `AWS.` or `Amazon.` namespaces.
pub fn valid_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
        && !lower.starts_with("aws.")
        && !lower.starts_with("amazon.")
}

/// The base type of a data type (`Number.float` → `Number`), if it is one SQS knows.
fn base_type(data_type: &str) -> Option<&'static str> {
    let base = data_type.split('.').next().unwrap_or("");
    ["String", "Number", "Binary"]
        .into_iter()
        .find(|known| *known == base)
}

/// The `MessageAttributes` (or, with `system`, `MessageSystemAttributes`) of a send.
pub fn parse(input: Option<&Value>, system: bool) -> Result<Attributes, SqsError> {
    let what = if system {
        "MessageSystemAttributes"
    } else {
        "MessageAttributes"
    };
    let Some(input) = input else {
        return Ok(Attributes::new());
    };
    let Value::Object(map) = input else {
        return Err(SqsError::invalid(format!("{what} must be a map")));
    };
    if map.len() > MAX_ATTRIBUTES {
        return Err(SqsError::invalid(format!(
            "Number of message attributes [{}] exceeds the allowed maximum [{MAX_ATTRIBUTES}].",
            map.len()
        )));
    }
    let mut out = Attributes::new();
    for (name, value) in map {
        if system {
            if name != "AWSTraceHeader" {
                return Err(SqsError::invalid(format!(
                    "Message system attribute name '{name}' is invalid."
                )));
            }
        } else if !valid_name(name) {
            // SQS's wording for a name of other characters; the rest of the rule after it.
            let chars_ok = name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
            let rest = if chars_ok {
                " It must be 1 to 256 characters long, neither start nor end with a period, \
                 hold no two periods in a row, and not start with 'AWS.' or 'Amazon.'."
            } else {
                ""
            };
            return Err(SqsError::invalid(format!(
                "The message attribute name '{name}' is invalid. Attribute name can contain \
                 A-Z, a-z, 0-9, underscore (_), hyphen (-), and period (.) characters.{rest}"
            )));
        }
        out.insert(name.clone(), parse_value(name, value)?);
    }
    Ok(out)
}

fn parse_value(name: &str, value: &Value) -> Result<Attribute, SqsError> {
    let field = |key: &str| value.get(key).filter(|v| !v.is_null());
    let Some(Value::String(data_type)) = field("DataType") else {
        return Err(SqsError::invalid(format!(
            "The message attribute '{name}' must contain a non-empty message attribute type."
        )));
    };
    let Some(base) = base_type(data_type).filter(|_| data_type.len() <= 256) else {
        return Err(SqsError::invalid(format!(
            "The message attribute '{name}' has an invalid message attribute type, the set \
             of supported type prefixes is Binary, Number, and String."
        )));
    };
    if field("StringListValues").is_some() || field("BinaryListValues").is_some() {
        return Err(SqsError::invalid(format!(
            "Message attribute '{name}': list values are not supported; use StringValue or \
             BinaryValue."
        )));
    }
    let text = |key: &str| match field(key) {
        Some(Value::String(s)) => Ok(Some(s.clone())),
        None => Ok(None),
        Some(_) => Err(SqsError::invalid(format!(
            "Message attribute '{name}': {key} must be a string."
        ))),
    };
    let value = if base == "Binary" {
        let Some(encoded) = text("BinaryValue")? else {
            return Err(SqsError::invalid(format!(
                "The message attribute '{name}' with type 'Binary' must use field 'Binary'."
            )));
        };
        let bytes = STANDARD.decode(encoded.as_bytes()).map_err(|_| {
            SqsError::invalid(format!(
                "Message attribute '{name}': BinaryValue is not valid base64."
            ))
        })?;
        if bytes.is_empty() {
            return Err(SqsError::invalid(format!(
                "Message attribute '{name}' must contain a non-empty value of type 'Binary'."
            )));
        }
        AttributeValue::Binary(bytes)
    } else {
        let Some(s) = text("StringValue")?.filter(|s| !s.is_empty()) else {
            return Err(SqsError::invalid(format!(
                "Message attribute '{name}' must contain a non-empty value of type '{base}'."
            )));
        };
        if base == "Number" && !is_number(&s) {
            return Err(SqsError::invalid(format!(
                "Can't cast the value of message attribute '{name}' to a number."
            )));
        }
        if let Some(c) = s.chars().find(|c| !crate::actions::send::allowed_char(*c)) {
            return Err(SqsError::invalid(format!(
                "Message attribute '{name}' contains a character SQS does not allow ({:?}).",
                c
            )));
        }
        AttributeValue::String(s)
    };
    Ok(Attribute {
        data_type: data_type.clone(),
        value,
    })
}

/// SQS numbers: an optional sign, digits with an optional fraction and exponent, up to 38
/// digits of precision.
fn is_number(s: &str) -> bool {
    let digits = s.bytes().filter(u8::is_ascii_digit).count();
    digits > 0 && digits <= 38 && s.parse::<f64>().is_ok_and(f64::is_finite)
}

/// The bytes an attribute counts towards the message size: name, type and value.
pub fn size(attributes: &Attributes) -> usize {
    attributes
        .iter()
        .map(|(name, a)| {
            name.len()
                + a.data_type.len()
                + match &a.value {
                    AttributeValue::String(s) => s.len(),
                    AttributeValue::Binary(b) => b.len(),
                }
        })
        .sum()
}

/// Adds `attributes` to `headers` as the module head says.
pub fn to_headers(attributes: &Attributes, headers: &mut Headers) {
    for (name, a) in attributes {
        let value = match &a.value {
            AttributeValue::String(s) => s.clone(),
            AttributeValue::Binary(b) => STANDARD.encode(b),
        };
        headers.insert(name.clone(), value);
        if a.data_type != "String" {
            headers.insert(format!("{TYPE_PREFIX}{name}"), a.data_type.clone());
        }
    }
}

/// The message attributes `headers` carry: every header whose name is a valid attribute
/// name, typed by its `aws:type:` header (String without one).
pub fn from_headers(headers: &Headers) -> Attributes {
    let mut out = Attributes::new();
    for (name, value) in headers {
        if name.starts_with(HEADER_PREFIX) || !valid_name(name) || value.is_empty() {
            continue;
        }
        let data_type = headers
            .get(&format!("{TYPE_PREFIX}{name}"))
            .cloned()
            .unwrap_or_else(|| "String".to_owned());
        let value = match base_type(&data_type) {
            Some("Binary") => match STANDARD.decode(value.as_bytes()) {
                Ok(bytes) => AttributeValue::Binary(bytes),
                Err(_) => continue,
            },
            Some(_) => AttributeValue::String(value.clone()),
            None => continue,
        };
        out.insert(name.clone(), Attribute { data_type, value });
    }
    out
}

/// The attributes `names` asks for: `All` or `.*` for every one, `prefix.*` for those
/// starting with `prefix.`, otherwise exact names.
pub fn select(attributes: &Attributes, names: &[String]) -> Attributes {
    let wanted = |name: &str| {
        names.iter().any(|n| {
            n == "All"
                || n == ".*"
                || n == name
                || n.strip_suffix(".*")
                    .is_some_and(|prefix| name.starts_with(&format!("{prefix}.")))
        })
    };
    attributes
        .iter()
        .filter(|(name, _)| wanted(name))
        .map(|(n, a)| (n.clone(), a.clone()))
        .collect()
}

/// The attributes as the JSON shape `MessageBodyAttributeMap`.
pub fn to_json(attributes: &Attributes) -> Value {
    let mut map = Map::new();
    for (name, a) in attributes {
        let mut value = Map::new();
        match &a.value {
            AttributeValue::String(s) => value.insert("StringValue".into(), s.clone().into()),
            AttributeValue::Binary(b) => {
                value.insert("BinaryValue".into(), STANDARD.encode(b).into())
            }
        };
        value.insert("DataType".into(), a.data_type.clone().into());
        map.insert(name.clone(), Value::Object(value));
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn attributes_of_every_type_survive_the_trip_through_headers() {
        let input = json!({
            "s": {"DataType": "String", "StringValue": "text"},
            "n": {"DataType": "Number.int", "StringValue": "-12.5e3"},
            "b": {"DataType": "Binary.png", "BinaryValue": STANDARD.encode([0u8, 255, 7])},
        });
        let attributes = parse(Some(&input), false).unwrap();
        let mut headers = Headers::new();
        to_headers(&attributes, &mut headers);
        headers.insert(DEDUP_HEADER.into(), "d".into());
        assert_eq!(from_headers(&headers), attributes);
    }

    #[test]
    fn bad_attributes_are_refused() {
        for bad in [
            json!({"AWS.x": {"DataType": "String", "StringValue": "v"}}),
            json!({"a..b": {"DataType": "String", "StringValue": "v"}}),
            json!({"n": {"DataType": "Number", "StringValue": "ten"}}),
            json!({"n": {"DataType": "Float", "StringValue": "1"}}),
            json!({"s": {"DataType": "String"}}),
            json!({"b": {"DataType": "Binary", "BinaryValue": "***"}}),
        ] {
            assert!(parse(Some(&bad), false).is_err(), "{bad}");
        }
    }

    #[test]
    fn selection_takes_all_exact_names_and_prefixes() {
        let input = json!({
            "a.x": {"DataType": "String", "StringValue": "1"},
            "a.y": {"DataType": "String", "StringValue": "2"},
            "b": {"DataType": "String", "StringValue": "3"},
        });
        let attributes = parse(Some(&input), false).unwrap();
        let names = |v: &[&str]| -> Vec<String> {
            select(
                &attributes,
                &v.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
            .into_keys()
            .collect()
        };
        assert_eq!(names(&["All"]), ["a.x", "a.y", "b"]);
        assert_eq!(names(&["a.*"]), ["a.x", "a.y"]);
        assert_eq!(names(&["b"]), ["b"]);
        assert!(names(&[]).is_empty());
    }
}
