//! A store that must never go back in time (ARCHITECTURE.md, "Acknowledged means durable"):
//! [`Monotonic`] wraps any adapter and refuses what only a store that lost history can
//! answer. A failover that lost writes, a restart from a stale AOF, an eviction, a file
//! restored from a backup all look the same from here: numbers that went down.
//!
//! - An ask whose descriptor generation is above the board revision: the lane holds a
//!   grant the store no longer has (`store_regressed`).
//! - A board revision, or a controller epoch counter, below the highest one seen
//!   (`store_regressed`). The highest seen are kept across restarts in
//!   `$ROW_FENCE_HOME/revisions.json` ([`Marks`]), per store and board: the daemon records
//!   what its asks see, the CLI what it writes and acknowledges.
//! - A store clock below one this process already judged or wrote with
//!   (`clock_regressed`): an expired lease must not come back to life.
//!
//! [`accept_regression`] is the operator's way out (`row-fence store accept-regression`):
//! it raises the board revision above every generation ever seen and drops every row
//! lease and the controller lease, so every older lease is stale and lanes re-acquire,
//! and no generation or epoch is ever handed out twice.

use crate::meta;
use crate::{
    AskCheck, CLAIMS, ControllerLease, Expected, FencedBatch, Judgement, LeaseStore, LogEntry,
    META, ReadSet, Record, RecordWrite, Snapshot, StoreCheck, StoreError, WriteKind,
};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The marks file under `$ROW_FENCE_HOME`.
pub const MARKS_FILE: &str = "revisions.json";

/// The highest numbers seen for one board of one store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The highest board revision seen (also the highest generation handed out).
    pub revision: u64,
    /// The highest controller epoch seen.
    #[serde(default)]
    pub epoch: u64,
}

/// The highest revision and epoch seen per board, for one store, kept in a file shared by
/// the daemon and the CLI of one home (merged by maximum under a lock, so neither loses
/// the other's).
#[derive(Debug)]
pub struct Marks {
    /// `$ROW_FENCE_HOME/revisions.json`; `None` keeps them in memory only.
    path: Option<PathBuf>,
    /// The store they belong to (its redacted description).
    store: String,
    /// Board → mark.
    seen: Mutex<BTreeMap<String, Mark>>,
    /// True when `seen` holds something the file does not.
    dirty: AtomicBool,
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
        let seen = path
            .as_deref()
            .and_then(|p| read_file(p).remove(store))
            .unwrap_or_default();
        Marks {
            path,
            store: store.to_string(),
            seen: Mutex::new(seen),
            dirty: AtomicBool::new(false),
        }
    }

    /// The highest numbers seen for `board`.
    pub fn get(&self, board: &str) -> Mark {
        lock(&self.seen).get(board).copied().unwrap_or_default()
    }

    /// Raises `board`'s mark to at least `mark` (in memory; [`Marks::flush`] writes it).
    pub fn observe(&self, board: &str, mark: Mark) {
        let mut seen = lock(&self.seen);
        let have = seen.entry(board.to_string()).or_default();
        if mark.revision > have.revision || mark.epoch > have.epoch {
            have.revision = have.revision.max(mark.revision);
            have.epoch = have.epoch.max(mark.epoch);
            self.dirty.store(true, Ordering::Relaxed);
        }
    }

    /// Writes what is new to the file: merged by maximum with what it holds, under an
    /// exclusive lock on `<file>.lock`, replaced atomically.
    pub fn flush(&self) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if !self.dirty.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let result = merge_into(path, &self.store, &lock(&self.seen).clone());
        if result.is_err() {
            self.dirty.store(true, Ordering::Relaxed);
        }
        result
    }
}

