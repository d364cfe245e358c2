//! A schema registry that speaks Confluent Schema Registry's REST API, so that Confluent's
//! clients, serializers and tools work against Ferry: subjects with numbered versions,
//! schemas under global ids shared across subjects, references, soft and hard deletes,
//! the seven compatibility levels, and the READWRITE / READONLY / IMPORT modes. Avro only
//! for now; JSON Schema and Protobuf are refused with a message saying so.
//!
//! One concept per module: [`model`] holds the state and every decision on it (pure),
//! `schema` the values calls take and answer,
//! `compatibility` decides with Avro's rules whether a schema may follow another,
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
mod compatibility;
mod error;
mod level;
pub mod model;
mod payload;
mod rejection;
mod schema;
mod store;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

pub use error::RegistryError;
pub use level::{CompatibilityLevel, Mode};
pub use rejection::PayloadRejection;
pub use schema::{
    Deleted, NewSchema, Reference, RegisteredVersion, SchemaType, StoredSchema, VersionSpec,
};

use model::Registry;
use store::Store;

/// The registry, durable in a directory. Cheap to share behind an `Arc`; calls that change
/// it write the store and run one at a time.
#[derive(Debug)]
pub struct SchemaRegistry {
    store: Store,
    state: Mutex<Registry>,
}

impl SchemaRegistry {
    /// Opens the registry saved in `dir` (created if missing; empty the first time).
    pub fn open(dir: &Path) -> Result<SchemaRegistry, RegistryError> {
        let (store, registry) = Store::open(dir)?;
        Ok(SchemaRegistry {
            store,
            state: Mutex::new(registry),
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
