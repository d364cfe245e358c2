//! A small tmpfs mounted for one test, for disk-full and read-only cases. Mounting needs root
//! (CI and the development machines run as root); elsewhere the test skips with a loud
//! message, and under `CI=true` that is a failure ([`crate::ci`]).

use std::path::PathBuf;
use std::process::Command;

/// A tmpfs mounted for the test's lifetime, unmounted (lazily, in case a file is still
/// open) when dropped.
pub struct SmallFs {
    /// Where it is mounted.
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallFs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it: `256k`, `16m`) on a fresh
    /// temporary directory; `None` after a loud message when it cannot (not root), a panic
    /// under `CI=true`.
    pub fn mount(size: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .status();
        match status {
            Ok(s) if s.success() => Some(SmallFs { path, _dir: dir }),
            other => {
                crate::ci::skip_or_fail(&format!(
                    "cannot mount a tmpfs ({other:?}): this test needs root"
                ));
                None
            }
        }
    }

    /// Remounts it with `mode` (`ro`, `rw`): a file system that turns read-only under a
    /// running writer.
    pub fn remount(&self, mode: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "remount {mode} failed");
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_fs_fills_up_and_turns_read_only() {
        let Some(fs) = SmallFs::mount("64k") else {
            return;
        };
        let file = fs.path.join("f");
        assert!(std::fs::write(&file, vec![0u8; 16 * 1024]).is_ok());
        let full = std::fs::write(fs.path.join("big"), vec![0u8; 128 * 1024]).unwrap_err();
        assert_eq!(full.raw_os_error(), Some(libc::ENOSPC), "{full}");
        fs.remount("ro");
        let read_only = std::fs::write(fs.path.join("g"), b"x").unwrap_err();
        assert_eq!(read_only.raw_os_error(), Some(libc::EROFS), "{read_only}");
        fs.remount("rw");
        std::fs::remove_file(fs.path.join("big")).unwrap();
        std::fs::write(fs.path.join("g"), b"x").unwrap();
    }

    #[test]
    fn dropping_it_unmounts_it() {
        let Some(fs) = SmallFs::mount("64k") else {
            return;
        };
        let path = fs.path.clone();
        drop(fs);
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
        assert!(
            !mounts.contains(path.to_str().unwrap()),
            "{} is still mounted",
            path.display()
        );
    }
}
