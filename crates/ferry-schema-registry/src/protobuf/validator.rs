//! Enforcement at publish for Protobuf subjects. The payload is what follows Confluent's
//! 5-byte magic-and-id prefix: the message-index array (a zig-zag varint count, then
//! that many zig-zag varint indexes into the file's messages and their nested ones; a
//! count of 0 — the single byte `0` — means the first message), then the message.
//!
//! The message is decoded with `prost-reflect`'s `DynamicMessage`, which refuses
//! truncated or malformed wire data and a value whose wire type is not its field's, and
//! keeps unknown fields (as Confluent's deserializer does: a newer writer may add them).
//! `DynamicMessage` does not say which field failed, so a refused payload is walked
//! record by record (a small wire-format reader, below) to name it.

use prost::encoding::decode_varint;
use prost_reflect::{DynamicMessage, Kind, MessageDescriptor};

use crate::model::Registry;
use crate::{PayloadRejection, StoredSchema};

/// A compiled `.proto`, for many payloads.
#[derive(Debug)]
pub(crate) struct ProtobufPayloadValidator {
    schema: super::ProtobufSchema,
}

impl ProtobufPayloadValidator {
    /// Compiles `schema`, its imports resolved from its references in `registry` as
    /// registration does.
    pub(crate) fn compile(
        schema: &StoredSchema,
        registry: &Registry,
    ) -> Result<ProtobufPayloadValidator, String> {
        let references = registry
            .resolve_references(&schema.references)
            .map_err(|e| e.to_string())?;
        Ok(ProtobufPayloadValidator {
            schema: super::parse(&schema.schema, &references)?,
        })
    }

    /// Whether `payload` (message indexes, then the message) is a message of the schema.
    pub(crate) fn validate(&self, payload: &[u8]) -> Result<(), PayloadRejection> {
        let mut rest = payload;
        let indexes = message_indexes(&mut rest)?;
        let message = self.message(&indexes)?;
        match DynamicMessage::decode(message.clone(), rest) {
            Ok(_) => Ok(()),
            Err(error) => Err(locate(&message, rest, "").unwrap_or_else(|| {
                PayloadRejection::whole(format!("not a {} message: {error}", message.full_name()))
            })),
        }
    }

    /// The message the indexes name: the first into the file's messages, each next one
    /// into the nested messages of the one before.
    fn message(&self, indexes: &[i64]) -> Result<MessageDescriptor, PayloadRejection> {
        let unknown = || {
            PayloadRejection::whole(format!(
                "message index {indexes:?} names no message of the schema"
            ))
        };
        let mut found: Option<MessageDescriptor> = None;
        for &index in indexes {
            let index = usize::try_from(index).map_err(|_| unknown())?;
            let next = match &found {
                None => self.schema.file.messages().nth(index),
                Some(parent) => parent.child_messages().nth(index),
            };
            found = Some(next.ok_or_else(unknown)?);
        }
        found.ok_or_else(unknown)
    }
}

/// Reads the message-index array off the front of `buf`.
fn message_indexes(buf: &mut &[u8]) -> Result<Vec<i64>, PayloadRejection> {
    let bad = |what: &str| {
        PayloadRejection::whole(format!(
            "{what} in the message-index array before the message"
        ))
    };
    let count = zigzag(decode_varint(buf).map_err(|_| bad("a truncated or invalid count"))?);
    if count == 0 {
        return Ok(vec![0]);
    }
    // Each index takes a byte at least: a count beyond the payload is garbage.
    if count < 0 || count as u64 > buf.len() as u64 {
        return Err(bad(&format!("an impossible count {count}")));
    }
    (0..count)
        .map(|_| {
            decode_varint(buf)
                .map(zigzag)
                .map_err(|_| bad("a truncated or invalid index"))
        })
        .collect()
}

