//! Enforcement at publish: whether a payload is data written with a live schema of a
//! subject, answered as a [`PayloadRejection`] that names the failing field.
//!
//! **Which schema.** A payload in Confluent's wire format names it: magic byte 0, the
//! schema id as 4 bytes big-endian, then the encoded data. A producer that does not use
//! the wire format names the id beside the payload (Ferry's `ferry-schema-id` header),
//! and the payload is the encoded data itself. Either way the id must be a live (not
//! deleted) version of the subject: data written with another subject's schema, or with a
//! version taken back, is refused.
//!
//! **Formats.** Avro is decoded here against the writer schema (see [`AvroValidator`]);
//! JSON Schema and Protobuf by their modules' validators (the JSON document after the
//! prefix; for Protobuf, Confluent's message-index array then the message). Each schema
//! type's validator is compiled once per schema id and cached
//! ([`CompiledCache`]), so a publish does not parse its schema again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use apache_avro::Schema;
use apache_avro::schema::{InnerDecimalSchema, Name, ResolvedSchema, UuidSchema};

use crate::model::Registry;
use crate::schema::{Reference, SchemaType, StoredSchema, VersionSpec};
use crate::{
    JsonPayloadValidator, PayloadRejection, ProtobufPayloadValidator, SchemaRegistry, avro,
};

/// Confluent's wire format: this byte, then the schema id (4 bytes, big-endian).
const MAGIC_BYTE: u8 = 0;
const WIRE_HEADER_BYTES: usize = 5;
/// How deep nested values may go before a payload is refused: a recursive schema (a tree
/// of records) would otherwise let a payload of a few KiB exhaust the stack.
const MAX_DEPTH: usize = 256;
/// How many compiled schemas the cache keeps before starting over.
const MAX_CACHED: usize = 4096;
/// How deep references may nest, as the registry allows when registering.
const MAX_REFERENCE_DEPTH: usize = 32;

impl SchemaRegistry {
    /// Checks that `payload` is data written with a live version of `subject` and
    /// answers the schema id it was checked against. With `schema_id` `None` the payload
    /// must be in Confluent's wire format (the id in its first 5 bytes); with `Some` the
    /// payload is the encoded data itself. Reads the registry's state only.
    pub fn validate(
        &self,
        subject: &str,
        schema_id: Option<u32>,
        payload: &[u8],
    ) -> Result<u32, PayloadRejection> {
        let (id, data) = match schema_id {
            Some(id) => (id, payload),
            None => split_wire_format(payload)?,
        };
        let compiled = self.read(|registry| compiled_for(registry, &self.compiled, subject, id))?;
        compiled.validate(data)?;
        Ok(id)
    }
}

/// The schema id and the data of a payload in Confluent's wire format.
fn split_wire_format(payload: &[u8]) -> Result<(u32, &[u8]), PayloadRejection> {
    let Some((header, data)) = payload.split_first_chunk::<WIRE_HEADER_BYTES>() else {
        return Err(PayloadRejection::whole(format!(
            "{} bytes is shorter than Confluent's 5-byte wire-format header (magic byte 0, \
             schema id): serialize with a schema-registry serializer, or name the schema id \
             in the ferry-schema-id header",
            payload.len()
        )));
    };
    if header[0] != MAGIC_BYTE {
        return Err(PayloadRejection::whole(format!(
            "the first byte is {:#04x}, not Confluent's magic byte 0: serialize with a \
             schema-registry serializer, or name the schema id in the ferry-schema-id header",
            header[0]
        )));
    }
    let id = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    Ok((id, data))
}

