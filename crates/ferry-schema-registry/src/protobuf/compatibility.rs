//! Whether a Protobuf reader reads every message a writer writes, by Confluent's Protobuf
//! rules, which follow Protobuf's own wire-compatibility rules. Hand-written over
//! `prost-reflect` descriptors: no crate compares two `.proto` files.
//!
//! Refused, writer → reader:
//!
//! - the `syntax` changed (proto2 and proto3 differ in presence and defaults);
//! - the `package` changed (every message's full name changes with it);
//! - a message removed (a message index or a type name that named it names nothing);
//! - a field number kept with a type of another kind (scalar, enum, message) or another
//!   message or enum type, or a scalar type with another wire encoding: of `int32`,
//!   `uint32`, `int64`, `uint64` and `bool`, of `sint32` and `sint64`, of `fixed32` and
//!   `sfixed32`, of `fixed64` and `sfixed64`, of `string` and `bytes`, any may become
//!   another of its group, and `float` and `double` stay what they are;
//! - a field the reader requires (proto2 `required`) that the writer does not;
//! - two or more fields moved into one `oneof` (a writer may have set both), a field
//!   moved into a `oneof` that already existed, a field removed from a `oneof`.
//!
//! Accepted: fields and messages added, fields removed (readers keep unknown fields),
//! fields renamed (the number is what is on the wire), a field moved alone into a new
//! `oneof`, singular ↔ repeated, enum values added or removed (Confluent accepts these
//! too: proto3 enums are open).

use std::collections::{BTreeMap, BTreeSet};

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor, Syntax};

use super::ProtobufSchema;

/// Why messages `writer` writes may be misread by `reader`; empty when none can be.
pub(crate) fn readable(writer: &ProtobufSchema, reader: &ProtobufSchema) -> Vec<String> {
    let mut out = Vec::new();
    let (w, r) = (&writer.file, &reader.file);
    if w.syntax() != r.syntax() {
        out.push(format!(
            "syntax changed from {} to {}",
            syntax(w.syntax()),
            syntax(r.syntax())
        ));
    }
    if w.package_name() != r.package_name() {
        out.push(format!(
            "package changed from {:?} to {:?}",
            w.package_name(),
            r.package_name()
        ));
    }
    let w_messages = messages(w.messages(), w.package_name());
    let r_messages = messages(r.messages(), r.package_name());
    for (name, w_message) in &w_messages {
        match r_messages.get(name) {
            Some(r_message) => fields(w_message, r_message, name, &mut out),
            None if w_message.is_map_entry() => {}
            None => out.push(format!("message {name} removed")),
        }
    }
    out
}

/// Every message of the file, nested ones included, by name within the package.
fn messages(
    top: impl Iterator<Item = MessageDescriptor>,
    package: &str,
) -> BTreeMap<String, MessageDescriptor> {
    let mut all = BTreeMap::new();
    let mut pending: Vec<MessageDescriptor> = top.collect();
    while let Some(message) = pending.pop() {
        pending.extend(message.child_messages());
        all.insert(relative(message.full_name(), package), message);
    }
    all
}

fn relative(full_name: &str, package: &str) -> String {
    if package.is_empty() {
        return full_name.to_owned();
    }
    full_name
        .strip_prefix(package)
        .and_then(|rest| rest.strip_prefix('.'))
        .unwrap_or(full_name)
        .to_owned()
}

