//! A home's history floors (`$ROW_FENCE_HOME/revisions.json`): per store and board, the
//! highest board revision and controller epoch this home has seen, the highest generation
//! it has seen of each row, the latest lease expiry it has found passed, and whether it
//! found the board behind what it had seen; and which store identity each address it
//! reached carried. [`crate::monotonic::Monotonic`] judges every answer against them
//! (ARCHITECTURE.md, "The generation never goes back", "The store's clock judges"); this
//! module keeps them.
//!
//! Floors are keyed by the identity the store carries ([`crate::identity`]); a store that
//! carries none yet (before its first write, or written by an older version) has its
//! floors kept under its address ([`crate::LeaseStore::address`]) until one is found there,
//! which then adopts them. `addresses` remembers which identity each address carried: a
//! store at a known address that carries another identity, or none, is not the store this
//! home knew there.
//!
//! Every process of a home shares the file: the CLI writes what it commits at once, the
//! daemon writes what its asks saw every second, and a lease expiry found passed (or a
//! board found behind) is written before the answer that found it leaves. Writers merge by
//! maximum under a lock on `<file>.lock` and replace the file atomically (a new inode), so
//! none loses another's. Readers take the floors from the file again whenever it changed
//! ([`Marks::refresh`], one `stat` when it did not), so a running daemon judges with a
//! revision the CLI recorded a moment ago, without a restart.
//!
//! The expiry floor goes down only when an operator accepts the clock as it is
//! (`row-fence store accept-clock`, `accept-regression`): the accept raises the board's
//! clock era, and a higher era's floor replaces a lower one's in every merge. A board found
//! behind stays so until an operator accepts the regression, which raises its accept count
//! the same way.
//!
//! Bounded: each board keeps the [`MAX_ROWS`] rows with the highest generations seen. A row
//! floor matters only for a restore that lost that row's newer generation, so the rows
//! dropped first are the oldest grants: a restore that went back no further than the
//! lowest generation kept is covered whole.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The marks file under `$ROW_FENCE_HOME`.
pub const MARKS_FILE: &str = "revisions.json";

/// The rows a board keeps floors for: those with the highest generations seen (about
/// 25 bytes each in the file; a board of 10,000 rows keeps these).
pub const MAX_ROWS: usize = 1024;

/// The file's format version (the first had no version: store → board → floors).
const VERSION: u32 = 2;

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
    /// The revision floor this home held when it found the board behind it (0: never, or
    /// accepted since): from then on the board answers `store_regressed` here, however its
    /// revision gets back up, until an operator accepts the regression.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost: u64,
    /// How many times an operator accepted a regression of the board: a higher count's
    /// `lost` replaces a lower one's, so an accept clears it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub accepted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Mark {
    /// Raises `self` to at least `other`: revision and epoch by maximum, the expiry floor
    /// by (era, floor), the regression by (accepts, floor). True when anything rose.
    pub fn merge(&mut self, other: Mark) -> bool {
        let before = *self;
        self.revision = self.revision.max(other.revision);
        self.epoch = self.epoch.max(other.epoch);
        if (other.clock_era, other.expired_ms) > (self.clock_era, self.expired_ms) {
            self.clock_era = other.clock_era;
            self.expired_ms = other.expired_ms;
        }
        if (other.accepted, other.lost) > (self.accepted, self.lost) {
            self.accepted = other.accepted;
            self.lost = other.lost;
        }
        *self != before
    }
}

/// A board's floors: its [`Mark`] and the highest generation seen of each row. Stored as
/// one flat object ([`FloorsText`]): serde's `flatten` would buffer every board it reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "FloorsText", into = "FloorsText")]
pub struct Floors {
    /// The board's scalars.
    pub mark: Mark,
    /// Row → the highest generation of its lease this home has seen ([`MAX_ROWS`] kept).
    pub rows: BTreeMap<String, u64>,
    /// Row → the lane this home saw holding that generation ([`TWICE`] when it saw two):
    /// a generation is one grant to one lane, so the row's lease at that generation held
    /// by another lane is the same generation handed out again (a restore, then a grant
    /// from a home that never saw it), never a lease to judge by.
    pub holders: BTreeMap<String, String>,
}

/// The holder kept for a row whose floor generation this home saw held by two lanes (no
/// lane is named so): every lease of the row at that generation is a generation handed out
/// twice.
pub const TWICE: &str = "";