/// The compiled validator of schema `id`, after checking that `id` is a live version of
/// `subject`.
fn compiled_for(
    registry: &Registry,
    cache: &CompiledCache,
    subject: &str,
    id: u32,
) -> Result<Arc<Compiled>, PayloadRejection> {
    let Ok(stored) = registry.schema(id) else {
        // Gone for good (hard-deleted, or never registered): so is its compiled form.
        cache.forget(id);
        return Err(PayloadRejection::whole(format!(
            "schema id {id} does not exist in the registry"
        )));
    };
    // The common case, a live version of the subject, scans the subjects once; the
    // refusals below look again only to say why.
    let live = registry.versions_of_id(id, false).unwrap_or_default();
    if !live.iter().any(|(s, _)| s == subject) {
        let holders = registry.versions_of_id(id, true).unwrap_or_default();
        if holders.iter().any(|(s, _)| s == subject) {
            return Err(PayloadRejection::whole(format!(
                "schema id {id} is a deleted version of subject {subject:?}: register the \
                 schema again, or write with a live version"
            )));
        }
        let others: Vec<&str> = holders.iter().map(|(s, _)| s.as_str()).collect();
        return Err(PayloadRejection::whole(format!(
            "schema id {id} is not a version of subject {subject:?} (it is registered under \
             {others:?}): the payload was written for another subject"
        )));
    }
    if let Some(compiled) = cache.get(id, stored) {
        return Ok(compiled);
    }
    let compiled = Arc::new(Compiled::compile(registry, stored).map_err(|problem| {
        PayloadRejection::whole(format!(
            "schema id {id} cannot be used to validate payloads: {problem}"
        ))
    })?);
    cache.put(id, stored, Arc::clone(&compiled));
    Ok(compiled)
}

/// A schema made ready to check payloads, per schema type.
enum Compiled {
    Avro(AvroValidator),
    Json(JsonPayloadValidator),
    Protobuf(ProtobufPayloadValidator),
}

impl Compiled {
    fn compile(registry: &Registry, stored: &StoredSchema) -> Result<Compiled, String> {
        match stored.schema_type {
            SchemaType::Avro => {
                let references = reference_texts(registry, &stored.references, 0)?;
                let schema = avro::parse(&stored.schema, &references)?;
                AvroValidator::new(schema).map(Compiled::Avro)
            }
            SchemaType::Json => JsonPayloadValidator::compile(stored, registry).map(Compiled::Json),
            SchemaType::Protobuf => {
                ProtobufPayloadValidator::compile(stored, registry).map(Compiled::Protobuf)
            }
        }
    }

    fn validate(&self, data: &[u8]) -> Result<(), PayloadRejection> {
        match self {
            Compiled::Avro(validator) => validator.validate(data),
            Compiled::Json(validator) => validator.validate(data),
            Compiled::Protobuf(validator) => validator.validate(data),
        }
    }
}

/// The texts of the named types `references` bring, theirs first, each once: what
/// [`avro::parse`] inlines.
fn reference_texts(
    registry: &Registry,
    references: &[Reference],
    depth: usize,
) -> Result<Vec<String>, String> {
    if depth > MAX_REFERENCE_DEPTH {
        return Err(format!(
            "references nest deeper than {MAX_REFERENCE_DEPTH} levels"
        ));
    }
    let mut texts: Vec<String> = Vec::new();
    for r in references {
        let version = registry
            .version(&r.subject, VersionSpec::Number(r.version), false)
            .map_err(|e| format!("reference {:?}: {e}", r.name))?;
        for text in reference_texts(registry, &version.schema.references, depth + 1)? {
            if !texts.contains(&text) {
                texts.push(text);
            }
        }
        if !texts.contains(&version.schema.schema) {
            texts.push(version.schema.schema);
        }
    }
    Ok(texts)
}

/// Compiled validators by schema id. Ids are immutable — an id never names another schema,
/// even after a hard delete — so an entry stays right for as long as its id exists; it is
/// dropped when a publish finds the id gone. Each entry also keeps the schema it was
/// compiled from and is used only for that very schema, a belt to those braces: comparing
/// the text on a hit is far cheaper than parsing it. One per registry.
#[derive(Default)]
pub(crate) struct CompiledCache {
    entries: Mutex<HashMap<u32, (StoredSchema, Arc<Compiled>)>>,
}

impl std::fmt::Debug for CompiledCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledCache")
            .field("schemas", &self.lock().len())
            .finish()
    }
}

impl CompiledCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, (StoredSchema, Arc<Compiled>)>> {
        // Entries are inserted whole: a panic elsewhere cannot leave one half-made.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, id: u32, stored: &StoredSchema) -> Option<Arc<Compiled>> {
        let entries = self.lock();
        let (schema, compiled) = entries.get(&id)?;
        (schema == stored).then(|| Arc::clone(compiled))
    }

    fn put(&self, id: u32, stored: &StoredSchema, compiled: Arc<Compiled>) {
        let mut entries = self.lock();
        if entries.len() >= MAX_CACHED && !entries.contains_key(&id) {
            entries.clear();
        }
        entries.insert(id, (stored.clone(), compiled));
    }

    fn forget(&self, id: u32) {
        self.lock().remove(&id);
    }

    #[cfg(test)]
    fn holds(&self, id: u32) -> bool {
        self.lock().contains_key(&id)
    }
}