fn fields(w: &MessageDescriptor, r: &MessageDescriptor, name: &str, out: &mut Vec<String>) {
    let (w_package, r_package) = (w.package_name(), r.package_name());
    for w_field in w.fields() {
        let at = format!("{name}.{} (field {})", w_field.name(), w_field.number());
        let Some(r_field) = r.get_field(w_field.number()) else {
            if let Some(oneof) = real_oneof(&w_field)
                && r.oneofs().any(|o| o.name() == oneof)
            {
                out.push(format!(
                    "{at} removed from oneof {oneof}: a message with it set reads as none set"
                ));
            }
            continue;
        };
        if let Some(why) = type_change(&w_field, &r_field, w_package, r_package) {
            out.push(format!("{at}: {why}"));
        }
        if r_field.is_required() && !w_field.is_required() {
            out.push(format!("{at}: became required"));
        }
    }
    for r_field in r.fields() {
        if r_field.is_required() && w.get_field(r_field.number()).is_none() {
            out.push(format!(
                "{name}.{} (field {}): required field added",
                r_field.name(),
                r_field.number()
            ));
        }
    }
    // Fields that were not in a oneof and are now.
    let w_oneofs: BTreeSet<String> = w
        .oneofs()
        .filter(|o| !o.is_synthetic())
        .map(|o| o.name().to_owned())
        .collect();
    let mut moved: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r_field in r.fields() {
        let Some(oneof) = real_oneof(&r_field) else {
            continue;
        };
        let Some(w_field) = w.get_field(r_field.number()) else {
            continue;
        };
        if real_oneof(&w_field).is_none() {
            moved
                .entry(oneof)
                .or_default()
                .push(w_field.name().to_owned());
        }
    }
    for (oneof, names) in moved {
        if w_oneofs.contains(&oneof) {
            out.push(format!(
                "{name}: {} moved into the existing oneof {oneof}: a writer may have set it \
                 together with the oneof",
                names.join(", ")
            ));
        } else if names.len() > 1 {
            out.push(format!(
                "{name}: {} moved together into oneof {oneof}: a writer may have set more \
                 than one",
                names.join(", ")
            ));
        }
    }
}

/// The oneof a field is declared in, unless it is the synthetic one of a proto3
/// `optional`.
fn real_oneof(field: &FieldDescriptor) -> Option<String> {
    field
        .containing_oneof()
        .filter(|o| !o.is_synthetic())
        .map(|o| o.name().to_owned())
}

/// Why the reader's field cannot read what the writer's wrote, if it cannot.
fn type_change(
    w: &FieldDescriptor,
    r: &FieldDescriptor,
    w_package: &str,
    r_package: &str,
) -> Option<String> {
    match (w.kind(), r.kind()) {
        (Kind::Message(a), Kind::Message(b)) => {
            let (a_name, b_name) = (
                relative(a.full_name(), w_package),
                relative(b.full_name(), r_package),
            );
            (a_name != b_name)
                .then(|| format!("type changed from message {a_name} to message {b_name}"))
        }
        (Kind::Enum(a), Kind::Enum(b)) => {
            let (a_name, b_name) = (
                relative(a.full_name(), w_package),
                relative(b.full_name(), r_package),
            );
            (a_name != b_name).then(|| format!("type changed from enum {a_name} to enum {b_name}"))
        }
        (a @ (Kind::Message(_) | Kind::Enum(_)), b)
        | (a, b @ (Kind::Message(_) | Kind::Enum(_))) => Some(format!(
            "kind changed from {} to {}: the field number is reused for another kind of type",
            kind_name(&a),
            kind_name(&b)
        )),
        (a, b) => (wire_group(&a) != wire_group(&b)).then(|| {
            format!(
                "type changed from {} to {}: their wire encodings differ",
                kind_name(&a),
                kind_name(&b)
            )
        }),
    }
}

/// Scalars that read each other's encoding (Protobuf's "updating a message type" rules).
fn wire_group(kind: &Kind) -> u8 {
    match kind {
        Kind::Int32 | Kind::Uint32 | Kind::Int64 | Kind::Uint64 | Kind::Bool => 0,
        Kind::Sint32 | Kind::Sint64 => 1,
        Kind::Fixed32 | Kind::Sfixed32 => 2,
        Kind::Fixed64 | Kind::Sfixed64 => 3,
        Kind::String | Kind::Bytes => 4,
        Kind::Float => 5,
        Kind::Double => 6,
        Kind::Message(_) => 7,
        Kind::Enum(_) => 8,
    }
}

fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::Message(m) => format!("message {}", m.full_name()),
        Kind::Enum(e) => format!("enum {}", e.full_name()),
        scalar => format!("{scalar:?}").to_lowercase(),
    }
}

