//! `ferry topology lint`: checks a design file against the rules of `ferry_topology` and
//! exits so that CI can gate on it: 0 when no finding is an error, 1 when one is, 2 when
//! the file cannot be read or is not in the format.

use std::path::Path;

use ferry_topology::{Finding, Severity, Topology};

use super::{EXIT_FINDINGS, EXIT_NO_VERDICT};

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum LintFormat {
    /// One finding per line.
    Text,
    /// An array of objects: file, id, severity, element, line, message, fix.
    Json,
}

pub fn lint(file: &Path, format: LintFormat) -> i32 {
    let topology = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read it: {e}"))
        .and_then(|text| Topology::from_yaml(&text).map_err(|e| e.to_string()));
    let topology = match topology {
        Ok(topology) => topology,
        Err(error) => {
            eprintln!("ferry: error: {}: {error}", file.display());
            return EXIT_NO_VERDICT;
        }
    };
    let findings = ferry_topology::lint(&topology);
    let out = match format {
        LintFormat::Text => text(file, &findings),
        LintFormat::Json => json(file, &findings),
    };
    // `ferry topology lint … | head` is not a failure: the exit code still tells.
    if let Err(e) = std::io::Write::write_all(&mut std::io::stdout(), out.as_bytes())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("ferry: error: writing the findings: {e}");
        return EXIT_NO_VERDICT;
    }
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    eprintln!(
        "{}: {errors} error(s), {} warning(s)",
        file.display(),
        findings.len() - errors
    );
    if errors > 0 { EXIT_FINDINGS } else { 0 }
}

fn text(file: &Path, findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| {
            format!(
                "{}: {} {} {}: {} (fix: {})\n",
                file.display(),
                f.id,
                f.severity.as_str(),
                f.element,
                f.message,
                f.fix
            )
        })
        .collect()
}

fn json(file: &Path, findings: &[Finding]) -> String {
    let findings: Vec<serde_json::Value> = findings
        .iter()
        .map(|f| {
            serde_json::json!({
                "file": file.display().to_string(),
                "id": f.id,
                "severity": f.severity,
                "element": f.element,
                "line": f.line,
                "message": f.message,
                "fix": f.fix,
            })
        })
        .collect();
    format!("{}\n", serde_json::Value::Array(findings))
}
