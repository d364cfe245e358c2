//! The registry on disk: one JSON file, `registry.json`, in the directory the caller
//! gives, replaced whole on every change.
//!
//! **Why a file and not Ferry's log.** Confluent keeps its registry in a Kafka topic and
//! replays it at start. Here the registry is small (schemas, not messages), changes a few
//! times a day, and is read whole at start and by id after: a snapshot replaced atomically
//! is one consistent state with nothing to replay or compact, and keeps the registry
//! independent of the broker's storage (a broker repair never touches it).
//!
//! **Crash windows.** A save writes `registry.json.tmp`, fsyncs it, renames it over
//! `registry.json` and fsyncs the directory. A crash before the rename leaves the old file
//! whole and maybe a torn temp file, which the next open removes (it was never
//! acknowledged: the call that wrote it had not answered yet). A crash after the rename
//! but before the directory fsync may bring back the old file after a power loss; the
//! change was not acknowledged then either, as the call answers after the fsync. A file
//! that does not parse is never replaced by an empty registry: the open fails, saying so.

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::RegistryError;
use crate::model::Registry;

const FILE: &str = "registry.json";
const TEMP: &str = "registry.json.tmp";
/// The file's layout; a later layout reads this one or refuses it by number.
const FORMAT: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Snapshot {
    format: u32,
    registry: Registry,
}

/// Where the registry lives.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
}

impl Store {
    /// Opens (creating) `dir` and reads the registry saved there, empty if none was.
    pub(crate) fn open(dir: &Path) -> Result<(Store, Registry), RegistryError> {
        fs::create_dir_all(dir).map_err(|e| io_error("creating", dir, &e))?;
        let temp = dir.join(TEMP);
        match fs::remove_file(&temp) {
            Ok(()) => tracing::info!(
                path = %temp.display(),
                "removed the temporary file of a save that did not finish"
            ),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io_error("removing", &temp, &e)),
        }
        let path = dir.join(FILE);
        let registry = match fs::read(&path) {
            Ok(bytes) => {
                let snapshot: Snapshot = serde_json::from_slice(&bytes).map_err(|e| {
                    RegistryError::Store(format!(
                        "{} is not a registry this version reads ({e}); restore it from a \
                         backup or move it away to start empty",
                        path.display()
                    ))
                })?;
                if snapshot.format != FORMAT {
                    return Err(RegistryError::Store(format!(
                        "{} has format {}, this version reads format {FORMAT}",
                        path.display(),
                        snapshot.format
                    )));
                }
                snapshot.registry
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Registry::default(),
            Err(e) => return Err(io_error("reading", &path, &e)),
        };
        Ok((
            Store {
                dir: dir.to_owned(),
            },
            registry,
        ))
    }

    /// Replaces the saved registry with `registry`, durably, before answering.
    pub(crate) fn save(&self, registry: &Registry) -> Result<(), RegistryError> {
        let bytes = serde_json::to_vec(&SnapshotRef {
            format: FORMAT,
            registry,
        })
        .map_err(|e| RegistryError::Store(format!("encoding the registry: {e}")))?;
        let temp = self.dir.join(TEMP);
        let mut file = File::create(&temp).map_err(|e| io_error("creating", &temp, &e))?;
        file.write_all(&bytes)
            .and_then(|()| file.sync_all())
            .map_err(|e| io_error("writing", &temp, &e))?;
        drop(file);
        let path = self.dir.join(FILE);
        fs::rename(&temp, &path).map_err(|e| io_error("renaming over", &path, &e))?;
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| io_error("syncing", &self.dir, &e))
    }
}

#[derive(Serialize)]
struct SnapshotRef<'a> {
    format: u32,
    registry: &'a Registry,
}

