//! SNS subscription filter policies: which published messages a subscription takes.
//!
//! A policy is a JSON object; every key must match (AND), the conditions listed under one
//! key are alternatives (OR), and `"$or": [policy, …]` (at any level) matches when one of
//! its policies does. With scope `MessageAttributes` (the default) keys are message
//! attribute names; with scope `MessageBody` they are keys of the JSON body, and an object
//! under a key matches the nested object (or any element of an array of objects).
//!
//! Conditions: an exact string, number, `true`/`false` or `null`; `{"prefix": s}`,
//! `{"suffix": s}`, `{"equals-ignore-case": s}`; `{"anything-but": v | [v…] |
//! {"prefix": s} | {"suffix": s}}`; `{"numeric": [op, n, (op, n)]}` with `=`, `<`, `<=`,
//! `>`, `>=`; `{"exists": bool}`; `{"cidr": "a.b.c.d/n"}`. An attribute matches by its
//! type: a String against strings, a Number against numbers, a `String.Array` (a JSON
//! array in its value) by any of its elements; Binary attributes never match. A key the
//! message lacks matches only `{"exists": false}`.

use serde_json::{Map, Value};

use crate::message_attributes::{AttributeValue, Attributes};

/// Where a policy looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    MessageAttributes,
    MessageBody,
}

impl Scope {
    pub fn parse(text: &str) -> Option<Scope> {
        match text {
            "MessageAttributes" => Some(Scope::MessageAttributes),
            "MessageBody" => Some(Scope::MessageBody),
            _ => None,
        }
    }
}

/// The most key/value combinations a policy may have, as SNS allows.
const MAX_COMBINATIONS: usize = 150;

/// Checks a policy's grammar; the error says what is wrong.
pub fn validate(policy: &str, scope: Scope) -> Result<Value, String> {
    let value: Value =
        serde_json::from_str(policy).map_err(|e| format!("the policy is not valid JSON: {e}"))?;
    let Value::Object(map) = &value else {
        return Err("the policy must be a JSON object".into());
    };
    let combinations = check_object(map, scope)?;
    if combinations > MAX_COMBINATIONS {
        return Err(format!(
            "Filter policy is too complex: {combinations} combinations of values, at most \
             {MAX_COMBINATIONS}"
        ));
    }
    Ok(value)
}

/// Checks one level; returns its number of combinations.
fn check_object(map: &Map<String, Value>, scope: Scope) -> Result<usize, String> {
    if map.is_empty() {
        return Err("a policy object must have at least one key".into());
    }
    let mut product = 1usize;
    for (key, value) in map {
        let count = if key == "$or" {
            let Value::Array(alternatives) = value else {
                return Err("$or must be an array of policies".into());
            };
            if alternatives.len() < 2 {
                return Err("$or needs at least two policies".into());
            }
            let mut sum = 0;
            for alternative in alternatives {
                let Value::Object(m) = alternative else {
                    return Err("each $or alternative must be an object".into());
                };
                sum += check_object(m, scope)?;
            }
            sum
        } else {
            match value {
                Value::Array(conditions) => {
                    if conditions.is_empty() {
                        return Err(format!("the conditions of {key:?} must not be empty"));
                    }
                    for c in conditions {
                        check_condition(key, c)?;
                    }
                    conditions.len()
                }
                Value::Object(nested) if scope == Scope::MessageBody => {
                    check_object(nested, scope)?
                }
                _ => {
                    return Err(format!(
                        "the value of {key:?} must be an array of conditions"
                    ));
                }
            }
        };
        product = product.saturating_mul(count.max(1));
    }
    Ok(product)
}

