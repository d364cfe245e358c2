//! Pub/Sub schemas as subjects of Ferry's schema registry, so that they are Ferry's own:
//! the registry's REST API, its store and its backups see them.
//!
//! | Pub/Sub | registry |
//! |---|---|
//! | schema `projects/P/schemas/S` | subject `pubsub:P.S` |
//! | its revisions | the subject's versions |
//! | revision id | the version number, in decimal (`"1"`, `"2"`, …) |
//! | AVRO, PROTOCOL_BUFFER | AVRO, PROTOBUF |
//!
//! The subject's `:` is a character no broker name holds, so a Pub/Sub schema's subject
//! never meets the `<topic>-value` and `<topic>-key` subjects of Confluent's clients.
//! Each subject is registered with compatibility NONE: Pub/Sub does not check a new
//! revision against earlier ones, only that it is a valid schema of the same type.
//!
//! What the registry cannot express: a revision repeating a live revision's definition
//! is that revision (the registry keeps one version per distinct schema), so CommitSchema
//! with an unchanged definition answers the existing revision, and RollbackSchema (a new
//! revision copying an old one) is refused with UNIMPLEMENTED. The registry keeps no
//! creation times, so `revision_create_time` is left unset.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ferry_schema_registry::model::Registry;
use ferry_schema_registry::{
    CompatibilityLevel, Deleted, NewSchema, RegisteredVersion, RegistryError, SchemaRegistry,
    SchemaType, VersionSpec,
};
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tonic::{Request, Response, Status};

use crate::PubSub;
use crate::generated::schema_service_server::SchemaService;
use crate::names::{self, Collection, to_broker};
use crate::schema_check::{CompiledSchema, schema_type};
use crate::status::unsupported;

/// Where the subjects of Pub/Sub schemas start.
const SUBJECT_PREFIX: &str = "pubsub:";
/// How many compiled definitions are kept before starting over.
const MAX_COMPILED: usize = 1024;
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1000;

/// The registry behind the SchemaService and topic schemas, with definitions compiled for
/// checking messages, by schema id (an id never names another schema, so an entry never
/// goes stale).
pub struct Schemas {
    registry: Arc<SchemaRegistry>,
    compiled: Mutex<HashMap<u32, Arc<CompiledSchema>>>,
}

/// A schema named by a request: `projects/P/schemas/S`, optionally `@revision`.
pub struct SchemaName {
    /// Without the revision.
    pub resource: String,
    pub subject: String,
    pub revision: Option<u32>,
}

impl SchemaName {
    pub fn parse(name: &str) -> Result<SchemaName, Status> {
        let (resource, revision) = match name.split_once('@') {
            Some((resource, revision)) => (resource, Some(revision_number(revision)?)),
            None => (name, None),
        };
        let broker = to_broker(resource, Collection::Schemas)?;
        Ok(SchemaName {
            resource: resource.to_owned(),
            subject: format!("{SUBJECT_PREFIX}{}", broker.as_str()),
            revision,
        })
    }

    fn spec(&self) -> VersionSpec {
        self.revision
            .map_or(VersionSpec::Latest, VersionSpec::Number)
    }
}

/// A revision id as the version number it stands for.
pub fn revision_number(revision: &str) -> Result<u32, Status> {
    revision
        .parse::<u32>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "Invalid revision id {revision:?}: revision ids here are the schema's version \
                 numbers (1, 2, ...)"
            ))
        })
}

/// A registry error as Pub/Sub's status.
pub fn from_registry(error: RegistryError) -> Status {
    use RegistryError as E;
    let message = error.to_string();
    match error {
        E::SubjectNotFound(_)
        | E::VersionNotFound { .. }
        | E::SchemaIdNotFound(_)
        | E::SchemaNotFound(_)
        | E::SubjectSoftDeleted(_)
        | E::VersionSoftDeleted { .. } => Status::not_found(message),
        E::InvalidSchema(_)
        | E::InvalidSubject(_)
        | E::UnsupportedSchemaType(_)
        | E::InvalidVersion(_)
        | E::Incompatible { .. } => Status::invalid_argument(message),
        E::Store(_) => Status::unavailable(message),
        _ => Status::failed_precondition(message),
    }
}

