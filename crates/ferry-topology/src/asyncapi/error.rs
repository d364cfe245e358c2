//! Why an AsyncAPI document could not be imported.

/// An AsyncAPI document that is not one this importer reads, or that does not make a
/// topology. Nothing is imported when any of these is returned.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("line {line}, column {column}: not valid JSON: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    /// The text is not YAML, or not a YAML mapping.
    #[error("not valid YAML: {0}")]
    Yaml(#[source] crate::Error),
    #[error("not an AsyncAPI document: it has no `asyncapi` version field")]
    NotAsyncApi,
    #[error(
        "AsyncAPI {found} is not supported: this importer reads AsyncAPI 3.0; convert the \
         document first (`asyncapi convert` of the AsyncAPI CLI turns 2.x into 3.0)"
    )]
    Version2 { found: String },
    #[error("AsyncAPI {found} is not supported: this importer reads AsyncAPI 3.0")]
    UnsupportedVersion { found: String },
    #[error(
        "reference `{reference}` is not resolved: only references inside the document \
         (`#/components/...`) are read; bundle external files into the document first"
    )]
    ExternalReference { reference: String },
    #[error("reference `{reference}` points at nothing in the document")]
    DanglingReference { reference: String },
    #[error("reference `{reference}` refers to itself through a loop of references")]
    ReferenceLoop { reference: String },
    /// A part whose content does not make a valid part of a topology (a wrong type, an
    /// `x-ferry` value the format does not accept).
    #[error("{at}: {message}")]
    Invalid { at: String, message: String },
}
