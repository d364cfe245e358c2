//! The one error type of the storage crate. Each variant is something a caller can act on.

use std::io;
use std::ops::Range;
use std::path::PathBuf;

/// What went wrong in the storage layer, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error(
        "the disk is full: no space left on the device holding {path}; free space or raise the retention limits; the log is unchanged and appends resume once space is back"
    )]
    DiskFull { path: PathBuf },

    #[error(
        "{path} is read-only or not writable by this process: mount it read-write or fix its permissions"
    )]
    ReadOnly { path: PathBuf },

    #[error(
        "{path} is locked by pid {pid}: another Ferry process is using this data directory; stop it or point this one at another directory"
    )]
    Locked { path: PathBuf, pid: u32 },

    #[error("{what} of {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        what: &'static str,
        size: usize,
        max: usize,
    },

    #[error("an append needs at least one record")]
    EmptyAppend,

    #[error("invalid storage configuration: {0}")]
    InvalidConfig(String),

    #[error(
        "checksum mismatch in {file} at byte {position} (batch at offset {offset}): {detail}; the data on disk is damaged"
    )]
    Corrupt {
        file: PathBuf,
        position: u64,
        offset: u64,
        detail: String,
    },

    #[error(
        "refusing to open the log in {dir}: {file} is damaged at byte {position} ({detail}) with intact data after it; reopen with repair enabled to quarantine the damaged segment (offsets {lost:?} would be lost)"
    )]
    CorruptLog {
        dir: PathBuf,
        file: PathBuf,
        position: u64,
        detail: String,
        lost: Range<u64>,
    },

    #[error(
        "offset {requested} is out of range: the log holds offsets {start}..{end}; read from the start offset or the end"
    )]
    OffsetOutOfRange {
        requested: u64,
        start: u64,
        end: u64,
    },

    #[error(
        "the log in {dir} stopped accepting writes after a failed fdatasync ({cause}); whether earlier writes reached the disk is unknown, so reopen the log to recover from what is on disk"
    )]
    Poisoned { dir: PathBuf, cause: String },

    #[error("the log is closed")]
    Closed,

    #[error(
        "{call} was called from an append completion: completions run on the log's own threads, which the call would wait for; use append_then there, or hand the work to another thread"
    )]
    BlockingCallInCompletion { call: &'static str },

    #[error("I/O error while trying to {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

pub type Result<T, E = StorageError> = std::result::Result<T, E>;

impl StorageError {
    /// Classifies an I/O error so that a full disk and a read-only directory get their own
    /// variants: callers (and later the server's status mapping) react to those differently
    /// from a generic failure.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => StorageError::DiskFull { path },
            Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::EPERM) => {
                StorageError::ReadOnly { path }
            }
            _ => StorageError::Io { op, path, source },
        }
    }

    /// A failure the caller may retry once the cause (space, permissions) is fixed.
    pub fn is_resource_exhausted(&self) -> bool {
        matches!(self, StorageError::DiskFull { .. })
    }

    /// Used to fail every request of a group with the same cause; `io::Error` is not `Clone`.
    pub(crate) fn duplicate(&self) -> StorageError {
        match self {
            StorageError::DiskFull { path } => StorageError::DiskFull { path: path.clone() },
            StorageError::ReadOnly { path } => StorageError::ReadOnly { path: path.clone() },
            StorageError::Poisoned { dir, cause } => StorageError::Poisoned {
                dir: dir.clone(),
                cause: cause.clone(),
            },
            StorageError::Io { op, path, source } => StorageError::Io {
                op,
                path: path.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            StorageError::TooLarge { what, size, max } => StorageError::TooLarge {
                what,
                size: *size,
                max: *max,
            },
            StorageError::Closed => StorageError::Closed,
            other => StorageError::Io {
                op: "append to",
                path: PathBuf::new(),
                source: io::Error::other(other.to_string()),
            },
        }
    }
}

/// Attaches an operation and a path to `io::Result`s, the way every call site wants it.
pub(crate) trait IoContext<T> {
    fn ctx(self, op: &'static str, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, op: &'static str, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| StorageError::io(op, path, e))
    }
}
