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

use crate::identity::StoreId;
use crate::marks::{Conflict, Floors, Mark};
use crate::meta;
use crate::{
    AskCheck, CLAIMS, ControllerLease, FencedBatch, Judgement, LeaseStore, LogEntry, META, ReadSet,
    Record, RowLease, Snapshot, StoreCheck, StoreError, WriteKind,
};
use async_trait::async_trait;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::marks::{MARKS_FILE, Marks, marks_path};

mod accept;
#[cfg(test)]
mod tests;

pub use accept::{Accepted, AcceptedClock, AcceptedIdentity, accept_clock, accept_regression};

/// How long the identity a store was found to carry is used before it is asked again (at
/// once after a lost connection: a restarted server may be another one).
const IDENTITY_TTL: Duration = Duration::from_secs(1);

/// Whether a call may write: only a write path gives a store its identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// The key this process keeps the store's floors under, as last resolved.
#[derive(Clone, Debug)]
struct Resolved {
    /// The identity the store carries, or its address while it carries none.
    key: String,
    /// True when `key` is an identity the store carries.
    carried: bool,
    /// The store's addresses when it was resolved.
    addresses: Vec<String>,
    /// [`LeaseStore::connection_losses`] when it was resolved.
    losses: u64,
    at: Instant,
}

