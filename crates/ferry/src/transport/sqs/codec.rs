//! A Ferry message as an SQS (or SNS) message: the payload is the body, so other SQS
//! clients read it as it was published, and what Ferry keeps besides goes in a few message
//! attributes (SQS and SNS allow ten per message):
//!
//! | attribute | type | what |
//! |---|---|---|
//! | `x-ferry-id` | String | the message id |
//! | `x-ferry-key` | Binary | the ordering key, when there is one |
//! | `x-ferry-published-at` | Number | ms since the epoch |
//! | `x-ferry-headers` | String | the headers as a JSON object, when there are any (the dead-letter metadata `ferry-dlq-*` among them) |
//! | `x-ferry-body` | String | `base64` when the payload is not text an SQS body may hold, `empty` for an empty payload |
//!
//! The names start with `x-`: Ferry's own SQS endpoint reserves the `ferry-` attribute
//! namespace for the broker's metadata.
//!
//! An SQS body must be XML characters (no control characters but tab, CR and LF) and at
//! least one character long, hence `x-ferry-body`.

use std::collections::{BTreeMap, HashMap};

use base64::Engine as _;
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, Message, Received, now_ms};

pub(super) const ID: &str = "x-ferry-id";
const KEY: &str = "x-ferry-key";
const PUBLISHED_AT: &str = "x-ferry-published-at";
const HEADERS: &str = "x-ferry-headers";
const BODY: &str = "x-ferry-body";

/// A message attribute, in neither SDK's types (SQS and SNS each have their own).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Attr {
    String(String),
    Number(String),
    Binary(Vec<u8>),
}

/// A message ready to send: its body and attributes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Encoded {
    pub id: String,
    pub body: String,
    pub attributes: Vec<(&'static str, Attr)>,
}

/// Encodes `message` (which has its id) as published at `published_at_ms`.
pub(super) fn encode(message: &Message, published_at_ms: i64) -> Encoded {
    let id = message
        .id
        .clone()
        .expect("the SDK assigns ids before publishing");
    encode_parts(
        &id,
        message.key.as_deref(),
        &message.headers,
        &message.payload,
        published_at_ms,
    )
}

pub(super) fn encode_parts(
    id: &str,
    key: Option<&[u8]>,
    headers: &BTreeMap<String, String>,
    payload: &[u8],
    published_at_ms: i64,
) -> Encoded {
    let mut attributes = vec![
        (ID, Attr::String(id.to_owned())),
        (PUBLISHED_AT, Attr::Number(published_at_ms.to_string())),
    ];
    if let Some(key) = key {
        attributes.push((KEY, Attr::Binary(key.to_vec())));
    }
    if !headers.is_empty() {
        let json = serde_json::to_string(headers).expect("a string map encodes");
        attributes.push((HEADERS, Attr::String(json)));
    }
    let body = match std::str::from_utf8(payload) {
        Ok("") => {
            attributes.push((BODY, Attr::String("empty".into())));
            "-".to_owned()
        }
        Ok(text) if text.chars().all(xml_char) => text.to_owned(),
        _ => {
            attributes.push((BODY, Attr::String("base64".into())));
            base64::engine::general_purpose::STANDARD.encode(payload)
        }
    };
    Encoded {
        id: id.to_owned(),
        body,
        attributes,
    }
}

/// The characters SQS accepts in a body.
fn xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// What a received SQS message holds, before it becomes a [`Received`].
pub(super) struct Raw<'a> {
    pub message_id: &'a str,
    pub body: &'a str,
    pub attributes: HashMap<&'a str, Attr>,
    pub receive_count: u32,
    pub sent_ms: i64,
}

/// Decodes a received message. One published by another SQS client (no `x-ferry-*`
/// attributes) is taken as it is: its SQS id, its body as the payload, its send time.
pub(super) fn decode(raw: Raw<'_>, dead_letters: bool) -> Result<Received> {
    let string = |name: &str| match raw.attributes.get(name) {
        Some(Attr::String(s) | Attr::Number(s)) => Some(s.as_str()),
        _ => None,
    };
    let payload = match string(BODY) {
        None => Bytes::copy_from_slice(raw.body.as_bytes()),
        Some("empty") => Bytes::new(),
        Some("base64") => base64::engine::general_purpose::STANDARD
            .decode(raw.body)
            .map(Bytes::from)
            .map_err(|e| corrupt(raw.message_id, format!("its base64 body: {e}")))?,
        Some(other) => return Err(corrupt(raw.message_id, format!("body encoding `{other}`"))),
    };
    let headers: BTreeMap<String, String> = match string(HEADERS) {
        Some(json) => serde_json::from_str(json)
            .map_err(|e| corrupt(raw.message_id, format!("its headers: {e}")))?,
        None => BTreeMap::new(),
    };
    let key = match raw.attributes.get(KEY) {
        Some(Attr::Binary(key)) => Some(Bytes::copy_from_slice(key)),
        _ => None,
    };
    let dead_letter = dead_letters
        .then(|| DeadLetterInfo::from_headers(&headers))
        .flatten();
    Ok(Received {
        id: string(ID).unwrap_or(raw.message_id).to_owned(),
        key,
        headers,
        payload,
        priority: 0,
        published_at_ms: string(PUBLISHED_AT).and_then(|v| v.parse().ok()).unwrap_or(
            if raw.sent_ms > 0 {
                raw.sent_ms
            } else {
                now_ms()
            },
        ),
        attempt: raw.receive_count.max(1),
        dead_letter,
    })
}

fn corrupt(id: &str, what: String) -> Error {
    Error::Transport {
        transport: super::capabilities::NAME,
        message: format!("SQS message {id} carries a malformed {what}"),
        source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(message: Message) -> Received {
        let encoded = encode(&message, 1234);
        decode(
            Raw {
                message_id: "sqs-id",
                body: &encoded.body,
                attributes: encoded.attributes.into_iter().collect(),
                receive_count: 2,
                sent_ms: 99,
            },
            false,
        )
        .unwrap()
    }

    #[test]
    fn text_binary_and_empty_payloads_come_back_as_published() {
        for payload in [&b"plain text"[..], b"", b"\x00\x01\xff", b"bell\x07"] {
            let m = Message::new(payload.to_vec())
                .with_id("01J")
                .with_key(&b"k\x00"[..])
                .with_header("type", "order");
            let r = round_trip(m);
            assert_eq!(&r.payload[..], payload);
            assert_eq!(r.id, "01J");
            assert_eq!(r.key.as_deref(), Some(&b"k\x00"[..]));
            assert_eq!(r.header("type"), Some("order"));
            assert_eq!((r.published_at_ms, r.attempt), (1234, 2));
        }
        let text = encode(&Message::new("héllo").with_id("x"), 1);
        assert_eq!(text.body, "héllo");
        assert_eq!(
            text.attributes.len(),
            2,
            "no encoding attribute for plain text"
        );
    }

    #[test]
    fn a_message_from_another_client_is_taken_as_it_is() {
        let r = decode(
            Raw {
                message_id: "sqs-id",
                body: "hello",
                attributes: HashMap::new(),
                receive_count: 1,
                sent_ms: 42,
            },
            true,
        )
        .unwrap();
        assert_eq!(
            (r.id.as_str(), &r.payload[..], r.published_at_ms),
            ("sqs-id", &b"hello"[..], 42)
        );
        assert_eq!(r.dead_letter, None);
    }
}