impl Schemas {
    pub fn new(registry: Arc<SchemaRegistry>) -> Schemas {
        Schemas {
            registry,
            compiled: Mutex::new(HashMap::new()),
        }
    }

    pub fn read<T>(&self, f: impl FnOnce(&Registry) -> T) -> T {
        self.registry.read(f)
    }

    /// Applies `change` to the registry off the runtime's workers (it syncs its file).
    async fn change<T: Send + 'static>(
        &self,
        change: impl FnOnce(&mut Registry) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let registry = Arc::clone(&self.registry);
        tokio::task::spawn_blocking(move || {
            let mut refusal = None;
            let answer = registry.change(|state| {
                change(state).map_err(|status| {
                    refusal = Some(status);
                    // Carries nothing: the refusal above is what is answered.
                    RegistryError::NotPermitted(String::new())
                })
            });
            match (answer, refusal) {
                (Ok(answer), _) => Ok(answer),
                (Err(_), Some(status)) => Err(status),
                (Err(e), None) => Err(from_registry(e)),
            }
        })
        .await
        .map_err(|e| Status::internal(format!("the schema change did not complete: {e}")))?
    }

    /// The compiled definition of a registered revision.
    pub fn compiled(&self, version: &RegisteredVersion) -> Result<Arc<CompiledSchema>, Status> {
        let mut cache = self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(compiled) = cache.get(&version.id) {
            return Ok(Arc::clone(compiled));
        }
        let compiled = Arc::new(
            CompiledSchema::compile(
                pubsub_type(version.schema.schema_type)?,
                &version.schema.schema,
            )
            .map_err(Status::failed_precondition)?,
        );
        if cache.len() >= MAX_COMPILED {
            cache.clear();
        }
        cache.insert(version.id, Arc::clone(&compiled));
        Ok(compiled)
    }
}

fn registry_type(kind: pb::schema::Type) -> SchemaType {
    match kind {
        pb::schema::Type::Avro => SchemaType::Avro,
        _ => SchemaType::Protobuf,
    }
}

fn pubsub_type(kind: SchemaType) -> Result<pb::schema::Type, Status> {
    match kind {
        SchemaType::Avro => Ok(pb::schema::Type::Avro),
        SchemaType::Protobuf => Ok(pb::schema::Type::ProtocolBuffer),
        SchemaType::Json => Err(Status::failed_precondition(
            "the registry holds a JSON Schema under this name, which Pub/Sub cannot use",
        )),
    }
}

