//! The query protocol: form parameters (from the URL and a form body) folded into the
//! model's input shape, and outputs written as the XML SQS answers with.
//!
//! Flattened lists and maps arrive numbered from 1: `AttributeName.1`,
//! `Attribute.1.Name` / `Attribute.1.Value`, `Tag.1.Key` / `Tag.1.Value`, `TagKey.1`,
//! `MessageAttribute.1.Name` / `MessageAttribute.1.Value.StringValue`, batch entries as
//! `SendMessageBatchRequestEntry.1.<member>`. A request posted to a queue's URL path
//! without a `QueueUrl` parameter is addressed to that queue.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::Response;
use serde_json::{Map, Value};

use super::{Protocol, Request, response};
use crate::errors::{Code, SqsError};

const CONTENT_TYPE: &str = "text/xml";
const NAMESPACE: &str = "http://queue.amazonaws.com/doc/2012-11-05/";

pub fn decode(path: &str, query: Option<&str>, body: &[u8]) -> Result<Request, SqsError> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    if let Some(q) = query {
        pairs.extend(form_urlencoded::parse(q.as_bytes()).into_owned());
    }
    pairs.extend(form_urlencoded::parse(body).into_owned());
    let action = pairs
        .iter()
        .find(|(k, _)| k == "Action")
        .map(|(_, v)| v.clone())
        .ok_or_else(|| {
            SqsError::new(
                Code::InvalidAction,
                "The request names no action: use the Action parameter (query protocol) or \
                 the X-Amz-Target header (JSON protocol).",
            )
        })?;
    let mut input = fold(&pairs, false)?;
    input.remove("Action");
    input.remove("Version");
    if !input.contains_key("QueueUrl") && path.trim_matches('/').contains('/') {
        input.insert("QueueUrl".into(), Value::String(path.to_owned()));
    }
    Ok(Request {
        protocol: Protocol::Query,
        action,
        input,
    })
}

/// Scalar lists: the parameter's prefix and the input member it fills.
const LISTS: [(&str, &str); 6] = [
    ("AttributeName", "AttributeNames"),
    ("MessageAttributeName", "MessageAttributeNames"),
    ("MessageSystemAttributeName", "MessageSystemAttributeNames"),
    ("TagKey", "TagKeys"),
    // AddPermission's `AWSAccountId.N` and `ActionName.N`.
    ("AWSAccountId", "AWSAccountIds"),
    ("ActionName", "Actions"),
];
/// Batch entries: every batch's entries fill `Entries`.
const ENTRIES: [&str; 3] = [
    "SendMessageBatchRequestEntry",
    "DeleteMessageBatchRequestEntry",
    "ChangeMessageVisibilityBatchRequestEntry",
];

/// The members of a numbered list by index: each the rest of its keys with their values.
type Numbered = BTreeMap<u32, Vec<(String, String)>>;

/// Folds `pairs` into the input shape; `in_entry` for a batch entry's own members, where
/// another batch's entries mean nothing and are skipped like any unknown parameter (so a
/// request nesting entries in entries cannot recurse any deeper).
fn fold(pairs: &[(String, String)], in_entry: bool) -> Result<Map<String, Value>, SqsError> {
    let mut out = Map::new();
    let mut groups: BTreeMap<&str, Numbered> = BTreeMap::new();
    for (key, value) in pairs {
        let Some((head, rest)) = key.split_once('.') else {
            out.insert(key.clone(), Value::String(value.clone()));
            continue;
        };
        let (index, rest) = rest.split_once('.').unwrap_or((rest, ""));
        let index: u32 = index.parse().ok().filter(|i| *i >= 1).ok_or_else(|| {
            SqsError::invalid(format!(
                "Parameter {:?} has no valid index; number lists from 1.",
                key.chars().take(100).collect::<String>()
            ))
        })?;
        let head = match head {
            h if LISTS.iter().any(|(p, _)| *p == h) => h,
            h if ENTRIES.contains(&h) && !in_entry => h,
            "Attribute" | "Tag" | "Tags" | "MessageAttribute" | "MessageSystemAttribute" => head,
            _ => continue,
        };
        groups
            .entry(head)
            .or_default()
            .entry(index)
            .or_default()
            .push((rest.to_owned(), value.clone()));
    }
    for (head, members) in groups {
        if let Some((_, member)) = LISTS.iter().find(|(p, _)| *p == head) {
            let list = members
                .into_values()
                .filter_map(|fields| fields.into_iter().find(|(k, _)| k.is_empty()))
                .map(|(_, v)| Value::String(v))
                .collect();
            out.insert((*member).into(), Value::Array(list));
        } else if ENTRIES.contains(&head) {
            let mut entries = Vec::new();
            for fields in members.into_values() {
                entries.push(Value::Object(fold(&fields, true)?));
            }
            out.insert("Entries".into(), Value::Array(entries));
        } else {
            let (member, key_name, value_name) = match head {
                "Attribute" => ("Attributes", "Name", "Value"),
                "Tag" | "Tags" => ("Tags", "Key", "Value"),
                "MessageAttribute" => ("MessageAttributes", "Name", "Value"),
                _ => ("MessageSystemAttributes", "Name", "Value"),
            };
            let mut map = Map::new();
            for fields in members.into_values() {
                let name = fields
                    .iter()
                    .find(|(k, _)| k == key_name)
                    .map(|(_, v)| v.clone());
                let Some(name) = name else {
                    return Err(SqsError::invalid(format!(
                        "{head} entries need a {key_name}."
                    )));
                };
                let value = if head.starts_with("Message") {
                    let nested: Map<String, Value> = fields
                        .iter()
                        .filter_map(|(k, v)| {
                            k.strip_prefix(&format!("{value_name}."))
                                .map(|field| (field.to_owned(), Value::String(v.clone())))
                        })
                        .collect();
                    Value::Object(nested)
                } else {
                    let v = fields
                        .iter()
                        .find(|(k, _)| k == value_name)
                        .map(|(_, v)| v.clone());
                    Value::String(v.unwrap_or_default())
                };
                map.insert(name, value);
            }
            out.insert(member.into(), Value::Object(map));
        }
    }
    Ok(out)
}

