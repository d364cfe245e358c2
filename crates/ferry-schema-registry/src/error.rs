//! What the registry refuses, and why. The HTTP API maps each variant to Confluent's
//! status and `error_code` in one place (`api::error`).

/// A refused or failed registry call. A refusal changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("Subject '{0}' not found.")]
    SubjectNotFound(String),
    #[error("Version {version} not found for subject '{subject}'.")]
    VersionNotFound { subject: String, version: String },
    #[error("Schema {0} not found")]
    SchemaIdNotFound(u32),
    #[error("Schema not found under subject '{0}': register it first")]
    SchemaNotFound(String),
    #[error("Subject '{0}' was soft deleted. Set permanent=true to delete permanently")]
    SubjectSoftDeleted(String),
    #[error("Subject '{0}' was not deleted first before being permanently deleted")]
    SubjectNotSoftDeleted(String),
    #[error(
        "Subject '{subject}' Version {version} was soft deleted. Set permanent=true to delete \
         permanently"
    )]
    VersionSoftDeleted { subject: String, version: u32 },
    #[error(
        "Subject '{subject}' Version {version} was not deleted first before being permanently \
         deleted"
    )]
    VersionNotSoftDeleted { subject: String, version: u32 },
    #[error(
        "Subject '{0}' does not have subject-level compatibility configured \
         (ask with defaultToGlobal=true for the global level)"
    )]
    SubjectLevelNotConfigured(String),
    #[error(
        "Subject '{0}' does not have subject-level mode configured \
         (ask with defaultToGlobal=true for the global mode)"
    )]
    SubjectModeNotConfigured(String),
    #[error("Invalid schema: {0}")]
    InvalidSchema(String),
    #[error(
        "The specified subject {0:?} is not valid: it must be non-empty, without control characters"
    )]
    InvalidSubject(String),
    /// A schema type this registry does not take, named apart from a malformed schema so
    /// the message says the type is the problem, not the text. Every type Confluent
    /// defines (AVRO, JSON, PROTOBUF) is taken now; kept for callers that match on it.
    #[error("Schema type {0} is not supported by this registry")]
    UnsupportedSchemaType(String),
    #[error(
        "The specified version '{0}' is not a valid version id. Allowed values are between \
         [1, 2^31-1] and the string \"latest\""
    )]
    InvalidVersion(String),
    #[error(
        "Invalid compatibility level {0:?}. Valid values are NONE, BACKWARD, FORWARD, FULL, \
         BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE and FULL_TRANSITIVE"
    )]
    InvalidCompatibilityLevel(String),
    #[error("Invalid mode {0:?}. Valid values are READWRITE, READONLY and IMPORT")]
    InvalidMode(String),
    /// The mode forbids the call, or an option is not supported: the message says which.
    #[error("{0}")]
    NotPermitted(String),
    #[error(
        "One or more references exist to the schema {{subject={subject}, version={version}}}: \
         delete the schemas that reference it first"
    )]
    ReferenceExists { subject: String, version: u32 },
    #[error("Schema id {id} is already taken by another schema; import it under a new id")]
    IdDoesNotMatch { id: u32 },
    /// The registration breaks the subject's compatibility level; `messages` say where.
    #[error(
        "Schema being registered is incompatible with an earlier schema for subject \
         \"{subject}\", details: [{}]",
        messages.join(", ")
    )]
    Incompatible {
        subject: String,
        messages: Vec<String>,
    },
    /// The store could not be read or written; a failed write changed nothing.
    #[error("Error in the schema store: {0}")]
    Store(String),
}
