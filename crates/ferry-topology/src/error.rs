//! Why a topology file could not be read at all (as opposed to findings in a file that
//! was read).

/// A topology file that is not valid YAML or not in the format.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad YAML, an unknown or missing field, a value of the wrong kind.
    #[error("line {line}, column {column}: {message}")]
    Parse {
        line: u64,
        column: u64,
        message: String,
    },
    /// An error the parser could not place (it says so itself).
    #[error("{message}")]
    Unplaced { message: String },
    #[error(
        "format version {found} is not supported: this Ferry reads version {}",
        crate::format::FORMAT_VERSION
    )]
    UnsupportedVersion { found: u32 },
}

impl Error {
    pub(crate) fn from_yaml(error: serde_saphyr::Error) -> Self {
        // The plain message (no source snippet): the CLI prints one line per error. The
        // parser's advice for duplicate keys is about its own API, not the file.
        let message = error.without_snippet().to_string().replace(
            ", set DuplicateKeyPolicy in Options if acceptable",
            " (each key may appear once)",
        );
        match error.location() {
            Some(location) if location.line() > 0 => {
                let (line, column) = (location.line(), location.column());
                let suffix = format!(" at line {line}, column {column}");
                let message = message
                    .strip_suffix(&suffix)
                    .map(str::to_owned)
                    .unwrap_or(message);
                Self::Parse {
                    line,
                    column,
                    message,
                }
            }
            _ => Self::Unplaced { message },
        }
    }

    /// The line the error is on, when known.
    pub fn line(&self) -> Option<u64> {
        match self {
            Self::Parse { line, .. } => Some(*line),
            _ => None,
        }
    }
}
