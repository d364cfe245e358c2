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

#[test]
fn the_contract_only_grows() {
    let lock = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/ferry/v1/contract.lock");
    let now = contract_lines();
    if std::env::var_os("FERRY_BLESS").is_some() {
        let mut text = String::from(
            "# Every field, enum value and rpc of ferry.v1 ever published; see tests/contract.rs.\n",
        );
        for line in &now {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&lock, text).unwrap();
        return;
    }
    let locked: BTreeSet<String> = std::fs::read_to_string(&lock)
        .expect("contract.lock exists (FERRY_BLESS=1 writes it)")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_owned)
        .collect();
    let gone: Vec<&String> = locked.difference(&now).collect();
    assert!(
        gone.is_empty(),
        "published parts of ferry.v1 changed or disappeared (add new fields instead):\n{}",
        gone.iter().map(|l| format!("  {l}\n")).collect::<String>()
    );
    let added: Vec<&String> = now.difference(&locked).collect();
    assert!(
        added.is_empty(),
        "new parts of ferry.v1: record them with FERRY_BLESS=1 cargo test -p ferry-proto:\n{}",
        added.iter().map(|l| format!("  {l}\n")).collect::<String>()
    );
}

#[test]
fn messages_round_trip_through_the_wire_format() {
    use ferry_proto::v1::{OutgoingMessage, PublishRequest, outgoing_message};
    let request = PublishRequest {
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
