//! A store that must never go back in time (ARCHITECTURE.md, "Acknowledged means durable"):
//! [`Monotonic`] wraps any adapter and refuses what only a store that lost history, or a
//! clock that went back, can answer. A failover that lost writes, a restart from a stale
//! AOF, an eviction, a file restored from a backup all look the same from here: numbers
//! that went down.
//!
//! - An ask whose descriptor generation is above the board revision: the lane holds a
//!   grant the store no longer has (`store_regressed`).
//! - A board revision, or a controller epoch counter, below the highest one this home has
//!   seen (`store_regressed`).
//! - A store clock below the latest lease expiry this home has found passed on the board
//!   (`clock_regressed`): judged with it, that lease would be live again.
//!
//! The floors are the home's ([`crate::marks`], `$ROW_FENCE_HOME/revisions.json`), shared
//! by the daemon and the CLI, and every call takes them **before** it reads the store: a
//! read is compared only with what was known when it began, so a concurrent call that read
//! a newer revision first never makes an older read look like a regression, and what the
//! CLI recorded a moment ago is seen by the daemon's next ask without a restart.
//!
//! What a home's floors cannot see: history recorded only by another home (a takeover made
//! from another machine, then lost by a restore, is not known here), and an expiry only
//! another home found passed. That is what a consensus store is for.
//!
//! [`accept_regression`] is the operator's way out of `store_regressed`, and
//! [`accept_clock`] the way out of `clock_regressed` after a clock that ran ahead was
//! corrected.

use crate::marks::Mark;
use crate::meta;
use crate::{
    AskCheck, CLAIMS, ControllerLease, Expected, FencedBatch, Judgement, LeaseStore, LogEntry,
    META, ReadSet, Record, RecordWrite, RowLease, Snapshot, StoreCheck, StoreError, WriteKind,
};
use async_trait::async_trait;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::marks::{MARKS_FILE, Marks, marks_path};

#[cfg(test)]
mod tests;

/// A store wrapped so that it never answers from an older history than one seen, nor
/// judges with a clock below a lease expiry already found passed.
#[derive(Debug)]
pub struct Monotonic {
    inner: Arc<dyn LeaseStore>,
    marks: Arc<Marks>,
    /// True for a writer (the CLI): marks are written as soon as a write is acknowledged.
    eager: bool,
}

impl Monotonic {
    /// Wraps `inner`; its marks are kept in `marks_path` (`None`: in memory only). A
    /// writer (`eager`) writes each acknowledged revision to the file at once; the daemon
    /// flushes revisions on its own schedule ([`Monotonic::marks`]). A lease expiry found
    /// passed is written at once by both.
    pub fn new(inner: Arc<dyn LeaseStore>, marks_path: Option<PathBuf>, eager: bool) -> Monotonic {
        // Keyed by which store this is; floors an older version kept under the spelling
        // (its description) are read too, so an upgrade keeps them.
        let marks = Arc::new(Marks::load_with_legacy(
            marks_path,
            &inner.identity(),
            &[inner.describe()],
        ));
        Monotonic {
            inner,
            marks,
            eager,
        }
    }

    /// The marks (the daemon flushes them periodically and at exit).
    pub fn marks(&self) -> Arc<Marks> {
        self.marks.clone()
    }

    /// The wrapped store, unguarded (for [`accept_regression`] and [`accept_clock`]).
    pub fn inner(&self) -> &dyn LeaseStore {
        self.inner.as_ref()
    }

    /// The board's floors as this home knows them now (the file read again if another
    /// process changed it): taken before a call reads the store.
    ///
    /// Fails while floors this process holds could not be written (a full or read-only
    /// home): a restarted process would not see them, so nothing is judged on them.
    fn floor(&self, board: &str) -> Result<Mark, StoreError> {
        self.marks.refresh();
        if let Some(why) = self.marks.unwritten() {
            return Err(StoreError::HomeUnwritable(format!(
                "this home's floors cannot be kept ({why}), so board {board} is not judged: a restart would forget what was seen; free space on the home's file system, make revisions.json readable and writable, or restore it"
            )));
        }
        Ok(self.marks.get(board))
    }

