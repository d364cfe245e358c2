//! Why a RabbitMQ definitions file could not be imported.

/// A file that is not RabbitMQ definitions, or not ones this importer can read. Nothing is
/// imported when any of these is returned.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("line {line}, column {column}: not valid JSON: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "not RabbitMQ definitions: expected a JSON object with `queues`, `exchanges` or \
         `bindings` (what `rabbitmqctl export_definitions` writes)"
    )]
    NotDefinitions,
    /// A field of the wrong type, e.g. a queue without a name.
    #[error("not RabbitMQ definitions: {message}")]
    Invalid { message: String },
    #[error("the definitions have nothing in vhost `{vhost}`; they have {}", .known.join(", "))]
    UnknownVhost { vhost: String, known: Vec<String> },
    #[error(
        "the definitions hold queues or exchanges in several vhosts ({}): import one at a \
         time with `from_vhost_definitions`",
        .vhosts.join(", ")
    )]
    SeveralVhosts { vhosts: Vec<String> },
}
