//! A topic's `schema_settings`: checked at CreateTopic, kept in the front end's topic
//! records (the broker's topic spec names a registry subject, but its validator finds the
//! schema by Confluent's wire prefix or a `ferry-schema-id` header, which Pub/Sub messages
//! do not carry), and enforced here at every Publish. Publishes through the other front
//! ends are not checked against a Pub/Sub schema.
//!
//! A message is valid when it is valid under one of the schema's revisions from
//! `first_revision_id` to `last_revision_id` (each end open when empty), newest first; a
//! Publish with one invalid message stores nothing. Accepted messages carry the
//! attributes Pub/Sub adds: `googclient_schemaname`, `googclient_schemaencoding` and
//! `googclient_schemarevisionid` (the revision that validated the message).
//!
//! A topic whose schema was deleted shows the schema as `_deleted-schema_`, as Pub/Sub
//! does, and refuses Publish with FAILED_PRECONDITION until it is deleted and made again.

use std::sync::Arc;

use ferry_schema_registry::{Deleted, VersionSpec};
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tonic::Status;

use crate::schema_check::CompiledSchema;
use crate::schemas::{SchemaName, Schemas, revision_number};
use crate::status::unsupported;
use crate::store::TopicSchema;

/// How a topic whose schema was deleted names it.
pub const DELETED_SCHEMA: &str = "_deleted-schema_";
pub const SCHEMA_NAME_ATTRIBUTE: &str = "googclient_schemaname";
pub const SCHEMA_ENCODING_ATTRIBUTE: &str = "googclient_schemaencoding";
pub const SCHEMA_REVISION_ATTRIBUTE: &str = "googclient_schemarevisionid";

/// The settings asked at CreateTopic, checked: the schema exists, the encoding is JSON or
/// BINARY, and the revisions named exist, in order.
pub fn checked(
    schemas: Option<&Schemas>,
    settings: &pb::SchemaSettings,
) -> Result<TopicSchema, Status> {
    let schemas = schemas.ok_or_else(|| {
        unsupported("A topic schema (schema_settings) on a server without a schema registry")
    })?;
    let name = SchemaName::parse(&settings.schema)?;
    if name.revision.is_some() {
        return Err(Status::invalid_argument(
            "schema_settings.schema names a schema, not a revision: use first_revision_id \
             and last_revision_id",
        ));
    }
    let encoding = match pb::Encoding::try_from(settings.encoding) {
        Ok(e @ (pb::Encoding::Json | pb::Encoding::Binary)) => e,
        _ => {
            return Err(Status::invalid_argument(
                "schema_settings.encoding must be JSON or BINARY",
            ));
        }
    };
    let live = schemas
        .read(|r| r.versions(&name.subject, Deleted::Exclude))
        .map_err(|_| {
            Status::not_found(format!("Resource not found (resource={})", name.resource))
        })?;
    let revision = |id: &str| -> Result<Option<u32>, Status> {
        if id.is_empty() {
            return Ok(None);
        }
        let n = revision_number(id)?;
        if !live.contains(&n) {
            return Err(Status::not_found(format!(
                "Resource not found (resource={}@{id})",
                name.resource
            )));
        }
        Ok(Some(n))
    };
    if let (Some(first), Some(last)) = (
        revision(&settings.first_revision_id)?,
        revision(&settings.last_revision_id)?,
    ) && first > last
    {
        return Err(Status::invalid_argument(
            "first_revision_id must not come after last_revision_id",
        ));
    }
    Ok(TopicSchema {
        schema: name.resource,
        encoding: encoding.as_str_name().to_owned(),
        first_revision_id: settings.first_revision_id.clone(),
        last_revision_id: settings.last_revision_id.clone(),
    })
}

/// The settings as GetTopic shows them.
pub fn shown(schemas: Option<&Schemas>, kept: &TopicSchema) -> pb::SchemaSettings {
    let exists = schemas.is_some_and(|schemas| {
        SchemaName::parse(&kept.schema)
            .is_ok_and(|name| schemas.read(|r| r.versions(&name.subject, Deleted::Exclude).is_ok()))
    });
    pb::SchemaSettings {
        schema: if exists {
            kept.schema.clone()
        } else {
            DELETED_SCHEMA.to_owned()
        },
        encoding: pb::Encoding::from_str_name(&kept.encoding).unwrap_or_default() as i32,
        first_revision_id: kept.first_revision_id.clone(),
        last_revision_id: kept.last_revision_id.clone(),
    }
}

/// Checks every message of a Publish and, when all are valid, adds the schema attributes
/// to each; when one is not, answers INVALID_ARGUMENT and changes nothing.
pub fn validate(
    schemas: Option<&Schemas>,
    kept: &TopicSchema,
    messages: &mut [pb::PubsubMessage],
) -> Result<(), Status> {
    let deleted = || {
        Status::failed_precondition(format!(
            "The topic's schema {} was deleted: messages cannot be validated",
            kept.schema
        ))
    };
    let schemas = schemas.ok_or_else(deleted)?;
    let name = SchemaName::parse(&kept.schema)?;
    let encoding = pb::Encoding::from_str_name(&kept.encoding).unwrap_or_default();
    let bound = |id: &str| (!id.is_empty()).then(|| id.parse::<u32>().ok()).flatten();
    let (first, last) = (
        bound(&kept.first_revision_id),
        bound(&kept.last_revision_id),
    );
    // The revisions in range, newest first, compiled once for the whole batch.
    let revisions: Vec<(u32, Arc<CompiledSchema>)> = schemas
        .read(|r| {
            let numbers = r.versions(&name.subject, Deleted::Exclude).ok()?;
            Some(
                numbers
                    .into_iter()
                    .rev()
                    .filter(|v| first.is_none_or(|f| *v >= f) && last.is_none_or(|l| *v <= l))
                    .filter_map(|v| r.version(&name.subject, VersionSpec::Number(v), false).ok())
                    .collect::<Vec<_>>(),
            )
        })
        .ok_or_else(deleted)?
        .into_iter()
        .map(|v| schemas.compiled(&v).map(|c| (v.version, c)))
        .collect::<Result<_, _>>()?;
    if revisions.is_empty() {
        return Err(Status::failed_precondition(format!(
            "The topic's schema {} has no revision between first_revision_id and \
             last_revision_id any more",
            kept.schema
        )));
    }
    let mut accepted = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        let mut newest_reason = None;
        let found = revisions.iter().find(|(_, compiled)| {
            match compiled.validate(&message.data, encoding) {
                Ok(()) => true,
                Err(why) => {
                    newest_reason.get_or_insert(why);
                    false
                }
            }
        });
        match found {
            Some((revision, _)) => accepted.push(*revision),
            None => {
                return Err(Status::invalid_argument(format!(
                    "Invalid data in message {index}: message failed schema validation \
                     against {}: {}",
                    kept.schema,
                    newest_reason.unwrap_or_default()
                )));
            }
        }
    }
    for (message, revision) in messages.iter_mut().zip(accepted) {
        let attributes = &mut message.attributes;
        attributes.insert(SCHEMA_NAME_ATTRIBUTE.to_owned(), kept.schema.clone());
        attributes.insert(SCHEMA_ENCODING_ATTRIBUTE.to_owned(), kept.encoding.clone());
        attributes.insert(SCHEMA_REVISION_ATTRIBUTE.to_owned(), revision.to_string());
    }
    Ok(())
}