fn read_file(path: &Path) -> MarksFile {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn merge_into(path: &Path, store: &str, seen: &BTreeMap<String, Mark>) -> std::io::Result<()> {
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
    let mut all = read_file(path);
    let boards = all.entry(store.to_string()).or_default();
    for (board, mark) in seen {
        let have = boards.entry(board.clone()).or_default();
        have.revision = have.revision.max(mark.revision);
        have.epoch = have.epoch.max(mark.epoch);
    }
    let bytes = serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?;
    let written = crate::atomic_file::write(path, &bytes, 0o600, true);
    let _ = lock.unlock();
    written
}

/// A store wrapped so that it never answers from an older history than one seen.
#[derive(Debug)]
pub struct Monotonic {
    inner: Arc<dyn LeaseStore>,
    marks: Arc<Marks>,
    /// The highest store clock this process judged or wrote with, ms since the Unix epoch.
    judged_ms: AtomicU64,
    /// True for a writer (the CLI): marks are written as soon as a write is acknowledged.
    eager: bool,
}

impl Monotonic {
    /// Wraps `inner`; its marks are kept in `marks_path` (`None`: in memory only). A
    /// writer (`eager`) writes each acknowledged revision to the file at once; the daemon
    /// flushes on its own schedule ([`Monotonic::marks`]).
    pub fn new(inner: Arc<dyn LeaseStore>, marks_path: Option<PathBuf>, eager: bool) -> Monotonic {
        let marks = Arc::new(Marks::load(marks_path, &inner.describe()));
        Monotonic {
            inner,
            marks,
            judged_ms: AtomicU64::new(0),
            eager,
        }
    }

    /// The marks (the daemon flushes them periodically and at exit).
    pub fn marks(&self) -> Arc<Marks> {
        self.marks.clone()
    }

    /// The wrapped store, unguarded (for [`accept_regression`]).
    pub fn inner(&self) -> &dyn LeaseStore {
        self.inner.as_ref()
    }

    /// Refuses a clock below `floor` (the highest this process used before the call began),
    /// then raises the floor.
    fn clock(&self, floor: u64, now_ms: u64) -> Result<(), StoreError> {
        if now_ms < floor {
            return Err(StoreError::ClockRegressed(format!(
                "the store's clock read {}, {} ms before a time this process already judged with ({}); a store or server whose clock went back must not judge expiry",
                crate::judge::rfc3339(now_ms),
                floor - now_ms,
                crate::judge::rfc3339(floor)
            )));
        }
        self.judged_ms.fetch_max(now_ms, Ordering::Relaxed);
        Ok(())
    }

    /// Refuses a board revision or epoch below the highest seen, then records them.
    /// `epoch` is `None` when the call did not read `meta` (then it is not compared).
    fn history(&self, board: &str, revision: u64, epoch: Option<u64>) -> Result<(), StoreError> {
        let seen_now = Mark {
            revision,
            epoch: epoch.unwrap_or(0),
        };
        let seen = self.marks.get(board);
        if seen_now.revision < seen.revision {
            return Err(StoreError::Regressed(format!(
                "board {board} is at revision {} but revision {} was already seen ({}): the store lost history (a failover, a restart from an old file, an eviction); an operator runs `row-fence store accept-regression {board}`",
                seen_now.revision,
                seen.revision,
                self.inner.describe()
            )));
        }
        if epoch.is_some_and(|epoch| epoch < seen.epoch) {
            return Err(StoreError::Regressed(format!(
                "board {board}'s controller epoch counter is {} but epoch {} was already handed out: the store lost history; an operator runs `row-fence store accept-regression {board}`",
                seen_now.epoch, seen.epoch
            )));
        }
        self.marks.observe(board, seen_now);
        Ok(())
    }

    fn flush_if_eager(&self) {
        if self.eager {
            let _ = self.marks.flush();
        }
    }
}

/// The controller epoch counter a snapshot with `meta` shows (0 without one).
fn epoch_of(snapshot: &Snapshot) -> u64 {
    let counter = snapshot
        .record(META, meta::EPOCH)
        .and_then(|r| r.value.as_u64())
        .unwrap_or(0);
    let lease = snapshot
        .record(META, meta::LEASE)
        .and_then(|r| serde_json::from_value::<ControllerLease>(r.value.clone()).ok())
        .map_or(0, |l| l.epoch);
    counter.max(lease)
}

#[async_trait]
impl LeaseStore for Monotonic {
    async fn layout(&self, board: &str) -> Result<crate::meta::Layout, StoreError> {
        self.inner.layout(board).await
    }

    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError> {
        let floor = self.judged_ms.load(Ordering::Relaxed);
        let snapshot = self.inner.sections(board, names).await?;
        self.clock(floor, snapshot.now_ms)?;
        let epoch = names.contains(&META).then(|| epoch_of(&snapshot));
        self.history(board, snapshot.revision, epoch)?;
        Ok(snapshot)
    }

    async fn read_records(&self, board: &str, reads: &ReadSet) -> Result<Snapshot, StoreError> {
        let floor = self.judged_ms.load(Ordering::Relaxed);
        let snapshot = self.inner.read_records(board, reads).await?;
        self.clock(floor, snapshot.now_ms)?;
        // The epoch counter is compared only when meta was read whole: a keyed read of
        // other meta records does not show it.
        let epoch = reads.is_whole(META).then(|| epoch_of(&snapshot));
        self.history(board, snapshot.revision, epoch)?;
        Ok(snapshot)
    }

    async fn record(
        &self,
        board: &str,
        section: &str,
        key: &str,
    ) -> Result<Option<Record>, StoreError> {
        self.inner.record(board, section, key).await
    }

    async fn fenced_batch(&self, board: &str, batch: &FencedBatch) -> Result<u64, StoreError> {
        let revision = self.inner.fenced_batch(board, batch).await?;
        let epoch = batch
            .writes
            .iter()
            .filter(|w| w.kind == WriteKind::Put && w.section == META)
            .filter_map(|w| match w.key.as_str() {
                meta::EPOCH => w.value.as_u64(),
                meta::LEASE => w.value.get("epoch").and_then(|e| e.as_u64()),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        self.marks.observe(board, Mark { revision, epoch });
        self.flush_if_eager();
        Ok(revision)
    }

    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        let floor = self.judged_ms.load(Ordering::Relaxed);
        let judgement = self.inner.ask(check).await?;
        self.clock(floor, judgement.now_ms)?;
        if check.generation > judgement.revision {
            return Err(StoreError::Regressed(format!(
                "{} holds {}/{} at generation {}, but the board is at revision {}: the store lost the grant (a failover, a restart from an old file, an eviction); an operator runs `row-fence store accept-regression {}`",
                check.lane,
                check.board,
                check.row,
                check.generation,
                judgement.revision,
                check.board
            )));
        }
        self.history(&check.board, judgement.revision, None)?;
        Ok(judgement)
    }

    async fn section_names(&self, board: &str) -> Result<Vec<String>, StoreError> {
        self.inner.section_names(board).await
    }

    async fn log(&self, board: &str, count: usize) -> Result<Vec<LogEntry>, StoreError> {
        self.inner.log(board, count).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }

    async fn now_ms(&self) -> Result<u64, StoreError> {
        let floor = self.judged_ms.load(Ordering::Relaxed);
        let now = self.inner.now_ms().await?;
        self.clock(floor, now)?;
        Ok(now)
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn connection_losses(&self) -> u64 {
        self.inner.connection_losses()
    }

    async fn check(&self) -> Result<StoreCheck, StoreError> {
        self.inner.check().await
    }

    fn last_check(&self) -> Option<StoreCheck> {
        self.inner.last_check()
    }

    fn calls_in_flight(&self) -> u64 {
        self.inner.calls_in_flight()
    }
}

/// What [`accept_regression`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Accepted {
    /// The board revision before.
    pub from_revision: u64,
    /// The revision it committed at: above every generation ever seen.
    pub revision: u64,
    /// The controller epoch counter now: the next controller grant gets one above it.
    pub epoch: u64,
    /// Row leases dropped (their lanes re-acquire).
    pub leases_dropped: usize,
}

/// Raises `board`'s revision above every generation ever seen (this home's marks, every
/// stored lease, the board itself), drops every row lease and the controller lease, and
/// raises the epoch counter above every epoch seen: one fenced batch, pinned to the
/// revision it read (retried on a concurrent write, at most 16 times).
pub async fn accept_regression(store: &Monotonic, board: &str) -> Result<Accepted, StoreError> {
    let inner = store.inner();
    for _ in 0..crate::fencing::MAX_ATTEMPTS {
        let snapshot = inner.sections(board, &[META, CLAIMS]).await?;
        let seen = store.marks.get(board);
        let claims = snapshot.sections.get(CLAIMS).cloned().unwrap_or_default();
        let highest_generation = claims
            .values()
            .filter_map(|r| r.value.get("generation").and_then(|g| g.as_u64()))
            .max()
            .unwrap_or(0);
        let revision = seen.revision.max(snapshot.revision).max(highest_generation) + 1;
        let epoch = seen.epoch.max(epoch_of(&snapshot));
        let mut writes: Vec<RecordWrite> = claims
            .iter()
            .map(|(row, record)| RecordWrite {
                kind: WriteKind::Delete,
                section: CLAIMS.into(),
                key: row.clone(),
                expected: Expected::At(record.revision).wire(),
                value: serde_json::Value::Null,
            })
            .collect();
        if let Some(lease) = snapshot.record(META, meta::LEASE) {
            writes.push(RecordWrite {
                kind: WriteKind::Delete,
                section: META.into(),
                key: meta::LEASE.into(),
                expected: Expected::At(lease.revision).wire(),
                value: serde_json::Value::Null,
            });
        }
        writes.push(RecordWrite {
            kind: WriteKind::Put,
            section: META.into(),
            key: meta::EPOCH.into(),
            expected: Expected::of(snapshot.record(META, meta::EPOCH)).wire(),
            value: serde_json::json!(epoch),
        });
        let batch = FencedBatch {
            writes,
            lease: None,
            expected_revision: Some(snapshot.revision),
            min_revision: Some(revision),
        };
        match inner.fenced_batch(board, &batch).await {
            Ok(committed) => {
                store.marks.observe(
                    board,
                    Mark {
                        revision: committed,
                        epoch,
                    },
                );
                let _ = store.marks.flush();
                return Ok(Accepted {
                    from_revision: snapshot.revision,
                    revision: committed,
                    epoch,
                    leases_dropped: claims.len(),
                });
            }
            Err(StoreError::RevisionConflict { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::RevisionConflict {
        key: "revision".into(),
    })
}

/// The marks file of a home.
pub fn marks_path(home: &Path) -> PathBuf {
    home.join(MARKS_FILE)
}
