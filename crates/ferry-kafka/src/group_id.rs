//! Kafka group ids as the names of the broker's groups, which hold a Kafka group's
//! committed offsets.
//!
//! A Kafka group id is any string (`range,roundrobin`, `my group:1`), a Ferry group name is
//! not (ASCII letters, digits, `.`, `_`, `-`; see `ferry_broker::Name`). The Kafka side
//! always shows the client's id unchanged; only the broker sees the name. The mapping:
//!
//! - an id that is a Ferry name and does not start with [`PREFIX`] is its own name, so
//!   Ferry-named groups look the same from Kafka, `ferry group` and Ferry's other APIs;
//! - any other id — empty, with other characters, or starting with the prefix — is
//!   [`PREFIX`] followed by its UTF-8 bytes, ASCII letters and digits as they are and
//!   every other byte as `_` and two lowercase hex digits: `range,roundrobin` is
//!   `kafka__range_2croundrobin`, `kafka__x` is `kafka__kafka_5f_5fx`.
//!
//! Two ids never share a name: a plain name never starts with the prefix, and the escaped
//! form is one-to-one. Decoding accepts only what encoding produces, so a broker group
//! whose name starts with the prefix without being an encoding (one made through Ferry's
//! own APIs) is no Kafka group's and is not listed as one. An id whose name would exceed
//! the name limit (every escaped byte takes three) cannot be served: INVALID_GROUP_ID.

use std::fmt::Write;

use ferry_broker::Name;

/// What starts the name of every group whose id is not a plain Ferry name.
pub const PREFIX: &str = "kafka__";

/// Why a Kafka group id has no broker group name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupIdError {
    #[error(
        "group id {start:?}… ({len} bytes) would be a {encoded}-byte group name, over the \
         {max}-byte limit (each byte other than an ASCII letter or digit takes 3)"
    )]
    TooLong {
        /// The id's first characters, for the message.
        start: String,
        len: usize,
        encoded: usize,
        max: usize,
    },
}

/// The broker group name of the Kafka group `id`.
pub fn to_name(id: &str) -> Result<Name, GroupIdError> {
    if !id.starts_with(PREFIX)
        && let Ok(name) = Name::new(id)
    {
        return Ok(name);
    }
    let mut encoded = String::with_capacity(PREFIX.len() + id.len() * 3);
    encoded.push_str(PREFIX);
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "_{byte:02x}");
        }
    }
    let too_long = || GroupIdError::TooLong {
        start: id.chars().take(32).collect(),
        len: id.len(),
        encoded: encoded.len(),
        max: Name::MAX_LEN,
    };
    if encoded.len() > Name::MAX_LEN {
        return Err(too_long());
    }
    // Letters, digits and `_` after a prefix starting with a letter: a valid name of any
    // length up to the limit checked above.
    Name::new(encoded.clone()).map_err(|_| too_long())
}

/// The Kafka group id whose broker group is named `name`; `None` for a name no id maps to.
pub fn from_name(name: &str) -> Option<String> {
    let Some(escaped) = name.strip_prefix(PREFIX) else {
        return Some(name.to_owned());
    };
    let mut bytes = Vec::with_capacity(escaped.len());
    let mut rest = escaped.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'_' {
            let hex = tail.get(..2)?;
            if !hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return None;
            }
            let byte = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            bytes.push(byte);
            rest = &tail[2..];
        } else {
            bytes.push(first);
            rest = tail;
        }
    }
    let id = String::from_utf8(bytes).ok()?;
    // Only what encoding produces decodes: not `kafka__abc` (`abc` is its own name), nor
    // an escaped letter or uppercase hex.
    (to_name(&id).ok()?.as_str() == name).then_some(id)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn ferry_names_are_their_own_names() {
        for id in ["orders", "billing.v2", "a-b_c", "0group"] {
            assert_eq!(to_name(id).unwrap().as_str(), id);
            assert_eq!(from_name(id).as_deref(), Some(id));
        }
    }

    #[test]
    fn other_ids_are_escaped_after_the_prefix() {
        let cases = [
            ("range,roundrobin", "kafka__range_2croundrobin"),
            ("my group:1", "kafka__my_20group_3a1"),
            ("", "kafka__"),
            ("-x", "kafka___2dx"),
            ("a..b", "kafka__a_2e_2eb"),
            ("é", "kafka___c3_a9"),
        ];
        for (id, name) in cases {
            assert_eq!(to_name(id).unwrap().as_str(), name, "{id:?}");
            assert_eq!(from_name(name).as_deref(), Some(id), "{name:?}");
        }
    }

    #[test]
    fn a_plain_id_starting_with_the_prefix_is_escaped_too() {
        let name = to_name("kafka__range").unwrap();
        assert_eq!(name.as_str(), "kafka__kafka_5f_5frange");
        assert_ne!(name, to_name("range").unwrap());
        assert_eq!(from_name(name.as_str()).as_deref(), Some("kafka__range"));
    }

    #[test]
    fn names_that_no_id_encodes_to_do_not_decode() {
        for name in [
            // What `abc` would be if it were escaped: but `abc` is its own name.
            "kafka__abc",
            // Uppercase hex, an escaped letter, a short escape, invalid UTF-8.
            "kafka__a_2C",
            "kafka___61",
            "kafka__a_2",
            "kafka___ff",
        ] {
            assert_eq!(from_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn an_id_too_long_to_name_is_refused() {
        let id = ",".repeat(65);
        let err = to_name(&id).unwrap_err();
        assert!(
            matches!(
                err,
                GroupIdError::TooLong {
                    len: 65,
                    encoded: 202,
                    max: 200,
                    ..
                }
            ),
            "{err:?}"
        );
        // The longest escaped id that fits: (200 - 7) / 3 bytes.
        assert!(to_name(&",".repeat(64)).is_ok());
        // A plain name is never lengthened.
        assert!(to_name(&"a".repeat(200)).is_ok());
    }

    proptest! {
        #[test]
        fn every_id_round_trips_and_names_are_distinct(
            a in "(kafka__)?[ -~é,:_.]{0,40}",
            b in "(kafka__)?[ -~é,:_.]{0,40}",
        ) {
            let name_a = to_name(&a).unwrap();
            prop_assert_eq!(from_name(name_a.as_str()), Some(a.clone()));
            let name_b = to_name(&b).unwrap();
            prop_assert_eq!(name_a == name_b, a == b);
        }

        #[test]
        fn every_decodable_name_is_its_ids_name(name in "kafka__[a-z0-9_]{0,20}") {
            if let Some(id) = from_name(&name) {
                let encoded = to_name(&id).unwrap();
                prop_assert_eq!(encoded.as_str(), name.as_str());
            }
        }
    }
}