/// [`Floors`] as the file holds them: the mark's fields and `rows` side by side.
#[derive(Clone, Serialize, Deserialize)]
struct FloorsText {
    revision: u64,
    #[serde(default)]
    epoch: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    expired_ms: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    clock_era: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    lost: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    accepted: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    rows: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    holders: BTreeMap<String, String>,
}

impl From<FloorsText> for Floors {
    fn from(t: FloorsText) -> Floors {
        Floors {
            mark: Mark {
                revision: t.revision,
                epoch: t.epoch,
                expired_ms: t.expired_ms,
                clock_era: t.clock_era,
                lost: t.lost,
                accepted: t.accepted,
            },
            rows: t.rows,
            holders: t.holders,
        }
    }
}

impl From<Floors> for FloorsText {
    fn from(f: Floors) -> FloorsText {
        FloorsText {
            revision: f.mark.revision,
            epoch: f.mark.epoch,
            expired_ms: f.mark.expired_ms,
            clock_era: f.mark.clock_era,
            lost: f.mark.lost,
            accepted: f.mark.accepted,
            rows: f.rows,
            holders: f.holders,
        }
    }
}

impl Floors {
    /// Raises `self` to at least `other`. True when anything rose.
    fn merge(&mut self, other: &Floors) -> bool {
        let mut rose = self.mark.merge(other.mark);
        for (row, generation) in &other.rows {
            rose |= self.observe_row(row, *generation);
            if let Some(holder) = other.holders.get(row) {
                rose |= self.observe_holder(row, *generation, holder);
            }
        }
        self.cap();
        rose
    }

    /// Raises `row`'s floor to `generation` (a new generation forgets the old one's
    /// holder). True when it rose.
    fn observe_row(&mut self, row: &str, generation: u64) -> bool {
        match self.rows.get_mut(row) {
            Some(seen) if *seen >= generation => false,
            Some(seen) => {
                *seen = generation;
                self.holders.remove(row);
                true
            }
            None => {
                self.rows.insert(row.to_string(), generation);
                self.holders.remove(row);
                true
            }
        }
    }

    /// Records that `holder` held `row` at `generation`, when that is the row's floor
    /// (call [`Floors::observe_row`] first): a second lane seen at it makes it [`TWICE`].
    /// True when anything changed.
    fn observe_holder(&mut self, row: &str, generation: u64, holder: &str) -> bool {
        if self.rows.get(row) != Some(&generation) {
            return false;
        }
        match self.holders.get_mut(row) {
            Some(held) if held == holder || held == TWICE => false,
            Some(held) => {
                *held = TWICE.to_string();
                true
            }
            None => {
                self.holders.insert(row.to_string(), holder.to_string());
                true
            }
        }
    }

    /// The lane this home saw holding `row` at `generation` ([`TWICE`]: two lanes), if
    /// that is the row's floor and a holder was seen.
    pub fn holder(&self, row: &str, generation: u64) -> Option<&str> {
        if self.rows.get(row) != Some(&generation) {
            return None;
        }
        self.holders.get(row).map(String::as_str)
    }

    /// Keeps the [`MAX_ROWS`] highest generations once a quarter more have gathered (a
    /// trim per insert would sort on every observation).
    fn cap(&mut self) {
        if self.rows.len() <= MAX_ROWS + MAX_ROWS / 4 {
            return;
        }
        let mut generations: Vec<u64> = self.rows.values().copied().collect();
        let cut = generations.len() - MAX_ROWS;
        let (_, threshold, _) = generations.select_nth_unstable(cut);
        let threshold = *threshold;
        // Generations are unique per board, so exactly MAX_ROWS are at or above it.
        self.rows.retain(|_, g| *g >= threshold);
        let rows = &self.rows;
        self.holders.retain(|row, _| rows.contains_key(row));
    }
}

/// Which identity an address carried when this home last reached a store there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// The identity (`id:…`).
    pub id: String,
    /// How many times an operator accepted another identity here: a higher count wins a
    /// merge, so an accept replaces what every process of the home knew.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub accepted: u64,
}

/// Store key (an identity, or an address with none yet) → board → floors.
type Stores = BTreeMap<String, BTreeMap<String, Floors>>;

/// The same, the boards' scalars only.
type Marked = BTreeMap<String, BTreeMap<String, Mark>>;

/// Merges the scalars of `from` into `into` by maximum.
fn merge_marks(into: &mut Marked, from: &Stores) {
    for (store, boards) in from {
        let held = into.entry(store.clone()).or_default();
        for (board, floors) in boards {
            held.entry(board.clone()).or_default().merge(floors.mark);
        }
    }
}