fn zigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// The first record of `buf` (a `message`) that fails to decode, with its field's path
/// under `path`; `None` when no single record is to blame (a group, say).
fn locate(message: &MessageDescriptor, buf: &[u8], path: &str) -> Option<PayloadRejection> {
    let mut rest = buf;
    let mut seen: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    while !rest.is_empty() {
        let record_start = rest;
        let Ok(key) = decode_varint(&mut rest) else {
            return Some(at(path, "a truncated or invalid field key"));
        };
        let number = (key >> 3) as u32;
        let field = message.get_field(number);
        let mut field_path = join(
            path,
            &field
                .as_ref()
                .map_or_else(|| format!("#{number}"), |f| f.name().to_owned()),
        );
        if let Some(f) = &field
            && f.is_list()
        {
            let i = seen.entry(number).or_default();
            field_path = format!("{field_path}[{i}]");
            *i += 1;
        }
        let truncated = || Some(at(&field_path, "the payload ends inside this field"));
        let value: Option<&[u8]> = match key & 7 {
            0 => {
                if decode_varint(&mut rest).is_err() {
                    return truncated();
                }
                None
            }
            1 => {
                if take(&mut rest, 8).is_none() {
                    return truncated();
                }
                None
            }
            2 => {
                let Ok(len) = decode_varint(&mut rest) else {
                    return truncated();
                };
                let Some(bytes) = usize::try_from(len)
                    .ok()
                    .and_then(|len| take(&mut rest, len))
                else {
                    return truncated();
                };
                Some(bytes)
            }
            5 => {
                if take(&mut rest, 4).is_none() {
                    return truncated();
                }
                None
            }
            // Groups are proto2's deprecated nesting: left to DynamicMessage's message.
            3 | 4 => return None,
            other => {
                return Some(at(&field_path, &format!("an invalid wire type {other}")));
            }
        };
        let consumed = record_start.len() - rest.len();
        if number == 0 {
            return Some(at(path, "field number 0, which no field has"));
        }
        let record = &record_start[..consumed];
        let Some(field) = field else { continue };
        if let (Kind::Message(nested), Some(bytes)) = (field.kind(), value)
            && !field.is_map()
            && let Some(found) = locate(&nested, bytes, &field_path)
        {
            return Some(found);
        }
        if let Err(error) = DynamicMessage::decode(message.clone(), record) {
            return Some(at(&field_path, &error.to_string()));
        }
    }
    None
}

/// The next `len` bytes of `buf`, or `None` (and `buf` untouched) when it is shorter.
fn take<'b>(buf: &mut &'b [u8], len: usize) -> Option<&'b [u8]> {
    if buf.len() < len {
        return None;
    }
    let (head, tail) = buf.split_at(len);
    *buf = tail;
    Some(head)
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn at(path: &str, reason: &str) -> PayloadRejection {
    PayloadRejection::at(path, reason)
}

#[cfg(test)]
mod tests {
    use prost::encoding::encode_varint;

    use super::*;
    use crate::NewSchema;

    const ORDER: &str = r#"syntax = "proto3";
        package shop;
        message Order {
            string id = 1;
            repeated Line lines = 2;
            message Line { string sku = 1; int64 qty = 2; }
        }
        message Refund { string order_id = 1; }"#;

    fn validator() -> ProtobufPayloadValidator {
        let mut registry = Registry::default();
        let id = registry
            .register("orders-value", &NewSchema::protobuf(ORDER))
            .unwrap();
        ProtobufPayloadValidator::compile(registry.schema(id).unwrap(), &registry).unwrap()
    }

    fn key(out: &mut Vec<u8>, number: u32, wire_type: u8) {
        encode_varint(u64::from(number) << 3 | u64::from(wire_type), out);
    }

    fn string(out: &mut Vec<u8>, number: u32, value: &[u8]) {
        key(out, number, 2);
        encode_varint(value.len() as u64, out);
        out.extend_from_slice(value);
    }

    fn line(sku: &[u8], qty: u64) -> Vec<u8> {
        let mut out = Vec::new();
        string(&mut out, 1, sku);
        key(&mut out, 2, 0);
        encode_varint(qty, &mut out);
        out
    }

    /// An `Order` with `lines`, after the message-index array `[0]` (the single byte 0).
    fn order(lines: &[Vec<u8>]) -> Vec<u8> {
        let mut out = vec![0];
        string(&mut out, 1, b"o-1");
        for l in lines {
            string(&mut out, 2, l);
        }
        out
    }

    #[test]
    fn a_valid_message_passes_and_unknown_fields_are_kept() {
        let v = validator();
        v.validate(&order(&[line(b"a", 1), line(b"b", 2)])).unwrap();
        let mut with_unknown = order(&[line(b"a", 1)]);
        key(&mut with_unknown, 99, 0);
        encode_varint(7, &mut with_unknown);
        v.validate(&with_unknown).unwrap();
    }

