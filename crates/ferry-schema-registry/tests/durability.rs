//! The registry's state and its file agree whatever happens: a change that cannot be
//! saved is not made, and any sequence of calls reads back the same after a reopen.

use ferry_schema_registry::{
    CompatibilityLevel, Deleted, Mode, NewSchema, RegistryError, SchemaRegistry, SchemaType,
    VersionSpec,
};
use proptest::prelude::*;

fn order(fields: &[(&str, &str, Option<&str>)]) -> String {
    let fields: Vec<String> = fields
        .iter()
        .map(|(name, ty, default)| match default {
            Some(d) => format!(r#"{{"name":"{name}","type":{ty},"default":{d}}}"#),
            None => format!(r#"{{"name":"{name}","type":{ty}}}"#),
        })
        .collect();
    format!(
        r#"{{"type":"record","name":"OrderPlaced","fields":[{}]}}"#,
        fields.join(",")
    )
}

/// A few schemas that are compatible with each other in some directions and not others.
fn schemas() -> Vec<String> {
    vec![
        order(&[("id", r#""string""#, None)]),
        order(&[
            ("id", r#""string""#, None),
            ("note", r#""string""#, Some(r#""""#)),
        ]),
        order(&[("id", r#""string""#, None), ("qty", r#""int""#, None)]),
        order(&[("id", r#""long""#, None)]),
    ]
}

/// The schemas above as Avro, and a few JSON Schema and Protobuf ones: a subject may
/// only keep one format, so registering across formats is refused too.
fn typed_schemas() -> Vec<(SchemaType, String)> {
    let mut all: Vec<(SchemaType, String)> = schemas()
        .into_iter()
        .map(|s| (SchemaType::Avro, s))
        .collect();
    all.push((
        SchemaType::Json,
        r#"{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string"}}}"#
            .to_owned(),
    ));
    all.push((
        SchemaType::Json,
        r#"{"type":"object","additionalProperties":false,"properties":{"id":{"type":"integer"}}}"#
            .to_owned(),
    ));
    all.push((
        SchemaType::Protobuf,
        "syntax = \"proto3\"; message OrderPlaced { string id = 1; }".to_owned(),
    ));
    all.push((
        SchemaType::Protobuf,
        "syntax = \"proto3\"; message OrderPlaced { int64 id = 1; }".to_owned(),
    ));
    all
}

#[test]
fn a_change_that_cannot_be_saved_is_not_made() {
    let dir = tempfile::tempdir().unwrap();
    let registry = SchemaRegistry::open(dir.path()).unwrap();
    registry
        .change(|r| r.register("orders-value", &NewSchema::avro(schemas()[0].clone())))
        .unwrap();
    // The save's temporary file cannot be created where a directory stands.
    std::fs::create_dir(dir.path().join("registry.json.tmp")).unwrap();
    let error = registry
        .change(|r| r.register("orders-value", &NewSchema::avro(schemas()[1].clone())))
        .unwrap_err();
    assert!(matches!(error, RegistryError::Store(_)), "{error:?}");
    assert_eq!(
        registry.read(|r| r.versions("orders-value", Deleted::Exclude)),
        Ok(vec![1]),
        "the refused version is not in memory"
    );
    std::fs::remove_dir(dir.path().join("registry.json.tmp")).unwrap();
    drop(registry);
    let reopened = SchemaRegistry::open(dir.path()).unwrap();
    assert_eq!(
        reopened.read(|r| r.versions("orders-value", Deleted::Exclude)),
        Ok(vec![1])
    );
}

#[derive(Debug, Clone)]
enum Call {
    Register {
        subject: usize,
        schema: usize,
    },
    SoftDeleteVersion {
        subject: usize,
        latest: bool,
    },
    HardDeleteVersion {
        subject: usize,
        version: u32,
    },
    SoftDeleteSubject {
        subject: usize,
    },
    HardDeleteSubject {
        subject: usize,
    },
    SetLevel {
        subject: Option<usize>,
        level: usize,
    },
    /// `None` removes the subject's own mode.
    SetSubjectMode {
        subject: usize,
        mode: Option<usize>,
    },
    Reopen,
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        4 => (0..2usize, 0..8usize).prop_map(|(subject, schema)| Call::Register { subject, schema }),
        1 => (0..2usize, any::<bool>()).prop_map(|(subject, latest)| Call::SoftDeleteVersion { subject, latest }),
        1 => (0..2usize, 1..5u32).prop_map(|(subject, version)| Call::HardDeleteVersion { subject, version }),
        1 => (0..2usize).prop_map(|subject| Call::SoftDeleteSubject { subject }),
        1 => (0..2usize).prop_map(|subject| Call::HardDeleteSubject { subject }),
        1 => (proptest::option::of(0..2usize), 0..7usize).prop_map(|(subject, level)| Call::SetLevel { subject, level }),
        1 => (0..2usize, proptest::option::of(0..3usize)).prop_map(|(subject, mode)| Call::SetSubjectMode { subject, mode }),
        1 => Just(Call::Reopen),
    ]
}

const SUBJECTS: [&str; 2] = ["orders-value", "audit-value"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// After any sequence of calls, refused or not, the registry reopened from its file
    /// is the one in memory; ids name one schema each, and versions only grow.
    #[test]
    fn any_sequence_of_calls_reads_back_the_same_after_a_reopen(calls in proptest::collection::vec(call(), 1..30)) {
        let dir = tempfile::tempdir().unwrap();
        let mut registry = SchemaRegistry::open(dir.path()).unwrap();
        let schemas = typed_schemas();
        let mut id_of: std::collections::HashMap<usize, u32> = Default::default();
        for call in calls {
            match call {
                Call::Register { subject, schema } => {
                    let (schema_type, text) = &schemas[schema];
                    let answer = registry.change(|r| r.register(SUBJECTS[subject], &NewSchema::of(*schema_type, text.clone())));
                    match answer {
                        Ok(id) => {
                            // An id names one schema, and a schema still held keeps its id.
                            let text = registry.read(|r| r.schema(id).map(|s| s.schema.clone()));
                            prop_assert_eq!(text.as_deref(), Ok(schemas[schema].1.as_str()));
                            if let Some(previous) = id_of.get(&schema)
                                && registry.read(|r| r.schema(*previous).is_ok())
                            {
                                prop_assert_eq!(*previous, id);
                            }
                            id_of.insert(schema, id);
                        }
                        Err(RegistryError::Incompatible { messages, .. }) => prop_assert!(!messages.is_empty()),
                        Err(RegistryError::NotPermitted(_)) => prop_assert_eq!(
                            registry.read(|r| r.effective_mode(SUBJECTS[subject])),
                            Mode::Readonly
                        ),
                        Err(other) => prop_assert!(false, "unexpected refusal {other:?}"),
                    }
                }
                Call::SoftDeleteVersion { subject, latest } => {
                    let spec = if latest { VersionSpec::Latest } else { VersionSpec::Number(1) };
                    let _ = registry.change(|r| r.delete_version(SUBJECTS[subject], spec, false));
                }
                Call::HardDeleteVersion { subject, version } => {
                    let _ = registry.change(|r| r.delete_version(SUBJECTS[subject], VersionSpec::Number(version), true));
                }
                Call::SoftDeleteSubject { subject } => {
                    let _ = registry.change(|r| r.delete_subject(SUBJECTS[subject], false));
                }
                Call::HardDeleteSubject { subject } => {
                    let _ = registry.change(|r| r.delete_subject(SUBJECTS[subject], true));
                }
                Call::SetLevel { subject, level } => {
                    let level = CompatibilityLevel::ALL[level];
                    registry.change(|r| {
                        match subject {
                            Some(s) => r.set_subject_level(SUBJECTS[s], level),
                            None => r.set_global_level(level),
                        }
                        Ok(())
                    }).unwrap();
                }
                Call::SetSubjectMode { subject, mode } => {
                    let modes = [Mode::Readwrite, Mode::Readonly, Mode::Import];
                    let _ = registry.change(|r| match mode {
                        Some(m) => r.set_subject_mode(SUBJECTS[subject], modes[m], false),
                        None => r.delete_subject_mode(SUBJECTS[subject]).map(|_| ()),
                    });
                }
                Call::Reopen => {
                    let before = registry.read(|r| r.clone());
                    drop(registry);
                    registry = SchemaRegistry::open(dir.path()).unwrap();
                    prop_assert_eq!(registry.read(|r| r.clone()), before);
                }
            }
            for subject in SUBJECTS {
                if let Ok(versions) = registry.read(|r| r.versions(subject, Deleted::Include)) {
                    prop_assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
                }
            }
        }
        let before = registry.read(|r| r.clone());
        drop(registry);
        let reopened = SchemaRegistry::open(dir.path()).unwrap();
        prop_assert_eq!(reopened.read(|r| r.clone()), before);
    }
}