/// The file as written: versioned, with the bindings beside the floors.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarksFile {
    version: u32,
    #[serde(default)]
    stores: Stores,
    #[serde(default)]
    addresses: BTreeMap<String, Binding>,
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

/// Everything a process knows of the floors.
#[derive(Debug, Default)]
struct State {
    stores: Stores,
    addresses: BTreeMap<String, Binding>,
    /// Store keys adopted into an identity (key → identity): their floors are merged into
    /// it and they are dropped from the file at the next flush.
    retired: BTreeMap<String, String>,
    /// Boards of the file read last that changed since they were merged, as the file
    /// holds them: parsed and merged when a call first needs them ([`State::settle`]), so
    /// re-reading a file of many boards costs an ask one board's rows, not all of them.
    unread: BTreeMap<(String, String), Box<RawValue>>,
    /// Each board as the file held it when it was last merged: an unchanged one is not
    /// parsed again.
    merged: BTreeMap<(String, String), Box<RawValue>>,
    /// Why a board of the file could not be read, if one could not.
    unreadable: Option<String>,
}

impl State {
    /// Merges the file's copy of `board` of `store` if it changed since it was merged.
    fn settle(&mut self, store: &str, board: &str) {
        let key = (store.to_string(), board.to_string());
        let Some(raw) = self.unread.remove(&key) else {
            return;
        };
        match serde_json::from_str::<Floors>(raw.get()) {
            Ok(floors) => {
                board_mut(&mut self.stores, store, board).merge(&floors);
                self.merged.insert(key, raw);
            }
            Err(e) => {
                self.unreadable = Some(format!("board {board}'s floors are not floors: {e}"));
            }
        }
    }

    /// Settles every board of `store`.
    fn settle_store(&mut self, store: &str) {
        let boards: Vec<String> = self
            .unread
            .keys()
            .filter(|(s, _)| s == store)
            .map(|(_, b)| b.clone())
            .collect();
        for board in boards {
            self.settle(store, &board);
        }
    }

    /// The scalars the file held of `board` when it was last read (0s: none).
    fn file_mark(&self, store: &str, board: &str) -> Mark {
        self.merged
            .get(&(store.to_string(), board.to_string()))
            .and_then(|raw| serde_json::from_str::<Mark>(raw.get()).ok())
            .unwrap_or_default()
    }
}

/// An address this home knew to carry another identity than the store there carries now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The address.
    pub address: String,
    /// The identity this home knew there.
    pub known: String,
}

/// The floors of every store a home reached, kept in a file shared by every process of it.
#[derive(Debug)]
pub struct Marks {
    /// `$ROW_FENCE_HOME/revisions.json`; `None` keeps them in memory only.
    path: Option<PathBuf>,
    /// What this process knows.
    state: Mutex<State>,
    /// True when `state` holds something the file may not.
    dirty: AtomicBool,
    /// The version of the file last merged into `state`.
    loaded: Mutex<Option<Version>>,
    /// The boards' scalars as last written to the file by this process or read from it
    /// (rows are not needed to know what a restart would see of them).
    on_disk: Mutex<Marked>,
    /// One flush at a time, so a flush that waits knows what the one before wrote.
    flushing: Mutex<()>,
    /// Why the last flush failed, until one succeeds: floors this process holds that no
    /// restart would see, so nothing may be judged on them (fail closed).
    failed: Mutex<Option<String>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn board_of<'a>(stores: &'a Stores, store: &str, board: &str) -> Option<&'a Floors> {
    stores.get(store)?.get(board)
}

fn board_mut<'a>(stores: &'a mut Stores, store: &str, board: &str) -> &'a mut Floors {
    stores
        .entry(store.to_string())
        .or_default()
        .entry(board.to_string())
        .or_default()
}

/// Merges `from` into `into` by maximum; true when anything rose.
fn merge_stores(into: &mut Stores, from: &Stores) -> bool {
    let mut rose = false;
    for (store, boards) in from {
        for (board, floors) in boards {
            rose |= board_mut(into, store, board).merge(floors);
        }
    }
    rose
}

