//! Replacing a small file so that a crash leaves the old contents or the new, never a
//! mixture: written to `<path>.tmp`, synced, renamed over `path`, and the directory synced
//! so the rename itself is on disk. The front end's state files and its receipt key use it.

use std::io::Write;
use std::path::Path;

/// Who may read the file: the receipt key is the owner's alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Default,
    OwnerOnly,
}

/// Makes `bytes` the contents of `path`, durably and whole.
pub fn replace(path: &Path, bytes: &[u8], access: Access) -> std::io::Result<()> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = Path::new(&tmp_name);
    {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        if access == Access::OwnerOnly {
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        }
        let mut file = options.open(tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_contents_replace_the_old_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        replace(&path, b"old", Access::Default).unwrap();
        replace(&path, b"new", Access::OwnerOnly).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
