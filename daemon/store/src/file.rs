//! The embedded file store (`ROW_FENCE_STORE=file`, the default): one JSON document per
//! board, `<dir>/<board>.json`, so one machine needs no server at all.
//!
//! - Writers take an exclusive `flock` on `<board>.lock` (a separate file, because the
//!   document itself is replaced by rename) without blocking, retrying until their caller's
//!   deadline, so a lock held elsewhere never pins a thread. Under the lock they remove the
//!   temp files a killed writer left, bring the fence log up to the document
//!   ([`super::file_log`]), write a temp file, fsync it, rename it over the document (the
//!   commit point) and fsync the directory.
//! - Readers take no lock: a rename is atomic, so they see the old document or the new
//!   one, and a read-only store directory can still be read.
//! - The clock is this machine's, and it must not go back: every writer stores the highest
//!   time it has seen in the document, and a judge or writer whose clock is below it is
//!   refused `clock_regressed`.

use super::document::BoardDocument;
use super::file_cache::{DocumentCache, ReadError};
use super::file_log;
use super::identity::StoreId;
use super::judge::{rfc3339, span};
use super::{
    AskCheck, FencedBatch, Judgement, LeaseStore, LogEntry, ReadSet, Record, Snapshot, StoreError,
};
use async_trait::async_trait;
use row_fence_contract::descriptor::validate_board;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The longest a writer waits for a board's lock before it gives up (its caller's deadline
/// usually ends the wait first).
pub const LOCK_WAIT: Duration = Duration::from_secs(30);

/// Between attempts to take a board's lock.
const LOCK_RETRY: Duration = Duration::from_millis(5);

/// At most this many file store calls run at once, each on a thread of its own; more wait
/// for one to finish (within their caller's deadline) instead of adding threads behind a
/// stuck disk.
pub const MAX_BLOCKING_CALLS: usize = 16;

/// The embedded store rooted at a directory.
#[derive(Clone, Debug)]
pub struct FileStore {
    /// Holds `<board>.json` and `<board>.lock`; created 0700.
    dir: Arc<PathBuf>,
    /// Calls running on a thread now, also ones whose caller gave up waiting.
    in_flight: Arc<AtomicU64>,
    /// Bounds the threads calls run on ([`MAX_BLOCKING_CALLS`]).
    threads: Arc<tokio::sync::Semaphore>,
    /// The documents readers parsed, kept while their file is unchanged (writers, under
    /// the lock, always read the file afresh).
    cache: Arc<DocumentCache>,
}

