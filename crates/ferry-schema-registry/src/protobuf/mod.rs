//! Protobuf (`schemaType: "PROTOBUF"`): `.proto` text compiled with `protox`, a
//! pure-Rust compiler, into `prost-reflect` descriptors. An `import` is resolved from the
//! schema's references, a reference's `name` being the import path, as in Confluent's
//! registry; Google's well-known types (`google/protobuf/timestamp.proto`, …) come built
//! in, as Confluent's do. Nothing is read from disk.

pub(crate) mod compatibility;
pub(crate) mod validator;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use prost::Message as _;
use prost_reflect::FileDescriptor;
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
            Some(source) => File::from_source(name, source),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// What two registrations of the same `.proto` share: the file as parsed, without
/// comments, whitespace or source positions. A field's name, number, type or order, an
/// option or an import makes another schema.
pub(crate) fn identity(text: &str) -> Result<String, String> {
    let file = File::from_source(ROOT, text).map_err(|e| error_text(&e))?;
    let mut descriptor = file.file_descriptor_proto().clone();
    descriptor.source_code_info = None;
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
    fn identity_ignores_comments_and_formatting_but_not_numbers() {
        let a = "syntax = \"proto3\"; message A { string x = 1; }";
        let b = "syntax = \"proto3\";\n// a comment\nmessage A {\n  string x = 1;\n}\n";
        let c = "syntax = \"proto3\"; message A { string x = 2; }";
        assert_eq!(identity(a).unwrap(), identity(b).unwrap());
        assert_ne!(identity(a).unwrap(), identity(c).unwrap());
    }
}