/// A store wrapped so that it never answers from an older history than one seen, nor
/// judges with a clock below a lease expiry already found passed.
#[derive(Debug)]
pub struct Monotonic {
    inner: Arc<dyn LeaseStore>,
    marks: Arc<Marks>,
    /// True for a writer (the CLI): marks are written as soon as a write is acknowledged.
    eager: bool,
    /// The store key resolved last ([`IDENTITY_TTL`]).
    resolved: Mutex<Option<Resolved>>,
    /// The identity the store carried at the last [`LeaseStore::check`], given with
    /// every [`LeaseStore::last_check`] (the daemon's status reads only that).
    checked_identity: Mutex<Option<String>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Monotonic {
    /// Wraps `inner`; its marks are kept in `marks_path` (`None`: in memory only). A
    /// writer (`eager`) writes each acknowledged revision to the file at once; the daemon
    /// flushes revisions on its own schedule ([`Monotonic::marks`]). A lease expiry found
    /// passed, and a board found behind, are written at once by both.
    pub fn new(inner: Arc<dyn LeaseStore>, marks_path: Option<PathBuf>, eager: bool) -> Monotonic {
        if let Some(dir) = marks_path.as_deref().and_then(std::path::Path::parent) {
            // The floors go into the process's home; it is made now, before any write is
            // acknowledged, so recording a committed write never fails for want of it.
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir);
        }
        Monotonic {
            inner,
            marks: Arc::new(Marks::load(marks_path)),
            eager,
            resolved: Mutex::new(None),
            checked_identity: Mutex::new(None),
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

    /// The keys floors of this store may have been kept under before it carried an
    /// identity: its addresses and its spellings (older versions keyed them so).
    fn legacy_keys(&self, addresses: &[String]) -> Vec<String> {
        let mut keys = addresses.to_vec();
        for key in [self.inner.address(), self.inner.describe()] {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }

    /// The key this store's floors are kept under (ARCHITECTURE.md, "The lease store"): the
    /// identity it carries, created on a write path when it carries none and this home
    /// knows none at its addresses; its address while it carries none and nothing wrote
    /// one (a read never creates it). A store at an address where this home knew an
    /// identity that carries another, or none, is `store_regressed`: an emptied or
    /// replaced store is never a fresh start.
    async fn store_key(&self, access: Access) -> Result<String, StoreError> {
        let losses = self.inner.connection_losses();
        let cached = lock(&self.resolved).clone();
        if let Some(r) = cached
            && r.losses == losses
            && r.at.elapsed() < IDENTITY_TTL
            && (r.carried || access == Access::Read)
        {
            // An address key serves only while no process of the home has found the
            // identity there: from then on the floors are the identity's. (A carried
            // identity needs no look at the file here: the floor's own read does that.)
            if r.carried {
                return Ok(r.key);
            }
            self.marks.refresh();
            if self.marks.bound(&r.addresses).is_empty() {
                return Ok(r.key);
            }
        }
        self.marks.refresh();
        // Its addresses after the look at its identity: a store learns there where the
        // server says it is (a socket's TCP address).
        let carried = self.inner.carried_identity().await?;
        let addresses = self.inner.addresses();
        let id = match carried {
            Some(id) => Some(id),
            None => {
                if let Some((address, known)) = self.marks.bound(&addresses).into_iter().next() {
                    return Err(StoreError::Regressed(format!(
                        "the store at {address} carries no identity, but this home knew it there as {known}: it was emptied or replaced (an empty server at the address, another deployment, a restore from before its identity was written), so nothing is judged or written on it; an operator who has looked runs `row-fence store accept-regression BOARD` for each board, which accepts the store there as it is"
                    )));
                }
                match access {
                    Access::Write => self.inner.create_identity(&StoreId::generate()).await?,
                    Access::Read => None,
                }
            }
        };
        let (key, carried) = match id {
            Some(id) => {
                self.marks
                    .bind(
                        &addresses,
                        id.as_str(),
                        &self.legacy_keys(&addresses),
                        false,
                    )
                    .map_err(|c| another_store(&c, &id))?;
                (id.to_string(), true)
            }
            None => (self.inner.address(), false),
        };
        *lock(&self.resolved) = Some(Resolved {
            key: key.clone(),
            carried,
            addresses,
            losses,
            at: Instant::now(),
        });
        Ok(key)
    }

    /// The board's floors as this home knows them now (the file read again if another
    /// process changed it): taken before a call reads the store.
    ///
    /// Fails while floors this process holds could not be written (a full or read-only
    /// home): a restarted process would not see them, so nothing is judged on them.
    fn floor(&self, key: &str, board: &str) -> Result<Mark, StoreError> {
        let floor = self.known(key, board)?;
        if floor.lost > 0 {
            return Err(StoreError::Regressed(format!(
                "board {board} went back in time: this home found it behind revision {} it had seen ({}), and answers so however its revision gets back up, until an operator runs `row-fence store accept-regression {board}`",
                floor.lost,
                self.inner.describe()
            )));
        }
        Ok(floor)
    }

    /// The board's floors, whether or not it was found behind (what an operator's accept
    /// raises the board above).
    fn known(&self, key: &str, board: &str) -> Result<Mark, StoreError> {
        self.marks.refresh();
        // Taken first: it reads the board's floors from the file, which may not be floors.
        let mark = self.marks.get(key, board);
        if let Some(why) = self.marks.unwritten() {
            return Err(StoreError::HomeUnwritable(crate::Detail::from(format!(
                "this home's floors cannot be kept ({why}), so board {board} is not judged: a restart would forget what was seen; free space on the home's file system, make revisions.json readable and writable, or restore it"
            ))));
        }
        Ok(mark)
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

    /// Records that the board was found behind what this home had seen, so it stays
    /// `store_regressed` here however its revision gets back up (written to the home
    /// before the answer leaves; a home that cannot write it answers the same), and
    /// returns the error that says so.
    async fn found_lost(&self, key: &str, board: &str, floor: Mark, why: String) -> StoreError {
        self.marks.observe(
            key,
            board,
            Mark {
                lost: floor.revision.max(1),
                accepted: floor.accepted,
                ..Mark::default()
            },
        );
        let (marks, key, name) = (self.marks.clone(), key.to_string(), board.to_string());
        let _ = tokio::task::spawn_blocking(move || marks.persist(&key, &name)).await;
        StoreError::Regressed(format!(
            "{why}: the store lost history (a restore, a failover, a restart from an old file, an eviction); this home answers so for board {board} until an operator runs `row-fence store accept-regression {board}`"
        ))
    }

    /// Refuses a board revision or epoch below the floor taken before the call (and keeps
    /// refusing: [`Monotonic::found_lost`]), then records them. `epoch` is `None` when the
    /// call did not read `meta` (then it is not compared).
    async fn history(
        &self,
        key: &str,
        board: &str,
        floor: Mark,
        revision: u64,
        epoch: Option<u64>,
    ) -> Result<(), StoreError> {
        if revision < floor.revision {
            let why = format!(
                "board {board} is at revision {revision} but revision {} was already seen ({})",
                floor.revision,
                self.inner.describe()
            );
            return Err(self.found_lost(key, board, floor, why).await);
        }
        if let Some(epoch) = epoch
            && epoch < floor.epoch
        {
            let why = format!(
                "board {board}'s controller epoch counter is {epoch} but epoch {} was already handed out",
                floor.epoch
            );
            return Err(self.found_lost(key, board, floor, why).await);
        }
        self.marks.observe(
            key,
            board,
            Mark {
                revision,
                epoch: epoch.unwrap_or(0),
                ..Mark::default()
            },
        );
        Ok(())
    }

    /// Refuses a row lease older than a generation this home has seen of its row, or at
    /// that generation held by another lane than the one this home saw hold it (`seen`,
    /// taken before the call), then records the rows' generations and holders: a home that
    /// saw generation N of a row never answers from a history where it holds an older one,
    /// nor one where N was handed out again, however the board's revision got back up.
    async fn rows(
        &self,
        key: &str,
        board: &str,
        floor: Mark,
        seen: impl Fn(&str) -> RowSeen,
        rows: &[(&str, u64, &str)],
    ) -> Result<(), StoreError> {
        for (row, generation, holder) in rows {
            let (floor_generation, floor_holder) = seen(row);
            if *generation < floor_generation {
                let why = format!(
                    "row {row} of board {board} holds a lease at generation {generation}, but this home already saw generation {floor_generation} of it"
                );
                return Err(self.found_lost(key, board, floor, why).await);
            }
            if *generation == floor_generation
                && let Some(held) = floor_holder
                && held != *holder
            {
                let before = if held == crate::marks::TWICE {
                    "two lanes".to_string()
                } else {
                    held.to_string()
                };
                let why = format!(
                    "row {row} of board {board} is held by {holder} at generation {generation}, which this home saw held by {before}: the generation was handed out again"
                );
                return Err(self.found_lost(key, board, floor, why).await);
            }
        }
        self.marks.observe_leases(key, board, rows.iter().copied());
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
        key: &str,
        board: &str,
        floor: Mark,
        expired_ms: Option<u64>,
    ) -> Result<(), StoreError> {
        let Some(expired_ms) = expired_ms else {
            return Ok(());
        };
        self.marks.observe(
            key,
            board,
            Mark {
                expired_ms,
                clock_era: floor.clock_era,
                ..Mark::default()
            },
        );
        let (marks, key, name) = (self.marks.clone(), key.to_string(), board.to_string());
        let persisted = tokio::task::spawn_blocking(move || marks.persist(&key, &name))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        persisted.map_err(|e| {
            StoreError::HomeUnwritable(crate::Detail::caused_by(format!(
                "a lease on board {board} was found expired, but this home's floors could not be written ({e}): a restart could judge it live again, so nothing is judged; free space on the home's file system or make it writable"
            ), e))
        })
    }

    /// A writer records what it committed before it reports success: a committed write
    /// this home's floors do not hold would let a restore from before it go unseen.
    fn flush_if_eager(&self, board: &str, revision: u64) -> Result<(), StoreError> {
        if !self.eager {
            return Ok(());
        }
        self.marks.flush().map_err(|e| {
            StoreError::HomeUnwritable(crate::Detail::caused_by(format!(
                "the write committed at revision {revision} in the store, but this home's floors could not be written ({e}): nothing was handed out; free space on the home's file system or make it writable, then run `row-fence show {board}` (it records the revision) and repeat the command"
            ), e))
        })
    }

    /// A read: the key, the floors known before it, the read, then its checks (clock,
    /// history, rows) and the expiries it shows passed.
    async fn read(
        &self,
        board: &str,
        epoch_read: bool,
        read: impl std::future::Future<Output = Result<Snapshot, StoreError>>,
    ) -> Result<Snapshot, StoreError> {
        let key = self.store_key(Access::Read).await?;
        let floor = self.floor(&key, board)?;
        let seen = self.marks.floors(&key, board);
        let snapshot = read.await?;
        let epoch = epoch_read.then(|| epoch_of(&snapshot));
        self.clock(board, floor, snapshot.now_ms)?;
        self.history(&key, board, floor, snapshot.revision, epoch)
            .await?;
        let rows = rows_of(&snapshot);
        self.rows(&key, board, floor, |row| row_floor(&seen, row), &rows)
            .await?;
        self.found_expired(&key, board, floor, latest_passed(&snapshot))
            .await?;
        Ok(snapshot)
    }
}

/// The error for a store at a known address that carries another identity.
fn another_store(conflict: &Conflict, carried: &StoreId) -> StoreError {
    StoreError::Regressed(format!(
        "the store at {} carries identity {carried}, but this home knew {} there: it is another store (another deployment under the same name, a replaced server), not the history this home saw; nothing is judged or written on it; an operator who has looked runs `row-fence store accept-regression BOARD` for each board, which accepts {carried} there",
        conflict.address, conflict.known
    ))
}

/// A row's floor: the highest generation seen of it (0: none kept) and the lane seen
/// holding that generation, if one was ([`crate::marks::TWICE`]: two).
pub(crate) type RowSeen = (u64, Option<String>);

/// `row`'s floor in a board's floors.
fn row_floor(seen: &Floors, row: &str) -> RowSeen {
    let generation = seen.rows.get(row).copied().unwrap_or(0);
    (generation, seen.holder(row, generation).map(str::to_string))
}

/// Each row lease a snapshot holds, with its generation and holder.
fn rows_of(snapshot: &Snapshot) -> Vec<(&str, u64, &str)> {
    snapshot
        .sections
        .get(CLAIMS)
        .into_iter()
        .flat_map(|claims| claims.iter())
        .filter_map(|(row, r)| lease_of(row, &r.value))
        .collect()
}

/// A claims record's row, generation and holder (`None`: not a lease).
fn lease_of<'a>(row: &'a str, value: &'a serde_json::Value) -> Option<(&'a str, u64, &'a str)> {
    Some((
        row,
        value.get("generation")?.as_u64()?,
        value.get("holder")?.as_str()?,
    ))
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
        self.read(
            board,
            names.contains(&META),
            self.inner.sections(board, names),
        )
        .await
    }

    async fn read_records(&self, board: &str, reads: &ReadSet) -> Result<Snapshot, StoreError> {
        // The epoch counter is compared only when meta was read whole: a keyed read of
        // other meta records does not show it.
        self.read(
            board,
            reads.is_whole(META),
            self.inner.read_records(board, reads),
        )
        .await
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
        let key = self.store_key(Access::Write).await?;
        let floor = self.floor(&key, board)?;
        let revision = self.inner.fenced_batch(board, batch).await?;
        if revision <= floor.revision {
            // Committed where this home already saw the revision: a generation handed out
            // again. Not acknowledged, and the board stays regressed here.
            let why =
                format!("board {board} committed a write at revision {revision}, already seen");
            let _ = self.found_lost(&key, board, floor, why).await;
            return Err(StoreError::RegressedCommit {
                board: board.to_string(),
                revision,
                seen: floor.revision,
            });
        }
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
            &key,
            board,
            Mark {
                revision,
                epoch,
                ..Mark::default()
            },
        );
        let granted = batch
            .writes
            .iter()
            .filter(|w| w.kind == WriteKind::Put && w.section == CLAIMS)
            .filter_map(|w| lease_of(&w.key, &w.value));
        self.marks.observe_leases(&key, board, granted);
        self.flush_if_eager(board, revision)?;
        Ok(revision)
    }

    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        let board = check.board.as_str();
        let key = self.store_key(Access::Read).await?;
        let floor = self.floor(&key, board)?;
        let row_seen = self.marks.row_seen(&key, board, &check.row);
        let judgement = self.inner.ask(check).await?;
        self.clock(board, floor, judgement.now_ms)?;
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
        self.history(&key, board, floor, judgement.revision, None)
            .await?;
        let held: Vec<(&str, u64, &str)> = judgement
            .lease
            .as_ref()
            .map(|l| (check.row.as_str(), l.generation, l.holder.as_str()))
            .into_iter()
            .collect();
        self.rows(&key, board, floor, |_| row_seen.clone(), &held)
            .await?;
        let passed = judgement
            .lease
            .as_ref()
            .map(|l| l.expires_at_ms)
            .filter(|expiry| *expiry <= judgement.now_ms);
        self.found_expired(&key, board, floor, passed).await?;
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

    fn address(&self) -> String {
        self.inner.address()
    }

    fn addresses(&self) -> Vec<String> {
        self.inner.addresses()
    }

    async fn carried_identity(&self) -> Result<Option<StoreId>, StoreError> {
        self.inner.carried_identity().await
    }

    async fn import(
        &self,
        board: &str,
        records: &[crate::copy::CopiedRecord],
        revision: u64,
    ) -> Result<u64, crate::copy::ImportError> {
        self.inner.import(board, records, revision).await
    }

    async fn drop_partial(&self, board: &str) -> Result<usize, StoreError> {
        self.inner.drop_partial(board).await
    }

    fn connection_losses(&self) -> u64 {
        self.inner.connection_losses()
    }

    /// The store's check, with the identity it carries as a note.
    async fn check(&self) -> Result<StoreCheck, StoreError> {
        let mut check = self.inner.check().await?;
        let carried = self.inner.carried_identity().await;
        check.notes.push(match &carried {
            Ok(Some(id)) => format!("identity: {id} (carried by the store; this home's floors are kept under it)"),
            Ok(None) => "identity: none yet (the first write gives the store one; until then this home's floors are kept under its address)".to_string(),
            Err(e) => format!("identity: could not be read ({e})"),
        });
        check.identity = carried.ok().flatten().map(|id| id.to_string());
        *lock(&self.checked_identity) = check.identity.clone();
        Ok(check)
    }

    fn last_check(&self) -> Option<StoreCheck> {
        let mut check = self.inner.last_check()?;
        check.identity = lock(&self.checked_identity).clone();
        Some(check)
    }

    fn calls_in_flight(&self) -> u64 {
        self.inner.calls_in_flight()
    }
}