fn io_error(doing: &str, path: &Path, error: &std::io::Error) -> RegistryError {
    RegistryError::Store(format!("{doing} {}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompatibilityLevel, Mode};
    use crate::{NewSchema, VersionSpec};

    const V1: &str =
        r#"{"type":"record","name":"OrderPlaced","fields":[{"name":"id","type":"string"}]}"#;
    const V2: &str = r#"{"type":"record","name":"OrderPlaced","fields":[{"name":"id","type":"string"},{"name":"note","type":"string","default":""}]}"#;

    #[test]
    fn reopening_keeps_subjects_versions_ids_levels_deletes_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut registry) = Store::open(dir.path()).unwrap();
        registry
            .register("orders-value", &NewSchema::avro(V1))
            .unwrap();
        registry
            .register("orders-value", &NewSchema::avro(V2))
            .unwrap();
        registry
            .register("audit-value", &NewSchema::avro(V1))
            .unwrap();
        registry
            .delete_version("audit-value", VersionSpec::Number(1), false)
            .unwrap();
        registry.set_subject_level("orders-value", CompatibilityLevel::Full);
        registry.set_global_level(CompatibilityLevel::ForwardTransitive);
        registry.set_mode(Mode::Readonly, false).unwrap();
        store.save(&registry).unwrap();

        let (_, reopened) = Store::open(dir.path()).unwrap();
        assert_eq!(reopened, registry);
        assert_eq!(
            reopened
                .version("orders-value", VersionSpec::Latest, false)
                .unwrap()
                .id,
            2
        );
        assert!(
            reopened
                .version("audit-value", VersionSpec::Latest, false)
                .is_err()
        );
        assert_eq!(reopened.mode(), Mode::Readonly);
    }

    #[test]
    fn a_torn_temporary_file_is_ignored_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut registry) = Store::open(dir.path()).unwrap();
        registry
            .register("orders-value", &NewSchema::avro(V1))
            .unwrap();
        store.save(&registry).unwrap();
        // A save that crashed half-way through writing its temporary file.
        fs::write(dir.path().join(TEMP), br#"{"format":1,"registry":{"sche"#).unwrap();

        let (_, reopened) = Store::open(dir.path()).unwrap();
        assert_eq!(reopened, registry);
        assert!(!dir.path().join(TEMP).exists());
    }

    #[test]
    fn a_corrupt_registry_file_stops_the_open_instead_of_starting_empty() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(FILE), b"{\"format\":1,\"regis").unwrap();
        let error = Store::open(dir.path()).unwrap_err();
        assert!(matches!(error, RegistryError::Store(_)), "{error:?}");
        assert!(error.to_string().contains("registry.json"), "{error}");
    }

    #[test]
    fn a_file_written_before_subject_modes_still_opens() {
        let dir = tempfile::tempdir().unwrap();
        // registry.json as written before subjects had their own mode.
        let old = r#"{"format":1,"registry":{
            "schemas":{"1":{"schema_type":"AVRO","schema":"\"string\"","references":[]}},
            "subjects":{"orders-value":{"versions":[{"version":1,"id":1,"deleted":false}],
                                        "compatibility":"FULL"}},
            "next_id":2,"compatibility":"BACKWARD","mode":"READWRITE"}}"#;
        fs::write(dir.path().join(FILE), old).unwrap();
        let (store, mut registry) = Store::open(dir.path()).unwrap();
        assert_eq!(registry.subject_mode("orders-value"), None);
        assert_eq!(registry.effective_mode("orders-value"), Mode::Readwrite);
        assert_eq!(
            registry.effective_level("orders-value"),
            CompatibilityLevel::Full
        );
        assert_eq!(
            registry
                .version("orders-value", VersionSpec::Latest, false)
                .unwrap()
                .id,
            1
        );
        // Saved again without subject modes, the file keeps the old shape.
        store.save(&registry).unwrap();
        let text = fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(!text.contains(r#""mode":null"#), "{text}");
        registry
            .set_subject_mode("orders-value", Mode::Readonly, false)
            .unwrap();
        store.save(&registry).unwrap();
        let (_, reopened) = Store::open(dir.path()).unwrap();
        assert_eq!(reopened.subject_mode("orders-value"), Some(Mode::Readonly));
    }

    #[test]
    fn an_empty_directory_opens_an_empty_registry() {
        let dir = tempfile::tempdir().unwrap();
        let (_, registry) = Store::open(&dir.path().join("new")).unwrap();
        assert_eq!(registry, Registry::default());
    }
}