/// Merges `from`'s bindings into `into`: a higher accept count wins; between equals, the
/// one `into` holds stays (a process that then finds the store carrying another identity
/// answers `store_regressed`, never a fresh start).
fn merge_bindings(into: &mut BTreeMap<String, Binding>, from: &BTreeMap<String, Binding>) -> bool {
    let mut changed = false;
    for (address, binding) in from {
        match into.get(address) {
            Some(held) if held.accepted >= binding.accepted => {}
            _ => {
                into.insert(address.clone(), binding.clone());
                changed = true;
            }
        }
    }
    changed
}

/// Moves each retired key's floors into the identity that adopted it.
fn adopt(stores: &mut Stores, retired: &BTreeMap<String, String>) {
    for (old, id) in retired {
        if old == id {
            continue;
        }
        if let Some(boards) = stores.remove(old) {
            let moved: Stores = [(id.clone(), boards)].into_iter().collect();
            merge_stores(stores, &moved);
        }
    }
}

impl Marks {
    /// The marks kept in `path` (loaded now; a missing file starts empty, one that cannot
    /// be read makes every judgement fail until it can: [`Marks::unwritten`]).
    pub fn load(path: Option<PathBuf>) -> Marks {
        let marks = Marks {
            path,
            failed: Mutex::new(None),
            state: Mutex::new(State::default()),
            dirty: AtomicBool::new(false),
            loaded: Mutex::new(None),
            on_disk: Mutex::new(Marked::new()),
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
        let file = match read_lazy(path) {
            Ok(file) => file,
            Err(e) => return self.cannot_read(path, e),
        };
        {
            let mut state = lock(&self.state);
            state.unreadable = None;
            merge_bindings(&mut state.addresses, &file.addresses);
            for (store, boards) in file.stores {
                for (board, raw) in boards {
                    let key = (store.clone(), board);
                    if state.merged.get(&key).is_some_and(|m| m.get() == raw.get()) {
                        state.unread.remove(&key);
                    } else {
                        state.unread.insert(key, raw);
                    }
                }
            }
            let retired: Vec<String> = state.retired.keys().cloned().collect();
            let mut adopted = false;
            for old in &retired {
                if state.unread.keys().any(|(s, _)| s == old) {
                    state.settle_store(old);
                    adopted = true;
                }
            }
            if adopted {
                let retired = state.retired.clone();
                adopt(&mut state.stores, &retired);
                self.dirty.store(true, Ordering::Relaxed);
            }
        }
        *lock(&self.loaded) = Some(version);
    }

    /// A file that exists but cannot be read (or parsed) holds floors this process does
    /// not know: nothing is judged until it can be ([`Marks::unwritten`]).
    fn cannot_read(&self, path: &Path, e: std::io::Error) {
        *lock(&self.failed) = Some(format!("{} could not be read: {e}", path.display()));
    }

    /// The floors known for `board` of `store` now (call [`Marks::refresh`] first to
    /// include what other processes recorded).
    pub fn get(&self, store: &str, board: &str) -> Mark {
        let mut state = lock(&self.state);
        state.settle(store, board);
        board_of(&state.stores, store, board)
            .map(|f| f.mark)
            .unwrap_or_default()
    }

    /// All of `board`'s floors, rows included (a copy: taken before a read whose rows are
    /// judged against it).
    pub fn floors(&self, store: &str, board: &str) -> Floors {
        let mut state = lock(&self.state);
        state.settle(store, board);
        board_of(&state.stores, store, board)
            .cloned()
            .unwrap_or_default()
    }

    /// The highest generation seen of `row` of `board` (0: none kept).
    pub fn row(&self, store: &str, board: &str, row: &str) -> u64 {
        let mut state = lock(&self.state);
        state.settle(store, board);
        board_of(&state.stores, store, board)
            .and_then(|f| f.rows.get(row).copied())
            .unwrap_or(0)
    }

    /// `row`'s floor: the highest generation seen of it (0: none kept) and the lane seen
    /// holding that generation, if one was ([`TWICE`]: two).
    pub fn row_seen(&self, store: &str, board: &str, row: &str) -> (u64, Option<String>) {
        let mut state = lock(&self.state);
        state.settle(store, board);
        board_of(&state.stores, store, board).map_or((0, None), |f| {
            let generation = f.rows.get(row).copied().unwrap_or(0);
            (generation, f.holder(row, generation).map(str::to_string))
        })
    }

    /// Raises `board`'s floors to at least `mark` (in memory; [`Marks::flush`] writes
    /// them). True when anything rose.
    pub fn observe(&self, store: &str, board: &str, mark: Mark) -> bool {
        let mut state = lock(&self.state);
        state.settle(store, board);
        let raised = board_mut(&mut state.stores, store, board).mark.merge(mark);
        if raised {
            self.dirty.store(true, Ordering::Relaxed);
        }
        raised
    }

    /// Raises each row's floor to the generation given (in memory). True when any rose.
    pub fn observe_rows<'a>(
        &self,
        store: &str,
        board: &str,
        rows: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> bool {
        let mut state = lock(&self.state);
        state.settle(store, board);
        let floors = board_mut(&mut state.stores, store, board);
        let mut raised = false;
        for (row, generation) in rows {
            raised |= floors.observe_row(row, generation);
        }
        floors.cap();
        if raised {
            self.dirty.store(true, Ordering::Relaxed);
        }
        raised
    }

    /// Raises each row's floor to the generation given and records the lane seen holding
    /// it (in memory). True when anything changed.
    pub fn observe_leases<'a>(
        &self,
        store: &str,
        board: &str,
        leases: impl IntoIterator<Item = (&'a str, u64, &'a str)>,
    ) -> bool {
        let mut state = lock(&self.state);
        state.settle(store, board);
        let floors = board_mut(&mut state.stores, store, board);
        let mut changed = false;
        for (row, generation, holder) in leases {
            changed |= floors.observe_row(row, generation);
            changed |= floors.observe_holder(row, generation, holder);
        }
        floors.cap();
        if changed {
            self.dirty.store(true, Ordering::Relaxed);
        }
        changed
    }

