//! A home's history floors (`$ROW_FENCE_HOME/revisions.json`): per store and board, the
//! highest board revision and controller epoch this home has seen, and the latest lease
//! expiry it has found passed. [`crate::monotonic::Monotonic`] judges every answer against
//! them (ARCHITECTURE.md, "The generation never goes back", "The store's clock judges");
//! this module keeps them.
//!
//! Every process of a home shares the file: the CLI writes what it commits at once, the
//! daemon writes what its asks saw every second, and a lease expiry found passed is written
//! before the answer that found it leaves. Writers merge by maximum under a lock on
//! `<file>.lock` and replace the file atomically (a new inode), so none loses another's.
//! Readers take the floors from the file again whenever it changed ([`Marks::refresh`], one
//! `stat` when it did not), so a running daemon judges with a revision the CLI recorded a
//! moment ago, without a restart.
//!
//! The expiry floor goes down only when an operator accepts the clock as it is
//! (`row-fence store accept-clock`, `accept-regression`): the accept raises the board's
//! clock era, and a higher era's floor replaces a lower one's in every merge.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The marks file under `$ROW_FENCE_HOME`.
pub const MARKS_FILE: &str = "revisions.json";

/// The floors of one board of one store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The highest board revision seen (also the highest generation handed out).
    pub revision: u64,
    /// The highest controller epoch seen.
    #[serde(default)]
    pub epoch: u64,
    /// The latest expiry (ms since the Unix epoch) of a lease this home found passed on
    /// the board: a clock below it would make that lease live again, so it judges nothing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub expired_ms: u64,
    /// How many times an operator accepted the board's clock as it was: a higher era's
    /// `expired_ms` replaces a lower one's, so an accept can lower the floor.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clock_era: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Mark {
    /// Raises `self` to at least `other`: revision and epoch by maximum, the expiry floor
    /// by (era, floor). True when anything rose.
    pub fn merge(&mut self, other: Mark) -> bool {
        let before = *self;
        self.revision = self.revision.max(other.revision);
        self.epoch = self.epoch.max(other.epoch);
        if (other.clock_era, other.expired_ms) > (self.clock_era, self.expired_ms) {
            self.clock_era = other.clock_era;
            self.expired_ms = other.expired_ms;
        }
        *self != before
    }
}

/// What identifies one version of the marks file: every write is a rename (a new inode),
/// and ctime catches anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Version {
    dev: u64,
    ino: u64,
    size: u64,
    ctime: (i64, i64),
}

