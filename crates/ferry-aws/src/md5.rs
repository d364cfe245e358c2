//! The MD5 digests SQS answers with and SDKs check (the Java and Go SDKs refuse a message
//! whose digests do not match): of the body, and of the message attributes and the
//! message system attributes, encoded as AWS documents it — for each attribute, sorted by
//! name (byte order): the name, the data type, one transport byte (1 for String and
//! Number, 2 for Binary) and the value, each length-prefixed with a 4-byte big-endian
//! length except the transport byte.

use md5::{Digest, Md5};

use crate::message_attributes::{AttributeValue, Attributes};

/// Lowercase hex MD5 of `bytes`.
pub fn hex_md5(bytes: &[u8]) -> String {
    let digest = Md5::digest(bytes);
    let mut out = String::with_capacity(32);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// MD5OfMessageAttributes (and MD5OfMessageSystemAttributes) of `attributes`; `None` when
/// there are none, as SQS leaves the field out then.
pub fn of_attributes(attributes: &Attributes) -> Option<String> {
    if attributes.is_empty() {
        return None;
    }
    let mut encoded = Vec::new();
    // A BTreeMap iterates in byte order of the names, the order AWS sorts by.
    for (name, attribute) in attributes {
        length_prefixed(&mut encoded, name.as_bytes());
        length_prefixed(&mut encoded, attribute.data_type.as_bytes());
        match &attribute.value {
            AttributeValue::String(s) => {
                encoded.push(1);
                length_prefixed(&mut encoded, s.as_bytes());
            }
            AttributeValue::Binary(b) => {
                encoded.push(2);
                length_prefixed(&mut encoded, b);
            }
        }
    }
    Some(hex_md5(&encoded))
}

fn length_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message_attributes::Attribute;

    fn string(data_type: &str, value: &str) -> Attribute {
        Attribute {
            data_type: data_type.into(),
            value: AttributeValue::String(value.into()),
        }
    }

    // Published vectors of other SQS implementations, computed against AWS.
    #[test]
    fn digests_match_published_vectors() {
        let one: Attributes = [("timestamp".into(), string("Number", "1493147359900"))].into();
        assert_eq!(
            of_attributes(&one).unwrap(),
            "235c5c510d26fb653d073faed50ae77c"
        );
        let two: Attributes = [
            ("ordinal".into(), string("Number", "1")),
            ("category".into(), string("String", "test")),
        ]
        .into();
        assert_eq!(
            of_attributes(&two).unwrap(),
            "d21ae90c49061e927f57df5f5d72be1f"
        );
        let store: Attributes = [("SellerName".into(), string("String", "Example Store"))].into();
        assert_eq!(
            of_attributes(&store).unwrap(),
            "cd28f3b68aeee4b2eac9c66f2f694b58"
        );
        assert_eq!(of_attributes(&Attributes::new()), None);
        assert_eq!(hex_md5(b""), "d41d8cd98f00b204e9800998ecf8427e");
    }
}
