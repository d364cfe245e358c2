//! The registry's state and every decision on it: subjects and their versions, schemas
//! under global ids shared across subjects, references between schemas, soft and hard
//! deletes, compatibility levels and modes, global and per subject (the values calls
//! take are in `schema`). Pure: no I/O, so a change is made on a copy, stored, and only
//! then becomes the state (see `SchemaRegistry`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::compatibility::{self, Earlier};
use crate::format::{self, Parsed};
use crate::schema::{
    Deleted, NewSchema, Reference, RegisteredVersion, ResolvedReference, SchemaType, StoredSchema,
    VersionSpec,
};
use crate::{CompatibilityLevel, Mode, RegistryError};

/// One version of a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct SubjectVersion {
    version: u32,
    id: u32,
    deleted: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Subject {
    /// Oldest first; hard-deleted versions are gone.
    versions: Vec<SubjectVersion>,
    /// Overrides the global level when set.
    compatibility: Option<CompatibilityLevel>,
    /// Overrides the global mode when set. Absent from files written before subjects had
    /// modes, which still open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<Mode>,
}

impl Subject {
    fn live(&self) -> impl Iterator<Item = &SubjectVersion> {
        self.versions.iter().filter(|v| !v.deleted)
    }
}

/// How deep references may nest: deep enough for any real model, and a bound on a
/// chain that loops through subjects.
const MAX_REFERENCE_DEPTH: usize = 32;

/// Everything the registry holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registry {
    schemas: BTreeMap<u32, StoredSchema>,
    subjects: BTreeMap<String, Subject>,
    /// The next id a new schema gets; ids are never reused, even after a hard delete,
    /// so an id in an old message never names another schema.
    next_id: u32,
    compatibility: CompatibilityLevel,
    mode: Mode,
}

impl Default for Registry {
    fn default() -> Registry {
        Registry {
            schemas: BTreeMap::new(),
            subjects: BTreeMap::new(),
            next_id: 1,
            compatibility: CompatibilityLevel::default(),
            mode: Mode::default(),
        }
    }
}