    /// Refuses a store clock below the latest lease expiry this home found passed on the
    /// board (`floor`, taken before the call).
    fn clock(&self, board: &str, floor: Mark, now_ms: u64) -> Result<(), StoreError> {
        if now_ms < floor.expired_ms {
            return Err(StoreError::ClockRegressed(format!(
                "the store's clock reads {}, {} before the expiry of a lease this home already found passed on board {board} ({}): judged now, that lease would be live again; fix the clock, or, if it ran ahead and was corrected, run `row-fence store accept-clock {board}`",
                crate::judge::rfc3339(now_ms),
                crate::judge::span(floor.expired_ms - now_ms),
                crate::judge::rfc3339(floor.expired_ms),
            )));
        }
        Ok(())
    }

    /// Refuses a board revision or epoch below the floor taken before the call, then
    /// records them. `epoch` is `None` when the call did not read `meta` (then it is not
    /// compared).
    fn history(
        &self,
        board: &str,
        floor: Mark,
        revision: u64,
        epoch: Option<u64>,
    ) -> Result<(), StoreError> {
        if revision < floor.revision {
            return Err(StoreError::Regressed(format!(
                "board {board} is at revision {revision} but revision {} was already seen ({}): the store lost history (a failover, a restart from an old file, an eviction); an operator runs `row-fence store accept-regression {board}`",
                floor.revision,
                self.inner.describe()
            )));
        }
        if let Some(epoch) = epoch
            && epoch < floor.epoch
        {
            return Err(StoreError::Regressed(format!(
                "board {board}'s controller epoch counter is {epoch} but epoch {} was already handed out: the store lost history; an operator runs `row-fence store accept-regression {board}`",
                floor.epoch
            )));
        }
        self.marks.observe(
            board,
            Mark {
                revision,
                epoch: epoch.unwrap_or(0),
                ..Mark::default()
            },
        );
        Ok(())
    }

    /// Records that a lease expiring at `expired_ms` was found passed (in the clock era
    /// of `floor`: an accept made meanwhile wins), and waits until the home's file holds
    /// it, so no restart or cold command judges that lease live again.
    ///
    /// Fails when the file cannot be written: the answer that found the lease passed is
    /// then not given (fail closed), since a restarted process could judge it live again.
    async fn found_expired(
        &self,
        board: &str,
        floor: Mark,
        expired_ms: Option<u64>,
    ) -> Result<(), StoreError> {
        let Some(expired_ms) = expired_ms else {
            return Ok(());
        };
        self.marks.observe(
            board,
            Mark {
                expired_ms,
                clock_era: floor.clock_era,
                ..Mark::default()
            },
        );
        let (marks, board) = (self.marks.clone(), board.to_string());
        let board_name = board.clone();
        let persisted = tokio::task::spawn_blocking(move || marks.persist_expiry(&board))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        persisted.map_err(|e| {
            StoreError::HomeUnwritable(format!(
                "a lease on board {board_name} was found expired, but this home's floors could not be written ({e}): a restart could judge it live again, so nothing is judged; free space on the home's file system or make it writable"
            ))
        })
    }

    /// A writer records what it committed before it reports success: a committed write
    /// this home's floors do not hold would let a restore from before it go unseen.
    fn flush_if_eager(&self, board: &str, revision: u64) -> Result<(), StoreError> {
        if !self.eager {
            return Ok(());
        }
        self.marks.flush().map_err(|e| {
            StoreError::HomeUnwritable(format!(
                "the write committed at revision {revision} in the store, but this home's floors could not be written ({e}): nothing was handed out; free space on the home's file system or make it writable, then run `row-fence show {board}` (it records the revision) and repeat the command"
            ))
        })
    }

