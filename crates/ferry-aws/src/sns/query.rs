//! SNS's query protocol: form parameters folded into the model's input shape, and outputs
//! written as the XML SNS answers with.
//!
//! SNS's lists and maps are not flattened, unlike SQS's: a list member is
//! `Tags.member.1.Key`, a map entry `Attributes.entry.1.key` / `Attributes.entry.1.value`
//! (message attributes name theirs `Name` / `Value`). Answers wrap lists in `<member>`
//! and maps in `<entry><key/><value/></entry>`.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::Response;
use serde_json::{Map, Value};

use super::errors::{Code, SnsError};
use crate::protocol::query::escape;
use crate::protocol::response;

const CONTENT_TYPE: &str = "text/xml";
pub const NAMESPACE: &str = "http://sns.amazonaws.com/doc/2010-03-31/";

/// The form's parameters: the URL's and the body's.
pub fn pairs(query: Option<&str>, body: &[u8]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    if let Some(q) = query {
        pairs.extend(form_urlencoded::parse(q.as_bytes()).into_owned());
    }
    pairs.extend(form_urlencoded::parse(body).into_owned());
    pairs
}

#[derive(Debug, Default)]
struct Node {
    value: Option<String>,
    children: BTreeMap<String, Node>,
}

/// The most parts a parameter's name has: the model's deepest,
/// `PublishBatchRequestEntries.member.N.MessageAttributes.entry.N.Value.StringValue`, has 8.
/// Decoding recurses once per part, so a name of thousands of parts would overflow the
/// stack; such a name is refused.
const MAX_PARTS: usize = 16;

/// The action and its input.
pub fn decode(pairs: &[(String, String)]) -> Result<(String, Map<String, Value>), SnsError> {
    let mut root = Node::default();
    let mut action = None;
    for (key, value) in pairs {
        match key.as_str() {
            "Action" => action = Some(value.clone()),
            "Version" => {}
            _ if key.split('.').nth(MAX_PARTS).is_some() => {
                return Err(SnsError::parameter(format!(
                    "{}…: a parameter name has at most {MAX_PARTS} parts",
                    key.chars().take(100).collect::<String>()
                )));
            }
            _ => {
                let mut node = &mut root;
                for part in key.split('.') {
                    node = node.children.entry(part.to_owned()).or_default();
                }
                node.value = Some(value.clone());
            }
        }
    }
    let action = action.ok_or_else(|| {
        SnsError::new(
            Code::InvalidAction,
            "The request names no action (Action=…).",
        )
    })?;
    let mut input = Map::new();
    for (key, node) in root.children {
        input.insert(key, convert(node)?);
    }
    Ok((action, input))
}

/// The children of a numbered node in index order.
fn numbered(node: Node, what: &str) -> Result<Vec<Node>, SnsError> {
    let mut items = Vec::new();
    for (index, child) in node.children {
        let i: u32 = index
            .parse()
            .ok()
            .filter(|i| *i >= 1)
            .ok_or_else(|| SnsError::parameter(format!("{what}.{index} has no valid index")))?;
        items.push((i, child));
    }
    items.sort_by_key(|(i, _)| *i);
    Ok(items.into_iter().map(|(_, c)| c).collect())
}

fn convert(mut node: Node) -> Result<Value, SnsError> {
    if node.children.is_empty() {
        return Ok(Value::String(node.value.unwrap_or_default()));
    }
    if node.children.len() == 1 {
        if let Some(members) = node.children.remove("member") {
            let list = numbered(members, "member")?
                .into_iter()
                .map(convert)
                .collect::<Result<_, _>>()?;
            return Ok(Value::Array(list));
        }
        if let Some(entries) = node.children.remove("entry") {
            let mut map = Map::new();
            for mut entry in numbered(entries, "entry")? {
                let key = entry
                    .children
                    .remove("key")
                    .or_else(|| entry.children.remove("Name"))
                    .and_then(|k| k.value)
                    .ok_or_else(|| SnsError::parameter("a map entry has no key"))?;
                let value = entry
                    .children
                    .remove("value")
                    .or_else(|| entry.children.remove("Value"))
                    .map(convert)
                    .transpose()?
                    .unwrap_or(Value::Null);
                map.insert(key, value);
            }
            return Ok(Value::Object(map));
        }
    }
    let mut map = Map::new();
    for (key, child) in node.children {
        map.insert(key, convert(child)?);
    }
    Ok(Value::Object(map))
}