/// Counts a blocking call until its thread is done with it.
struct Running(Arc<AtomicU64>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl FileStore {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> FileStore {
        FileStore {
            dir: Arc::new(dir.into()),
            in_flight: Arc::new(AtomicU64::new(0)),
            threads: Arc::new(tokio::sync::Semaphore::new(MAX_BLOCKING_CALLS)),
            cache: Arc::new(DocumentCache::default()),
        }
    }

    /// How many times a reader read and parsed a board's document rather than using the
    /// one it kept (for tests and the bench).
    pub fn documents_parsed(&self) -> u64 {
        self.cache.parsed()
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn document_path(&self, board: &str) -> PathBuf {
        self.dir.join(format!("{board}.json"))
    }

    fn lock_path(&self, board: &str) -> PathBuf {
        self.dir.join(format!("{board}.lock"))
    }

    fn open_lock(&self, board: &str) -> Result<File, StoreError> {
        let path = self.lock_path(board);
        let open = || {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
        };
        match open() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.create_dir()?;
                open()
            }
            other => other,
        }
        .map_err(|e| io_error(&path, e))
    }

    fn create_dir(&self) -> Result<(), StoreError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(self.dir.as_path())
            .map_err(|e| io_error(&self.dir, e))
    }

    /// Reads a board's document (an empty board when absent), without a lock: the one
    /// parsed last time while the file is unchanged ([`crate::file_cache`]).
    pub fn read_document(&self, board: &str) -> Result<Arc<BoardDocument>, StoreError> {
        check_board(board)?;
        let path = self.document_path(board);
        match self.cache.read(&path, |bytes| parse(board, &path, bytes)) {
            Ok(Some(document)) => Ok(document),
            Ok(None) => Ok(Arc::new(BoardDocument::new(board))),
            Err(ReadError::Io(e)) => Err(io_error(&path, e)),
            Err(ReadError::Parse(e)) => Err(e),
        }
    }

    /// Reads a board's document afresh (writers, under the lock).
    fn load(&self, board: &str, path: &Path) -> Result<BoardDocument, StoreError> {
        match fs::read(path) {
            Ok(bytes) => parse(board, path, &bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(BoardDocument::new(board)),
            Err(e) => Err(io_error(path, e)),
        }
    }

    /// Takes the board's exclusive lock if it is free now (`None` when another process
    /// holds it).
    fn try_lock(&self, board: &str) -> Result<Option<File>, StoreError> {
        let lock = self.open_lock(board)?;
        match lock.try_lock() {
            Ok(()) => Ok(Some(lock)),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(io_error(&self.lock_path(board), e)),
        }
    }

    /// Runs `change` on the board's document under the exclusive lock and commits the
    /// result (the rename) when `change` succeeds. Nothing is written on an error; `None`
    /// when the lock is held elsewhere (nothing was read or written).
    fn try_update<T>(
        &self,
        board: &str,
        clock: Clock,
        change: impl FnOnce(&mut BoardDocument) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        check_board(board)?;
        let Some(lock) = self.try_lock(board)? else {
            return Ok(None);
        };
        let result = self.update_locked(board, clock, change);
        let _ = lock.unlock();
        result.map(Some)
    }

    fn update_locked<T>(
        &self,
        board: &str,
        clock: Clock,
        change: impl FnOnce(&mut BoardDocument) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let path = self.document_path(board);
        let log = file_log::path(&self.dir, board);
        for leftover in crate::atomic_file::leftovers(&path)
            .into_iter()
            .chain(crate::atomic_file::leftovers(&log))
        {
            let _ = fs::remove_file(leftover);
        }
        let mut document = self.load(board, &path)?;
        let now = match clock {
            Clock::Checked => clock_now(&document)?,
            Clock::Accepted => {
                document.clock_ms = 0;
                system_now_ms()
            }
        };
        // The log file catches up with the document first; what it cannot take yet stays
        // in the document.
        if let Ok(through) = file_log::reconcile(&log, &document.log, document.revision) {
            document.log.retain(|e| e.revision > through);
        }
        let revision = document.revision;
        let out = change(&mut document)?;
        document.clock_ms = document.clock_ms.max(now);
        self.store(&path, &document)?;
        if document.revision > revision
            && let Some(entry) = document.log.last()
        {
            let _ = file_log::append(&log, entry);
        }
        Ok(out)
    }

    /// [`FileStore::try_update`], retried until the lock is free, at most [`LOCK_WAIT`]
    /// (the caller's deadline, dropping this future, usually ends it first).
    async fn update<T: Send + 'static>(
        &self,
        board: &str,
        clock: Clock,
        change: impl Fn(&mut BoardDocument) -> Result<T, StoreError> + Send + Sync + 'static,
    ) -> Result<T, StoreError> {
        let change = Arc::new(change);
        let started = Instant::now();
        loop {
            let (board_name, change) = (board.to_string(), change.clone());
            let attempt = self
                .blocking(move |s| s.try_update(&board_name, clock, |d| change(d)))
                .await?;
            if let Some(out) = attempt {
                return Ok(out);
            }
            if started.elapsed() >= LOCK_WAIT {
                return Err(StoreError::Failed(crate::Detail::from(format!(
                    "{} is locked by another writer for over {} s; nothing was written",
                    self.lock_path(board).display(),
                    LOCK_WAIT.as_secs()
                ))));
            }
            tokio::time::sleep(LOCK_RETRY).await;
        }
    }

    /// Writes the document: the rename is the commit point. A directory that cannot be
    /// synced after it is not "nothing written": the write is in place but may not
    /// survive a crash (`Indeterminate`).
    fn store(&self, path: &Path, document: &BoardDocument) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(document)
            .map_err(|e| StoreError::Invalid(crate::Detail::caused_by(e.to_string(), e)))?;
        crate::atomic_file::write(path, &bytes, 0o600, false).map_err(|e| io_error(path, e))?;
        File::open(self.dir.as_path())
            .and_then(|dir| dir.sync_all())
            .map_err(|e| {
                StoreError::Indeterminate(crate::Detail::caused_by(format!(
                    "{} was replaced, but its directory could not be synced, so it may not survive a crash: {e}",
                    path.display()
                ), e))
            })
    }

    /// Takes the board's exclusive lock (retrying until it is free, at most [`LOCK_WAIT`];
    /// the caller's deadline, dropping this future, usually ends it first) and holds it
    /// until the guard is dropped: no writer of this store gets at the board meanwhile (a
    /// migration's copy).
    pub async fn hold(&self, board: &str) -> Result<HeldBoard, StoreError> {
        check_board(board)?;
        let path = self.document_path(board);
        let started = Instant::now();
        let lock = loop {
            if let Some(lock) = self.try_lock(board)? {
                break lock;
            }
            if started.elapsed() >= LOCK_WAIT {
                return Err(StoreError::Failed(crate::Detail::from(format!(
                    "{} is locked by another writer for over {} s",
                    self.lock_path(board).display(),
                    LOCK_WAIT.as_secs()
                ))));
            }
            tokio::time::sleep(LOCK_RETRY).await;
        };
        let document = self.load(board, &path)?;
        Ok(HeldBoard {
            store: self.clone(),
            lock,
            path,
            document,
        })
    }

    /// Runs `work` on a thread of its own, counted in [`LeaseStore::calls_in_flight`]
    /// until the thread is done with it (also when the caller stopped waiting).
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(FileStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let guard = Running(self.in_flight.clone());
        let thread = self.threads.clone().acquire_owned().await.map_err(|e| {
            StoreError::Failed(crate::Detail::caused_by(
                format!("the file store is closed: {e}"),
                e,
            ))
        })?;
        let store = self.clone();
        tokio::task::spawn_blocking(move || {
            let _running = (guard, thread);
            work(store)
        })
        .await
        .map_err(|e| {
            StoreError::Failed(crate::Detail::caused_by(
                format!("the file store task failed: {e}"),
                e,
            ))
        })?
    }
}

