//! Protobuf (`schemaType: "PROTOBUF"`): `.proto` text compiled with `protox`, a
//! pure-Rust compiler, into `prost-reflect` descriptors. An `import` is resolved from the
//! schema's references, a reference's `name` being the import path, as in Confluent's
//! registry; Google's well-known types (`google/protobuf/timestamp.proto`, …) come built
//! in, as Confluent's do. Nothing is read from disk.
//!
//! A schema is taken in either form Confluent's registry takes: `.proto` text, or a
//! base64 `FileDescriptorProto`, which is what Confluent's serializers register (they
//! hold compiled descriptors, not sources). [`serialized`] gives the second form back,
//! for `format=serialized`.

pub(crate) mod compatibility;
pub(crate) mod validator;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use prost::Message as _;
use prost_reflect::FileDescriptor;
use prost_reflect::prost_types::FileDescriptorProto;
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

use crate::schema::ResolvedReference;

/// The name the schema being registered compiles under: not a path any import can name
/// by accident.
const ROOT: &str = "<registered schema>.proto";

/// A compiled `.proto` file, with the files it imports.
#[derive(Debug, Clone)]
pub(crate) struct ProtobufSchema {
    pub(crate) file: FileDescriptor,
}

/// `text` compiled, its imports taken from `references` (by name) or the well-known
/// types: refused when it does not parse, imports a file it was not given, or names a
/// type nothing defines.
pub(crate) fn parse(
    text: &str,
    references: &[ResolvedReference],
) -> Result<ProtobufSchema, String> {
    let mut files = BTreeMap::new();
    files.insert(ROOT.to_owned(), text.to_owned());
    for r in references {
        files.insert(r.name.clone(), r.schema.clone());
    }
    let mut resolver = ChainFileResolver::new();
    resolver.add(References(files));
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler
        .open_file(ROOT)
        .map_err(|e| error_text(&e).replace(ROOT, "the schema"))?;
    let file = compiler
        .descriptor_pool()
        .get_file_by_name(ROOT)
        .ok_or_else(|| "the schema compiled to no file".to_owned())?;
    Ok(ProtobufSchema { file })
}

/// The referenced files, by import path.
struct References(BTreeMap<String, String>);

