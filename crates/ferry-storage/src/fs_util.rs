//! File-system steps whose ordering is part of the crash-safety argument.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::error::{IoContext, Result};

/// Makes a directory entry change (create, rename, unlink) durable. Without it a file that was
/// fsynced can still vanish after power loss because its name was never written.
pub fn sync_dir(dir: &Path) -> Result<()> {
    // `Path::parent` of a bare relative name (`data`) is the empty path, which names no
    // directory to open: it means the working directory.
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx("fsync directory", dir)
}

/// Replaces `path` with `bytes` so that after a crash it holds either the old or the new
/// contents, never a mix: write a temporary file, fsync it, rename over, fsync the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .ctx("create", &tmp)?;
        file.write_all(bytes).ctx("write", &tmp)?;
        file.sync_data().ctx("fsync", &tmp)?;
    }
    fs::rename(&tmp, path).ctx("rename into place", path)?;
    if let Some(parent) = path.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Creates `dir` (and parents) and makes the new entry durable.
pub fn create_dir_durable(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).ctx("create directory", dir)?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Bytes an unprivileged process can still write to the file system holding `path`: what a
/// full disk runs out of (root's reserved blocks on ext4 are not counted).
pub fn available_bytes(path: &Path) -> Result<u64> {
    let stat = rustix::fs::statvfs(path)
        .map_err(std::io::Error::from)
        .ctx("query free space of", path)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_of_a_bare_relative_name_is_the_working_directory() {
        let parent = Path::new("ferry-data").parent().expect("a parent");
        assert!(parent.as_os_str().is_empty());
        sync_dir(parent).expect("syncs the working directory");
    }
}
