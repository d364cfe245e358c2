//! `ferry topology …`: topology as code. `lint` checks a design file against the rules
//! of `ferry_topology` and exits so that CI can gate on it: 0 when no finding is an
//! error, 1 when one is, 2 when the file cannot be read or is not in the format.

use std::path::{Path, PathBuf};

use ferry_topology::{Finding, Severity, Topology};

#[derive(clap::Subcommand, Debug)]
pub enum TopologyCommand {
    /// Check FILE against the design rules (docs/topology.md): one finding per line,
    /// `FILE: ID severity element: message (fix: …)`. Exits 1 if any finding is an
    /// error, 2 if FILE cannot be read or is not a valid topology file.
    Lint {
        /// The topology file (YAML).
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// How to print the findings.
        #[arg(long, value_enum, default_value_t = LintFormat::Text)]
        format: LintFormat,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum LintFormat {
    /// One finding per line.
    Text,
    /// An array of objects: file, id, severity, element, line, message, fix.
    Json,
}

/// Exit code: some finding is an error.
const EXIT_FINDINGS: i32 = 1;
/// Exit code: no verdict. The file could not be read or parsed (nothing was checked),
/// or the findings could not be written.
const EXIT_NO_VERDICT: i32 = 2;

/// Runs the command and returns the process exit code.
pub fn run(command: TopologyCommand) -> i32 {
    match command {
        TopologyCommand::Lint { file, format } => lint(&file, format),
    }
}

fn lint(file: &Path, format: LintFormat) -> i32 {
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