impl FileResolver for References {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        match self.0.get(name) {
            Some(source) => source_file(name, source),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// A schema's text as a file named `name`: `.proto` text, else a base64
/// `FileDescriptorProto`. When it is neither, the `.proto` parser's error says why.
fn source_file(name: &str, text: &str) -> Result<File, protox::Error> {
    match File::from_source(name, text) {
        Ok(file) => Ok(file),
        Err(error) => match descriptor(text) {
            Some(mut descriptor) => {
                // The descriptor names itself after the client's file; imports name it by
                // the reference's name, which is the one that counts here.
                descriptor.name = Some(name.to_owned());
                Ok(File::from_file_descriptor_proto(descriptor))
            }
            None => Err(error),
        },
    }
}

/// `text` as a base64 `FileDescriptorProto`, when it is one that declares something.
fn descriptor(text: &str) -> Option<FileDescriptorProto> {
    let bytes = BASE64.decode(text.trim()).ok()?;
    let descriptor = FileDescriptorProto::decode(bytes.as_slice()).ok()?;
    let declares = !descriptor.message_type.is_empty()
        || !descriptor.enum_type.is_empty()
        || !descriptor.service.is_empty()
        || !descriptor.dependency.is_empty();
    declares.then_some(descriptor)
}

/// The compiled schema as a base64 `FileDescriptorProto`, the form Confluent's
/// serializers ask for with `format=serialized`.
pub(crate) fn serialized(schema: &ProtobufSchema) -> String {
    let mut descriptor = schema.file.file_descriptor_proto().clone();
    descriptor.source_code_info = None;
    BASE64.encode(descriptor.encode_to_vec())
}

/// What two registrations of the same `.proto` share: the file as parsed, without
/// comments, whitespace, source positions or its own file name. A field's name, number,
/// type or order, an option or an import makes another schema. The same schema sent as
/// text and as a descriptor need not match (a compiler fills in fields the parser
/// leaves out), but each form keeps its id when sent again.
pub(crate) fn identity(text: &str) -> Result<String, String> {
    let file = source_file(ROOT, text).map_err(|e| error_text(&e))?;
    let mut descriptor = file.file_descriptor_proto().clone();
    descriptor.source_code_info = None;
    descriptor.name = None;
    let mut out = String::new();
    for byte in descriptor.encode_to_vec() {
        let _ = write!(out, "{byte:02x}");
    }
    Ok(out)
}

/// A protox error with its causes.
fn error_text(error: &protox::Error) -> String {
    crate::avro::error_text(error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SchemaType;

    #[test]
    fn a_schema_that_does_not_compile_is_refused_with_the_reason() {
        let error = parse("syntax = \"proto3\"; message A { strin x = 1; }", &[]).unwrap_err();
        assert!(error.contains("strin"), "{error}");
        assert!(parse("message {", &[]).is_err());
        assert!(parse("syntax = \"proto3\"; message A { string x = 1; }", &[]).is_ok());
    }

    #[test]
    fn an_import_is_resolved_from_a_reference_named_by_its_path() {
        let order = "syntax = \"proto3\"; package shop; import \"shop/line.proto\";
                     message Order { repeated Line lines = 1; }";
        let error = parse(order, &[]).unwrap_err();
        assert!(error.contains("shop/line.proto"), "{error}");
        let line = ResolvedReference {
            name: "shop/line.proto".to_owned(),
            schema_type: SchemaType::Protobuf,
            schema: "syntax = \"proto3\"; package shop; message Line { string sku = 1; }"
                .to_owned(),
        };
        let schema = parse(order, &[line]).unwrap();
        assert_eq!(
            schema.file.messages().next().unwrap().full_name(),
            "shop.Order"
        );
    }

    #[test]
    fn well_known_types_need_no_reference() {
        let text = "syntax = \"proto3\"; import \"google/protobuf/timestamp.proto\";
                    message A { google.protobuf.Timestamp at = 1; }";
        parse(text, &[]).unwrap();
    }

    #[test]
    fn a_base64_descriptor_is_taken_as_confluents_serializers_send_it() {
        let line = ResolvedReference {
            name: "shop/line.proto".to_owned(),
            schema_type: SchemaType::Protobuf,
            schema: "syntax = \"proto3\"; package shop; message Line { string sku = 1; }"
                .to_owned(),
        };
        let order = "syntax = \"proto3\"; package shop; import \"shop/line.proto\";
                     message Order { repeated Line lines = 1; }";
        let compiled = parse(order, std::slice::from_ref(&line)).unwrap();
        let encoded = serialized(&compiled);
        // The descriptor form compiles to the same messages, its import resolved the
        // same way.
        let again = parse(&encoded, &[line]).unwrap();
        let names = |s: &ProtobufSchema| -> Vec<String> {
            s.file
                .messages()
                .map(|m| m.full_name().to_owned())
                .collect()
        };
        assert_eq!(names(&again), names(&compiled));
        assert_eq!(
            identity(&encoded).unwrap(),
            identity(&format!("\n{encoded}\n")).unwrap()
        );
        // Neither .proto nor a descriptor: the .proto parser's reason.
        let error = parse("bm90IGEgZGVzY3JpcHRvcg==", &[]).unwrap_err();
        assert!(!error.is_empty());
    }

    #[test]
    fn identity_ignores_comments_and_formatting_but_not_numbers() {
        let a = "syntax = \"proto3\"; message A { string x = 1; }";
        let b = "syntax = \"proto3\";\n// a comment\nmessage A {\n  string x = 1;\n}\n";
        let c = "syntax = \"proto3\"; message A { string x = 2; }";
        assert_eq!(identity(a).unwrap(), identity(b).unwrap());
        assert_ne!(identity(a).unwrap(), identity(c).unwrap());
    }
}