fn syntax(syntax: Syntax) -> &'static str {
    match syntax {
        Syntax::Proto2 => "proto2",
        Syntax::Proto3 => "proto3",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::parse;

    fn check(writer: &str, reader: &str) -> Vec<String> {
        readable(&parse(writer, &[]).unwrap(), &parse(reader, &[]).unwrap())
    }

    fn ok(writer: &str, reader: &str) {
        let found = check(writer, reader);
        assert!(found.is_empty(), "{found:?}");
    }

    fn refused(writer: &str, reader: &str, expect: &str) {
        let found = check(writer, reader);
        assert!(
            found.iter().any(|m| m.contains(expect)),
            "expected {expect:?} in {found:?}"
        );
    }

    fn proto(body: &str) -> String {
        format!("syntax = \"proto3\"; package shop; {body}")
    }

    #[test]
    fn fields_added_removed_and_renamed_are_accepted() {
        let v1 = proto("message Order { string id = 1; int64 total = 2; }");
        let added = proto("message Order { string id = 1; int64 total = 2; string note = 3; }");
        let removed = proto("message Order { string id = 1; }");
        let renamed = proto("message Order { string order_id = 1; int64 total = 2; }");
        ok(&v1, &added);
        ok(&added, &v1);
        ok(&v1, &removed);
        ok(&v1, &renamed);
    }

    #[test]
    fn a_field_number_reused_with_another_kind_or_message_is_refused() {
        let v1 = proto(
            "message Order { string id = 1; Line line = 2; } message Line {} message Other {}",
        );
        refused(
            &v1,
            &proto(
                "message Order { string id = 1; int64 line = 2; } message Line {} message Other {}",
            ),
            "Order.line (field 2): kind changed from message shop.Line to int64",
        );
        refused(
            &v1,
            &proto(
                "message Order { string id = 1; Other line = 2; } message Line {} message Other {}",
            ),
            "type changed from message Line to message Other",
        );
    }

    #[test]
    fn scalars_change_only_within_their_wire_encoding() {
        let int32 = proto("message A { int32 x = 1; }");
        ok(&int32, &proto("message A { int64 x = 1; }"));
        ok(&int32, &proto("message A { bool x = 1; }"));
        ok(
            &proto("message A { string x = 1; }"),
            &proto("message A { bytes x = 1; }"),
        );
        ok(
            &proto("message A { sint32 x = 1; }"),
            &proto("message A { sint64 x = 1; }"),
        );
        refused(
            &int32,
            &proto("message A { sint32 x = 1; }"),
            "wire encodings differ",
        );
        refused(
            &int32,
            &proto("message A { string x = 1; }"),
            "from int32 to string",
        );
        refused(
            &proto("message A { float x = 1; }"),
            &proto("message A { double x = 1; }"),
            "wire",
        );
    }

    #[test]
    fn a_message_removed_is_refused_and_one_added_is_not() {
        let two = proto("message A { string x = 1; } message B { string y = 1; }");
        let one = proto("message A { string x = 1; }");
        refused(&two, &one, "message B removed");
        ok(&one, &two);
        let nested = proto("message A { message N { int32 z = 1; } N n = 1; }");
        let nested_changed = proto("message A { message N { string z = 1; } N n = 1; }");
        refused(&nested, &nested_changed, "A.N.z (field 1): type changed");
    }

    #[test]
    fn package_and_syntax_changes_are_refused() {
        let a = "syntax = \"proto3\"; package shop; message A { string x = 1; }";
        let b = "syntax = \"proto3\"; package store; message A { string x = 1; }";
        let c = "syntax = \"proto2\"; package shop; message A { optional string x = 1; }";
        refused(a, b, "package changed from \"shop\" to \"store\"");
        refused(a, c, "syntax changed from proto3 to proto2");
    }

    #[test]
    fn oneof_changes_follow_the_wire_rules() {
        let plain = proto("message A { string x = 1; string y = 2; }");
        let one_moved = proto("message A { oneof choice { string x = 1; } string y = 2; }");
        let both_moved = proto("message A { oneof choice { string x = 1; string y = 2; } }");
        ok(&plain, &one_moved);
        refused(&plain, &both_moved, "x, y moved together into oneof choice");
        refused(
            &one_moved,
            &both_moved,
            "y moved into the existing oneof choice",
        );
        let dropped = proto("message A { oneof choice { string x = 1; } }");
        refused(
            &both_moved,
            &dropped,
            "A.y (field 2) removed from oneof choice",
        );
        ok(&dropped, &both_moved);
    }

    #[test]
    fn a_required_field_added_is_refused() {
        let a = "syntax = \"proto2\"; message A { optional string x = 1; }";
        let b = "syntax = \"proto2\"; message A { optional string x = 1; required int32 y = 2; }";
        refused(a, b, "A.y (field 2): required field added");
        ok(b, a);
    }

    #[test]
    fn proto3_optional_is_not_a_oneof() {
        ok(
            &proto("message A { string x = 1; }"),
            &proto("message A { optional string x = 1; }"),
        );
    }
}