impl Version {
    fn of(meta: &std::fs::Metadata) -> Version {
        Version {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// The floors per board, for one store, kept in a file shared by every process of one
/// home.
#[derive(Debug)]
pub struct Marks {
    /// `$ROW_FENCE_HOME/revisions.json`; `None` keeps them in memory only.
    path: Option<PathBuf>,
    /// The store they belong to: its identity ([`crate::LeaseStore::identity`]), the
    /// same for every spelling of it.
    store: String,
    /// Keys older versions kept the same store's floors under (its spelling): read and
    /// merged, so an upgrade keeps them; written under `store` only.
    legacy: Vec<String>,
    /// Board → floors, as this process knows them.
    seen: Mutex<BTreeMap<String, Mark>>,
    /// True when `seen` holds something the file may not.
    dirty: AtomicBool,
    /// The version of the file last merged into `seen`.
    loaded: Mutex<Option<Version>>,
    /// Board → floors as last written to the file by this process or read from it.
    on_disk: Mutex<BTreeMap<String, Mark>>,
    /// One flush at a time, so a flush that waits knows what the one before wrote.
    flushing: Mutex<()>,
    /// Why the last flush failed, until one succeeds: floors this process holds that no
    /// restart would see, so nothing may be judged on them (fail closed).
    failed: Mutex<Option<String>>,
}

type MarksFile = BTreeMap<String, BTreeMap<String, Mark>>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Marks {
    /// The marks of `store` kept in `path` (loaded now; a missing or unreadable file
    /// starts empty).
    pub fn load(path: Option<PathBuf>, store: &str) -> Marks {
        Marks::load_with_legacy(path, store, &[])
    }

    /// As [`Marks::load`], also reading the floors kept under `legacy` keys (the store's
    /// spelling, as older versions keyed it): merged into `store`'s and written under
    /// `store` at the next flush.
    pub fn load_with_legacy(path: Option<PathBuf>, store: &str, legacy: &[String]) -> Marks {
        let marks = Marks {
            path,
            store: store.to_string(),
            legacy: legacy.iter().filter(|k| *k != store).cloned().collect(),
            failed: Mutex::new(None),
            seen: Mutex::new(BTreeMap::new()),
            dirty: AtomicBool::new(false),
            loaded: Mutex::new(None),
            on_disk: Mutex::new(BTreeMap::new()),
            flushing: Mutex::new(()),
        };
        marks.refresh();
        marks
    }

    /// Merges the file into what this process knows, when it changed since it was last
    /// read (one `stat` when it did not). Call it before taking a floor to judge with.
    pub fn refresh(&self) {
        let Some(path) = &self.path else {
            return;
        };
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(e) => return self.cannot_read(path, e),
        };
        let version = Version::of(&meta);
        if *lock(&self.loaded) == Some(version) {
            return;
        }
        // Read after the stat: a newer file read under an older version is read again
        // next time, never the other way round.
        let mut file = match read_file(path) {
            Ok(file) => file,
            Err(e) => return self.cannot_read(path, e),
        };
        let boards = file.remove(&self.store).unwrap_or_default();
        {
            let mut seen = lock(&self.seen);
            for (board, mark) in &boards {
                seen.entry(board.clone()).or_default().merge(*mark);
            }
            for key in &self.legacy {
                for (board, mark) in file.remove(key).unwrap_or_default() {
                    let on_disk = boards.get(&board).copied().unwrap_or_default();
                    seen.entry(board).or_default().merge(mark);
                    let mut written = on_disk;
                    if written.merge(mark) {
                        self.dirty.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
        {
            let mut on_disk = lock(&self.on_disk);
            for (board, mark) in boards {
                on_disk.entry(board).or_default().merge(mark);
            }
        }
        *lock(&self.loaded) = Some(version);
    }

    /// A file that exists but cannot be read (or parsed) holds floors this process does
    /// not know: nothing is judged until it can be ([`Marks::unwritten`]).
    fn cannot_read(&self, path: &Path, e: std::io::Error) {
        *lock(&self.failed) = Some(format!("{} could not be read: {e}", path.display()));
    }

    /// The floors known for `board` now (call [`Marks::refresh`] first to include what
    /// other processes recorded).
    pub fn get(&self, board: &str) -> Mark {
        lock(&self.seen).get(board).copied().unwrap_or_default()
    }

    /// Raises `board`'s floors to at least `mark` (in memory; [`Marks::flush`] writes
    /// them). True when anything rose.
    pub fn observe(&self, board: &str, mark: Mark) -> bool {
        let raised = lock(&self.seen)
            .entry(board.to_string())
            .or_default()
            .merge(mark);
        if raised {
            self.dirty.store(true, Ordering::Relaxed);
        }
        raised
    }

    /// True when the file is known to hold `board`'s expiry floor at least as high as
    /// `mark`'s (same era or a later one).
    fn expiry_on_disk(&self, board: &str, mark: Mark) -> bool {
        let disk = lock(&self.on_disk).get(board).copied().unwrap_or_default();
        (disk.clock_era, disk.expired_ms) >= (mark.clock_era, mark.expired_ms)
    }

    /// Writes `board`'s expiry floor to the file unless it is there already: a lease found
    /// expired must stay expired for a restarted daemon and a cold `check` too, so the
    /// answer that found it waits for this.
    pub fn persist_expiry(&self, board: &str) -> std::io::Result<()> {
        let want = self.get(board);
        if self.path.is_none() || self.expiry_on_disk(board, want) {
            return Ok(());
        }
        self.dirty.store(true, Ordering::Relaxed);
        self.flush()
    }

    /// Writes what is new to the file: merged by maximum with what it holds, under an
    /// exclusive lock on `<file>.lock`, replaced atomically.
    pub fn flush(&self) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let _one = lock(&self.flushing);
        if !self.dirty.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let seen = lock(&self.seen).clone();
        match merge_into(path, &self.store, &seen) {
            Ok(merged) => {
                *lock(&self.on_disk) = merged;
                *lock(&self.failed) = None;
                Ok(())
            }
            Err(e) => {
                self.dirty.store(true, Ordering::Relaxed);
                *lock(&self.failed) = Some(format!("{} could not be written: {e}", path.display()));
                Err(e)
            }
        }
    }

    /// Why floors this process holds are not in the file (the last flush failed and none
    /// succeeded since), after trying once more: `None` when the file holds them all.
    /// A caller judges nothing while it is `Some`: a restarted process would not see them.
    pub fn unwritten(&self) -> Option<String> {
        lock(&self.failed).as_ref()?;
        // Through the file whatever is dirty: a flush reads it first, so it also tells
        // whether a file that could not be read can be now.
        self.dirty.store(true, Ordering::Relaxed);
        match self.flush() {
            Ok(()) => {
                *lock(&self.loaded) = None;
                self.refresh();
                lock(&self.failed).clone()
            }
            Err(_) => lock(&self.failed).clone(),
        }
    }
}

/// The file's floors; a missing file holds none. One that cannot be read or parsed is an
/// error: judged or merged as empty, it would drop every floor in it.
fn read_file(path: &Path) -> std::io::Result<MarksFile> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not JSON floors: {e}"),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(MarksFile::new()),
        Err(e) => Err(e),
    }
}

/// Merges `seen` into the file's floors for `store`, under the file's lock; returns what
/// the file holds for `store` now.
fn merge_into(
    path: &Path,
    store: &str,
    seen: &BTreeMap<String, Mark>,
) -> std::io::Result<BTreeMap<String, Mark>> {
    if let Some(dir) = path.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let lock_path = path.with_extension("lock");
    let lock: File = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_path)?;
    lock.lock()?;
    // Under the lock no other writer of the file runs: a killed one's temp files are garbage.
    for leftover in crate::atomic_file::leftovers(path) {
        let _ = std::fs::remove_file(leftover);
    }
    let mut all = match read_file(path) {
        Ok(all) => all,
        Err(e) => {
            let _ = lock.unlock();
            return Err(e);
        }
    };
    let boards = all.entry(store.to_string()).or_default();
    for (board, mark) in seen {
        boards.entry(board.clone()).or_default().merge(*mark);
    }
    let merged = boards.clone();
    let bytes = serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?;
    let written = crate::atomic_file::write(path, &bytes, 0o600, true);
    let _ = lock.unlock();
    written.map(|()| merged)
}

/// The marks file of a home.
pub fn marks_path(home: &Path) -> PathBuf {
    home.join(MARKS_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(revision: u64, expired_ms: u64, clock_era: u64) -> Mark {
        Mark {
            revision,
            epoch: 0,
            expired_ms,
            clock_era,
        }
    }

    #[test]
    fn an_accepted_clock_era_replaces_a_higher_floor_of_an_older_era() {
        let mut m = mark(5, 9_000, 0);
        assert!(!m.merge(mark(4, 8_000, 0)), "nothing rose");
        assert!(m.merge(mark(4, 1_000, 1)), "a later era lowers the floor");
        assert_eq!(m, mark(5, 1_000, 1));
        assert!(
            !m.merge(mark(5, 9_000, 0)),
            "an older era never raises it again"
        );
    }

    #[test]
    fn a_floor_another_process_recorded_is_seen_without_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MARKS_FILE);
        let daemon = Marks::load(Some(path.clone()), "s");
        let cli = Marks::load(Some(path.clone()), "s");
        cli.observe("b", mark(7, 0, 0));
        cli.flush().unwrap();
        assert_eq!(daemon.get("b").revision, 0, "not read yet");
        daemon.refresh();
        assert_eq!(daemon.get("b").revision, 7);
        // The accept of another process lowers this one's expiry floor too.
        daemon.observe("b", mark(7, 50_000, 0));
        daemon.persist_expiry("b").unwrap();
        cli.refresh();
        assert_eq!(cli.get("b").expired_ms, 50_000);
        cli.observe("b", mark(7, 10_000, 1));
        cli.flush().unwrap();
        daemon.refresh();
        assert_eq!(daemon.get("b"), mark(7, 10_000, 1));
        daemon.flush().unwrap();
        assert_eq!(read_file(&path).unwrap()["s"]["b"], mark(7, 10_000, 1));
    }
}
