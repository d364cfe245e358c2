//! Message header names: the well-known ones every layer agrees on, and the prefix the
//! broker keeps for its own metadata.
//!
//! Headers are a string map. Well-known names are constants rather than typed fields so a
//! message stays one shape across transports that only carry string headers (AMQP, NATS,
//! HTTP), while code still spells them one way.

/// The kind of event or command, e.g. `order.created`.
pub const TYPE: &str = "type";
/// The schema version of the payload, for consumers that handle several.
pub const VERSION: &str = "version";
/// The payload's media type, e.g. `application/json`.
pub const CONTENT_TYPE: &str = "content-type";
/// Ties a reply, or every message of one business flow, to the message that started it.
pub const CORRELATION_ID: &str = "correlation-id";
/// W3C trace context, so a trace continues across the broker.
pub const TRACEPARENT: &str = "traceparent";
/// Where a request/reply responder sends its answer.
pub const REPLY_TO: &str = "reply-to";
/// The service that produced the message.
pub const SOURCE: &str = "source";
/// What a message is about, dot-separated (`orders.eu.created`): the header a subscription
/// filter's subject pattern matches.
pub const SUBJECT: &str = "subject";

/// Prefix of the header names the broker writes for its own metadata (see
/// `record.rs`). Publish refuses user headers that start with it in any letter case,
/// so broker metadata can never be forged or shadowed by a producer — and so that names
/// stay unambiguous when the server maps them to case-insensitive HTTP headers.
pub const RESERVED_PREFIX: &str = "ferry-";

/// When the producer created the message, in decimal ms since the Unix epoch — Kafka's
/// CreateTime, kept for producers that set their own timestamps, while the message's
/// `published_at` stays the time the broker stored it. The one name in the reserved
/// namespace a publisher may set (exactly so spelled, a value from 0 to `i64::MAX`): it is
/// stored and delivered among the message's headers, so every API shows it alike.
pub const CREATED_AT: &str = "ferry-created-at";

/// The schema registry id of the schema a payload was written with, in decimal, for
/// producers that do not put Confluent's wire-format prefix in the payload: a channel that
/// requires a schema subject checks the payload against this schema (see
/// `schema_requirement.rs`). Like [`CREATED_AT`], a name in the reserved namespace a
/// publisher may set (exactly so spelled, a value from 0 to `u32::MAX`), stored and
/// delivered with the message so that a consumer knows how to decode it.
pub const SCHEMA_ID: &str = "ferry-schema-id";

/// A [`SCHEMA_ID`] value, `None` when it is not one.
pub fn parse_schema_id(value: &str) -> Option<u32> {
    value.parse::<u32>().ok()
}

/// A [`CREATED_AT`] value, `None` when it is not one.
pub fn parse_created_at(value: &str) -> Option<i64> {
    value.parse::<i64>().ok().filter(|&t| t >= 0)
}

/// Whether `name` is in the broker's reserved namespace (case-insensitive).
pub fn is_reserved(name: &str) -> bool {
    name.len() >= RESERVED_PREFIX.len()
        && name.as_bytes()[..RESERVED_PREFIX.len()].eq_ignore_ascii_case(RESERVED_PREFIX.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_prefix_matches_in_any_letter_case() {
        for name in ["ferry-id", "Ferry-Id", "FERRY-x", "ferry-"] {
            assert!(is_reserved(name), "{name}");
        }
        for name in ["ferry", "ferryman", "x-ferry-id", "", "ferr"] {
            assert!(!is_reserved(name), "{name}");
        }
    }

    #[test]
    fn well_known_names_are_not_reserved() {
        for name in [
            TYPE,
            VERSION,
            CONTENT_TYPE,
            CORRELATION_ID,
            TRACEPARENT,
            REPLY_TO,
            SOURCE,
            SUBJECT,
        ] {
            assert!(!is_reserved(name));
        }
    }
}