    /// A read's checks: its clock and history against the floor taken before it, then
    /// the expiries it shows passed.
    async fn judge_snapshot(
        &self,
        board: &str,
        floor: Mark,
        snapshot: &Snapshot,
        epoch: Option<u64>,
    ) -> Result<(), StoreError> {
        self.clock(board, floor, snapshot.now_ms)?;
        self.history(board, floor, snapshot.revision, epoch)?;
        self.found_expired(board, floor, latest_passed(snapshot))
            .await
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

/// The latest expiry, at or before the snapshot's clock, of a row lease or the controller
/// lease the snapshot holds: what a reader found passed.
fn latest_passed(snapshot: &Snapshot) -> Option<u64> {
    let rows = snapshot
        .sections
        .get(CLAIMS)
        .into_iter()
        .flat_map(|claims| claims.values())
        .filter_map(|r| serde_json::from_value::<RowLease>(r.value.clone()).ok())
        .map(|l| l.expires_at_ms);
    let controller = snapshot
        .record(META, meta::LEASE)
        .and_then(|r| serde_json::from_value::<ControllerLease>(r.value.clone()).ok())
        .map(|l| l.expires_at_ms);
    rows.chain(controller)
        .filter(|expiry| *expiry <= snapshot.now_ms)
        .max()
}

#[async_trait]
impl LeaseStore for Monotonic {
    async fn layout(&self, board: &str) -> Result<crate::meta::Layout, StoreError> {
        self.inner.layout(board).await
    }

    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError> {
        let floor = self.floor(board)?;
        let snapshot = self.inner.sections(board, names).await?;
        let epoch = names.contains(&META).then(|| epoch_of(&snapshot));
        self.judge_snapshot(board, floor, &snapshot, epoch).await?;
        Ok(snapshot)
    }

    async fn read_records(&self, board: &str, reads: &ReadSet) -> Result<Snapshot, StoreError> {
        let floor = self.floor(board)?;
        let snapshot = self.inner.read_records(board, reads).await?;
        // The epoch counter is compared only when meta was read whole: a keyed read of
        // other meta records does not show it.
        let epoch = reads.is_whole(META).then(|| epoch_of(&snapshot));
        self.judge_snapshot(board, floor, &snapshot, epoch).await?;
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
        self.marks.observe(
            board,
            Mark {
                revision,
                epoch,
                ..Mark::default()
            },
        );
        self.flush_if_eager(board, revision)?;
        Ok(revision)
    }

    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        let floor = self.floor(&check.board)?;
        let judgement = self.inner.ask(check).await?;
        self.clock(&check.board, floor, judgement.now_ms)?;
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
        self.history(&check.board, floor, judgement.revision, None)?;
        let passed = judgement
            .lease
            .as_ref()
            .map(|l| l.expires_at_ms)
            .filter(|expiry| *expiry <= judgement.now_ms);
        self.found_expired(&check.board, floor, passed).await?;
        Ok(judgement)
    }

    async fn section_names(&self, board: &str) -> Result<Vec<String>, StoreError> {
        self.inner.section_names(board).await
    }

    async fn boards(&self) -> Result<Option<Vec<String>>, StoreError> {
        self.inner.boards().await
    }

    async fn log(&self, board: &str, count: usize) -> Result<Vec<LogEntry>, StoreError> {
        self.inner.log(board, count).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }

    async fn now_ms(&self) -> Result<u64, StoreError> {
        self.inner.now_ms().await
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn identity(&self) -> String {
        self.inner.identity()
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
/// revision it read (retried on a concurrent write, at most 16 times). With no lease left
/// to come back to life, it also accepts the store's clock as it is now (as
/// [`accept_clock`] does).
pub async fn accept_regression(store: &Monotonic, board: &str) -> Result<Accepted, StoreError> {
    let inner = store.inner();
    for _ in 0..crate::fencing::MAX_ATTEMPTS {
        let seen = store.floor(board)?;
        let snapshot = inner.sections(board, &[META, CLAIMS]).await?;
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
            .map(|(row, r)| delete(CLAIMS, row, r))
            .collect();
        if let Some(lease) = snapshot.record(META, meta::LEASE) {
            writes.push(delete(META, meta::LEASE, lease));
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
                store.accepted(
                    board,
                    Mark {
                        revision: committed,
                        epoch,
                        expired_ms: snapshot.now_ms,
                        clock_era: seen.clock_era + 1,
                    },
                )?;
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

/// What [`accept_clock`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AcceptedClock {
    /// The floor before: the latest lease expiry this home had found passed, ms since the
    /// Unix epoch (0: none).
    pub from_floor_ms: u64,
    /// The store's clock accepted as it is, ms since the Unix epoch: the new floor.
    pub clock_ms: u64,
    /// The revision the accept committed at.
    pub revision: u64,
    /// Rows whose leases were dropped: found passed under the clock that ran ahead but
    /// live again under the corrected one (their lanes re-acquire).
    pub rows_dropped: Vec<String>,
    /// True when the controller lease was dropped for the same reason (the epoch counter
    /// stays, so the next controller grant gets a new epoch).
    pub controller_dropped: bool,
}

/// The operator's way out of `clock_regressed` after a clock that ran ahead was corrected:
/// accepts the store's clock as it is now. Every lease that expired at or before the old
/// floor but after the clock's now (found passed under the clock that ran ahead, live
/// again under the corrected one) is dropped, so no lease found expired ever comes back;
/// the home's floor becomes the store's now (in a new clock era, which every process of
/// the home adopts), and on the file store the board's highest written time too. One
/// fenced batch pinned to the revision it read (retried on a concurrent write).
///
/// What it gives up: a lease granted or renewed while the clock ran ahead keeps the
/// expiry that clock gave it (up to the step longer than its TTL), and an expiry found
/// passed only by another home is not known here.
pub async fn accept_clock(store: &Monotonic, board: &str) -> Result<AcceptedClock, StoreError> {
    let inner = store.inner();
    for _ in 0..crate::fencing::MAX_ATTEMPTS {
        let seen = store.floor(board)?;
        let snapshot = inner.sections(board, &[META, CLAIMS]).await?;
        let now = snapshot.now_ms;
        let revived = |expires_at_ms: u64| expires_at_ms > now && expires_at_ms <= seen.expired_ms;
        let claims = snapshot.sections.get(CLAIMS).cloned().unwrap_or_default();
        let rows: Vec<(&String, &Record)> = claims
            .iter()
            .filter(|(_, r)| {
                serde_json::from_value::<RowLease>(r.value.clone())
                    .is_ok_and(|l| revived(l.expires_at_ms))
            })
            .collect();
        let controller = snapshot.record(META, meta::LEASE).filter(|r| {
            serde_json::from_value::<ControllerLease>(r.value.clone())
                .is_ok_and(|l| revived(l.expires_at_ms))
        });
        let mut writes: Vec<RecordWrite> =
            rows.iter().map(|(row, r)| delete(CLAIMS, row, r)).collect();
        writes.extend(controller.map(|r| delete(META, meta::LEASE, r)));
        let batch = FencedBatch {
            writes,
            lease: None,
            expected_revision: Some(snapshot.revision),
            // Commits at the next revision, as any batch; on the file store a batch that
            // names it also accepts this machine's clock (the board's highest time).
            min_revision: Some(snapshot.revision + 1),
        };
        match inner.fenced_batch(board, &batch).await {
            Ok(committed) => {
                store.accepted(
                    board,
                    Mark {
                        revision: committed,
                        epoch: 0,
                        expired_ms: now,
                        clock_era: seen.clock_era + 1,
                    },
                )?;
                return Ok(AcceptedClock {
                    from_floor_ms: seen.expired_ms,
                    clock_ms: now,
                    revision: committed,
                    rows_dropped: rows.iter().map(|(row, _)| row.to_string()).collect(),
                    controller_dropped: controller.is_some(),
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

/// A delete of `record` at the revision it was read at.
fn delete(section: &str, key: &str, record: &Record) -> RecordWrite {
    RecordWrite {
        kind: WriteKind::Delete,
        section: section.into(),
        key: key.into(),
        expected: Expected::At(record.revision).wire(),
        value: serde_json::Value::Null,
    }
}

impl Monotonic {
    /// Records an operator's accept in the home's file at once: the accept is done only
    /// when every process of the home will judge with it.
    fn accepted(&self, board: &str, mark: Mark) -> Result<(), StoreError> {
        self.marks.observe(board, mark);
        self.marks.flush().map_err(|e| {
            StoreError::Indeterminate(format!(
                "board {board} was committed at revision {}, but this home's floors could not be written ({e}); run the accept again",
                mark.revision
            ))
        })
    }
}