/// Checks Avro binary data against its writer schema.
///
/// Hand-written rather than apache-avro's `from_avro_datum`: that decoder builds the
/// whole value and, on bad data, says what went wrong but not where — a producer needs
/// the field (`order.items[2].sku`). This walks the schema alongside the bytes, building
/// nothing, and names the path to the value that fails; it follows the Avro
/// specification's binary encoding (zig-zag varints, length-prefixed bytes and strings,
/// blocked arrays and maps, unions by index).
struct AvroValidator {
    root: Schema,
    /// The named types references (`Schema::Ref`) resolve to, by full name.
    names: HashMap<Name, Schema>,
}

impl AvroValidator {
    fn new(schema: Schema) -> Result<AvroValidator, String> {
        let names = ResolvedSchema::try_from(&schema)
            .map_err(|e| avro::error_text(&e))?
            .get_names()
            .iter()
            .map(|(name, named)| (name.clone(), (*named).clone()))
            .collect();
        Ok(AvroValidator {
            root: schema,
            names,
        })
    }

    fn validate(&self, data: &[u8]) -> Result<(), PayloadRejection> {
        let mut walk = Walk {
            names: &self.names,
            data,
            at: 0,
        };
        walk.value(&self.root, &mut String::new(), 0)?;
        if walk.at < data.len() {
            return Err(PayloadRejection::whole(format!(
                "{} bytes follow the end of the value: the data was written with another \
                 schema, or has bytes appended",
                data.len() - walk.at
            )));
        }
        Ok(())
    }
}

/// One pass over a payload: where it is, and the named types references resolve to.
struct Walk<'a> {
    names: &'a HashMap<Name, Schema>,
    data: &'a [u8],
    at: usize,
}

