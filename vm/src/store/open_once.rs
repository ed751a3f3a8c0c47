//! Database files a process opens once and keeps open: a server starts
//! runs back to back, and opening (and migrating) a SQLite database for
//! each run was most of a trivial served run's cost, and would keep writers
//! of different runs from sharing a commit.
//!
//! An entry is forgotten once its file is gone or replaced (a removed
//! memory directory, a test's temporary directory), so a later open sees
//! the file as it is.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Which file a path names now: device and inode (`None`: no file).
type FileId = (u64, u64);

fn file_id(path: &Path) -> Option<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        std::fs::metadata(path).ok().map(|_| (0, 0))
    }
}

/// Open handles (`T`, cheap to clone: `Arc`s) by database file.
pub struct OpenOnce<T> {
    open: Mutex<Option<Handles<T>>>,
}

/// Each file's handle and the file it was opened on.
type Handles<T> = HashMap<PathBuf, (T, Option<FileId>)>;

impl<T: Clone> Default for OpenOnce<T> {
    fn default() -> Self {
        OpenOnce::new()
    }
}

impl<T: Clone> OpenOnce<T> {
    pub const fn new() -> OpenOnce<T> {
        OpenOnce {
            open: Mutex::new(None),
        }
    }

    /// The handle of database `file`, opened with `open` the first time
    /// (or again after the file was removed or replaced).
    pub fn get<E>(&self, file: &Path, open: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        let mut guard = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let map = guard.get_or_insert_with(HashMap::new);
        map.retain(|f, (_, id)| id.is_some() && file_id(f) == *id);
        if let Some((t, _)) = map.get(file) {
            return Ok(t.clone());
        }
        let t = open()?;
        map.insert(file.to_path_buf(), (t.clone(), file_id(file)));
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn kept_until_the_file_is_gone_or_replaced() {
        let dir = tempfile::tempdir().expect("temp dir");
        let f = dir.path().join("x.db");
        std::fs::write(&f, b"1").expect("write");
        let cache: OpenOnce<Arc<u32>> = OpenOnce::new();
        let n = std::cell::Cell::new(0);
        let open = || -> Result<Arc<u32>, ()> {
            n.set(n.get() + 1);
            Ok(Arc::new(n.get()))
        };
        assert_eq!(*cache.get(&f, open).expect("open"), 1);
        assert_eq!(*cache.get(&f, open).expect("kept"), 1);
        // Replaced: a new file at the same path.
        std::fs::remove_file(&f).expect("rm");
        std::fs::write(dir.path().join("other"), b"keeps the inode busy").expect("write");
        std::fs::write(&f, b"2").expect("write");
        assert_eq!(*cache.get(&f, open).expect("reopened"), 2);
        std::fs::remove_file(&f).expect("rm");
        assert_eq!(*cache.get(&f, open).expect("reopened"), 3);
    }
}
