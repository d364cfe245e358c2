//! The official AsyncAPI parser (npm `@asyncapi/parser`, with its Avro and Protobuf schema
//! parsers) accepts every document the export writes: of each example design, and of the
//! designs imported from third-party documents. Installed by scripts/asyncapi-packages.sh.

use std::path::{Path, PathBuf};
use std::process::Command;

use ferry_topology::{Topology, asyncapi};

fn validator_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/asyncapi")
}

/// Whether the parser is installed; skips loudly when not, and fails under `CI=true`.
fn validator_ready() -> bool {
    let installed = validator_dir()
        .join("node_modules/@asyncapi/parser/package.json")
        .exists();
    let node = Command::new("node").arg("--version").output().is_ok();
    if installed && node {
        return true;
    }
    let why = if node {
        "tests/asyncapi/node_modules is missing: run scripts/asyncapi-packages.sh"
    } else {
        "node is not installed"
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the AsyncAPI parser is required under CI=true: {why}"
    );
    eprintln!("SKIPPED: AsyncAPI documents not validated by the official parser: {why}");
    false
}

fn validate(files: &[PathBuf]) {
    let output = Command::new("node")
        .arg("validate.mjs")
        .args(files)
        .current_dir(validator_dir())
        .output()
        .expect("node runs");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the AsyncAPI parser refused a document:\n{report}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report.matches(": valid").count(), files.len(), "{report}");
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn files_in(dir: &str, ends: &[&str]) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| ends.iter().any(|e| p.to_string_lossy().ends_with(e)))
        .collect();
    files.sort();
    files
}

#[test]
fn the_official_parser_accepts_every_exported_document() {
    if !validator_ready() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    let mut write = |name: String, topology: &Topology| {
        let json = out.path().join(format!("{name}.json"));
        std::fs::write(&json, asyncapi::to_document(topology).to_string()).unwrap();
        let yaml = out.path().join(format!("{name}.yaml"));
        std::fs::write(&yaml, asyncapi::to_yaml_document(topology)).unwrap();
        written.extend([json, yaml]);
    };
    let designs = files_in("../../examples/topology", &[".yaml"])
        .into_iter()
        .chain(files_in("tests/data/topology", &[".yaml"]));
    for path in designs {
        let topology = Topology::from_yaml(&read(&path)).unwrap();
        write(
            path.file_stem().unwrap().to_string_lossy().into(),
            &topology,
        );
    }
    let third_party = files_in("tests/data/asyncapi", &[".yaml", ".json"]);
    assert!(third_party.len() >= 2, "{third_party:?}");
    for path in &third_party {
        let topology = asyncapi::from_document(&read(path)).unwrap();
        let name = format!("imported-{}", path.file_stem().unwrap().to_string_lossy());
        write(name, &topology);
    }
    validate(&written);
}

#[test]
fn the_third_party_documents_are_valid_asyncapi_themselves() {
    if !validator_ready() {
        return;
    }
    validate(&files_in("tests/data/asyncapi", &[".yaml", ".json"]));
}

#[test]
fn the_validator_fails_on_an_invalid_document() {
    if !validator_ready() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let bad = out.path().join("bad.json");
    // An operation without an action.
    std::fs::write(
        &bad,
        r##"{"asyncapi":"3.0.0","info":{"title":"t","version":"1"},"channels":{"c":{"address":"c"}},"operations":{"o":{"channel":{"$ref":"#/channels/c"}}}}"##,
    )
    .unwrap();
    let output = Command::new("node")
        .arg("validate.mjs")
        .arg(&bad)
        .current_dir(validator_dir())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("action"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}