    /// The addresses of `addresses` this home knows an identity at, with it.
    pub fn bound(&self, addresses: &[String]) -> Vec<(String, String)> {
        let state = lock(&self.state);
        addresses
            .iter()
            .filter_map(|a| state.addresses.get(a).map(|b| (a.clone(), b.id.clone())))
            .collect()
    }

    /// Records that a store reached at `addresses` carries identity `id`, and moves the
    /// floors kept under `adopt` (its addresses and spellings, before it carried one) into
    /// `id`'s. An address this home knew to carry another identity is a [`Conflict`] and
    /// changes nothing, unless `accept` (an operator's accept): then `id` replaces it, and
    /// the floors of the identity it replaces move into `id`'s too (the new store must
    /// not hand out a generation the old one did).
    pub fn bind(
        &self,
        addresses: &[String],
        id: &str,
        adopt_keys: &[String],
        accept: bool,
    ) -> Result<(), Conflict> {
        let mut state = lock(&self.state);
        let mut replaced = BTreeSet::new();
        for address in addresses {
            if let Some(held) = state.addresses.get(address)
                && held.id != id
            {
                if !accept {
                    return Err(Conflict {
                        address: address.clone(),
                        known: held.id.clone(),
                    });
                }
                replaced.insert(held.id.clone());
            }
        }
        let accepted = if accept {
            state
                .addresses
                .values()
                .map(|b| b.accepted)
                .max()
                .unwrap_or(0)
                + 1
        } else {
            0
        };
        // An accept replaces the identity it replaces wherever this home knew it: the other
        // members or sentinels of the store, or its other spellings, that a URL naming
        // fewer of them did not reach (each would otherwise still expect the old one, and
        // answer `store_regressed` for the store just accepted).
        let mut addresses = addresses.to_vec();
        if accept {
            addresses.extend(
                state
                    .addresses
                    .iter()
                    .filter(|(_, held)| replaced.contains(&held.id))
                    .map(|(address, _)| address.clone()),
            );
            addresses.sort();
            addresses.dedup();
        }
        let mut changed = false;
        for address in &addresses {
            let binding = Binding {
                id: id.to_string(),
                accepted: state
                    .addresses
                    .get(address)
                    .map_or(accepted, |held| held.accepted.max(accepted)),
            };
            if state.addresses.get(address) != Some(&binding) {
                state.addresses.insert(address.clone(), binding);
                changed = true;
            }
        }
        for old in adopt_keys.iter().chain(&replaced) {
            state.settle_store(old);
            if old != id && !state.retired.contains_key(old) {
                state.retired.insert(old.clone(), id.to_string());
                changed = true;
            }
        }
        let retired = state.retired.clone();
        adopt(&mut state.stores, &retired);
        if changed {
            self.dirty.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// True when the file is known to hold `board`'s expiry floor and regression at least
    /// as high as `mark`'s.
    fn on_disk_holds(&self, store: &str, board: &str, mark: Mark) -> bool {
        let mut disk = lock(&self.on_disk)
            .get(store)
            .and_then(|boards| boards.get(board))
            .copied()
            .unwrap_or_default();
        disk.merge(lock(&self.state).file_mark(store, board));
        (disk.clock_era, disk.expired_ms) >= (mark.clock_era, mark.expired_ms)
            && (disk.accepted, disk.lost) >= (mark.accepted, mark.lost)
    }

    /// Writes `board`'s expiry floor and regression to the file unless they are there
    /// already: a lease found expired must stay expired, and a board found behind stay
    /// behind, for a restarted daemon and a cold `check` too, so the answer that found it
    /// waits for this.
    pub fn persist(&self, store: &str, board: &str) -> std::io::Result<()> {
        let want = self.get(store, board);
        if self.path.is_none() || self.on_disk_holds(store, board, want) {
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
        let (stores, addresses, retired) = {
            let state = lock(&self.state);
            (
                state.stores.clone(),
                state.addresses.clone(),
                state.retired.clone(),
            )
        };
        match merge_into(path, &stores, &addresses, &retired) {
            Ok(merged) => {
                let mut on_disk = Marked::new();
                merge_marks(&mut on_disk, &merged);
                *lock(&self.on_disk) = on_disk;
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
        if let Some(why) = lock(&self.state).unreadable.clone() {
            return Some(why);
        }
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
/// error: judged or merged as empty, it would drop every floor in it. A file of the first
/// format (store → board → floors, no version) reads as floors kept under addresses.
fn read_file(path: &Path) -> std::io::Result<MarksFile> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(MarksFile::default()),
        Err(e) => return Err(e),
    };
    let not_floors = |e: serde_json::Error| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not JSON floors: {e}"),
        )
    };
    match serde_json::from_slice::<MarksFile>(&bytes) {
        Ok(file) => known_version(file.version).map(|()| file),
        Err(e) => {
            match serde_json::from_slice::<BTreeMap<String, BTreeMap<String, Mark>>>(&bytes) {
                Ok(first) => Ok(MarksFile {
                    version: VERSION,
                    stores: first
                        .into_iter()
                        .map(|(store, boards)| {
                            let boards = boards
                                .into_iter()
                                .map(|(board, mark)| {
                                    let floors = Floors {
                                        mark,
                                        ..Floors::default()
                                    };
                                    (board, floors)
                                })
                                .collect();
                            (store, boards)
                        })
                        .collect(),
                    addresses: BTreeMap::new(),
                }),
                Err(_) => Err(not_floors(e)),
            }
        }
    }
}

/// Refuses a file of a format newer than this version writes: its fields may mean what
/// this version cannot judge by, and merged into the format this version writes they would
/// be lost, so it judges nothing (fail closed) until the newer version runs again.
fn known_version(version: u32) -> std::io::Result<()> {
    if version > VERSION {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "written by a newer row-fence (floors format {version}; this one reads up to {VERSION}): run that version, or restore the file it replaced"
            ),
        ));
    }
    Ok(())
}

