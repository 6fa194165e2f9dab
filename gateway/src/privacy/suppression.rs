//! Users who asked not to be tracked (or were erased): their events are
//! answered `suppressed` at the edge and never produced. The list is a file
//! of `userId`s and `anonymousId`s, one a line, re-read when it changes and
//! on SIGHUP, so an erasure request takes effect without a restart.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;

/// Why the suppression list could not be read.
#[derive(Debug, thiserror::Error)]
#[error("suppression list {path}: {source}")]
pub struct SuppressionError {
    /// The file.
    pub path: String,
    /// What went wrong.
    pub source: std::io::Error,
}

/// The suppressed ids, swapped whole when the file changes.
#[derive(Debug)]
pub struct SuppressionList {
    path: PathBuf,
    ids: ArcSwap<HashSet<String>>,
    /// The file's modification time when last read, to notice changes.
    seen: Mutex<Option<SystemTime>>,
}

impl SuppressionList {
    /// Reads `path`: one id a line; blank lines and `#` comments skipped.
    pub fn load(path: &Path) -> Result<Self, SuppressionError> {
        let list =
            Self { path: path.to_path_buf(), ids: ArcSwap::from_pointee(HashSet::new()), seen: Mutex::new(None) };
        list.reload()?;
        Ok(list)
    }

    /// Re-reads the file; on error the running list stays.
    pub fn reload(&self) -> Result<usize, SuppressionError> {
        let fail = |source| SuppressionError { path: self.path.display().to_string(), source };
        let modified = std::fs::metadata(&self.path).and_then(|m| m.modified()).map_err(fail)?;
        let text = std::fs::read_to_string(&self.path).map_err(fail)?;
        let ids: HashSet<String> =
            text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned).collect();
        let count = ids.len();
        self.ids.store(Arc::new(ids));
        if let Ok(mut seen) = self.seen.lock() {
            *seen = Some(modified);
        }
        Ok(count)
    }

    /// Re-reads the file if its modification time moved since the last read.
    pub fn reload_if_changed(&self) -> Option<Result<usize, SuppressionError>> {
        let modified = std::fs::metadata(&self.path).and_then(|m| m.modified()).ok()?;
        let seen = self.seen.lock().ok().and_then(|s| *s);
        (seen != Some(modified)).then(|| self.reload())
    }

    /// Whether `id` is suppressed.
    pub fn contains(&self, id: &str) -> bool {
        self.ids.load().contains(id)
    }

    /// How many ids are suppressed.
    pub fn len(&self) -> usize {
        self.ids.load().len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ids_and_notices_changes() {
        let path = std::env::temp_dir().join(format!("eventgw-suppressed-{}", uuid::Uuid::new_v4()));
        std::fs::write(&path, "# erased on request\nu-1\n\n anon-2 \n").expect("write");
        let list = SuppressionList::load(&path).expect("loads");
        assert!(list.contains("u-1") && list.contains("anon-2") && !list.contains("u-3"));
        assert!(list.reload_if_changed().is_none(), "unchanged file is not re-read");
        std::fs::write(&path, "u-3\n").expect("rewrite");
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options().write(true).open(&path).and_then(|f| f.set_modified(later)).expect("touch");
        assert!(matches!(list.reload_if_changed(), Some(Ok(1))));
        assert!(list.contains("u-3") && !list.contains("u-1"));
        let _ = std::fs::remove_file(path);
    }
}