pub fn answer(action: &str, output: &Value, request_id: &str) -> Response<Body> {
    let mut xml = String::from("<?xml version=\"1.0\"?>");
    xml.push_str(&format!("<{action}Response xmlns=\"{NAMESPACE}\">"));
    if let Value::Object(fields) = output
        && !fields.is_empty()
    {
        xml.push_str(&format!("<{action}Result>"));
        for (key, value) in fields {
            write_member(&mut xml, action, key, value);
        }
        xml.push_str(&format!("</{action}Result>"));
    }
    xml.push_str(&format!(
        "<ResponseMetadata><RequestId>{}</RequestId></ResponseMetadata></{action}Response>",
        escape(request_id)
    ));
    response(200, CONTENT_TYPE, request_id, xml.into_bytes())
}

pub fn refuse(error: &SqsError, request_id: &str) -> Response<Body> {
    let xml = format!(
        "<?xml version=\"1.0\"?><ErrorResponse xmlns=\"{NAMESPACE}\"><Error><Type>{}</Type>\
         <Code>{}</Code><Message>{}</Message><Detail/></Error><RequestId>{}</RequestId>\
         </ErrorResponse>",
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

/// One member of an output, under the element names SQS's XML uses.
fn write_member(xml: &mut String, action: &str, key: &str, value: &Value) {
    match (key, value) {
        ("Attributes", Value::Object(map)) => {
            for (name, v) in map {
                xml.push_str(&format!(
                    "<Attribute><Name>{}</Name><Value>{}</Value></Attribute>",
                    escape(name),
                    escape(&scalar(v))
                ));
            }
        }
        ("Tags", Value::Object(map)) => {
            for (name, v) in map {
                xml.push_str(&format!(
                    "<Tag><Key>{}</Key><Value>{}</Value></Tag>",
                    escape(name),
                    escape(&scalar(v))
                ));
            }
        }
        ("MessageAttributes", Value::Object(map)) => {
            for (name, v) in map {
                xml.push_str(&format!(
                    "<MessageAttribute><Name>{}</Name><Value>",
                    escape(name)
                ));
                if let Value::Object(fields) = v {
                    for (k, field) in fields {
                        write_member(xml, action, k, field);
                    }
                }
                xml.push_str("</Value></MessageAttribute>");
            }
        }
        (_, Value::Array(items)) => {
            let element = match key {
                "QueueUrls" | "queueUrls" => "QueueUrl".to_owned(),
                "Messages" => "Message".to_owned(),
                "Successful" => format!("{action}ResultEntry"),
                "Failed" => "BatchResultErrorEntry".to_owned(),
                // ListMessageMoveTasks' flattened list.
                "Results" => format!("{action}ResultEntry"),
                other => other.to_owned(),
            };
            for item in items {
                write_member(xml, action, &element, item);
            }
        }
        (_, Value::Object(fields)) => {
            xml.push_str(&format!("<{key}>"));
            for (k, v) in fields {
                write_member(xml, action, k, v);
            }
            xml.push_str(&format!("</{key}>"));
        }
        (_, Value::Null) => {}
        (_, v) => xml.push_str(&format!("<{key}>{}</{key}>", escape(&scalar(v)))),
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Text as XML character data: the five markup characters as entities, and CR as a
/// character reference so it survives a parser's line-end normalization.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_parameters_fold_into_the_models_shapes() {
        let body = "Action=SendMessageBatch&QueueUrl=u&\
            SendMessageBatchRequestEntry.2.Id=b&SendMessageBatchRequestEntry.2.MessageBody=y&\
            SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=x&\
            SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=k&\
            SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=String&\
            SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue=v";
        let r = decode("/", None, body.as_bytes()).unwrap();
        assert_eq!(r.action, "SendMessageBatch");
        let entries = r.input["Entries"].as_array().unwrap();
        assert_eq!(entries[0]["Id"], "a");
        assert_eq!(entries[1]["Id"], "b");
        assert_eq!(entries[0]["MessageAttributes"]["k"]["StringValue"], "v");
        let r = decode(
            "/000000000000/q",
            Some("Action=CreateQueue&QueueName=q&Attribute.1.Name=DelaySeconds&Attribute.1.Value=5&AttributeName.1=All"),
            b"",
        )
        .unwrap();
        assert_eq!(r.input["Attributes"]["DelaySeconds"], "5");
        assert_eq!(r.input["AttributeNames"][0], "All");
        assert_eq!(r.input["QueueUrl"], "/000000000000/q");
    }

    #[test]
    fn entries_nested_in_entries_are_skipped_not_recursed_into() {
        // Before, each level of nesting was a level of recursion: a body of nested entries
        // overflowed the stack.
        let body = format!(
            "Action=SendMessageBatch&SendMessageBatchRequestEntry.1.Id=a&{}Id=b",
            "SendMessageBatchRequestEntry.1.".repeat(100_000)
        );
        let r = decode("/", None, body.as_bytes()).unwrap();
        let entries = r.input["Entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0], serde_json::json!({"Id": "a"}));
    }

    #[test]
    fn markup_in_values_is_escaped() {
        assert_eq!(escape("<a & 'b'>\r"), "&lt;a &amp; &apos;b&apos;&gt;&#xD;");
    }
}
