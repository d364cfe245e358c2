//! A schema registry that speaks Confluent Schema Registry's REST API, so that Confluent's
//! clients, serializers and tools work against Ferry: Avro, JSON Schema and Protobuf
//! schemas in subjects with numbered versions, under global ids shared across subjects,
//! with references, soft and hard deletes, the seven compatibility levels by each
//! format's Confluent rules, and the READWRITE / READONLY / IMPORT modes, global and per
//! subject.
//!
//! One concept per module: [`model`] holds the state and every decision on it (pure),
//! `schema` the values calls take and answer,
//! `format` puts the three formats behind one face (parse, identity), each in its own
//! module — `avro`, `json_schema` (the `jsonschema` crate), `protobuf` (`protox` and
//! `prost-reflect`) — with its compatibility rules and, for JSON Schema and Protobuf,
//! a compiled payload validator answering a [`PayloadRejection`],
//! `compatibility` decides which versions and directions a level checks,
//! `store` keeps the state in one file replaced atomically, and [`api`] is the REST API
//! as an axum router. [`SchemaRegistry`] ties them: a change is decided on a copy of the
//! state, saved, and only then becomes the state, so a refused or failed call changes
//! nothing.
//!
//! ```no_run
//! # fn run() -> Result<(), ferry_schema_registry::RegistryError> {
//! let registry = std::sync::Arc::new(ferry_schema_registry::SchemaRegistry::open(
//!     std::path::Path::new("ferry-data/schema-registry"),
//! )?);
//! let router = ferry_schema_registry::api::router(registry); // mount it under /schema-registry
//! # Ok(()) }
//! ```

pub mod api;
mod avro;
mod canonical_json;
mod compatibility;
mod error;
mod format;
mod json_schema;
mod level;
pub mod model;
mod payload;
mod protobuf;
mod rejection;
mod schema;
mod store;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

pub use error::RegistryError;
pub use level::{CompatibilityLevel, Mode};
pub use rejection::PayloadRejection;
// The compiled payload validators of the JSON Schema and Protobuf formats, for
// enforcement at publish (`payload`).
pub(crate) use json_schema::validator::JsonPayloadValidator;
pub(crate) use protobuf::validator::ProtobufPayloadValidator;
pub use schema::{
    Deleted, NewSchema, Reference, RegisteredVersion, ResolvedReference, SchemaType, StoredSchema,
    VersionSpec,
};

use model::Registry;
use store::Store;

/// The registry, durable in a directory. Cheap to share behind an `Arc`; calls that change
/// it write the store and run one at a time.
#[derive(Debug)]
pub struct SchemaRegistry {
    store: Store,
    state: Mutex<Registry>,
    /// Schemas compiled for enforcement at publish, by id.
    compiled: payload::CompiledCache,
}

impl SchemaRegistry {
    /// Opens the registry saved in `dir` (created if missing; empty the first time).
    pub fn open(dir: &Path) -> Result<SchemaRegistry, RegistryError> {
        let (store, registry) = Store::open(dir)?;
        Ok(SchemaRegistry {
            store,
            state: Mutex::new(registry),
            compiled: payload::CompiledCache::default(),
        })
    }

    /// Answers from the current state.
    pub fn read<T>(&self, f: impl FnOnce(&Registry) -> T) -> T {
        f(&self.lock())
    }

    /// Applies `change` to a copy of the state; when it succeeds and changed something,
    /// saves the copy and makes it the state. A refusal or a failed save leaves both the
    /// state and the file as they were. Blocks on the file's fsync: call it off the
    /// async runtime's workers.
    pub fn change<T>(
        &self,
        change: impl FnOnce(&mut Registry) -> Result<T, RegistryError>,
    ) -> Result<T, RegistryError> {
        let mut state = self.lock();
        let mut next = state.clone();
        let answer = change(&mut next)?;
        if next != *state {
            self.store.save(&next)?;
            *state = next;
        }
        Ok(answer)
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        // A panic while the lock was held happened before `*state = next`, so the state
        // behind a poisoned lock is still a whole one.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
