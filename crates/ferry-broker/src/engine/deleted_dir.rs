//! The files of a deleted queue or topic: set aside under the metadata lock, removed after.
//!
//! A consumer, stream or fetch that still held one of the deleted logs closes it as it lets
//! go, and the close checkpoints: it may write a file into the directory while it is being
//! removed ("Directory not empty"). Removing in place under the metadata lock would block
//! every other declaration until that close is done; removing in place after the lock would
//! race a create of the same name, whose new directory the removal could take. So the delete
//! renames the directory to a name no queue or topic can have (names never start with a
//! dot), inside the lock, and removes that, trying again while a late close finishes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferry_storage::StorageError;

use crate::error::Result;

/// What a set-aside directory's name starts with.
const PREFIX: &str = ".deleted-";

/// How long a holder that let go of the queue or topic may take to finish closing.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Renames a deleted queue's or topic's directory out of the way, or `None` when it has
/// none (a crash already took it). Called with the metadata lock held.
pub(super) fn set_aside(dir: &Path) -> Result<Option<PathBuf>> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    let aside = dir.with_file_name(format!(
        "{PREFIX}{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    match std::fs::rename(dir, &aside) {
        Ok(()) => Ok(Some(aside)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StorageError::io("set aside deleted", dir, e).into()),
    }
}

/// Removes a directory [`set_aside`] returned (`what` names it in an error), trying again
/// for up to [`CLOSE_GRACE`] while a late close writes into it.
pub(super) async fn remove(what: &'static str, aside: Option<PathBuf>) -> Result<()> {
    let Some(dir) = aside else {
        return Ok(());
    };
    let deadline = Instant::now() + CLOSE_GRACE;
    loop {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => return Ok(()),
            Err(e)
                if e.kind() == std::io::ErrorKind::DirectoryNotEmpty
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(StorageError::io(what, &dir, e).into()),
        }
    }
}

/// Removes what deletes set aside in `root` and a crash or a late close left behind.
pub(super) fn sweep(root: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry.map_err(|e| StorageError::io("list", root, e))?;
        if entry.file_name().to_string_lossy().starts_with(PREFIX) {
            let path = entry.path();
            std::fs::remove_dir_all(&path)
                .map_err(|e| StorageError::io("remove set-aside", &path, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_set_aside_directory_frees_its_name_at_once_and_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("orders");
        std::fs::create_dir_all(dir.join("0")).unwrap();
        std::fs::write(dir.join("0").join("log"), b"records").unwrap();

        let aside = set_aside(&dir).unwrap();
        assert!(!dir.exists(), "the name is free for a new create");
        // A create of the same name before the removal keeps its directory.
        std::fs::create_dir_all(&dir).unwrap();
        remove("remove queue", aside.clone()).await.unwrap();
        assert!(dir.exists());
        assert!(!aside.unwrap().exists());
    }

    #[tokio::test]
    async fn a_directory_already_gone_is_nothing_to_remove() {
        let root = tempfile::tempdir().unwrap();
        let aside = set_aside(&root.path().join("gone")).unwrap();
        assert_eq!(aside, None);
        remove("remove topic", aside).await.unwrap();
    }

    #[test]
    fn the_sweep_takes_only_what_was_set_aside() {
        let root = tempfile::tempdir().unwrap();
        let kept = root.path().join("orders");
        std::fs::create_dir_all(&kept).unwrap();
        let aside = set_aside(&kept).unwrap().unwrap();
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::write(kept.join("x"), b"").unwrap();
        sweep(root.path()).unwrap();
        assert!(!aside.exists());
        assert!(kept.join("x").exists());
    }
}