/// The file as a refresh reads it: each board's floors left as written, parsed when a call
/// needs them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LazyFile {
    #[allow(dead_code)]
    version: u32,
    #[serde(default)]
    stores: BTreeMap<String, BTreeMap<String, Box<RawValue>>>,
    #[serde(default)]
    addresses: BTreeMap<String, Binding>,
}

/// Reads the file as [`LazyFile`] (one of the first format: its boards under addresses).
fn read_lazy(path: &Path) -> std::io::Result<LazyFile> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(LazyFile {
                version: VERSION,
                stores: BTreeMap::new(),
                addresses: BTreeMap::new(),
            });
        }
        Err(e) => return Err(e),
    };
    match serde_json::from_slice::<LazyFile>(&bytes) {
        Ok(file) => known_version(file.version).map(|()| file),
        Err(e) => {
            serde_json::from_slice::<BTreeMap<String, BTreeMap<String, Box<RawValue>>>>(&bytes)
                .map(|stores| LazyFile {
                    version: 1,
                    stores,
                    addresses: BTreeMap::new(),
                })
                .map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("not JSON floors: {e}"),
                    )
                })
        }
    }
}

/// Merges what a process knows into the file, under the file's lock; returns the floors
/// the file holds now.
fn merge_into(
    path: &Path,
    stores: &Stores,
    addresses: &BTreeMap<String, Binding>,
    retired: &BTreeMap<String, String>,
) -> std::io::Result<Stores> {
    // The home is made when a process starts (the daemon's startup, a writer's
    // `Monotonic::new`), never here: a daemon whose home was removed under it must not
    // bring the directory back on its last flush.
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
    let mut file = match read_file(path) {
        Ok(file) => file,
        Err(e) => {
            let _ = lock.unlock();
            return Err(e);
        }
    };
    file.version = VERSION;
    merge_stores(&mut file.stores, stores);
    merge_bindings(&mut file.addresses, addresses);
    adopt(&mut file.stores, retired);
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    let written = crate::atomic_file::write(path, &bytes, 0o600, true);
    let _ = lock.unlock();
    written.map(|()| file.stores)
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
            expired_ms,
            clock_era,
            ..Mark::default()
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
        // A regression found stays until an accept, which a later finding replaces.
        let lost = Mark {
            lost: 5,
            ..Mark::default()
        };
        assert!(m.merge(lost) && m.lost == 5);
        let accepted = Mark {
            accepted: 1,
            ..Mark::default()
        };
        assert!(m.merge(accepted) && m.lost == 0);
        assert!(!m.merge(lost), "an older finding does not come back");
    }

    #[test]
    fn a_floor_another_process_recorded_is_seen_without_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MARKS_FILE);
        let daemon = Marks::load(Some(path.clone()));
        let cli = Marks::load(Some(path.clone()));
        cli.observe("s", "b", mark(7, 0, 0));
        cli.observe_rows("s", "b", [("r", 7)]);
        cli.flush().unwrap();
        assert_eq!(daemon.get("s", "b").revision, 0, "not read yet");
        daemon.refresh();
        assert_eq!(daemon.get("s", "b").revision, 7);
        assert_eq!(daemon.row("s", "b", "r"), 7);
        // The accept of another process lowers this one's expiry floor too.
        daemon.observe("s", "b", mark(7, 50_000, 0));
        daemon.persist("s", "b").unwrap();
        cli.refresh();
        assert_eq!(cli.get("s", "b").expired_ms, 50_000);
        cli.observe("s", "b", mark(7, 10_000, 1));
        cli.flush().unwrap();
        daemon.refresh();
        assert_eq!(daemon.get("s", "b"), mark(7, 10_000, 1));
        daemon.flush().unwrap();
        assert_eq!(
            read_file(&path).unwrap().stores["s"]["b"].mark,
            mark(7, 10_000, 1)
        );
    }

    /// Re-reading the file parses a board when a call needs it, and only if it changed
    /// since it was merged; a board that is not floors fails every judgement.
    #[test]
    fn a_board_is_parsed_when_needed_and_a_broken_one_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MARKS_FILE);
        let writer = Marks::load(Some(path.clone()));
        writer.observe_rows("s", "a", [("r", 3)]);
        writer.observe_rows("s", "b", [("r", 5)]);
        writer.flush().unwrap();
        let reader = Marks::load(Some(path.clone()));
        assert_eq!(lock(&reader.state).unread.len(), 2, "nothing parsed yet");
        assert_eq!(reader.row("s", "b", "r"), 5);
        assert_eq!(lock(&reader.state).unread.len(), 1, "only board b");
        writer.observe_rows("s", "a", [("r", 4)]);
        writer.flush().unwrap();
        reader.refresh();
        assert_eq!(reader.row("s", "a", "r"), 4);
        assert!(
            lock(&reader.state).unread.is_empty(),
            "b unchanged: not again"
        );
        std::fs::write(
            &path,
            r#"{"version":2,"stores":{"s":{"a":{"rows":7}}},"addresses":{}}"#,
        )
        .unwrap();
        reader.refresh();
        let _ = reader.get("s", "a");
        assert!(
            reader.unwritten().is_some(),
            "a board that is not floors judges nothing"
        );
    }

    /// A file a newer version wrote, or one cut short, judges nothing and is never
    /// replaced by a fresh one: every read fails, and so does every write.
    #[test]
    fn a_future_or_truncated_file_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MARKS_FILE);
        let writer = Marks::load(Some(path.clone()));
        writer.observe("id:s", "b", mark(9, 0, 0));
        writer.flush().unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        let future = written.replace("\"version\":2", "\"version\":3");
        assert_ne!(future, written);
        for broken in [future.as_str(), &written[..written.len() / 2], ""] {
            std::fs::write(&path, broken).unwrap();
            let marks = Marks::load(Some(path.clone()));
            assert!(marks.unwritten().is_some(), "{broken:?} was judged by");
            marks.observe("id:s", "b", mark(10, 0, 0));
            assert!(marks.flush().is_err(), "{broken:?} was written over");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
        }
    }

    /// A generation is one lane's: a second lane seen at a row's floor generation, by this
    /// process or merged from another's, marks it handed out twice; a newer generation
    /// starts over.
    #[test]
    fn a_second_holder_of_one_generation_is_kept_as_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MARKS_FILE);
        let a = Marks::load(Some(path.clone()));
        let b = Marks::load(Some(path.clone()));
        a.observe_leases("s", "b", [("r", 2, "lane-b")]);
        assert_eq!(a.floors("s", "b").holder("r", 2), Some("lane-b"));
        assert_eq!(a.floors("s", "b").holder("r", 1), None);
        a.flush().unwrap();
        b.observe_leases("s", "b", [("r", 2, "lane-c")]);
        b.flush().unwrap();
        a.refresh();
        assert_eq!(a.floors("s", "b").holder("r", 2), Some(TWICE));
        a.observe_leases("s", "b", [("r", 2, "lane-b")]);
        assert_eq!(a.floors("s", "b").holder("r", 2), Some(TWICE), "stays");
        a.observe_leases("s", "b", [("r", 3, "lane-d")]);
        assert_eq!(a.floors("s", "b").holder("r", 3), Some("lane-d"));
        assert_eq!(read_file(&path).unwrap().stores["s"]["b"].holders["r"], "");
    }

    #[test]
    fn a_board_of_ten_thousand_rows_keeps_its_highest_generations() {
        let marks = Marks::load(None);
        let names: Vec<String> = (0..10_000).map(|i| format!("row-{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            marks.observe_rows("s", "b", [(name.as_str(), i as u64 + 1)]);
        }
        let kept = lock(&marks.state).stores["s"]["b"].rows.len();
        assert!(kept <= MAX_ROWS + MAX_ROWS / 4, "{kept}");
        assert_eq!(
            marks.row("s", "b", "row-9999"),
            10_000,
            "the newest is kept"
        );
        assert_eq!(
            marks.row("s", "b", "row-0"),
            0,
            "the oldest grant is dropped first"
        );
        // A row seen again at a newer generation moves up.
        marks.observe_rows("s", "b", [("row-0", 20_000)]);
        assert_eq!(marks.row("s", "b", "row-0"), 20_000);
    }

    #[test]
    fn an_address_keeps_its_identity_and_an_accept_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MARKS_FILE);
        // Floors of the first format, kept under the address, are adopted by the first
        // identity found there.
        std::fs::write(&path, r#"{"redis host=a":{"b":{"revision":4,"epoch":1}}}"#).unwrap();
        let marks = Marks::load(Some(path.clone()));
        let addresses = ["redis host=a".to_string()];
        assert_eq!(marks.bound(&addresses), vec![]);
        marks.bind(&addresses, "id:x", &addresses, false).unwrap();
        assert_eq!(marks.get("id:x", "b").revision, 4);
        marks.flush().unwrap();
        let file = read_file(&path).unwrap();
        assert!(!file.stores.contains_key("redis host=a"), "{file:?}");
        assert_eq!(file.addresses["redis host=a"].id, "id:x");
        // Another process finds another identity there: a conflict, nothing changed.
        let other = Marks::load(Some(path.clone()));
        let conflict = other.bind(&addresses, "id:y", &[], false).unwrap_err();
        assert_eq!(conflict.known, "id:x");
        // An operator's accept replaces it, and the floors carry over.
        other.bind(&addresses, "id:y", &[], true).unwrap();
        assert_eq!(other.get("id:y", "b").revision, 4);
        other.flush().unwrap();
        marks.refresh();
        assert_eq!(
            marks.bound(&addresses),
            vec![(addresses[0].clone(), "id:y".into())]
        );
        // Made through a URL naming one of a store's addresses, it replaces the old identity
        // at the others this home knew too: a URL naming them all finds nothing else.
        let all = ["m1".to_string(), "m2".to_string(), "m3".to_string()];
        other.bind(&all, "id:y", &[], false).unwrap();
        other.bind(&all[..1], "id:z", &[], true).unwrap();
        assert_eq!(other.bind(&all, "id:z", &[], false), Ok(()));
        assert_eq!(other.get("id:z", "b").revision, 4);
    }
}
