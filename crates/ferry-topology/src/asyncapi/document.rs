//! Reading an AsyncAPI document's text (JSON or YAML) into a JSON value, with the order of
//! its channels and messages as written, and following its local `$ref`s.

use indexmap::IndexMap;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use super::Error;

/// A parsed document and the order its author wrote its channels and messages in: a JSON
/// value does not keep it, and an import keeps the author's order.
pub struct Source {
    pub doc: Value,
    pub channel_order: Vec<String>,
    pub message_order: Vec<String>,
}

#[derive(Deserialize)]
struct Skeleton {
    #[serde(default)]
    channels: IndexMap<String, IgnoredAny>,
    #[serde(default)]
    components: Option<SkeletonComponents>,
}

#[derive(Deserialize)]
struct SkeletonComponents {
    #[serde(default)]
    messages: IndexMap<String, IgnoredAny>,
}

pub fn parse(text: &str) -> Result<Source, Error> {
    // JSON is (almost) YAML, but serde_json's errors are the ones a JSON author expects.
    let is_json = text.trim_start().starts_with('{');
    let (doc, skeleton): (Value, Skeleton) = if is_json {
        let doc = serde_json::from_str(text).map_err(|error| Error::Json {
            line: error.line(),
            column: error.column(),
            message: error.to_string(),
        })?;
        check_version(&doc)?;
        let skeleton = serde_json::from_str(text).map_err(|error| Error::Invalid {
            at: "document".into(),
            message: error.to_string(),
        })?;
        (doc, skeleton)
    } else {
        let doc = serde_saphyr::from_str(text)
            .map_err(|error| Error::Yaml(crate::Error::from_yaml(error)))?;
        check_version(&doc)?;
        let skeleton = serde_saphyr::from_str(text).map_err(|error| Error::Invalid {
            at: "document".into(),
            message: error.to_string(),
        })?;
        (doc, skeleton)
    };
    Ok(Source {
        channel_order: skeleton.channels.into_keys().collect(),
        message_order: skeleton
            .components
            .map(|c| c.messages.into_keys().collect())
            .unwrap_or_default(),
        doc,
    })
}

fn check_version(doc: &Value) -> Result<(), Error> {
    let version = match doc.get("asyncapi") {
        Some(Value::String(version)) => version.clone(),
        // `asyncapi: 2.6` written without quotes reads as a number.
        Some(Value::Number(number)) => number.to_string(),
        _ => return Err(Error::NotAsyncApi),
    };
    if version.starts_with("3.0") {
        Ok(())
    } else if version.starts_with("2.") || version.starts_with("1.") {
        Err(Error::Version2 { found: version })
    } else {
        Err(Error::UnsupportedVersion { found: version })
    }
}

/// `value`, or what its `$ref` chain points at inside `doc`.
pub fn resolve<'a>(doc: &'a Value, mut value: &'a Value) -> Result<&'a Value, Error> {
    // Deeper chains than this are loops in any document written by hand or by a tool.
    const MAX_DEPTH: usize = 32;
    for _ in 0..MAX_DEPTH {
        let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
            return Ok(value);
        };
        value = lookup(doc, reference)?;
    }
    let reference = value
        .get("$ref")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Err(Error::ReferenceLoop { reference })
}

fn lookup<'a>(doc: &'a Value, reference: &str) -> Result<&'a Value, Error> {
    let Some(pointer) = reference.strip_prefix('#') else {
        return Err(Error::ExternalReference {
            reference: reference.to_owned(),
        });
    };
    doc.pointer(pointer)
        .ok_or_else(|| Error::DanglingReference {
            reference: reference.to_owned(),
        })
}

/// The last segment of a local reference: `#/components/messages/OrderPlaced` →
/// `OrderPlaced`.
pub fn reference_name(value: &Value) -> Option<String> {
    let reference = value.get("$ref")?.as_str()?;
    let last = reference.rsplit('/').next()?;
    Some(last.replace("~1", "/").replace("~0", "~"))
}

/// A JSON pointer segment: `~` and `/` escaped.
pub fn pointer_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A key AsyncAPI accepts for a component or an id (`^[a-zA-Z0-9\.\-_]+$`), unique among
/// `taken`: the name with other characters replaced, and `-2`, `-3`… on a clash.
pub fn unique_key(name: &str, taken: &mut Vec<String>) -> String {
    let mut base: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if base.is_empty() {
        base.push('_');
    }
    let mut key = base.clone();
    let mut n = 2;
    while taken.contains(&key) {
        key = format!("{base}-{n}");
        n += 1;
    }
    taken.push(key.clone());
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_asyncapi_2_document_is_refused_saying_to_convert_it() {
        let error = parse("asyncapi: 2.6.0\ninfo: {title: t, version: '1'}\nchannels: {}\n")
            .err()
            .unwrap();
        assert!(matches!(error, Error::Version2 { ref found } if found == "2.6.0"));
        assert!(error.to_string().contains("asyncapi convert"), "{error}");
    }

    #[test]
    fn a_document_without_a_version_is_not_asyncapi() {
        assert!(matches!(
            parse("{\"openapi\": \"3.1.0\"}").err().unwrap(),
            Error::NotAsyncApi
        ));
    }

    #[test]
    fn bad_json_names_its_line() {
        let error = parse("{\n \"asyncapi\": \"3.0.0\",\n}").err().unwrap();
        assert!(matches!(error, Error::Json { line: 3, .. }), "{error}");
    }

    #[test]
    fn channels_that_are_not_a_map_are_an_error_not_an_empty_design() {
        let error = parse("asyncapi: 3.0.0\nchannels: [a, b]\n").err().unwrap();
        assert!(matches!(error, Error::Invalid { .. }), "{error}");
    }

    #[test]
    fn the_authors_order_of_channels_is_kept() {
        let source = parse("asyncapi: 3.0.0\nchannels:\n  zeta: {}\n  alpha: {}\n").unwrap();
        assert_eq!(source.channel_order, ["zeta", "alpha"]);
    }

    #[test]
    fn references_outside_the_document_are_refused() {
        let doc = serde_json::json!({"a": {"$ref": "other.yaml#/x"}});
        assert!(matches!(
            resolve(&doc, &doc["a"]).unwrap_err(),
            Error::ExternalReference { .. }
        ));
        let looping = serde_json::json!({"a": {"$ref": "#/a"}});
        assert!(matches!(
            resolve(&looping, &looping["a"]).unwrap_err(),
            Error::ReferenceLoop { .. }
        ));
    }

    #[test]
    fn keys_are_made_acceptable_and_unique() {
        let mut taken = Vec::new();
        assert_eq!(unique_key("a b", &mut taken), "a_b");
        assert_eq!(unique_key("a b", &mut taken), "a_b-2");
    }
}
