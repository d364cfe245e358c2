//! A Ferry message as a JetStream message and back. Fields JetStream has no place for travel
//! in `ferry-*` headers, which a consumer is handed without; anything NATS headers cannot
//! carry unchanged is refused, never altered.

use std::collections::BTreeMap;
use std::str::FromStr;

use async_nats::HeaderMap;
use async_nats::header::{HeaderName, HeaderValue};
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::message::{DeadLetterInfo, Message, Received, header};

/// The message id the SDK assigned (`Nats-Msg-Id` may hold the dedup id instead).
pub const ID: &str = "ferry-id";
/// An ordering key that is printable ASCII.
const KEY: &str = "ferry-key";
/// Any other ordering key, hex-encoded.
const KEY_HEX: &str = "ferry-key-hex";
/// When the message was first published, on a message moved out of the holding stream.
pub const PUBLISHED_AT: &str = "ferry-published-at";
/// The delay asked for, on a message in the holding stream.
pub const DELAY_MS: &str = "ferry-delay-ms";

/// JetStream's deduplication header.
const NATS_MSG_ID: &str = "Nats-Msg-Id";

const INTERNAL: [&str; 5] = [ID, KEY, KEY_HEX, PUBLISHED_AT, DELAY_MS];

/// Headers (with the `Nats-Msg-Id` the stream deduplicates by) and payload.
pub struct Encoded {
    pub headers: HeaderMap,
    pub payload: Bytes,
}

fn refuse(name: &str, problem: &str) -> Error {
    Error::invalid(format!("header `{name}`"), problem)
}

fn insert(headers: &mut HeaderMap, name: &str, value: &str) -> Result<()> {
    let header_name = HeaderName::from_str(name)
        .map_err(|_| refuse(name, "NATS header names are printable ASCII without `:`"))?;
    if value.trim() != value {
        return Err(refuse(
            name,
            "NATS trims header values, so one with leading or trailing whitespace would change",
        ));
    }
    let header_value = HeaderValue::from_str(value)
        .map_err(|_| refuse(name, "NATS header values cannot hold CR or LF"))?;
    headers.insert(header_name, header_value);
    Ok(())
}

/// `message` (with its id set) as JetStream will store it, with the SDK's own `extra`
/// headers; `msg_id` replaces the `Nats-Msg-Id` that the dedup id (else the id) would be.
pub fn encode(
    message: &Message,
    extra: &[(&'static str, String)],
    msg_id: Option<String>,
) -> Result<Encoded> {
    let id = message
        .id
        .clone()
        .ok_or_else(|| Error::invalid("message", "has no id"))?;
    let mut headers = HeaderMap::new();
    for (name, value) in &message.headers {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("nats-") || INTERNAL.contains(&lower.as_str()) {
            return Err(refuse(
                name,
                "the name belongs to NATS or to the SDK's NATS transport",
            ));
        }
        if name == header::DLQ_ERROR {
            insert(&mut headers, name, &escape_text(value))?;
        } else {
            insert(&mut headers, name, value)?;
        }
    }
    insert(&mut headers, ID, &id)?;
    if let Some(key) = &message.key {
        if !key.is_empty() && key.iter().all(|b| b.is_ascii_graphic()) {
            insert(&mut headers, KEY, std::str::from_utf8(key).expect("ASCII"))?;
        } else {
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            insert(&mut headers, KEY_HEX, &hex)?;
        }
    }
    for (name, value) in extra {
        insert(&mut headers, name, value)?;
    }
    let msg_id = msg_id.unwrap_or_else(|| message.dedup_id.clone().unwrap_or(id));
    insert(&mut headers, NATS_MSG_ID, &msg_id)?;
    Ok(Encoded {
        headers,
        payload: message.payload.clone(),
    })
}

/// The user's headers of a stored message, without the SDK's own.
pub fn user_headers(headers: Option<&HeaderMap>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(headers) = headers else {
        return out;
    };
    for (name, values) in headers.iter() {
        let name: &str = name.as_ref();
        if name.to_ascii_lowercase().starts_with("nats-") || INTERNAL.contains(&name) {
            continue;
        }
        if let Some(value) = values.first() {
            let value = if name == header::DLQ_ERROR {
                unescape_text(value.as_str())
            } else {
                value.as_str().to_owned()
            };
            out.insert(name.to_owned(), value);
        }
    }
    out
}

fn get<'a>(headers: Option<&'a HeaderMap>, name: &str) -> Option<&'a str> {
    headers?.get(name).map(HeaderValue::as_str)
}