impl Walk<'_> {
    fn value(
        &mut self,
        schema: &Schema,
        path: &mut String,
        depth: usize,
    ) -> Result<(), PayloadRejection> {
        if depth > MAX_DEPTH {
            return Err(PayloadRejection::at(
                path.clone(),
                format!("values nest deeper than {MAX_DEPTH} levels"),
            ));
        }
        match schema {
            Schema::Null => Ok(()),
            Schema::Boolean => match self.take(path, 1, "a boolean")?[0] {
                0 | 1 => Ok(()),
                other => Err(PayloadRejection::at(
                    path.clone(),
                    format!("expected a boolean (0 or 1), found byte {other:#04x}"),
                )),
            },
            Schema::Int | Schema::Date | Schema::TimeMillis => {
                let n = self.long(path, "an int")?;
                if i32::try_from(n).is_err() {
                    return Err(PayloadRejection::at(
                        path.clone(),
                        format!("expected an int, found {n}, which is outside 32 bits"),
                    ));
                }
                Ok(())
            }
            Schema::Long
            | Schema::TimeMicros
            | Schema::TimestampMillis
            | Schema::TimestampMicros
            | Schema::TimestampNanos
            | Schema::LocalTimestampMillis
            | Schema::LocalTimestampMicros
            | Schema::LocalTimestampNanos => self.long(path, "a long").map(drop),
            Schema::Float => self.take(path, 4, "a float").map(drop),
            Schema::Double => self.take(path, 8, "a double").map(drop),
            Schema::Bytes | Schema::BigDecimal => self.bytes(path, "bytes").map(drop),
            Schema::String => self.string(path).map(drop),
            Schema::Uuid(UuidSchema::String) => {
                let text = self.string(path)?;
                if !is_uuid(text) {
                    return Err(PayloadRejection::at(
                        path.clone(),
                        format!("expected a UUID string, found {text:?}"),
                    ));
                }
                Ok(())
            }
            Schema::Uuid(UuidSchema::Bytes) => {
                let bytes = self.bytes(path, "UUID bytes")?;
                if bytes.len() != 16 {
                    return Err(PayloadRejection::at(
                        path.clone(),
                        format!("expected a 16-byte UUID, found {} bytes", bytes.len()),
                    ));
                }
                Ok(())
            }
            Schema::Uuid(UuidSchema::Fixed(fixed)) | Schema::Fixed(fixed) => {
                self.take(path, fixed.size, "fixed bytes").map(drop)
            }
            Schema::Duration(_) => self.take(path, 12, "a duration").map(drop),
            Schema::Decimal(decimal) => match &decimal.inner {
                InnerDecimalSchema::Bytes => self.bytes(path, "decimal bytes").map(drop),
                InnerDecimalSchema::Fixed(fixed) => {
                    self.take(path, fixed.size, "a fixed decimal").map(drop)
                }
            },
            Schema::Enum(e) => {
                let index = self.long(path, "an enum index")?;
                if usize::try_from(index).is_ok_and(|i| i < e.symbols.len()) {
                    return Ok(());
                }
                Err(PayloadRejection::at(
                    path.clone(),
                    format!(
                        "enum {} has {} symbols, found index {index}",
                        e.name.name(),
                        e.symbols.len()
                    ),
                ))
            }
            Schema::Union(union) => {
                let index = self.long(path, "a union branch")?;
                let variants = union.variants();
                let Some(branch) = usize::try_from(index).ok().and_then(|i| variants.get(i)) else {
                    return Err(PayloadRejection::at(
                        path.clone(),
                        format!(
                            "the union has {} branches, found branch {index}",
                            variants.len()
                        ),
                    ));
                };
                self.value(branch, path, depth + 1)
            }
            Schema::Record(record) => {
                for field in &record.fields {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(&field.name);
                    self.value(&field.schema, path, depth + 1)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Schema::Array(array) => {
                let mut index = 0u64;
                self.blocks(path, "array", |walk, path| {
                    let len = path.len();
                    path.push_str(&format!("[{index}]"));
                    index += 1;
                    walk.value(&array.items, path, depth + 1)?;
                    path.truncate(len);
                    Ok(())
                })
            }
            Schema::Map(map) => self.blocks(path, "map", |walk, path| {
                let key = walk.string(path)?.to_owned();
                let len = path.len();
                path.push_str(&format!("[{key:?}]"));
                walk.value(&map.types, path, depth + 1)?;
                path.truncate(len);
                Ok(())
            }),
            Schema::Ref { name } => {
                let Some(named) = self.names.get(name) else {
                    return Err(PayloadRejection::at(
                        path.clone(),
                        format!("the schema names type {name}, which it does not define"),
                    ));
                };
                self.value(named, path, depth + 1)
            }
        }
    }

    /// An array's or map's blocks: a count (negative: its absolute value, then the block's
    /// size in bytes), that many items, until a count of 0.
    fn blocks(
        &mut self,
        path: &mut String,
        what: &str,
        mut item: impl FnMut(&mut Self, &mut String) -> Result<(), PayloadRejection>,
    ) -> Result<(), PayloadRejection> {
        loop {
            let count = self.long(path, "a block count")?;
            if count == 0 {
                return Ok(());
            }
            if count < 0 {
                self.long(path, "a block size")?;
            }
            let count = count.unsigned_abs();
            // Items of a zero-size type (null, an empty record) take no bytes: bound the
            // count so that a forged one cannot keep the walk going for ever.
            let remaining = (self.data.len() - self.at) as u64;
            if count > remaining.max(1 << 16) {
                return Err(PayloadRejection::at(
                    path.clone(),
                    format!(
                        "an {what} block of {count} items is longer than the {remaining} bytes left"
                    ),
                ));
            }
            for _ in 0..count {
                item(self, path)?;
            }
        }
    }

    fn take(&mut self, path: &str, n: usize, what: &str) -> Result<&[u8], PayloadRejection> {
        let left = self.data.len() - self.at;
        if n > left {
            return Err(PayloadRejection::at(
                path,
                format!("expected {what} of {n} bytes, found the end of the payload after {left}"),
            ));
        }
        let bytes = &self.data[self.at..self.at + n];
        self.at += n;
        Ok(bytes)
    }

    /// A zig-zag varint of at most 10 bytes.
    fn long(&mut self, path: &str, what: &str) -> Result<i64, PayloadRejection> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let Some(&byte) = self.data.get(self.at) else {
                return Err(PayloadRejection::at(
                    path,
                    format!("expected {what}, found the end of the payload"),
                ));
            };
            self.at += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err(PayloadRejection::at(
            path,
            format!("expected {what}, found a varint longer than 10 bytes"),
        ))
    }

    fn bytes(&mut self, path: &str, what: &str) -> Result<&[u8], PayloadRejection> {
        let len = self.long(path, what)?;
        let Ok(len) = usize::try_from(len) else {
            return Err(PayloadRejection::at(
                path,
                format!("expected {what}, found the negative length {len}"),
            ));
        };
        self.take(path, len, what)
    }

    fn string(&mut self, path: &str) -> Result<&str, PayloadRejection> {
        let bytes = self.bytes(path, "a string")?;
        std::str::from_utf8(bytes).map_err(|e| {
            PayloadRejection::at(
                path,
                format!("expected a string, found bytes that are not UTF-8 ({e})"),
            )
        })
    }
}