fn check_condition(key: &str, condition: &Value) -> Result<(), String> {
    let Value::Object(operator) = condition else {
        return match condition {
            Value::Array(_) => Err(format!("{key:?}: a condition cannot be an array")),
            _ => Ok(()),
        };
    };
    let mut entries = operator.iter();
    let (Some((op, arg)), None) = (entries.next(), entries.next()) else {
        return Err(format!("{key:?}: an operator object has exactly one key"));
    };
    let text = |what: &str| match arg {
        Value::String(_) => Ok(()),
        _ => Err(format!("{key:?}: {what} must be a string")),
    };
    match op.as_str() {
        "prefix" | "suffix" | "equals-ignore-case" => text(op),
        "exists" => match arg {
            Value::Bool(_) => Ok(()),
            _ => Err(format!("{key:?}: exists must be true or false")),
        },
        "cidr" => match arg.as_str().and_then(parse_cidr) {
            Some(_) => Ok(()),
            None => Err(format!(
                "{key:?}: cidr must be an IPv4 prefix such as 10.0.0.0/24"
            )),
        },
        "numeric" => parse_numeric(arg).map(|_| ()).ok_or_else(|| {
            format!("{key:?}: numeric must be [op, number] or [op, number, op, number]")
        }),
        "anything-but" => match arg {
            Value::String(_) | Value::Number(_) => Ok(()),
            Value::Array(items)
                if !items.is_empty() && items.iter().all(|v| v.is_string() || v.is_number()) =>
            {
                Ok(())
            }
            Value::Object(inner) if inner.len() == 1 => match inner.iter().next() {
                Some((k, Value::String(_))) if k == "prefix" || k == "suffix" => Ok(()),
                _ => Err(format!(
                    "{key:?}: anything-but takes a value, a list, or a prefix or suffix"
                )),
            },
            _ => Err(format!(
                "{key:?}: anything-but takes a value, a list, or a prefix or suffix"
            )),
        },
        other => Err(format!("{key:?}: unrecognized match type {other}")),
    }
}

type Comparison = (String, f64);

fn parse_numeric(arg: &Value) -> Option<Vec<Comparison>> {
    let items = arg.as_array()?;
    if items.len() != 2 && items.len() != 4 {
        return None;
    }
    let mut out = Vec::new();
    for pair in items.chunks(2) {
        let op = pair[0].as_str()?;
        if !["=", "<", "<=", ">", ">="].contains(&op) {
            return None;
        }
        out.push((op.to_owned(), pair[1].as_f64()?));
    }
    if out.len() == 2 {
        // A range: a lower bound, then an upper one.
        let lower = matches!(out[0].0.as_str(), ">" | ">=");
        let upper = matches!(out[1].0.as_str(), "<" | "<=");
        if !(lower && upper && out[0].1 < out[1].1) {
            return None;
        }
    }
    Some(out)
}

fn parse_cidr(text: &str) -> Option<(u32, u32)> {
    let (ip, bits) = text.split_once('/')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    let bits: u32 = bits.parse().ok().filter(|b| *b <= 32)?;
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    Some((u32::from(ip) & mask, mask))
}

/// Numbers are equal to five digits after the decimal point, SNS's accuracy.
fn same_number(a: f64, b: f64) -> bool {
    (a * 100_000.0).round() == (b * 100_000.0).round()
}

/// One value a condition is tested against.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Str(String),
    Num(f64),
    Bool(bool),
    Null,
}

fn scalar_of_json(value: &Value) -> Option<Scalar> {
    match value {
        Value::String(s) => Some(Scalar::Str(s.clone())),
        Value::Number(n) => n.as_f64().map(Scalar::Num),
        Value::Bool(b) => Some(Scalar::Bool(*b)),
        Value::Null => Some(Scalar::Null),
        _ => None,
    }
}

/// The values of a message attribute, as its type says.
fn attribute_values(attributes: &Attributes, name: &str) -> Option<Vec<Scalar>> {
    let attribute = attributes.get(name)?;
    let AttributeValue::String(text) = &attribute.value else {
        return Some(Vec::new());
    };
    let base = attribute.data_type.as_str();
    if base.starts_with("Number") {
        return Some(
            text.trim()
                .parse::<f64>()
                .ok()
                .map(Scalar::Num)
                .into_iter()
                .collect(),
        );
    }
    if base == "String.Array" {
        return Some(match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(items)) => items.iter().filter_map(scalar_of_json).collect(),
            _ => vec![Scalar::Str(text.clone())],
        });
    }
    Some(vec![Scalar::Str(text.clone())])
}

/// Whether a message with `attributes` and `body` passes `policy` (already validated).
pub fn matches(policy: &Value, scope: Scope, attributes: &Attributes, body: &str) -> bool {
    let Value::Object(policy) = policy else {
        return false;
    };
    match scope {
        Scope::MessageAttributes => {
            object_matches(policy, &|key| attribute_values(attributes, key))
        }
        Scope::MessageBody => match serde_json::from_str::<Value>(body) {
            Ok(Value::Object(doc)) => body_matches(policy, &doc),
            _ => false,
        },
    }
}

/// Attribute scope: each key's values come from `lookup`.
fn object_matches(
    policy: &Map<String, Value>,
    lookup: &dyn Fn(&str) -> Option<Vec<Scalar>>,
) -> bool {
    policy.iter().all(|(key, conditions)| {
        if key == "$or" {
            return conditions.as_array().is_some_and(|alternatives| {
                alternatives
                    .iter()
                    .any(|a| a.as_object().is_some_and(|a| object_matches(a, lookup)))
            });
        }
        let Some(conditions) = conditions.as_array() else {
            return false;
        };
        key_matches(conditions, lookup(key).as_deref())
    })
}