/// A schema's type and definition, checked: the definition compiles as its type.
fn checked(schema: Option<&pb::Schema>) -> Result<(pb::schema::Type, String), Status> {
    let schema = schema.ok_or_else(|| Status::invalid_argument("A schema is required"))?;
    let kind = schema_type(schema.r#type).map_err(Status::invalid_argument)?;
    CompiledSchema::compile(kind, &schema.definition).map_err(Status::invalid_argument)?;
    Ok((kind, schema.definition.clone()))
}

/// A revision as Pub/Sub describes it; the definition only in the FULL view.
fn described(resource: &str, version: RegisteredVersion, full: bool) -> pb::Schema {
    let kind = match version.schema.schema_type {
        SchemaType::Avro => pb::schema::Type::Avro,
        SchemaType::Protobuf => pb::schema::Type::ProtocolBuffer,
        SchemaType::Json => pb::schema::Type::Unspecified,
    };
    pb::Schema {
        name: resource.to_owned(),
        r#type: kind as i32,
        definition: if full {
            version.schema.schema
        } else {
            String::new()
        },
        revision_id: version.version.to_string(),
        revision_create_time: None,
    }
}

/// Whether `view` asks for definitions, `default_full` standing for an unset view.
fn full_view(view: i32, default_full: bool) -> bool {
    match pb::SchemaView::try_from(view) {
        Ok(pb::SchemaView::Full) => true,
        Ok(pb::SchemaView::Basic) => false,
        _ => default_full,
    }
}

fn page_size(page_size: i32) -> Result<usize, Status> {
    match page_size {
        0 => Ok(DEFAULT_PAGE),
        n if n < 0 => Err(Status::invalid_argument(format!(
            "page_size must not be negative (got {n})"
        ))),
        n => Ok((n as usize).min(MAX_PAGE)),
    }
}

impl PubSub {
    fn schemas_or_refuse(&self) -> Result<&Schemas, Status> {
        self.schemas().ok_or_else(|| {
            unsupported("The schema service (this server runs without a schema registry)")
        })
    }
}

#[tonic::async_trait]
impl SchemaService for PubSub {
    async fn create_schema(
        &self,
        request: Request<pb::CreateSchemaRequest>,
    ) -> Result<Response<pb::Schema>, Status> {
        let schemas = self.schemas_or_refuse()?;
        let request = request.into_inner();
        let project = names::project(&request.parent)?;
        let resource = format!("projects/{project}/schemas/{}", request.schema_id);
        let name = SchemaName::parse(&resource)?;
        let (kind, definition) = checked(request.schema.as_ref())?;
        let subject = name.subject.clone();
        let version = schemas
            .change(move |registry| {
                if registry.versions(&subject, Deleted::Include).is_ok() {
                    return Err(Status::already_exists(format!(
                        "Resource already exists in the project (resource={resource})"
                    )));
                }
                registry.set_subject_level(&subject, CompatibilityLevel::None);
                let new = NewSchema::of(registry_type(kind), definition);
                registry.register(&subject, &new).map_err(from_registry)?;
                registry
                    .version(&subject, VersionSpec::Latest, false)
                    .map_err(from_registry)
            })
            .await?;
        Ok(Response::new(described(&name.resource, version, true)))
    }

    async fn get_schema(
        &self,
        request: Request<pb::GetSchemaRequest>,
    ) -> Result<Response<pb::Schema>, Status> {
        let schemas = self.schemas_or_refuse()?;
        let request = request.into_inner();
        let name = SchemaName::parse(&request.name)?;
        let version = schemas
            .read(|r| r.version(&name.subject, name.spec(), false))
            .map_err(|e| not_found(&request.name, e))?;
        Ok(Response::new(described(
            &name.resource,
            version,
            full_view(request.view, true),
        )))
    }

    async fn list_schemas(
        &self,
        request: Request<pb::ListSchemasRequest>,
    ) -> Result<Response<pb::ListSchemasResponse>, Status> {
        let schemas = self.schemas_or_refuse()?;
        let request = request.into_inner();
        let project = names::project(&request.parent)?;
        let prefix = format!("{SUBJECT_PREFIX}{}", names::prefix(project));
        let full = full_view(request.view, false);
        let (resources, next_page_token) = crate::pages::page(
            schemas
                .read(|r| r.subjects(&prefix, Deleted::Exclude))
                .iter()
                .filter_map(|s| {
                    let broker = s.strip_prefix(SUBJECT_PREFIX)?;
                    names::to_resource(broker, Collection::Schemas)
                })
                .collect(),
            request.page_size,
            &request.page_token,
        )?;
        let mut listed = Vec::with_capacity(resources.len());
        for resource in resources {
            let name = SchemaName::parse(&resource)?;
            // Deleted since listed: left out, as a later list would.
            if let Ok(version) =
                schemas.read(|r| r.version(&name.subject, VersionSpec::Latest, false))
            {
                listed.push(described(&resource, version, full));
            }
        }
        Ok(Response::new(pb::ListSchemasResponse {
            schemas: listed,
            next_page_token,
        }))
    }

    async fn list_schema_revisions(
        &self,
        request: Request<pb::ListSchemaRevisionsRequest>,
    ) -> Result<Response<pb::ListSchemaRevisionsResponse>, Status> {
        let schemas = self.schemas_or_refuse()?;
        let request = request.into_inner();
        let name = SchemaName::parse(&request.name)?;
        let size = page_size(request.page_size)?;
        // Newest first, as Pub/Sub lists them; the token is the last revision given.
        let after = if request.page_token.is_empty() {
            None
        } else {
            Some(revision_number(&request.page_token)?)
        };
        let full = full_view(request.view, false);
        let versions = schemas
            .read(|r| {
                let numbers = r.versions(&name.subject, Deleted::Exclude)?;
                numbers
                    .iter()
                    .rev()
                    .filter(|v| after.is_none_or(|after| **v < after))
                    .take(size + 1)
                    .map(|v| r.version(&name.subject, VersionSpec::Number(*v), false))
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| not_found(&request.name, e))?;
        let more = versions.len() > size;
        let listed: Vec<pb::Schema> = versions
            .into_iter()
            .take(size)
            .map(|v| described(&name.resource, v, full))
            .collect();
        let next_page_token = match listed.last() {
            Some(last) if more => last.revision_id.clone(),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListSchemaRevisionsResponse {
            schemas: listed,
            next_page_token,
        }))
    }

    async fn commit_schema(
        &self,
        request: Request<pb::CommitSchemaRequest>,
    ) -> Result<Response<pb::Schema>, Status> {
        let schemas = self.schemas_or_refuse()?;
        let request = request.into_inner();
        let name = SchemaName::parse(&request.name)?;
        let (kind, definition) = checked(request.schema.as_ref())?;
        let subject = name.subject.clone();
        let resource = name.resource.clone();
        let version = schemas
            .change(move |registry| {
                let latest = registry
                    .version(&subject, VersionSpec::Latest, false)
                    .map_err(|e| not_found(&resource, e))?;
                if registry_type(kind) != latest.schema.schema_type {
                    return Err(Status::invalid_argument(format!(
                        "A new revision must have the schema's type ({}); got {}",
                        pubsub_type(latest.schema.schema_type)?.as_str_name(),
                        kind.as_str_name()
                    )));
                }
                let new = NewSchema::of(registry_type(kind), definition);
                registry.register(&subject, &new).map_err(from_registry)?;
                registry
                    .lookup(&subject, &new, false)
                    .map_err(from_registry)
            })
            .await?;
        Ok(Response::new(described(&name.resource, version, true)))
    }

    async fn rollback_schema(
        &self,
        _request: Request<pb::RollbackSchemaRequest>,
    ) -> Result<Response<pb::Schema>, Status> {
        self.schemas_or_refuse()?;
        Err(Status::unimplemented(
            "RollbackSchema is not supported by this server: the schema registry keeps one \
             revision per distinct definition, so it cannot add a revision copying a live one; \
             delete the newer revisions (DeleteSchemaRevision) instead",
        ))
    }

    async fn delete_schema_revision(
        &self,
        request: Request<pb::DeleteSchemaRevisionRequest>,
    ) -> Result<Response<pb::Schema>, Status> {
        let schemas = self.schemas_or_refuse()?;
        let request = request.into_inner();
        let mut name = SchemaName::parse(&request.name)?;
        #[allow(deprecated)]
        let legacy = request.revision_id;
        if name.revision.is_none() && !legacy.is_empty() {
            name.revision = Some(revision_number(&legacy)?);
        }
        let Some(revision) = name.revision else {
            return Err(Status::invalid_argument(
                "Name the revision to delete: projects/{project}/schemas/{schema}@{revision}",
            ));
        };
        let subject = name.subject.clone();
        let shown = request.name.clone();
        let deleted = schemas
            .change(move |registry| {
                let spec = VersionSpec::Number(revision);
                let version = registry
                    .version(&subject, spec, false)
                    .map_err(|e| not_found(&shown, e))?;
                if registry
                    .versions(&subject, Deleted::Exclude)
                    .map_or(0, |v| v.len())
                    <= 1
                {
                    return Err(Status::failed_precondition(format!(
                        "Revision {revision} is the schema's only revision: delete the schema \
                         instead"
                    )));
                }
                registry
                    .delete_version(&subject, spec, false)
                    .map_err(from_registry)?;
                registry
                    .delete_version(&subject, spec, true)
                    .map_err(from_registry)?;
                Ok(version)
            })
            .await?;
        Ok(Response::new(described(&name.resource, deleted, true)))
    }

    async fn delete_schema(
        &self,
        request: Request<pb::DeleteSchemaRequest>,
    ) -> Result<Response<()>, Status> {
        let schemas = self.schemas_or_refuse()?;
        let request = request.into_inner();
        let name = SchemaName::parse(&request.name)?;
        let subject = name.subject;
        schemas
            .change(move |registry| {
                registry
                    .delete_subject(&subject, false)
                    .map_err(|e| not_found(&request.name, e))?;
                registry
                    .delete_subject(&subject, true)
                    .map_err(from_registry)?;
                Ok(())
            })
            .await?;
        Ok(Response::new(()))
    }

    async fn validate_schema(
        &self,
        request: Request<pb::ValidateSchemaRequest>,
    ) -> Result<Response<pb::ValidateSchemaResponse>, Status> {
        self.schemas_or_refuse()?;
        let request = request.into_inner();
        names::project(&request.parent)?;
        checked(request.schema.as_ref())?;
        Ok(Response::new(pb::ValidateSchemaResponse {}))
    }

    async fn validate_message(
        &self,
        request: Request<pb::ValidateMessageRequest>,
    ) -> Result<Response<pb::ValidateMessageResponse>, Status> {
        use pb::validate_message_request::SchemaSpec;
        let schemas = self.schemas_or_refuse()?;
        let request = request.into_inner();
        names::project(&request.parent)?;
        let compiled = match &request.schema_spec {
            Some(SchemaSpec::Name(shown)) => {
                let name = SchemaName::parse(shown)?;
                let version = schemas
                    .read(|r| r.version(&name.subject, name.spec(), false))
                    .map_err(|e| not_found(shown, e))?;
                schemas.compiled(&version)?
            }
            Some(SchemaSpec::Schema(schema)) => {
                let kind = schema_type(schema.r#type).map_err(Status::invalid_argument)?;
                Arc::new(
                    CompiledSchema::compile(kind, &schema.definition)
                        .map_err(Status::invalid_argument)?,
                )
            }
            None => {
                return Err(Status::invalid_argument(
                    "Name a schema (name) or give one (schema) to validate against",
                ));
            }
        };
        let encoding =
            pb::Encoding::try_from(request.encoding).unwrap_or(pb::Encoding::Unspecified);
        compiled
            .validate(&request.message, encoding)
            .map_err(|why| Status::invalid_argument(format!("Invalid message: {why}")))?;
        Ok(Response::new(pb::ValidateMessageResponse {}))
    }
}

/// A schema or revision that is not there, named as the caller named it.
fn not_found(shown: &str, error: RegistryError) -> Status {
    match error {
        RegistryError::SubjectNotFound(_)
        | RegistryError::VersionNotFound { .. }
        | RegistryError::SubjectSoftDeleted(_) => {
            Status::not_found(format!("Resource not found (resource={shown})"))
        }
        other => from_registry(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schema_is_a_subject_no_topic_subject_can_be() {
        let name = SchemaName::parse("projects/p/schemas/orders@3").unwrap();
        assert_eq!(name.subject, "pubsub:p.orders");
        assert_eq!(name.resource, "projects/p/schemas/orders");
        assert_eq!(name.revision, Some(3));
        assert!(SchemaName::parse("projects/p/schemas/orders@abc").is_err());
        assert!(SchemaName::parse("projects/p/topics/orders").is_err());
    }
}
