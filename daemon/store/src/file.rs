//! The embedded file store (`ROW_FENCE_STORE=file`, the default): one JSON document per
//! board, `<dir>/<board>.json`, so one machine needs no server at all. Writers take an
//! exclusive `flock` on `<board>.lock` (a separate file, because the document itself is
//! replaced by rename), write a temp file, fsync it, rename it over the document and fsync
//! the directory; readers take a shared lock. The clock is this machine's. The fence log
//! is kept beside the document ([`super::file_log`]).

use super::document::BoardDocument;
use super::file_log;
use super::{AskCheck, FencedBatch, Judgement, LeaseStore, LogEntry, Record, Snapshot, StoreError};
use async_trait::async_trait;
use row_fence_ask::descriptor::validate_board;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The embedded store rooted at a directory.
#[derive(Clone, Debug)]
pub struct FileStore {
    /// Holds `<board>.json` and `<board>.lock`; created 0700.
    dir: Arc<PathBuf>,
}

impl FileStore {
    /// A store in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> FileStore {
        FileStore {
            dir: Arc::new(dir.into()),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn document_path(&self, board: &str) -> PathBuf {
        self.dir.join(format!("{board}.json"))
    }

    fn open_lock(&self, board: &str) -> Result<File, StoreError> {
        let path = self.dir.join(format!("{board}.lock"));
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

    /// Reads a board's document under a shared lock (an empty board when absent).
    pub fn read_document(&self, board: &str) -> Result<BoardDocument, StoreError> {
        check_board(board)?;
        let path = self.document_path(board);
        match fs::metadata(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BoardDocument::new(board)),
            _ => {}
        }
        let lock = self.open_lock(board)?;
        lock.lock_shared().map_err(|e| io_error(&path, e))?;
        let document = self.load(board, &path);
        let _ = lock.unlock();
        document
    }

    fn load(&self, board: &str, path: &Path) -> Result<BoardDocument, StoreError> {
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BoardDocument::new(board)),
            Err(e) => return Err(io_error(path, e)),
        };
        let document: BoardDocument = serde_json::from_slice(&bytes)
            .map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display())))?;
        if document.board != board {
            return Err(StoreError::Corrupt(format!(
                "{} holds board {:?}, not {board:?}",
                path.display(),
                document.board
            )));
        }
        Ok(document)
    }

    /// Runs `change` on the board's document under the exclusive lock and writes the
    /// result back atomically when `change` succeeds. Nothing is written on an error.
    pub fn update<T>(
        &self,
        board: &str,
        change: impl FnOnce(&mut BoardDocument) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        check_board(board)?;
        let path = self.document_path(board);
        let lock = self.open_lock(board)?;
        lock.lock().map_err(|e| io_error(&path, e))?;
        let result = self.load(board, &path).and_then(|mut document| {
            let out = change(&mut document)?;
            // The log lives beside the document (file_log): keep the document small.
            let entries = std::mem::take(&mut document.log);
            self.store(&path, &document)?;
            file_log::append(&file_log::path(&self.dir, board), &entries)?;
            Ok(out)
        });
        let _ = lock.unlock();
        result
    }

    fn store(&self, path: &Path, document: &BoardDocument) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(document).map_err(|e| StoreError::Invalid(e.to_string()))?;
        crate::atomic_file::write(path, &bytes, 0o600, true).map_err(|e| io_error(path, e))
    }

    /// Takes the board's exclusive lock and holds it until the guard is dropped: no
    /// reader or writer of this store gets at the board meanwhile (a migration's copy).
    pub fn hold(&self, board: &str) -> Result<HeldBoard, StoreError> {
        check_board(board)?;
        let path = self.document_path(board);
        let lock = self.open_lock(board)?;
        lock.lock().map_err(|e| io_error(&path, e))?;
        let document = self.load(board, &path)?;
        Ok(HeldBoard {
            store: self.clone(),
            lock,
            path,
            document,
        })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(FileStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || work(store))
            .await
            .map_err(|e| StoreError::Unreachable(format!("the file store task failed: {e}")))?
    }
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

fn check_board(board: &str) -> Result<(), StoreError> {
    validate_board(board).map_err(|e| StoreError::Invalid(e.to_string()))
}

fn io_error(path: &Path, e: io::Error) -> StoreError {
    StoreError::Unreachable(format!("{}: {e}", path.display()))
}

/// This machine's clock in ms since the Unix epoch: the file store's clock.
pub fn system_now_ms() -> u64 {
    row_fence_ask::ledger::now_ms()
}

#[async_trait]
impl LeaseStore for FileStore {
    async fn layout(&self, board: &str) -> Result<String, StoreError> {
        let board = board.to_string();
        self.blocking(move |s| {
            let document = s.read_document(&board)?;
            Ok(document.moved_to.unwrap_or_else(|| "document".into()))
        })
        .await
    }

    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError> {
        let board = board.to_string();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        self.blocking(move |s| {
            let document = s.read_document(&board)?;
            document.ensure_here()?;
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
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
        let (board, batch) = (board.to_string(), batch.clone());
        self.blocking(move |s| {
            s.update(&board, |document| {
                document.ensure_here()?;
                document.apply(&batch)
            })
        })
        .await
    }

    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        let check = check.clone();
        self.blocking(move |s| {
            let document = s.read_document(&check.board)?;
            document.ensure_here()?;
            document.judge_ask(&check, system_now_ms())
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
            check_board(&board)?;
            file_log::newest(&file_log::path(&s.dir, &board), count)
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
}