fn body_matches(policy: &Map<String, Value>, doc: &Map<String, Value>) -> bool {
    policy.iter().all(|(key, spec)| {
        if key == "$or" {
            return spec.as_array().is_some_and(|alternatives| {
                alternatives
                    .iter()
                    .any(|a| a.as_object().is_some_and(|a| body_matches(a, doc)))
            });
        }
        let found = doc.get(key);
        match spec {
            Value::Object(nested) => match found {
                Some(Value::Object(inner)) => body_matches(nested, inner),
                Some(Value::Array(items)) => items
                    .iter()
                    .any(|i| i.as_object().is_some_and(|i| body_matches(nested, i))),
                _ => false,
            },
            Value::Array(conditions) => {
                let values = found.map(|v| match v {
                    Value::Array(items) => items.iter().filter_map(scalar_of_json).collect(),
                    other => scalar_of_json(other).into_iter().collect::<Vec<_>>(),
                });
                key_matches(conditions, values.as_deref())
            }
            _ => false,
        }
    })
}

/// One key: its conditions against its values (`None` when the message lacks the key).
fn key_matches(conditions: &[Value], values: Option<&[Scalar]>) -> bool {
    conditions.iter().any(|condition| {
        if let Some(exists) = condition.get("exists").and_then(Value::as_bool) {
            return exists == values.is_some();
        }
        values.is_some_and(|vs| vs.iter().any(|v| condition_matches(condition, v)))
    })
}

