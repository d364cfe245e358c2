//! An advisory lock on a directory, so that two processes never write the same log.
//!
//! `flock` (through `File::try_lock`) is released by the kernel when the holder dies, so a
//! SIGKILLed broker never leaves a stale lock behind; the pid written into the file is only
//! there to tell the operator who holds it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result, StorageError};

pub const LOCK_FILE: &str = "LOCK";

/// Held for as long as the directory is in use; dropping it releases the lock.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    path: PathBuf,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .ctx("open lock file", &path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let pid = text.trim().parse().unwrap_or(0);
                return Err(StorageError::Locked {
                    path: dir.to_path_buf(),
                    pid,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(StorageError::io("lock", &path, e)),
        }
        file.set_len(0).ctx("write lock file", &path)?;
        file.seek(SeekFrom::Start(0))
            .ctx("write lock file", &path)?;
        write!(file, "{}", std::process::id()).ctx("write lock file", &path)?;
        Ok(DirLock { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_on_same_directory_names_the_holder_pid() {
        let dir = tempfile::tempdir().unwrap();
        let _held = DirLock::acquire(dir.path()).unwrap();
        match DirLock::acquire(dir.path()) {
            Err(StorageError::Locked { pid, .. }) => assert_eq!(pid, std::process::id()),
            other => panic!("expected Locked, got {other:?}"),
        }
    }

    #[test]
    fn lock_is_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        drop(DirLock::acquire(dir.path()).unwrap());
        DirLock::acquire(dir.path()).unwrap();
    }
}