/// Whether a write checks this machine's clock against the board's highest time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Clock {
    /// A clock below the board's highest time is refused (`clock_regressed`).
    Checked,
    /// An operator accepting a regression or the clock (`store accept-regression`,
    /// `store accept-clock`: a batch with `min_revision`) accepts the clock as it is now: a
    /// board a writer with a clock far ahead once wrote is not stuck until real time
    /// catches up.
    Accepted,
}

/// A board held under the file store's exclusive lock (released on drop).
pub struct HeldBoard {
    store: FileStore,
    lock: File,
    path: PathBuf,
    document: BoardDocument,
}

impl HeldBoard {
    /// The board's document as read under the lock.
    pub fn document(&self) -> &BoardDocument {
        &self.document
    }

    /// Marks the document as moved to `to`, so this store refuses to serve the board from
    /// now on (written atomically, still under the lock).
    pub fn mark_moved(mut self, to: &str) -> Result<(), StoreError> {
        self.document.moved_to = Some(to.to_string());
        self.store.store(&self.path, &self.document)
    }
}

impl Drop for HeldBoard {
    fn drop(&mut self) {
        let _ = self.lock.unlock();
    }
}

/// Parses `path`'s bytes as the document of `board`.
fn parse(board: &str, path: &Path, bytes: &[u8]) -> Result<BoardDocument, StoreError> {
    let document: BoardDocument = serde_json::from_slice(bytes).map_err(|e| {
        StoreError::Corrupt(crate::Detail::caused_by(
            format!("{}: {e}", path.display()),
            e,
        ))
    })?;
    if document.board != board {
        return Err(StoreError::Corrupt(crate::Detail::from(format!(
            "{} holds board {:?}, not {board:?}",
            path.display(),
            document.board
        ))));
    }
    Ok(document)
}

fn check_board(board: &str) -> Result<(), StoreError> {
    validate_board(board)
        .map_err(|e| StoreError::Invalid(crate::Detail::caused_by(e.to_string(), e)))
}

fn io_error(path: &Path, e: io::Error) -> StoreError {
    StoreError::Failed(crate::Detail::caused_by(
        format!("{}: {e}", path.display()),
        e,
    ))
}

/// This machine's clock in ms since the Unix epoch: the file store's clock.
pub fn system_now_ms() -> u64 {
    row_fence_contract::ledger::now_ms()
}

/// This machine's now, unless it is below the highest time a writer of `document` saw.
fn clock_now(document: &BoardDocument) -> Result<u64, StoreError> {
    let now = system_now_ms();
    if now < document.clock_ms {
        return Err(StoreError::ClockRegressed(format!(
            "this machine's clock reads {}, {} before the time board {} was last written with ({}); fix the clock, or, if it ran ahead and was corrected, run `row-fence store accept-clock {}`",
            rfc3339(now),
            span(document.clock_ms - now),
            document.board,
            rfc3339(document.clock_ms),
            document.board
        )));
    }
    Ok(now)
}

#[async_trait]
impl LeaseStore for FileStore {
    async fn layout(&self, board: &str) -> Result<crate::meta::Layout, StoreError> {
        let board = board.to_string();
        self.blocking(move |s| {
            s.read_document(&board)?.ensure_here()?;
            Ok(crate::meta::Layout::Document)
        })
        .await
    }

    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError> {
        let board = board.to_string();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        // No clock check here: a read is not a judgement, and a writer whose clock is behind
        // is refused at its commit (under the lock).
        self.blocking(move |s| {
            let document = s.read_document(&board)?;
            document.ensure_here()?;
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            Ok(document.snapshot(&names, system_now_ms()))
        })
        .await
    }

