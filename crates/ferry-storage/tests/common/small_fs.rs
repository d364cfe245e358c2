//! A small tmpfs mounted for one test, for disk-full and read-only cases. Mounting needs root
//! (CI and the development machines run as root); elsewhere the test skips with a loud
//! message, and under `CI=true` that is a failure.

use std::path::PathBuf;
use std::process::Command;

/// A tmpfs mounted for the test's lifetime.
pub struct SmallFs {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallFs {
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
                let msg = format!("cannot mount a tmpfs ({other:?}): this test needs root");
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!("{msg}");
                }
                eprintln!("\n*** SKIPPED: {msg} ***\n");
                None
            }
        }
    }

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