    #[test]
    fn a_wrong_wire_type_at_a_nested_field_names_the_field() {
        let mut bad_line = Vec::new();
        key(&mut bad_line, 1, 0); // sku is a string, sent as a varint
        encode_varint(5, &mut bad_line);
        let payload = order(&[line(b"a", 1), line(b"b", 2), bad_line]);
        let refused = validator().validate(&payload).unwrap_err();
        assert_eq!(refused.field, "lines[2].sku", "{refused}");
        assert!(refused.reason.contains("wire type"), "{refused}");
    }

    #[test]
    fn invalid_utf8_in_a_string_names_the_field() {
        let refused = validator()
            .validate(&order(&[line(b"\xff\xfe", 1)]))
            .unwrap_err();
        assert_eq!(refused.field, "lines[0].sku", "{refused}");
        assert!(refused.reason.contains("UTF-8"), "{refused}");
    }

    #[test]
    fn a_truncated_message_is_refused_naming_where_it_ends() {
        let payload = order(&[line(b"abc", 1)]);
        let refused = validator()
            .validate(&payload[..payload.len() - 2])
            .unwrap_err();
        assert_eq!(refused.field, "lines[0]", "{refused}");
        assert!(refused.reason.contains("ends"), "{refused}");
    }

    #[test]
    fn message_indexes_pick_the_message_and_a_wrong_one_is_refused() {
        let v = validator();
        // [1]: count 1 (zig-zag 2), index 1 (zig-zag 2) — the second top-level message.
        let mut refund = vec![2, 2];
        string(&mut refund, 1, b"o-1");
        v.validate(&refund).unwrap();
        // [0, 0]: Order's first nested message, Line.
        let mut nested = vec![4, 0, 0];
        nested.extend(line(b"a", 1));
        v.validate(&nested).unwrap();
        for wrong in [vec![2, 10], vec![4, 0, 4], vec![2, 1]] {
            let refused = v.validate(&wrong).unwrap_err();
            assert_eq!(refused.field, "", "{refused}");
            assert!(
                refused.reason.contains("message index"),
                "{wrong:?}: {refused}"
            );
        }
        let refused = v.validate(&[]).unwrap_err();
        assert!(refused.reason.contains("message-index array"), "{refused}");
        let refused = v.validate(&[0x80]).unwrap_err();
        assert!(refused.reason.contains("message-index array"), "{refused}");
    }

    /// What Confluent's Python `ProtobufSerializer` (confluent-kafka 2.12.1) registered
    /// and wrote against this registry: the file as a base64 descriptor (`Refund`, then
    /// `Order` with a nested `Line`), and whole records, 5-byte prefix included.
    const CONFLUENT_FILE: &str = "ChBzaG9wL29yZGVyLnByb3RvEgRzaG9wIhoKBlJlZnVuZBIQCghvcmRlcl9pZBgBIAEoCSJWCgVPcmRlchIKCgJpZBgBIAEoCRIfCgVsaW5lcxgCIAMoCzIQLnNob3AuT3JkZXIuTGluZRogCgRMaW5lEgsKA3NrdRgBIAEoCRILCgNxdHkYAiABKANiBnByb3RvMw==";
    /// `Order{id: "o-1", lines: [{sku: "a", qty: 1}, {sku: "b", qty: 2}]}`: indexes [1].
    const CONFLUENT_ORDER: &str = "000000000202020a036f2d3112050a0161100112050a01621002";
    /// `Order.Line{sku: "z", qty: 9}`: indexes [1, 0].
    const CONFLUENT_LINE: &str = "00000000020402000a017a1009";

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn records_written_by_confluents_serializer_pass_and_a_damaged_one_does_not() {
        let mut registry = Registry::default();
        let id = registry
            .register("porders-value", &NewSchema::protobuf(CONFLUENT_FILE))
            .unwrap();
        let v = ProtobufPayloadValidator::compile(registry.schema(id).unwrap(), &registry).unwrap();
        let order = unhex(CONFLUENT_ORDER);
        v.validate(&order[5..]).unwrap();
        v.validate(&unhex(CONFLUENT_LINE)[5..]).unwrap();
        // The Order's bytes read as the first message, Refund, pass too: its field 1 is a
        // string as well, and the `lines` it does not know are kept as unknown fields.
        // Cut short, they do not pass.
        let mut as_refund = vec![0];
        as_refund.extend_from_slice(&order[7..]);
        v.validate(&as_refund).unwrap();
        let refused = v.validate(&order[5..order.len() - 1]).unwrap_err();
        assert_eq!(refused.field, "lines[1]", "{refused}");
    }
}