fn condition_matches(condition: &Value, value: &Scalar) -> bool {
    let text = match value {
        Scalar::Str(s) => Some(s.as_str()),
        _ => None,
    };
    match condition {
        Value::String(s) => text == Some(s.as_str()),
        Value::Number(n) => {
            matches!(value, Scalar::Num(v) if n.as_f64().is_some_and(|n| same_number(*v, n)))
        }
        Value::Bool(b) => *value == Scalar::Bool(*b),
        Value::Null => *value == Scalar::Null,
        Value::Object(op) => {
            let Some((name, arg)) = op.iter().next() else {
                return false;
            };
            match name.as_str() {
                "prefix" => text
                    .zip(arg.as_str())
                    .is_some_and(|(t, p)| t.starts_with(p)),
                "suffix" => text.zip(arg.as_str()).is_some_and(|(t, p)| t.ends_with(p)),
                "equals-ignore-case" => text
                    .zip(arg.as_str())
                    .is_some_and(|(t, p)| t.to_lowercase() == p.to_lowercase()),
                "numeric" => match (value, parse_numeric(arg)) {
                    (Scalar::Num(v), Some(comparisons)) => {
                        comparisons.iter().all(|(op, n)| match op.as_str() {
                            "=" => same_number(*v, *n),
                            "<" => v < n,
                            "<=" => v <= n,
                            ">" => v > n,
                            _ => v >= n,
                        })
                    }
                    _ => false,
                },
                "cidr" => match (text, arg.as_str().and_then(parse_cidr)) {
                    (Some(t), Some((network, mask))) => t
                        .parse::<std::net::Ipv4Addr>()
                        .is_ok_and(|ip| u32::from(ip) & mask == network),
                    _ => false,
                },
                "anything-but" => match arg {
                    Value::Object(inner) => match inner.iter().next() {
                        Some((k, Value::String(p))) if k == "prefix" => {
                            text.is_some_and(|t| !t.starts_with(p.as_str()))
                        }
                        Some((k, Value::String(p))) if k == "suffix" => {
                            text.is_some_and(|t| !t.ends_with(p.as_str()))
                        }
                        _ => false,
                    },
                    Value::Array(items) => !items.iter().any(|i| condition_matches(i, value)),
                    single => !condition_matches(single, value),
                },
                _ => false,
            }
        }
        Value::Array(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message_attributes::{Attribute, AttributeValue};

    /// The message attributes of AWS's filtering examples.
    fn example_attributes() -> Attributes {
        let mut a = Attributes::new();
        let mut put = |name: &str, data_type: &str, value: &str| {
            a.insert(
                name.into(),
                Attribute {
                    data_type: data_type.into(),
                    value: AttributeValue::String(value.into()),
                },
            );
        };
        put(
            "customer_interests",
            "String.Array",
            r#"["soccer", "rugby", "hockey"]"#,
        );
        put("store", "String", "example_corp");
        put("event", "String", "order_placed");
        put("price_usd", "Number", "210.75");
        put("source_ip", "String", "10.0.0.17");
        a
    }

    const EXAMPLE_BODY: &str = r#"{
        "mobile": 1234567890,
        "store": "example_corp",
        "event": "order_placed",
        "customer_interests": ["soccer", "rugby", "hockey"],
        "price_usd": 210.75,
        "delivery": {"address": {"city": "Seattle"}, "express": true},
        "items": [{"sku": "A-1"}, {"sku": "B-2"}]
    }"#;

    fn attrs(policy: &str) -> bool {
        let p = validate(policy, Scope::MessageAttributes).unwrap();
        matches(&p, Scope::MessageAttributes, &example_attributes(), "")
    }

    fn body(policy: &str) -> bool {
        let p = validate(policy, Scope::MessageBody).unwrap();
        matches(&p, Scope::MessageBody, &Attributes::new(), EXAMPLE_BODY)
    }

    #[test]
    fn the_documented_example_policy_accepts_the_example_message() {
        let policy = r#"{
            "store": ["example_corp"],
            "event": [{"anything-but": "order_cancelled"}],
            "customer_interests": ["rugby", "football", "baseball"],
            "price_usd": [{"numeric": [">=", 100]}]
        }"#;
        assert!(attrs(policy));
        assert!(body(policy));
    }

    #[test]
    fn exact_values_prefixes_suffixes_and_case() {
        assert!(attrs(r#"{"store": ["example_corp", "other"]}"#));
        assert!(!attrs(r#"{"store": ["other_corp"]}"#));
        assert!(attrs(
            r#"{"event": [{"prefix": "order-"}, {"prefix": "order_"}]}"#
        ));
        assert!(!attrs(r#"{"event": [{"prefix": "ship"}]}"#));
        assert!(attrs(r#"{"store": [{"suffix": "_corp"}]}"#));
        assert!(attrs(
            r#"{"event": [{"equals-ignore-case": "ORDER_PLACED"}]}"#
        ));
        assert!(attrs(r#"{"price_usd": [210.75]}"#));
        // A Number attribute does not match a string, nor a String attribute a number.
        assert!(!attrs(r#"{"price_usd": ["210.75"]}"#));
        assert!(!attrs(r#"{"store": [5]}"#));
    }

    #[test]
    fn anything_but_in_all_its_forms() {
        assert!(!attrs(r#"{"event": [{"anything-but": "order_placed"}]}"#));
        assert!(attrs(
            r#"{"event": [{"anything-but": ["order_cancelled", "order_failed"]}]}"#
        ));
        assert!(!attrs(
            r#"{"event": [{"anything-but": ["order_placed", "x"]}]}"#
        ));
        assert!(!attrs(
            r#"{"event": [{"anything-but": {"prefix": "order"}}]}"#
        ));
        assert!(attrs(
            r#"{"event": [{"anything-but": {"prefix": "ship"}}]}"#
        ));
        assert!(attrs(
            r#"{"event": [{"anything-but": {"suffix": "_cancelled"}}]}"#
        ));
        assert!(!attrs(
            r#"{"price_usd": [{"anything-but": [100, 210.75]}]}"#
        ));
        assert!(attrs(r#"{"price_usd": [{"anything-but": [100, 500]}]}"#));
        // The key must be there.
        assert!(!attrs(r#"{"missing": [{"anything-but": "x"}]}"#));
    }

    #[test]
    fn anything_but_passes_an_array_with_any_element_not_listed_as_documented() {
        let mut a = Attributes::new();
        a.insert(
            "customer_interests".into(),
            Attribute {
                data_type: "String.Array".into(),
                value: AttributeValue::String(r#"["rugby", "baseball"]"#.into()),
            },
        );
        let policy = r#"{"customer_interests": [{"anything-but": ["rugby", "tennis"]}]}"#;
        let p = validate(policy, Scope::MessageAttributes).unwrap();
        assert!(matches(&p, Scope::MessageAttributes, &a, ""));
        let p = validate(
            r#"{"price": [{"anything-but": [100, 500]}]}"#,
            Scope::MessageBody,
        )
        .unwrap();
        let body = |b: &str| matches(&p, Scope::MessageBody, &Attributes::new(), b);
        assert!(body(r#"{"price": 101}"#));
        assert!(body(r#"{"price": 100.1}"#));
        assert!(body(r#"{"price": [100, 50]}"#));
        assert!(!body(r#"{"price": 100}"#));
        // Combined with exists:false, a missing key passes too.
        let p = validate(
            r#"{"price": [{"anything-but": [100]}, {"exists": false}]}"#,
            Scope::MessageBody,
        )
        .unwrap();
        assert!(matches(
            &p,
            Scope::MessageBody,
            &Attributes::new(),
            r#"{"other": 1}"#
        ));
    }

    #[test]
    fn numbers_are_equal_to_five_decimals_in_any_notation() {
        let p = validate(
            r#"{"price_usd": [{"numeric": ["=", 301.5]}]}"#,
            Scope::MessageBody,
        )
        .unwrap();
        let body = |b: &str| matches(&p, Scope::MessageBody, &Attributes::new(), b);
        assert!(body(r#"{"price_usd": 301.5}"#));
        assert!(body(r#"{"price_usd": 3.015e2}"#));
        assert!(body(r#"{"price_usd": 301.500001}"#));
        assert!(!body(r#"{"price_usd": 301.50001}"#));
    }

    #[test]
    fn numeric_ranges() {
        assert!(attrs(
            r#"{"price_usd": [{"numeric": [">", 0, "<=", 300]}]}"#
        ));
        assert!(!attrs(
            r#"{"price_usd": [{"numeric": [">", 0, "<=", 150]}]}"#
        ));
        assert!(attrs(r#"{"price_usd": [{"numeric": ["=", 210.75]}]}"#));
        assert!(!attrs(r#"{"price_usd": [{"numeric": ["<", 100]}]}"#));
        assert!(
            validate(
                r#"{"p": [{"numeric": ["<", 1, ">", 5]}]}"#,
                Scope::MessageAttributes
            )
            .is_err()
        );
        assert!(
            validate(
                r#"{"p": [{"numeric": ["~", 1]}]}"#,
                Scope::MessageAttributes
            )
            .is_err()
        );
    }

    #[test]
    fn exists_and_missing_keys() {
        assert!(attrs(r#"{"store": [{"exists": true}]}"#));
        assert!(!attrs(r#"{"store": [{"exists": false}]}"#));
        assert!(attrs(r#"{"coupon": [{"exists": false}]}"#));
        assert!(!attrs(r#"{"coupon": ["x"]}"#));
    }

    #[test]
    fn or_across_keys_and_cidr() {
        assert!(attrs(
            r#"{"store": ["example_corp"], "$or": [{"event": ["nope"]}, {"price_usd": [{"numeric": [">", 200]}]}]}"#
        ));
        assert!(!attrs(
            r#"{"$or": [{"event": ["nope"]}, {"price_usd": [{"numeric": ["<", 200]}]}]}"#
        ));
        assert!(attrs(r#"{"source_ip": [{"cidr": "10.0.0.0/24"}]}"#));
        assert!(!attrs(r#"{"source_ip": [{"cidr": "10.0.1.0/24"}]}"#));
    }

    #[test]
    fn body_scope_matches_nested_keys_and_arrays_of_objects() {
        assert!(body(r#"{"delivery": {"address": {"city": ["Seattle"]}}}"#));
        assert!(!body(
            r#"{"delivery": {"address": {"city": ["Portland"]}}}"#
        ));
        assert!(body(r#"{"delivery": {"express": [true]}}"#));
        assert!(body(r#"{"items": {"sku": [{"prefix": "B-"}]}}"#));
        assert!(body(r#"{"mobile": [{"numeric": [">", 0]}]}"#));
        assert!(!body(r#"{"delivery": {"gift": [{"exists": true}]}}"#));
        // A body that is not a JSON object matches nothing.
        let p = validate(r#"{"a": ["b"]}"#, Scope::MessageBody).unwrap();
        assert!(!matches(
            &p,
            Scope::MessageBody,
            &Attributes::new(),
            "plain text"
        ));
    }

    #[test]
    fn malformed_policies_are_refused() {
        for bad in [
            "[]",
            "{}",
            "not json",
            r#"{"a": "b"}"#,
            r#"{"a": []}"#,
            r#"{"a": [{"bogus": 1}]}"#,
            r#"{"a": [{"prefix": 1}]}"#,
            r#"{"a": [{"exists": "yes"}]}"#,
            r#"{"$or": [{"a": ["b"]}]}"#,
            r#"{"a": {"b": ["c"]}}"#,
        ] {
            assert!(validate(bad, Scope::MessageAttributes).is_err(), "{bad}");
        }
        assert!(validate(r#"{"a": {"b": ["c"]}}"#, Scope::MessageBody).is_ok());
        let many: Vec<String> = (0..151).map(|i| format!("\"v{i}\"")).collect();
        let big = format!(r#"{{"a": [{}]}}"#, many.join(","));
        assert!(validate(&big, Scope::MessageAttributes).is_err());
    }
}
