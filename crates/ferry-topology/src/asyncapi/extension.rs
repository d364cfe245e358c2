//! The `x-ferry` extension: what a Ferry design says beyond what the AsyncAPI document
//! already says in its own fields.
//!
//! The export writes the native fields first, then reads them back the way an import
//! would (the *derived* design) and keeps in `x-ferry` only the difference between the
//! design and that reading: [`difference`]. The import reads the native fields and lays
//! `x-ferry` over them: [`overlay`]. So a setting is written once, AsyncAPI tools see
//! every setting they understand in their own fields, and `overlay(derived,
//! difference(full, derived)) == full` makes the round trip exact by construction.

use serde_json::{Map, Value};

/// The key of the extension on the document, a channel and a message.
pub const KEY: &str = "x-ferry";

/// What `full` says that `derived` does not: objects are compared key by key (a key that
/// `derived` has and `full` lacks becomes `null`, "remove"); any other value differs as a
/// whole. `None` when they agree.
pub fn difference(full: &Value, derived: &Value) -> Option<Value> {
    if full == derived {
        return None;
    }
    let (Value::Object(full), Value::Object(derived)) = (full, derived) else {
        return Some(full.clone());
    };
    let mut out = Map::new();
    for (key, value) in full {
        match derived.get(key) {
            Some(same) if same == value => {}
            Some(other) => {
                if let Some(diff) = difference(value, other) {
                    out.insert(key.clone(), diff);
                }
            }
            None => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    for key in derived.keys() {
        if !full.contains_key(key) {
            out.insert(key.clone(), Value::Null);
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// `base` with `extension` laid over it: the inverse of [`difference`].
pub fn overlay(base: &mut Value, extension: &Value) {
    match (base, extension) {
        (Value::Object(base), Value::Object(extension)) => {
            for (key, value) in extension {
                if value.is_null() {
                    base.remove(key);
                } else if let Some(existing) = base.get_mut(key) {
                    overlay(existing, value);
                } else {
                    base.insert(key.clone(), value.clone());
                }
            }
        }
        (base, extension) => *base = extension.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_overlay_of_the_difference_restores_the_full_value() {
        let full = json!({"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]});
        let derived = json!({"a": 1, "b": {"c": 5}, "l": [2, 1], "extra": true});
        let diff = difference(&full, &derived).unwrap();
        assert_eq!(
            diff,
            json!({"b": {"c": 2, "d": 3}, "l": [1, 2], "extra": null})
        );
        let mut restored = derived;
        overlay(&mut restored, &diff);
        assert_eq!(restored, full);
    }

    #[test]
    fn equal_values_leave_no_extension() {
        assert_eq!(difference(&json!({"a": [1]}), &json!({"a": [1]})), None);
    }
}