    async fn read_records(&self, board: &str, reads: &ReadSet) -> Result<Snapshot, StoreError> {
        let board = board.to_string();
        let reads = reads.clone();
        self.blocking(move |s| {
            let document = s.read_document(&board)?;
            document.ensure_here()?;
            let names: Vec<&str> = reads.sections.keys().map(String::as_str).collect();
            Ok(document.snapshot(&names, system_now_ms()))
        })
        .await
    }

    async fn record(
        &self,
        board: &str,
        section: &str,
        key: &str,
    ) -> Result<Option<Record>, StoreError> {
        let (board, section, key) = (board.to_string(), section.to_string(), key.to_string());
        self.blocking(move |s| {
            let document = s.read_document(&board)?;
            document.ensure_here()?;
            Ok(document.record(&section, &key).cloned())
        })
        .await
    }

    async fn fenced_batch(&self, board: &str, batch: &FencedBatch) -> Result<u64, StoreError> {
        let batch = batch.clone();
        let clock = if batch.min_revision.is_some() {
            Clock::Accepted
        } else {
            Clock::Checked
        };
        self.update(board, clock, move |document| {
            document.ensure_here()?;
            document.apply(&batch)
        })
        .await
    }

    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        let check = check.clone();
        self.blocking(move |s| {
            let document = s.read_document(&check.board)?;
            document.ensure_here()?;
            document.judge_ask(&check, clock_now(&document)?)
        })
        .await
    }

    /// Every `<board>.json` in the directory whose name is a board slug (a directory
    /// not made yet holds none).
    async fn boards(&self) -> Result<Option<Vec<String>>, StoreError> {
        self.blocking(|s| {
            let entries = match std::fs::read_dir(s.dir.as_path()) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(Vec::new())),
                Err(e) => {
                    return Err(StoreError::Failed(crate::Detail::caused_by(
                        format!("{}: {e}", s.dir.display()),
                        e,
                    )));
                }
            };
            let mut boards = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| {
                    StoreError::Failed(crate::Detail::caused_by(
                        format!("{}: {e}", s.dir.display()),
                        e,
                    ))
                })?;
                let name = entry.file_name();
                let Some(board) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                    continue;
                };
                if validate_board(board).is_ok() {
                    boards.push(board.to_string());
                }
            }
            boards.sort();
            Ok(Some(boards))
        })
        .await
    }

    async fn section_names(&self, board: &str) -> Result<Vec<String>, StoreError> {
        let board = board.to_string();
        self.blocking(move |s| Ok(s.read_document(&board)?.section_names()))
            .await
    }

    async fn log(&self, board: &str, count: usize) -> Result<Vec<LogEntry>, StoreError> {
        let board = board.to_string();
        self.blocking(move |s| {
            let document = s.read_document(&board)?;
            file_log::newest(
                &file_log::path(&s.dir, &board),
                &document.log,
                document.revision,
                count,
            )
        })
        .await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.blocking(|s| {
            s.create_dir()?;
            fs::read_dir(s.dir.as_path())
                .map(|_| ())
                .map_err(|e| io_error(&s.dir, e))
        })
        .await
    }

    async fn now_ms(&self) -> Result<u64, StoreError> {
        Ok(system_now_ms())
    }

    fn describe(&self) -> String {
        format!("file:{}", self.dir.display())
    }

    fn address(&self) -> String {
        format!("file:{}", crate::spec::canonical_path(&self.dir).display())
    }

    /// The directory resolved (symlinks followed) and as written: a path that is a
    /// symlink repointed at another directory (a restore) is still the address this home
    /// knew, and finds that directory's identity there. Also where it is on its file
    /// system ([`crate::file_mount`]), so a bind mount of it is the same address.
    fn addresses(&self) -> Vec<String> {
        let written: PathBuf = std::path::absolute(self.dir.as_path())
            .unwrap_or_else(|_| self.dir.to_path_buf())
            .components()
            .collect();
        let written = format!("file:{}", written.display());
        let resolved = self.address();
        let mut all = vec![resolved, written];
        all.extend(crate::file_mount::address(&crate::spec::canonical_path(
            &self.dir,
        )));
        all.sort();
        all.dedup();
        all
    }

    async fn carried_identity(&self) -> Result<Option<StoreId>, StoreError> {
        self.blocking(|s| crate::file_identity::read(&s.dir)).await
    }

    async fn create_identity(&self, fresh: &StoreId) -> Result<Option<StoreId>, StoreError> {
        let fresh = fresh.clone();
        self.blocking(move |s| crate::file_identity::create(&s.dir, &fresh).map(Some))
            .await
    }

    fn calls_in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }
}