/// What a delivered message says about itself; `attempt` and the engine's timestamp come
/// from the delivery.
pub fn received(
    headers: Option<&HeaderMap>,
    payload: Bytes,
    fallback_id: String,
    stored_at_ms: i64,
    attempt: u32,
    dead_letter: bool,
) -> Received {
    let id = get(headers, ID)
        .or_else(|| get(headers, NATS_MSG_ID))
        .map(str::to_owned)
        .unwrap_or(fallback_id);
    let key = get(headers, KEY)
        .map(|k| Bytes::copy_from_slice(k.as_bytes()))
        .or_else(|| get(headers, KEY_HEX).and_then(from_hex));
    let published_at_ms = get(headers, PUBLISHED_AT)
        .and_then(|v| v.parse().ok())
        .unwrap_or(stored_at_ms);
    let headers = user_headers(headers);
    let dead_letter = if dead_letter {
        DeadLetterInfo::from_headers(&headers)
    } else {
        None
    };
    Received {
        id,
        key,
        headers,
        payload,
        priority: 0,
        published_at_ms,
        attempt,
        dead_letter,
    }
}

fn from_hex(hex: &str) -> Option<Bytes> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()
        .map(Bytes::from)
}

/// Error texts are free text: percent-escape what NATS headers would cut or trim.
pub fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let last = text.chars().count().saturating_sub(1);
    for (i, c) in text.chars().enumerate() {
        let edge = i == 0 || i == last;
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            c if edge && c.is_whitespace() && c.is_ascii() => {
                out.push_str(&format!("%{:02X}", c as u8))
            }
            c => out.push(c),
        }
    }
    out
}

pub fn unescape_text(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(message: Message) -> Received {
        let encoded = encode(&message, &[], None).unwrap();
        received(
            Some(&encoded.headers),
            encoded.payload,
            "fallback".into(),
            7,
            1,
            true,
        )
    }

    #[test]
    fn key_id_and_headers_come_back_as_sent() {
        for key in [&b"customer-7"[..], b"with space", b"\x00\xff", b""] {
            let sent = Message::new("p")
                .with_id("01J00000000000000000000000")
                .with_key(Bytes::copy_from_slice(key))
                .with_header("x-trace", "a b");
            let got = round_trip(sent.clone());
            assert_eq!(got.key.as_deref(), Some(key));
            assert_eq!(got.id, "01J00000000000000000000000");
            assert_eq!(got.headers, sent.headers);
        }
    }

    #[test]
    fn the_dedup_id_is_the_nats_msg_id_else_the_id() {
        let msg_id = |m: &Message, over: Option<String>| {
            let encoded = encode(m, &[], over).unwrap();
            get(Some(&encoded.headers), NATS_MSG_ID).unwrap().to_owned()
        };
        let m = Message::new("p").with_id("i");
        assert_eq!(msg_id(&m, None), "i");
        assert_eq!(msg_id(&m.clone().with_dedup_id("d"), None), "d");
        assert_eq!(msg_id(&m, Some("s:1".into())), "s:1");
    }

    #[test]
    fn headers_nats_would_change_are_refused() {
        for (name, value) in [
            ("x", " padded"),
            ("x", "line\nbreak"),
            ("a:b", "v"),
            ("Nats-Expected-Stream", "s"),
            ("ferry-id", "i"),
        ] {
            let m = Message::new("p").with_id("i").with_header(name, value);
            assert!(
                matches!(encode(&m, &[], None), Err(Error::Invalid { .. })),
                "{name}: {value}"
            );
        }
    }

    #[test]
    fn dead_letter_errors_keep_every_character() {
        for text in [" boom\r\nat line 3 % ", "plain", "", "\t"] {
            assert_eq!(unescape_text(&escape_text(text)), text);
            let m = Message::new("p")
                .with_id("i")
                .with_header(header::DLQ_REASON, "rejected")
                .with_header(header::DLQ_ERROR, text);
            let got = round_trip(m);
            assert_eq!(
                got.dead_letter.unwrap().last_error.as_deref(),
                Some(text),
                "{text:?}"
            );
        }
    }
}
