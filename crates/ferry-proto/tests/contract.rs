//! The contract only grows: every message field, enum value and rpc of `ferry.v1` keeps its
//! number, type and shape once published (`proto/ferry/v1/contract.lock`), because clients
//! in other languages were generated from it. Adding is fine: the test then asks for the
//! new lines to be recorded (`FERRY_BLESS=1 cargo test -p ferry-proto`), which also shows
//! them in review.

use std::collections::BTreeSet;
use std::path::Path;

use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};

fn describe_message(prefix: &str, message: &DescriptorProto, lines: &mut BTreeSet<String>) {
    let name = format!("{prefix}{}", message.name());
    for field in &message.field {
        let ty = match field.r#type() {
            Type::Message | Type::Enum => field.type_name().to_owned(),
            other => format!("{other:?}").to_lowercase(),
        };
        let label = match (field.label(), field.proto3_optional()) {
            (Label::Repeated, _) => "repeated ",
            (_, true) => "optional ",
            _ => "",
        };
        let oneof = field
            .oneof_index
            .filter(|_| !field.proto3_optional())
            .map(|i| format!(" (oneof {})", message.oneof_decl[i as usize].name()))
            .unwrap_or_default();
        lines.insert(format!(
            "message {name} field {} = {}: {label}{ty}{oneof}",
            field.name(),
            field.number()
        ));
    }
    for nested in &message.nested_type {
        if !nested.options.as_ref().is_some_and(|o| o.map_entry()) {
            describe_message(&format!("{name}."), nested, lines);
        }
    }
}

fn contract_lines() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let set: FileDescriptorSet = protox::compile([root.join("ferry/v1/ferry.proto")], [&root])
        .expect("the contract compiles");
    let mut lines = BTreeSet::new();
    for file in set.file.iter().filter(|f| f.package() == "ferry.v1") {
        for message in &file.message_type {
            describe_message("", message, &mut lines);
        }
        for e in &file.enum_type {
            for value in &e.value {
                lines.insert(format!(
                    "enum {} value {} = {}",
                    e.name(),
                    value.name(),
                    value.number()
                ));
            }
        }
        for service in &file.service {
            for method in &service.method {
                lines.insert(format!(
                    "service {} rpc {}({}{}) returns ({}{})",
                    service.name(),
                    method.name(),
                    if method.client_streaming() {
                        "stream "
                    } else {
                        ""
                    },
                    method.input_type(),
                    if method.server_streaming() {
                        "stream "
                    } else {
                        ""
                    },
                    method.output_type(),
                ));
            }
        }
    }
    lines
}

/// What changed between the lock and the contract as it is now: `gone` are published parts
/// that changed or disappeared (never allowed, blessed or not), `added` new parts.
struct Change<'a> {
    gone: Vec<&'a String>,
    added: Vec<&'a String>,
}

fn change<'a>(locked: &'a BTreeSet<String>, now: &'a BTreeSet<String>) -> Change<'a> {
    Change {
        gone: locked.difference(now).collect(),
        added: now.difference(locked).collect(),
    }
}

/// The lock file's text for `lines`.
fn lock_text(lines: &BTreeSet<String>) -> String {
    let mut text = String::from(
        "# Every field, enum value and rpc of ferry.v1 ever published; see tests/contract.rs.\n",
    );
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

#[test]
fn the_contract_only_grows() {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/ferry/v1/contract.lock");
    let now = contract_lines();
    let locked: BTreeSet<String> = std::fs::read_to_string(&lock)
        .expect("contract.lock exists")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_owned)
        .collect();
    let Change { gone, added } = change(&locked, &now);
    // Checked before blessing too: a bless records additions, it never forgets a
    // published part.
    assert!(
        gone.is_empty(),
        "published parts of ferry.v1 changed or disappeared (add new fields instead):\n{}",
        gone.iter().map(|l| format!("  {l}\n")).collect::<String>()
    );
    if std::env::var_os("FERRY_BLESS").is_some() {
        std::fs::write(&lock, lock_text(&now)).unwrap();
        return;
    }
    assert!(
        added.is_empty(),
        "new parts of ferry.v1: record them with FERRY_BLESS=1 cargo test -p ferry-proto:\n{}",
        added.iter().map(|l| format!("  {l}\n")).collect::<String>()
    );
}

#[test]
fn a_removed_or_renumbered_part_is_gone_and_a_new_one_is_added() {
    let lock = |lines: &[&str]| lines.iter().map(|l| l.to_string()).collect::<BTreeSet<_>>();
    let locked = lock(&[
        "message A field x = 1: string",
        "message A field y = 2: string",
    ]);
    let now = lock(&[
        "message A field x = 1: string",
        "message A field y = 3: string",
        "message A field z = 4: string",
    ]);
    let Change { gone, added } = change(&locked, &now);
    assert_eq!(gone, ["message A field y = 2: string"]);
    assert_eq!(
        added,
        [
            "message A field y = 3: string",
            "message A field z = 4: string"
        ]
    );
}

#[test]
fn messages_round_trip_through_the_wire_format() {
    use ferry_proto::v1::{OutgoingMessage, PublishRequest, outgoing_message};
    let request = PublishRequest {
        batch_id: None,
        queue: "orders".into(),
        messages: vec![OutgoingMessage {
            payload: b"{\"id\":1}".to_vec().into(),
            key: Some(b"customer-7".to_vec().into()),
            headers: [("subject".to_owned(), "orders.created".to_owned())].into(),
            priority: 3,
            delivery: Some(outgoing_message::Delivery::DeliverAfterMs(1500)),
            ttl_ms: Some(60_000),
            dedup_id: Some("order-1".into()),
            id: None,
        }],
    };
    let bytes = request.encode_to_vec();
    assert_eq!(PublishRequest::decode(bytes.as_slice()).unwrap(), request);
    assert!(
        PublishRequest::decode(&bytes[..bytes.len() - 1]).is_err(),
        "a truncated frame is an error, not a shorter message"
    );
}

#[test]
fn the_embedded_source_is_the_compiled_file() {
    let on_disk = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/ferry/v1/ferry.proto"),
    )
    .unwrap();
    assert_eq!(ferry_proto::PROTO, on_disk);
    assert_eq!(
        ferry_proto::v1::admin_server::SERVICE_NAME,
        "ferry.v1.Admin"
    );
}
