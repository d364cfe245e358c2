//! What the harness fails with (as opposed to what it finds: a broker that loses a
//! message is a finding in the [`crate::Report`], not an error).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}, line {line}: not a history event: {source}")]
    BadHistory {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("no history files (*.jsonl) in {0}")]
    NoHistory(PathBuf),
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the scenario cannot run: {0}")]
    BadScenario(String),
    /// The server did not start, or stopped answering when it had to.
    #[error("the server: {0}")]
    Server(String),
    /// A worker process could not be started or did not stop when told.
    #[error("a worker: {0}")]
    Worker(String),
    #[error("a call to the server failed: {0}")]
    Client(#[from] ferry_client::ClientError),
    #[error("the drain did not finish within {seconds} s: {left}")]
    DrainTimeout { seconds: u64, left: String },
}

impl ChaosError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> ChaosError {
        ChaosError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

pub type Result<T, E = ChaosError> = std::result::Result<T, E>;