pub fn answer(action: &str, output: &Value, request_id: &str) -> Response<Body> {
    let mut xml = format!("<?xml version=\"1.0\"?><{action}Response xmlns=\"{NAMESPACE}\">");
    if let Value::Object(fields) = output {
        xml.push_str(&format!("<{action}Result>"));
        for (key, value) in fields {
            write_member(&mut xml, key, value);
        }
        xml.push_str(&format!("</{action}Result>"));
    }
    xml.push_str(&format!(
        "<ResponseMetadata><RequestId>{}</RequestId></ResponseMetadata></{action}Response>",
        escape(request_id)
    ));
    response(200, CONTENT_TYPE, request_id, xml.into_bytes())
}

pub fn refuse(error: &SnsError, request_id: &str) -> Response<Body> {
    let xml = format!(
        "<?xml version=\"1.0\"?><ErrorResponse xmlns=\"{NAMESPACE}\"><Error><Type>{}</Type>\
         <Code>{}</Code><Message>{}</Message></Error><RequestId>{}</RequestId></ErrorResponse>",
        error.code.fault(),
        error.code.query_code(),
        escape(&error.message),
        escape(request_id)
    );
    response(
        error.code.status(),
        CONTENT_TYPE,
        request_id,
        xml.into_bytes(),
    )
}

/// One member: `Attributes` is a map (`<entry>`), arrays are lists (`<member>`), other
/// objects structures.
fn write_member(xml: &mut String, key: &str, value: &Value) {
    match value {
        Value::Null => {}
        Value::Object(map) if key == "Attributes" => {
            xml.push_str("<Attributes>");
            for (name, v) in map {
                xml.push_str(&format!(
                    "<entry><key>{}</key><value>{}</value></entry>",
                    escape(name),
                    escape(&scalar(v))
                ));
            }
            xml.push_str("</Attributes>");
        }
        Value::Array(items) => {
            xml.push_str(&format!("<{key}>"));
            for item in items {
                write_member(xml, "member", item);
            }
            xml.push_str(&format!("</{key}>"));
        }
        Value::Object(fields) => {
            xml.push_str(&format!("<{key}>"));
            for (k, v) in fields {
                write_member(xml, k, v);
            }
            xml.push_str(&format!("</{key}>"));
        }
        v => xml.push_str(&format!("<{key}>{}</{key}>", escape(&scalar(v)))),
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_maps_fold_into_the_models_shapes() {
        let body = "Action=PublishBatch&Version=2010-03-31&TopicArn=t&\
            PublishBatchRequestEntries.member.2.Id=b&PublishBatchRequestEntries.member.2.Message=y&\
            PublishBatchRequestEntries.member.1.Id=a&PublishBatchRequestEntries.member.1.Message=x&\
            PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Name=k&\
            PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Value.DataType=String&\
            PublishBatchRequestEntries.member.1.MessageAttributes.entry.1.Value.StringValue=v&\
            Attributes.entry.1.key=FifoTopic&Attributes.entry.1.value=true&\
            Tags.member.1.Key=team&Tags.member.1.Value=core";
        let (action, input) = decode(&pairs(None, body.as_bytes())).unwrap();
        assert_eq!(action, "PublishBatch");
        let entries = input["PublishBatchRequestEntries"].as_array().unwrap();
        assert_eq!(entries[0]["Id"], "a");
        assert_eq!(entries[1]["Id"], "b");
        assert_eq!(entries[0]["MessageAttributes"]["k"]["StringValue"], "v");
        assert_eq!(input["Attributes"]["FifoTopic"], "true");
        assert_eq!(input["Tags"][0]["Key"], "team");
        assert!(!input.contains_key("Version"));
    }

    #[test]
    fn a_parameter_name_of_too_many_parts_is_refused() {
        // Before, each part was a level of recursion: such a name overflowed the stack.
        let deep = format!("Action=Publish&{}b=1", "a.".repeat(200_000));
        let e = decode(&pairs(None, deep.as_bytes())).unwrap_err();
        assert_eq!(e.code, Code::InvalidParameter);
        let parts = (1..=MAX_PARTS).map(|i| format!("p{i}")).collect::<Vec<_>>();
        let body = format!("Action=Publish&{}=v", parts.join("."));
        let (_, input) = decode(&pairs(None, body.as_bytes())).unwrap();
        assert!(input.contains_key("p1"));
    }

    #[test]
    fn answers_wrap_lists_in_members_and_maps_in_entries() {
        let out = serde_json::json!({
            "Topics": [{"TopicArn": "a<"}],
            "Attributes": {"k": "v"},
        });
        let response = answer("ListTopics", &out, "r");
        assert_eq!(response.status(), 200);
        let mut xml = String::new();
        write_member(&mut xml, "Topics", &out["Topics"]);
        write_member(&mut xml, "Attributes", &out["Attributes"]);
        assert_eq!(
            xml,
            "<Topics><member><TopicArn>a&lt;</TopicArn></member></Topics>\
             <Attributes><entry><key>k</key><value>v</value></entry></Attributes>"
        );
    }
}
