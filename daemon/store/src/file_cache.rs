//! The file store's parsed documents, kept while their file is unchanged (an ask
//! on a board of 10,000 rows costs what one on 10 rows costs).
//!
//! Every read still opens the file and `fstat`s it; the document parsed last time is used
//! only when the file is the very same: same device, inode, size, mtime and ctime. Every
//! write of the file store is a rename of a new file over the document (a new inode), so
//! a write is always seen by the next read: this caches a read, never a verdict (the ask
//! is still judged on every call, with the clock of that call).
//!
//! A file changed *in place* (an operator's editor, `cp` over it) keeps its inode, and two
//! changes within one tick of the file system's clock get the same mtime and ctime. So a
//! document is only kept once its file was last changed at least [`FINE_MARGIN`] (file
//! systems with sub-second timestamps) or [`COARSE_MARGIN`] (timestamps in whole seconds)
//! before the read began, as git does for "racily clean" index entries: any later change
//! then carries a later ctime, which no one can set back. A clock behind the file's ctime
//! keeps nothing.

use crate::StoreError;
use crate::document::BoardDocument;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long before a read a file with sub-second timestamps must have last changed for its
/// document to be kept: well above the kernel's coarse clock tick (1–10 ms), which is
/// what stamps a file's mtime and ctime.
pub const FINE_MARGIN: Duration = Duration::from_millis(100);

/// The same for a file whose timestamps have no sub-second part (ext3, FAT's 2 s, some
/// network file systems): over one tick of their clock.
pub const COARSE_MARGIN: Duration = Duration::from_secs(3);

/// At most this many boards' documents are kept (then the cache starts over): a store
/// holds a few boards, and a document of 10,000 rows is a few MB.
pub const MAX_DOCUMENTS: usize = 64;

/// What identifies one version of a file: a rename brings a new inode, a change in place
/// a new ctime (or size, or mtime).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// True when a read that began at `began` may keep this version: the file last
    /// changed long enough before it that any later change has a later timestamp.
    fn settled_before(&self, began: SystemTime) -> bool {
        let at = |(s, ns): (i64, i64)| -> Option<Duration> {
            Some(Duration::new(
                u64::try_from(s).ok()?,
                u32::try_from(ns).ok()?,
            ))
        };
        let (Some(mtime), Some(ctime)) = (at(self.mtime), at(self.ctime)) else {
            return false;
        };
        let margin = if self.mtime.1 == 0 && self.ctime.1 == 0 {
            COARSE_MARGIN
        } else {
            FINE_MARGIN
        };
        began
            .duration_since(UNIX_EPOCH)
            .is_ok_and(|now| now >= mtime.max(ctime) + margin)
    }
}

/// One kept document and the version of the file it was parsed from.
#[derive(Debug)]
struct Kept {
    stamp: Stamp,
    document: Arc<BoardDocument>,
}

/// The parsed documents of one file store, by path.
#[derive(Debug, Default)]
pub struct DocumentCache {
    kept: Mutex<HashMap<PathBuf, Kept>>,
    /// Documents read and parsed (not served from the cache): for tests and the bench.
    parsed: AtomicU64,
}

impl DocumentCache {
    /// The document at `path`, parsed by `parse` unless the file is the version parsed
    /// last time; `None` when there is no file.
    pub fn read(
        &self,
        path: &Path,
        parse: impl FnOnce(&[u8]) -> Result<BoardDocument, StoreError>,
    ) -> Result<Option<Arc<BoardDocument>>, ReadError> {
        let began = SystemTime::now();
        let mut file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.kept().remove(path);
                return Ok(None);
            }
            Err(e) => return Err(ReadError::Io(e)),
        };
        // The stamp of the file opened, so it names the bytes read below (a rename after
        // the open changes neither).
        let stamp = Stamp::of(&file.metadata().map_err(ReadError::Io)?);
        if let Some(kept) = self.kept().get(path).filter(|k| k.stamp == stamp) {
            return Ok(Some(kept.document.clone()));
        }
        let mut bytes = Vec::with_capacity(stamp.size as usize);
        file.read_to_end(&mut bytes).map_err(ReadError::Io)?;
        self.parsed.fetch_add(1, Ordering::Relaxed);
        let document = Arc::new(parse(&bytes).map_err(ReadError::Parse)?);
        let mut kept = self.kept();
        if stamp.settled_before(began) {
            if kept.len() >= MAX_DOCUMENTS && !kept.contains_key(path) {
                kept.clear();
            }
            kept.insert(
                path.to_path_buf(),
                Kept {
                    stamp,
                    document: document.clone(),
                },
            );
        } else {
            kept.remove(path);
        }
        Ok(Some(document))
    }

    /// How many documents were read and parsed rather than served from the cache.
    pub fn parsed(&self) -> u64 {
        self.parsed.load(Ordering::Relaxed)
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Kept>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why a document could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The file could not be opened or read.
    Io(io::Error),
    /// Its bytes are not the board's document.
    Parse(StoreError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changed_at(seconds: i64, nanos: i64) -> Stamp {
        Stamp {
            dev: 1,
            ino: 2,
            size: 3,
            mtime: (seconds, nanos),
            ctime: (seconds, nanos),
        }
    }

    fn at(seconds: u64, millis: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(millis)
    }

    #[test]
    fn a_file_is_kept_only_once_it_changed_a_margin_before_the_read() {
        let fine = changed_at(1_000, 500_000_000);
        assert!(
            !fine.settled_before(at(1_000, 550)),
            "within the fine margin"
        );
        assert!(fine.settled_before(at(1_000, 600)));
        // Whole-second timestamps: a change up to a tick later would carry the same one.
        let coarse = changed_at(1_000, 0);
        assert!(!coarse.settled_before(at(1_002, 0)));
        assert!(coarse.settled_before(at(1_003, 0)));
        // A clock behind the file's ctime keeps nothing.
        assert!(!fine.settled_before(at(999, 0)));
    }

    #[test]
    fn a_ctime_later_than_the_mtime_decides() {
        let mut stamp = changed_at(1_000, 500_000_000);
        stamp.ctime = (2_000, 500_000_000);
        assert!(!stamp.settled_before(at(1_500, 0)));
        assert!(stamp.settled_before(at(2_000, 700)));
    }
}
