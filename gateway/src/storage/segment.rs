//! The append side: creating a segment file, appending a group of frames
//! with one write (and one fsync when asked), all or nothing, and the
//! helpers both users need to rotate files (listing them by name).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::Format;

/// What an [`Appender`] writes to: a [`File`], or in tests a disk that
/// fills up or refuses to cut back.
pub trait SegmentFile: Write {
    /// Flushes the written bytes to the disk (`fdatasync`).
    fn sync_data(&self) -> std::io::Result<()>;
    /// Truncates the file to `len` bytes.
    fn set_len(&self, len: u64) -> std::io::Result<()>;
}

impl SegmentFile for File {
    fn sync_data(&self) -> std::io::Result<()> {
        File::sync_data(self)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        File::set_len(self, len)
    }
}

/// A group that was not appended.
#[derive(Debug)]
pub struct AppendError {
    /// Why the write, fsync or cut-back failed.
    pub error: std::io::Error,
    /// True when the file was cut back to its last whole group (or nothing
    /// was written); false when bytes of the failed group may still be in
    /// it: the appender then refuses groups until a cut-back succeeds, so a
    /// record whose append was refused is never read back.
    pub cut_back: bool,
}

/// Appends groups of frames to one segment file opened for appending.
pub struct Appender<F = File> {
    file: F,
    path: PathBuf,
    /// Bytes of whole groups (and the header): where a failed write is cut back to.
    len: u64,
    /// Fsync each group (the spool) or leave it to the page cache (the id
    /// log: a process crash keeps it, a machine crash may not).
    fsync: bool,
    /// A failed write's bytes may be past `len` (its cut-back failed).
    torn: bool,
}

impl Appender<File> {
    /// Creates the segment file `path` (it must not exist) and writes the
    /// format's header. With `fsync`, the file and its directory are
    /// synced, so the new name survives a crash. On failure no file is
    /// left behind.
    pub fn create(format: &Format, path: &Path, fsync: bool) -> std::io::Result<Self> {
        let mut file = File::options().create_new(true).append(true).open(path)?;
        let ready = file.write_all(format.header).and_then(|()| {
            if !fsync {
                return Ok(());
            }
            file.sync_all()?;
            path.parent().map_or(Ok(()), sync_dir)
        });
        if let Err(error) = ready {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(error);
        }
        Ok(Self::new(file, path.to_owned(), format.header.len() as u64, fsync))
    }
}

impl<F: SegmentFile> Appender<F> {
    /// Appends to `file`, which holds `len` bytes of whole groups.
    pub fn new(file: F, path: PathBuf, len: u64, fsync: bool) -> Self {
        Self { file, path, len, fsync, torn: false }
    }

    /// Appends `group` (whole frames from [`Format::frame`]) with one write
    /// and, if the appender fsyncs, one `fdatasync`. All or nothing: on
    /// failure what reached the file is cut off again.
    pub fn append(&mut self, group: &[u8]) -> Result<(), AppendError> {
        if self.torn {
            self.cut().map_err(|error| AppendError { error, cut_back: false })?;
            self.torn = false;
        }
        let written = self.file.write_all(group).and_then(|()| if self.fsync { self.file.sync_data() } else { Ok(()) });
        match written {
            Ok(()) => {
                self.len += group.len() as u64;
                Ok(())
            }
            Err(error) => {
                let cut_back = self.cut().is_ok();
                self.torn = !cut_back;
                Err(AppendError { error, cut_back })
            }
        }
    }

    fn cut(&self) -> std::io::Result<()> {
        self.file.set_len(self.len)?;
        if self.fsync { self.file.sync_data() } else { Ok(()) }
    }

    /// Bytes of whole groups, header included: the committed length.
    pub fn committed(&self) -> u64 {
        self.len
    }

    /// The segment file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file, for tests that look at what reached it.
    #[cfg(test)]
    pub fn file(&self) -> &F {
        &self.file
    }
}

/// Cuts the segment `path` back to `len` bytes (a failed group's bytes
/// off), fsyncing the cut when asked; a file already gone needs no cut.
pub fn cut_back(path: &Path, len: u64, fsync: bool) -> std::io::Result<()> {
    let cut = File::options().write(true).open(path).and_then(|f| {
        f.set_len(len)?;
        if fsync { f.sync_data() } else { Ok(()) }
    });
    match cut {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Fsyncs a directory, so the names created or removed in it survive a crash.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all())
}

/// The segment files of `dir` whose name `parse` recognises, sorted by
/// what it makes of them (oldest first, when it reads their number).
pub fn list<K: Ord>(dir: &Path, parse: impl Fn(&str) -> Option<K>) -> std::io::Result<Vec<(K, PathBuf)>> {
    let mut files: Vec<(K, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let path = entry.path();
            let key = parse(path.file_name()?.to_str()?)?;
            Some((key, path))
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

#[cfg(test)]
#[path = "segment_tests.rs"]
mod tests;
