//! `embedded:./dir` — the Ferry broker in this process. Every feature is native.

#[cfg(feature = "embedded")]
mod ack_batch;
mod capabilities;
#[cfg(feature = "embedded")]
mod engine;

pub use capabilities::capabilities;
#[cfg(feature = "embedded")]
pub use engine::Embedded;

/// The broker queue a source reads: a queue or subscription by its name, dead letters in
/// `<name>.dlq` (the broker's default). Shared by the embedded and the server transports,
/// which speak to the same broker.
#[cfg(any(feature = "embedded", feature = "server"))]
pub(crate) fn queue_of(source: &crate::spec::Source) -> String {
    use crate::spec::Source;
    match source {
        Source::Queue(name) | Source::Subscription { name, .. } => name.clone(),
        Source::DeadLetters(origin) => format!("{}.dlq", queue_of(origin)),
    }
}

/// A topic the broker already has answers its declaration again only when it has the
/// partitions declared. Shared, like [`queue_of`], by the two transports over the broker.
#[cfg(any(feature = "embedded", feature = "server"))]
pub(crate) fn same_partitions(
    decl: &crate::spec::TopicDecl,
    partitions: usize,
) -> crate::error::Result<()> {
    if partitions as u32 == decl.partitions {
        Ok(())
    } else {
        Err(crate::error::Error::Conflict {
            kind: "topic",
            name: decl.name.clone(),
            problem: format!(
                "partitions: declared {}, existing {partitions}",
                decl.partitions
            ),
        })
    }
}
