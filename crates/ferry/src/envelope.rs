//! The message envelope every Ferry event travels in: id, type, version, source, time,
//! correlation id, payload and metadata.
//!
//! It is carried in "binary mode" — the attributes as headers (`type`, `version`, `source`,
//! `time`, `correlation-id`, `content-type`), the payload alone as the body (JSON) — so
//! consumers, routers and filters read the attributes without decoding the payload, a
//! non-SDK client sees an ordinary message, and the id is the message id every transport
//! deduplicates and traces by.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::message::{Message, Received, header, now_ms};

const JSON: &str = "application/json";

/// The headers the envelope owns; metadata may not use them.
const ATTRIBUTES: [&str; 6] = [
    header::TYPE,
    header::VERSION,
    header::SOURCE,
    header::TIME,
    header::CORRELATION_ID,
    header::CONTENT_TYPE,
];

/// A typed event with its attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope<T> {
    /// A ULID: the message id.
    pub id: String,
    /// What happened, e.g. `OrderPlaced`; consumers route on it.
    pub event_type: String,
    /// The payload's schema version; bump it on any change consumers must know of, and let
    /// consumers accept the previous one during a rollout.
    pub version: String,
    /// Who published it, e.g. `order-service`.
    pub source: String,
    /// When the event happened, in milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// Ties the events of one flow together (and replies to their requests).
    pub correlation_id: Option<String>,
    pub payload: T,
    /// Further string attributes, carried as headers (not `ferry-*`, not the attributes above).
    pub metadata: BTreeMap<String, String>,
}

impl<T> Envelope<T> {
    /// A new event of `event_type`, version `1`, happening now, with a fresh id.
    pub fn new(event_type: impl Into<String>, payload: T) -> Envelope<T> {
        Envelope {
            id: crate::message::new_id(),
            event_type: event_type.into(),
            version: "1".into(),
            source: String::new(),
            time_ms: now_ms(),
            correlation_id: None,
            payload,
            metadata: BTreeMap::new(),
        }
    }
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }
    pub fn source(mut self, source: impl Into<String>) -> Self {
        self.source = source.into();
        self
    }
    pub fn correlation_id(mut self, id: impl Into<String>) -> Self {
        self.correlation_id = Some(id.into());
        self
    }
    pub fn metadata(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(name.into(), value.into());
        self
    }
}

impl<T: Serialize> Envelope<T> {
    /// The message that carries this envelope.
    pub fn to_message(&self) -> Result<Message> {
        if self.event_type.is_empty() {
            return Err(Error::invalid("envelope type", "must not be empty"));
        }
        let mut message = Message::new(serde_json::to_vec(&self.payload)?).with_id(&self.id);
        for (name, value) in &self.metadata {
            if ATTRIBUTES.contains(&name.as_str()) || name.starts_with("ferry-") {
                return Err(Error::invalid(
                    format!("envelope metadata `{name}`"),
                    "the name belongs to an envelope attribute or to Ferry",
                ));
            }
            message.headers.insert(name.clone(), value.clone());
        }
        let headers = &mut message.headers;
        headers.insert(header::TYPE.into(), self.event_type.clone());
        headers.insert(header::VERSION.into(), self.version.clone());
        if !self.source.is_empty() {
            headers.insert(header::SOURCE.into(), self.source.clone());
        }
        headers.insert(header::TIME.into(), self.time_ms.to_string());
        if let Some(id) = &self.correlation_id {
            headers.insert(header::CORRELATION_ID.into(), id.clone());
        }
        headers.insert(header::CONTENT_TYPE.into(), JSON.into());
        Ok(message)
    }
}

impl<T: DeserializeOwned> Envelope<T> {
    /// The envelope a received message carries; an error says which part is missing or
    /// does not decode as `T`.
    pub fn from_received(message: &Received) -> Result<Envelope<T>> {
        let required = |name: &str| {
            message
                .header(name)
                .map(str::to_owned)
                .ok_or_else(|| Error::invalid("envelope", format!("no `{name}` header")))
        };
        if let Some(content_type) = message.header(header::CONTENT_TYPE)
            && content_type != JSON
        {
            return Err(Error::invalid(
                "envelope",
                format!("content-type `{content_type}` is not {JSON}"),
            ));
        }
        let time_ms = match message.header(header::TIME) {
            Some(time) => time
                .parse()
                .map_err(|_| Error::invalid("envelope", format!("bad `time` header `{time}`")))?,
            None => message.published_at_ms,
        };
        let metadata = message
            .headers
            .iter()
            .filter(|(name, _)| !ATTRIBUTES.contains(&name.as_str()) && !name.starts_with("ferry-"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Envelope {
            id: message.id.clone(),
            event_type: required(header::TYPE)?,
            version: required(header::VERSION)?,
            source: message
                .header(header::SOURCE)
                .unwrap_or_default()
                .to_owned(),
            time_ms,
            correlation_id: message.header(header::CORRELATION_ID).map(str::to_owned),
            payload: serde_json::from_slice(&message.payload)?,
            metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
    struct OrderPlaced {
        order: u64,
        total_cents: i64,
    }

    #[test]
    fn an_envelope_survives_the_trip_through_a_message() {
        let sent = Envelope::new(
            "OrderPlaced",
            OrderPlaced {
                order: 7,
                total_cents: 1999,
            },
        )
        .version("2")
        .source("order-service")
        .correlation_id("flow-1")
        .metadata("tenant", "eu");
        let message = sent.to_message().unwrap();
        assert_eq!(message.id.as_deref(), Some(sent.id.as_str()));
        assert_eq!(message.headers["type"], "OrderPlaced");
        let back: Envelope<OrderPlaced> =
            Envelope::from_received(&Received::first_delivery_of(message)).unwrap();
        assert_eq!(back, sent);
    }

    #[test]
    fn bad_envelopes_are_refused_with_what_is_wrong() {
        let clash = Envelope::new("X", 1).metadata("type", "Y");
        assert!(clash.to_message().is_err());
        let plain =
            Received::first_delivery_of(Message::new("{}").with_id("01J00000000000000000000000"));
        let err = Envelope::<serde_json::Value>::from_received(&plain).unwrap_err();
        assert!(err.to_string().contains("`type`"), "{err}");
        let message = Envelope::new("X", "text").to_message().unwrap();
        let err =
            Envelope::<u64>::from_received(&Received::first_delivery_of(message)).unwrap_err();
        assert!(matches!(err, Error::Payload(_)), "{err}");
    }
}