impl Registry {
    /// Subject names, sorted, that start with `prefix`. A subject is deleted when all
    /// its versions are.
    pub fn subjects(&self, prefix: &str, deleted: Deleted) -> Vec<String> {
        self.subjects
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .filter(|(_, s)| !s.versions.is_empty())
            .filter(|(_, s)| deleted.shows(s.live().next().is_none()))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// A subject's version numbers, oldest first.
    pub fn versions(&self, subject: &str, deleted: Deleted) -> Result<Vec<u32>, RegistryError> {
        let s = self.subject(subject, deleted != Deleted::Exclude)?;
        Ok(s.versions
            .iter()
            .filter(|v| deleted.shows(v.deleted))
            .map(|v| v.version)
            .collect())
    }

    /// One version of a subject; soft-deleted ones only with `include_deleted`.
    pub fn version(
        &self,
        subject: &str,
        spec: VersionSpec,
        include_deleted: bool,
    ) -> Result<RegisteredVersion, RegistryError> {
        let s = self.subject(subject, include_deleted)?;
        let v = find_version(s, subject, spec, include_deleted)?;
        Ok(self.registered(subject, v))
    }

    /// The highest schema id in use (0 when there is none).
    pub fn max_id(&self) -> u32 {
        self.schemas.keys().next_back().copied().unwrap_or(0)
    }

    pub fn schema(&self, id: u32) -> Result<&StoredSchema, RegistryError> {
        self.schemas
            .get(&id)
            .ok_or(RegistryError::SchemaIdNotFound(id))
    }

    /// The subjects and versions that hold schema `id`.
    pub fn versions_of_id(
        &self,
        id: u32,
        include_deleted: bool,
    ) -> Result<Vec<(String, u32)>, RegistryError> {
        self.schema(id)?;
        Ok(self
            .subjects
            .iter()
            .flat_map(|(name, s)| s.versions.iter().map(move |v| (name, v)))
            .filter(|(_, v)| v.id == id && (include_deleted || !v.deleted))
            .map(|(name, v)| (name.clone(), v.version))
            .collect())
    }

    /// The ids of the live schemas that reference `subject`'s `version`, ascending.
    pub fn referenced_by(
        &self,
        subject: &str,
        spec: VersionSpec,
    ) -> Result<Vec<u32>, RegistryError> {
        let s = self.subject(subject, false)?;
        let version = find_version(s, subject, spec, false)?.version;
        let mut ids: Vec<u32> = self
            .subjects
            .values()
            .flat_map(|s| s.live())
            .map(|v| v.id)
            .filter(|id| {
                self.schemas[id]
                    .references
                    .iter()
                    .any(|r| r.subject == subject && r.version == version)
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// The version of `subject` that holds `new`'s schema.
    pub fn lookup(
        &self,
        subject: &str,
        new: &NewSchema,
        include_deleted: bool,
    ) -> Result<RegisteredVersion, RegistryError> {
        let s = self.subject(subject, include_deleted)?;
        let identity = self.prepare(new)?.identity;
        s.versions
            .iter()
            .rev()
            .filter(|v| include_deleted || !v.deleted)
            .find(|v| self.identity_of(v.id).as_deref() == Some(identity.as_str()))
            .map(|v| self.registered(subject, v))
            .ok_or_else(|| RegistryError::SchemaNotFound(subject.to_owned()))
    }

    /// Registers `new` under `subject` and answers its id: the id it already has when
    /// the subject holds it (nothing changes then), else a new version, checked against
    /// the subject's compatibility level, under the schema's id across all subjects.
    pub fn register(&mut self, subject: &str, new: &NewSchema) -> Result<u32, RegistryError> {
        if subject.is_empty() || subject.chars().any(char::is_control) {
            return Err(RegistryError::InvalidSubject(subject.to_owned()));
        }
        let mode = self.effective_mode(subject);
        match mode {
            Mode::Readonly => {
                return Err(RegistryError::NotPermitted(format!(
                    "Subject {subject} is in read-only mode: set the mode to READWRITE to register"
                )));
            }
            Mode::Readwrite if new.id.is_some() || new.version.is_some() => {
                return Err(RegistryError::NotPermitted(
                    "an id or version is given only in IMPORT mode: leave them out to have \
                     the registry assign them"
                        .to_owned(),
                ));
            }
            _ => {}
        }
        let prepared = self.prepare(new)?;
        let existing = self.subjects.get(subject);
        if new.id.is_none()
            && let Some(v) = existing.and_then(|s| {
                s.live()
                    .find(|v| self.identity_of(v.id).as_deref() == Some(&prepared.identity))
            })
        {
            return Ok(v.id);
        }
        if mode != Mode::Import {
            let messages = self.violations(subject, &prepared, None)?;
            if !messages.is_empty() {
                return Err(RegistryError::Incompatible {
                    subject: subject.to_owned(),
                    messages,
                });
            }
        }
        let id = match new.id {
            Some(id) => {
                if id == 0 || id > i32::MAX as u32 {
                    return Err(RegistryError::InvalidSchema(format!(
                        "id {id} is out of range: 1 to 2^31-1"
                    )));
                }
                match self.identity_of(id) {
                    Some(identity) if identity != prepared.identity => {
                        return Err(RegistryError::IdDoesNotMatch { id });
                    }
                    _ => id,
                }
            }
            None => self
                .schemas
                .iter()
                .find(|(id, _)| self.identity_of(**id).as_deref() == Some(&prepared.identity))
                .map(|(id, _)| *id)
                .unwrap_or(self.next_id),
        };
        let s = self.subjects.entry(subject.to_owned()).or_default();
        let next_version = s.versions.last().map_or(1, |v| v.version + 1);
        let version = match new.version {
            Some(v) if s.versions.iter().any(|old| old.version == v) => {
                return Err(RegistryError::NotPermitted(format!(
                    "subject {subject} already has a version {v}"
                )));
            }
            Some(v) if v == 0 || v > i32::MAX as u32 => {
                return Err(RegistryError::InvalidVersion(v.to_string()));
            }
            Some(v) => v,
            None => next_version,
        };
        s.versions.push(SubjectVersion {
            version,
            id,
            deleted: false,
        });
        s.versions.sort_by_key(|v| v.version);
        self.schemas.entry(id).or_insert_with(|| StoredSchema {
            schema_type: new.schema_type,
            schema: new.schema.clone(),
            references: new.references.clone(),
        });
        self.next_id = self.next_id.max(id + 1);
        Ok(id)
    }

    /// Why `new` could not be registered under `subject` — against `version` alone, or
    /// against what the level says when `None`. Empty: compatible (also for a subject
    /// without versions yet).
    pub fn check(
        &self,
        subject: &str,
        version: Option<VersionSpec>,
        new: &NewSchema,
    ) -> Result<Vec<String>, RegistryError> {
        let prepared = self.prepare(new)?;
        if let Some(spec) = version {
            let s = self.subject(subject, false)?;
            let v = find_version(s, subject, spec, false)?;
            return self.violations(subject, &prepared, Some(v.version));
        }
        self.violations(subject, &prepared, None)
    }

    /// Soft-deletes every version of `subject` — or, with `permanent`, removes the
    /// versions a soft delete left. Answers the versions deleted.
    pub fn delete_subject(
        &mut self,
        subject: &str,
        permanent: bool,
    ) -> Result<Vec<u32>, RegistryError> {
        self.writable(subject)?;
        let s = self.subject(subject, true)?;
        let live: Vec<SubjectVersion> = s.live().copied().collect();
        if permanent {
            if !live.is_empty() {
                return Err(RegistryError::SubjectNotSoftDeleted(subject.to_owned()));
            }
            let gone: Vec<u32> = s.versions.iter().map(|v| v.version).collect();
            self.subjects.remove(subject);
            self.drop_unused_schemas();
            return Ok(gone);
        }
        if live.is_empty() {
            return Err(RegistryError::SubjectSoftDeleted(subject.to_owned()));
        }
        for v in &live {
            self.refuse_if_referenced(subject, v.version)?;
        }
        let s = self.subjects.get_mut(subject).expect("looked up above");
        for v in &mut s.versions {
            v.deleted = true;
        }
        Ok(live.iter().map(|v| v.version).collect())
    }

    /// Soft-deletes one version — or, with `permanent`, removes a soft-deleted one.
    pub fn delete_version(
        &mut self,
        subject: &str,
        spec: VersionSpec,
        permanent: bool,
    ) -> Result<u32, RegistryError> {
        self.writable(subject)?;
        // A numbered version is found even when soft-deleted, to say so; `latest` is the
        // newest live one for a soft delete, the newest of all for a hard one.
        let s = self.subject(subject, true)?;
        let seen_deleted = permanent || matches!(spec, VersionSpec::Number(_));
        let v = *find_version(s, subject, spec, seen_deleted)?;
        if permanent {
            if !v.deleted {
                return Err(RegistryError::VersionNotSoftDeleted {
                    subject: subject.to_owned(),
                    version: v.version,
                });
            }
            let s = self.subjects.get_mut(subject).expect("looked up above");
            s.versions.retain(|old| old.version != v.version);
            if s.versions.is_empty() {
                self.subjects.remove(subject);
            }
            self.drop_unused_schemas();
            return Ok(v.version);
        }
        if v.deleted {
            return Err(RegistryError::VersionSoftDeleted {
                subject: subject.to_owned(),
                version: v.version,
            });
        }
        self.refuse_if_referenced(subject, v.version)?;
        let s = self.subjects.get_mut(subject).expect("looked up above");
        for old in &mut s.versions {
            if old.version == v.version {
                old.deleted = true;
            }
        }
        Ok(v.version)
    }

    pub fn global_level(&self) -> CompatibilityLevel {
        self.compatibility
    }

    pub fn set_global_level(&mut self, level: CompatibilityLevel) {
        self.compatibility = level;
    }

    /// The level set on `subject` itself, if any.
    pub fn subject_level(&self, subject: &str) -> Option<CompatibilityLevel> {
        self.subjects.get(subject).and_then(|s| s.compatibility)
    }

    /// The level `subject`'s registrations are checked at.
    pub fn effective_level(&self, subject: &str) -> CompatibilityLevel {
        self.subject_level(subject).unwrap_or(self.compatibility)
    }

    /// Sets `subject`'s own level; a subject may have a level before its first version.
    pub fn set_subject_level(&mut self, subject: &str, level: CompatibilityLevel) {
        self.subjects
            .entry(subject.to_owned())
            .or_default()
            .compatibility = Some(level);
    }

    /// Removes `subject`'s own level and answers it; it then follows the global one.
    pub fn delete_subject_level(
        &mut self,
        subject: &str,
    ) -> Result<CompatibilityLevel, RegistryError> {
        let s = self
            .subjects
            .get_mut(subject)
            .filter(|s| s.compatibility.is_some())
            .ok_or_else(|| RegistryError::SubjectLevelNotConfigured(subject.to_owned()))?;
        let level = s.compatibility.take().expect("filtered on it");
        if s.versions.is_empty() && s.mode.is_none() {
            self.subjects.remove(subject);
        }
        Ok(level)
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The mode set on `subject` itself, if any.
    pub fn subject_mode(&self, subject: &str) -> Option<Mode> {
        self.subjects.get(subject).and_then(|s| s.mode)
    }

    /// The mode `subject`'s registrations and deletes are under: its own, else the
    /// global one.
    pub fn effective_mode(&self, subject: &str) -> Mode {
        self.subject_mode(subject).unwrap_or(self.mode)
    }

    /// Sets `subject`'s own mode (a subject may have one before its first version).
    /// IMPORT keeps ids from elsewhere: it needs a subject without versions, or `force`.
    pub fn set_subject_mode(
        &mut self,
        subject: &str,
        mode: Mode,
        force: bool,
    ) -> Result<(), RegistryError> {
        if subject.is_empty() || subject.chars().any(char::is_control) {
            return Err(RegistryError::InvalidSubject(subject.to_owned()));
        }
        let has_versions = self
            .subjects
            .get(subject)
            .is_some_and(|s| !s.versions.is_empty());
        if mode == Mode::Import
            && self.effective_mode(subject) != Mode::Import
            && !force
            && has_versions
        {
            return Err(RegistryError::NotPermitted(format!(
                "Cannot import since found existing subjects: subject {subject} has versions; \
                 IMPORT mode needs a subject without versions (or force=true)"
            )));
        }
        self.subjects.entry(subject.to_owned()).or_default().mode = Some(mode);
        Ok(())
    }

    /// Removes `subject`'s own mode and answers it; it then follows the global one.
    pub fn delete_subject_mode(&mut self, subject: &str) -> Result<Mode, RegistryError> {
        let s = self
            .subjects
            .get_mut(subject)
            .filter(|s| s.mode.is_some())
            .ok_or_else(|| RegistryError::SubjectModeNotConfigured(subject.to_owned()))?;
        let mode = s.mode.take().expect("filtered on it");
        if s.versions.is_empty() && s.compatibility.is_none() {
            self.subjects.remove(subject);
        }
        Ok(mode)
    }

    /// Sets the mode. IMPORT keeps ids from elsewhere, which could collide with the ones
    /// this registry gave: it needs an empty registry, or `force`.
    pub fn set_mode(&mut self, mode: Mode, force: bool) -> Result<(), RegistryError> {
        if mode == Mode::Import && self.mode != Mode::Import && !force && !self.schemas.is_empty() {
            return Err(RegistryError::NotPermitted(
                "Cannot import since found existing subjects: IMPORT mode needs an empty \
                 registry (or force=true)"
                    .to_owned(),
            ));
        }
        self.mode = mode;
        Ok(())
    }

    fn subject(&self, name: &str, include_deleted: bool) -> Result<&Subject, RegistryError> {
        self.subjects
            .get(name)
            .filter(|s| !s.versions.is_empty())
            .filter(|s| include_deleted || s.live().next().is_some())
            .ok_or_else(|| RegistryError::SubjectNotFound(name.to_owned()))
    }

    fn registered(&self, subject: &str, v: &SubjectVersion) -> RegisteredVersion {
        RegisteredVersion {
            subject: subject.to_owned(),
            version: v.version,
            id: v.id,
            schema: self.schemas[&v.id].clone(),
        }
    }

    fn writable(&self, subject: &str) -> Result<(), RegistryError> {
        if self.effective_mode(subject) == Mode::Readonly {
            return Err(RegistryError::NotPermitted(format!(
                "Subject {subject} is in read-only mode: set the mode to READWRITE to delete"
            )));
        }
        Ok(())
    }

    /// A soft delete would leave a live schema pointing at a deleted one.
    fn refuse_if_referenced(&self, subject: &str, version: u32) -> Result<(), RegistryError> {
        let referenced = self.subjects.values().flat_map(|s| s.live()).any(|v| {
            self.schemas[&v.id]
                .references
                .iter()
                .any(|r| r.subject == subject && r.version == version)
        });
        if referenced {
            return Err(RegistryError::ReferenceExists {
                subject: subject.to_owned(),
                version,
            });
        }
        Ok(())
    }

    /// Schemas no version holds any more go with their last version; their ids stay
    /// used (`next_id` only grows).
    fn drop_unused_schemas(&mut self) {
        let used: std::collections::BTreeSet<u32> = self
            .subjects
            .values()
            .flat_map(|s| s.versions.iter().map(|v| v.id))
            .collect();
        self.schemas.retain(|id, _| used.contains(id));
    }

    fn identity_of(&self, id: u32) -> Option<String> {
        let s = self.schemas.get(&id)?;
        identity(s.schema_type, &s.schema, &s.references).ok()
    }

    /// `new` parsed with its references, or why it is not a schema.
    fn prepare(&self, new: &NewSchema) -> Result<Prepared, RegistryError> {
        let references = self.resolve_references(&new.references)?;
        let parsed = format::parse(new.schema_type, &new.schema, &references)
            .map_err(RegistryError::InvalidSchema)?;
        let identity = identity(new.schema_type, &new.schema, &new.references)
            .map_err(RegistryError::InvalidSchema)?;
        Ok(Prepared { parsed, identity })
    }

    /// The schemas `references` bring, theirs included, each once and before the
    /// schemas that reference them: what parsing a schema with references needs, at
    /// registration and for a payload validator alike.
    pub(crate) fn resolve_references(
        &self,
        references: &[Reference],
    ) -> Result<Vec<ResolvedReference>, RegistryError> {
        let mut resolved = Vec::new();
        self.collect_references(references, 0, &mut resolved)?;
        Ok(resolved)
    }

    fn collect_references(
        &self,
        references: &[Reference],
        depth: usize,
        resolved: &mut Vec<ResolvedReference>,
    ) -> Result<(), RegistryError> {
        if depth > MAX_REFERENCE_DEPTH {
            return Err(RegistryError::InvalidSchema(format!(
                "references nest deeper than {MAX_REFERENCE_DEPTH} levels"
            )));
        }
        for r in references {
            let missing = || {
                RegistryError::InvalidSchema(format!(
                    "reference {:?} names subject {:?} version {}, which does not exist: \
                     register it first",
                    r.name, r.subject, r.version
                ))
            };
            let s = self.subject(&r.subject, false).map_err(|_| missing())?;
            let v = s
                .live()
                .find(|v| v.version == r.version)
                .ok_or_else(missing)?;
            let schema = &self.schemas[&v.id];
            self.collect_references(&schema.references, depth + 1, resolved)?;
            let reference = ResolvedReference {
                name: r.name.clone(),
                schema_type: schema.schema_type,
                schema: schema.schema.clone(),
            };
            if !resolved.contains(&reference) {
                resolved.push(reference);
            }
        }
        Ok(())
    }

    /// Why `prepared` breaks `subject`'s level: against `only` when given (with the
    /// level's directions), else against the versions the level names.
    fn violations(
        &self,
        subject: &str,
        prepared: &Prepared,
        only: Option<u32>,
    ) -> Result<Vec<String>, RegistryError> {
        let level = self.effective_level(subject);
        if level == CompatibilityLevel::None {
            return Ok(Vec::new());
        }
        let Some(s) = self.subjects.get(subject) else {
            return Ok(Vec::new());
        };
        let mut parsed = Vec::new();
        for v in s.live().filter(|v| only.is_none_or(|o| o == v.version)) {
            let stored = &self.schemas[&v.id];
            let references = self.resolve_references(&stored.references)?;
            let schema =
                format::parse(stored.schema_type, &stored.schema, &references).map_err(|e| {
                    RegistryError::Store(format!(
                        "version {} of subject {subject} no longer parses: {e}",
                        v.version
                    ))
                })?;
            parsed.push((v.version, schema));
        }
        let earlier: Vec<Earlier<'_>> = parsed
            .iter()
            .map(|(version, schema)| Earlier {
                version: *version,
                schema,
            })
            .collect();
        Ok(compatibility::violations(level, &prepared.parsed, &earlier))
    }
}

fn find_version<'s>(
    s: &'s Subject,
    subject: &str,
    spec: VersionSpec,
    include_deleted: bool,
) -> Result<&'s SubjectVersion, RegistryError> {
    let mut candidates = s.versions.iter().filter(|v| include_deleted || !v.deleted);
    let found = match spec {
        VersionSpec::Latest => candidates.next_back(),
        VersionSpec::Number(n) => candidates.find(|v| v.version == n),
    };
    found.ok_or_else(|| RegistryError::VersionNotFound {
        subject: subject.to_owned(),
        version: match spec {
            VersionSpec::Latest => "latest".to_owned(),
            VersionSpec::Number(n) => n.to_string(),
        },
    })
}

/// What two registrations of the same schema share: its type, its text up to formatting
/// and its references.
fn identity(
    schema_type: SchemaType,
    text: &str,
    references: &[Reference],
) -> Result<String, String> {
    let refs: Vec<String> = references
        .iter()
        .map(|r| format!("{}={}@{}", r.name, r.subject, r.version))
        .collect();
    Ok(format!(
        "{}|{}|{}",
        schema_type.as_str(),
        format::identity(schema_type, text)?,
        refs.join(",")
    ))
}

struct Prepared {
    parsed: Parsed,
    identity: String,
}