/// A UUID as Avro's `uuid` logical type writes it: 8-4-4-4-12 hexadecimal digits.
fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NewSchema;

    const ORDER: &str = r#"{
        "type": "record", "name": "OrderPlaced", "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "customer", "type": {
                "type": "record", "name": "Customer",
                "fields": [
                    {"name": "name", "type": "string"},
                    {"name": "address", "type": ["null", {
                        "type": "record", "name": "Address",
                        "fields": [{"name": "zip", "type": "string"}]
                    }]}
                ]
            }},
            {"name": "items", "type": {"type": "array", "items": {
                "type": "record", "name": "Item",
                "fields": [
                    {"name": "sku", "type": "string"},
                    {"name": "quantity", "type": "int"}
                ]
            }}},
            {"name": "status", "type": {"type": "enum", "name": "Status",
                "symbols": ["NEW", "PAID"]}}
        ]
    }"#;

    const OTHER: &str = r#"{"type": "record", "name": "Refund",
        "fields": [{"name": "amount", "type": "double"}]}"#;

    fn long(n: i64, out: &mut Vec<u8>) {
        let mut v = ((n << 1) ^ (n >> 63)) as u64;
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    fn string(s: &[u8], out: &mut Vec<u8>) {
        long(s.len() as i64, out);
        out.extend_from_slice(s);
    }

    /// An OrderPlaced with two items, its zip code written as `zip` (raw bytes).
    fn order(zip: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        long(7, &mut out); // id
        string(b"Ada", &mut out); // customer.name
        long(1, &mut out); // customer.address: the Address branch
        out.extend_from_slice(zip);
        long(2, &mut out); // items: a block of 2
        for (sku, quantity) in [("A-1", 1), ("B-2", 3)] {
            string(sku.as_bytes(), &mut out);
            long(quantity, &mut out);
        }
        long(0, &mut out); // end of items
        long(1, &mut out); // status PAID
        out
    }

    fn valid_zip() -> Vec<u8> {
        let mut zip = Vec::new();
        string(b"10115", &mut zip);
        zip
    }

    fn wire(id: u32, data: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(data);
        out
    }

    fn registry_with(subjects: &[(&str, &str)]) -> (tempfile::TempDir, SchemaRegistry, Vec<u32>) {
        let dir = tempfile::tempdir().unwrap();
        let registry = SchemaRegistry::open(dir.path()).unwrap();
        let ids = subjects
            .iter()
            .map(|(subject, schema)| {
                registry
                    .change(|r| r.register(subject, &NewSchema::avro(*schema)))
                    .unwrap()
            })
            .collect();
        (dir, registry, ids)
    }

    #[test]
    fn valid_avro_is_accepted_in_the_wire_format_and_by_header_id() {
        let (_dir, registry, ids) = registry_with(&[("orders-value", ORDER)]);
        let data = order(&valid_zip());
        assert_eq!(
            registry.validate("orders-value", None, &wire(ids[0], &data)),
            Ok(ids[0])
        );
        assert_eq!(
            registry.validate("orders-value", Some(ids[0]), &data),
            Ok(ids[0])
        );
    }

    #[test]
    fn a_wrong_type_at_a_nested_field_is_named_by_its_path() {
        let (_dir, registry, ids) = registry_with(&[("orders-value", ORDER)]);
        // A string's length written as -3: not a string.
        let mut negative = Vec::new();
        long(-3, &mut negative);
        let refused = registry
            .validate("orders-value", Some(ids[0]), &order(&negative))
            .unwrap_err();
        assert_eq!(refused.field, "customer.address.zip");
        assert!(refused.reason.contains("negative length"), "{refused}");
        // Bytes that are not UTF-8 where a string belongs.
        let mut latin1 = Vec::new();
        string(b"\xff\xfe", &mut latin1);
        let refused = registry
            .validate("orders-value", Some(ids[0]), &order(&latin1))
            .unwrap_err();
        assert_eq!(refused.field, "customer.address.zip");
        assert!(refused.reason.contains("UTF-8"), "{refused}");
        // An array item: the second item's quantity does not fit an int.
        let mut data = Vec::new();
        long(7, &mut data);
        string(b"Ada", &mut data);
        long(0, &mut data); // no address
        long(2, &mut data);
        string(b"A-1", &mut data);
        long(1, &mut data);
        string(b"B-2", &mut data);
        long(1 << 40, &mut data);
        let refused = registry
            .validate("orders-value", Some(ids[0]), &data)
            .unwrap_err();
        assert_eq!(refused.field, "items[1].quantity");
        // An enum index past its symbols.
        let mut data = order(&valid_zip());
        *data.last_mut().unwrap() = 10; // index 5
        let refused = registry
            .validate("orders-value", Some(ids[0]), &data)
            .unwrap_err();
        assert_eq!(refused.field, "status");
        assert!(refused.reason.contains("2 symbols"), "{refused}");
    }

    #[test]
    fn truncated_data_and_trailing_bytes_are_refused() {
        let (_dir, registry, ids) = registry_with(&[("orders-value", ORDER)]);
        let data = order(&valid_zip());
        let refused = registry
            .validate("orders-value", Some(ids[0]), &data[..data.len() - 3])
            .unwrap_err();
        assert!(refused.reason.contains("end of the payload"), "{refused}");
        assert_eq!(refused.field, "items[1].quantity");
        let mut longer = data.clone();
        longer.extend_from_slice(b"xyz");
        let refused = registry
            .validate("orders-value", Some(ids[0]), &longer)
            .unwrap_err();
        assert_eq!(refused.field, "");
        assert!(refused.reason.contains("3 bytes follow"), "{refused}");
        // Not the wire format at all.
        let refused = registry
            .validate("orders-value", None, b"{\"id\": 7}")
            .unwrap_err();
        assert!(refused.reason.contains("magic byte"), "{refused}");
        let refused = registry
            .validate("orders-value", None, &[0, 0, 1])
            .unwrap_err();
        assert!(refused.reason.contains("5-byte"), "{refused}");
    }

    #[test]
    fn an_unknown_id_or_another_subjects_id_is_refused() {
        let (_dir, registry, ids) =
            registry_with(&[("orders-value", ORDER), ("refunds-value", OTHER)]);
        let data = order(&valid_zip());
        let refused = registry
            .validate("orders-value", None, &wire(999, &data))
            .unwrap_err();
        assert!(refused.reason.contains("does not exist"), "{refused}");
        let mut refund = Vec::new();
        refund.extend_from_slice(&1.5f64.to_le_bytes());
        let refused = registry
            .validate("orders-value", None, &wire(ids[1], &refund))
            .unwrap_err();
        assert!(refused.reason.contains("refunds-value"), "{refused}");
        assert!(refused.reason.contains("another subject"), "{refused}");
        // ...which is valid under its own subject.
        assert_eq!(
            registry.validate("refunds-value", None, &wire(ids[1], &refund)),
            Ok(ids[1])
        );
    }

    #[test]
    fn a_deleted_version_is_refused_and_a_hard_delete_drops_the_compiled_schema() {
        let (_dir, registry, ids) = registry_with(&[("orders-value", ORDER)]);
        let data = order(&valid_zip());
        registry
            .validate("orders-value", Some(ids[0]), &data)
            .unwrap();
        registry
            .change(|r| r.delete_version("orders-value", VersionSpec::Number(1), false))
            .unwrap();
        let refused = registry
            .validate("orders-value", Some(ids[0]), &data)
            .unwrap_err();
        assert!(refused.reason.contains("deleted version"), "{refused}");
        registry
            .change(|r| r.delete_version("orders-value", VersionSpec::Number(1), true))
            .unwrap();
        let refused = registry
            .validate("orders-value", Some(ids[0]), &data)
            .unwrap_err();
        assert!(refused.reason.contains("does not exist"), "{refused}");
        assert!(
            !registry.compiled.holds(ids[0]),
            "the compiled schema is dropped"
        );
    }

    #[test]
    fn a_schema_with_references_validates_the_referenced_types() {
        let dir = tempfile::tempdir().unwrap();
        let registry = SchemaRegistry::open(dir.path()).unwrap();
        let money = r#"{"type": "record", "name": "Money", "namespace": "shop",
            "fields": [{"name": "cents", "type": "long"}]}"#;
        registry
            .change(|r| r.register("money", &NewSchema::avro(money)))
            .unwrap();
        let mut payment = NewSchema::avro(
            r#"{"type": "record", "name": "Payment", "namespace": "shop",
                "fields": [{"name": "amount", "type": "shop.Money"}]}"#,
        );
        payment.references = vec![Reference {
            name: "shop.Money".to_owned(),
            subject: "money".to_owned(),
            version: 1,
        }];
        let id = registry
            .change(|r| r.register("payments-value", &payment))
            .unwrap();
        let mut data = Vec::new();
        long(250, &mut data);
        assert_eq!(registry.validate("payments-value", Some(id), &data), Ok(id));
        let refused = registry
            .validate("payments-value", Some(id), &[])
            .unwrap_err();
        assert_eq!(refused.field, "amount.cents");
    }

    #[test]
    fn json_schema_payloads_are_checked_and_the_refusal_names_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let registry = SchemaRegistry::open(dir.path()).unwrap();
        let schema = r#"{"type": "object", "required": ["id", "lines"],
            "properties": {"id": {"type": "string"},
                "lines": {"type": "array", "items": {"type": "object",
                    "properties": {"qty": {"type": "integer"}}}}}}"#;
        let id = registry
            .change(|r| r.register("shipments-value", &NewSchema::json(schema)))
            .unwrap();
        let mut framed = vec![0, 0, 0, 0, 0];
        framed[1..5].copy_from_slice(&id.to_be_bytes());
        framed.extend_from_slice(br#"{"id": "s-1", "lines": [{"qty": 2}]}"#);
        assert_eq!(registry.validate("shipments-value", None, &framed), Ok(id));

        let refused = registry
            .validate(
                "shipments-value",
                Some(id),
                br#"{"id": "s-1", "lines": [{"qty": 2}, {"qty": "two"}]}"#,
            )
            .unwrap_err();
        assert_eq!(refused.field, "lines[1].qty", "{refused}");
        let refused = registry
            .validate("shipments-value", Some(id), b"{not json")
            .unwrap_err();
        assert!(refused.reason.contains("not a JSON document"), "{refused}");
    }

    #[test]
    fn protobuf_payloads_are_checked_after_their_message_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let registry = SchemaRegistry::open(dir.path()).unwrap();
        let schema = "syntax = \"proto3\"; package shop;\n\
            message Order { string id = 1; int64 qty = 2; }";
        let id = registry
            .change(|r| r.register("orders-value", &NewSchema::protobuf(schema)))
            .unwrap();
        // Message index `0` (the first message), then id = "o-1" and qty = 5.
        let order = [0x00, 0x0a, 0x03, b'o', b'-', b'1', 0x10, 0x05];
        assert_eq!(registry.validate("orders-value", Some(id), &order), Ok(id));
        // qty written as a length-delimited field: not an int64.
        let wrong = [0x00, 0x0a, 0x03, b'o', b'-', b'1', 0x12, 0x01, 0x41];
        let refused = registry
            .validate("orders-value", Some(id), &wrong)
            .unwrap_err();
        assert_eq!(refused.field, "qty", "{refused}");
        assert!(refused.reason.contains("wire type"), "{refused}");
        // A second message that the schema does not have.
        let refused = registry
            .validate("orders-value", Some(id), &[0x02, 0x02, 0x0a, 0x00])
            .unwrap_err();
        assert!(refused.reason.contains("names no message"), "{refused}");
    }
}
