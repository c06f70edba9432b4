//! `row-fence-store`: the lease store (ARCHITECTURE.md, "The lease store"). One port
//! ([`LeaseStore`]), several adapters, and the domain every writer goes through: the fenced
//! write engine, row leases and the controller lease. Every write is a fenced batch; every
//! ask is judged on the store side with the store's clock. Typed errors only; no command
//! line, templates or log subscriber here (those belong to the resident and the CLI).
//!
//! # Layout
//!
//! The port and its adapters:
//! - this file: the port ([`LeaseStore`]), records, batches, row and controller leases,
//!   [`StoreError`], [`open`].
//! - [`redis`]: Redis: per-record keys (the `records` layout, Lua scripts) and, for boards
//!   not yet migrated, the whole document (the `document` layout); the records scripts
//!   guard the layout atomically and hand a document board to its document.
//! - [`etcd`]: etcd (`etcd://…`): per-record keys and a per-board head key, every batch
//!   one transaction fenced on the head's `mod_revision`, quorum writes and linearizable
//!   reads.
//! - [`file`], [`file_log`], [`file_cache`], [`file_identity`]: the embedded default, one
//!   JSON document per board under `$ROW_FENCE_HOME/store/`, written atomically under an
//!   exclusive lock, its fence log, the parsed documents readers keep while a file is
//!   unchanged, and the identity file beside the boards.
//! - [`document`]: the whole-document model both document adapters apply batches to.
//! - [`spec`]: the store URL (`file`, `redis://…`, …) and its display without a password.
//! - [`monotonic`]: any adapter wrapped so it never answers from an older history than one
//!   already seen (`store_regressed`), nor judges with a clock below a lease expiry already
//!   found passed (`clock_regressed`), and the operator's ways out of both.
//! - [`marks`]: those floors, kept per home in `revisions.json` and shared by its processes.
//! - [`identity`]: the random identity a store carries, which keys those floors.
//!
//! The domain on top of the port:
//! - [`fencing`]: the change → fenced batch engine every write goes through.
//! - [`lease`]: row leases (acquire, renew, release, list) as fenced writes.
//! - [`controller`]: the board controller's lease and epoch.
//! - [`judge`]: the one rule that judges a row lease, and the sentences that explain it.
//! - [`copy`]: boards copied between any two stores, revisions carried.
//! - [`meta`]: the board's scalars' keys and its [`Layout`], spelled once.
//! - [`expected`]: what a write expects of its record's revision ([`Expected`]).
//!
//! Plumbing the adapters share with the resident and the CLI:
//! - [`atomic_file`]: replacing a file atomically (temp file, fsync, rename).
//! - [`tls`]: the crypto provider `rediss://` stores need, installed once.

pub mod atomic_file;
pub mod controller;
pub mod copy;
pub mod document;
pub mod etcd;
pub mod expected;
pub mod fencing;
pub mod file;
pub mod file_cache;
pub mod file_identity;
pub mod file_log;
pub mod file_mount;
pub mod identity;
pub mod judge;
pub mod lease;
pub mod marks;
pub mod meta;
pub mod monotonic;
pub mod redis;
pub mod spec;
pub mod tls;

use async_trait::async_trait;
use row_fence_contract::Reason;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub use expected::Expected;
pub use judge::judge;
pub use meta::Layout;
pub use row_fence_contract::status::StoreCheck;
pub use spec::StoreSpec;

/// `expected` of a [`RecordWrite`] that skips the revision check ([`Expected::Blind`] on
/// the wire).
pub const BLIND: i64 = Expected::Blind.wire();

/// The fence log keeps exactly this many newest entries (`LOG_CAP`, as the source).
pub const LOG_CAP: usize = 1000;

/// The asks stream keeps this many newest entries.
pub const ASKS_CAP: usize = 1000;

/// The section holding row leases, one record per row.
pub const CLAIMS: &str = "claims";

/// The section holding the board's scalars ([`meta::LEASE`], [`meta::EPOCH`], [`meta::LAYOUT`]).
pub const META: &str = "meta";

/// One fence log entry: one per committed batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// The revision the batch committed at.
    pub revision: u64,
    /// The lease fence's owner, empty for an unfenced batch.
    pub owner: String,
    /// The number of writes in the batch.
    pub records: usize,
}

/// One record: its value and the board revision of the batch that last wrote it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The board revision of the batch that last wrote this record (≥ 1).
    #[serde(rename = "r")]
    pub revision: u64,
    /// The record's value, any JSON.
    #[serde(rename = "v")]
    pub value: serde_json::Value,
}

/// A section: key → record, sorted by key.
pub type Section = BTreeMap<String, Record>;

/// What a [`RecordWrite`] does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteKind {
    /// Writes `value` at the batch's revision.
    Put,
    /// Removes the record.
    Delete,
    /// Writes nothing; only its `expected` revision is compared.
    Check,
}

/// One write of a fenced batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordWrite {
    /// Put, delete or check.
    pub kind: WriteKind,
    /// The section (a hash per section on Redis).
    pub section: String,
    /// The record's key within its section.
    pub key: String,
    /// The revision the writer read the record at: 0 for absent, [`BLIND`] (-1) to skip
    /// the check ([`Expected`] on the wire; read it with [`RecordWrite::expectation`]).
    pub expected: i64,
    /// The value to put (ignored for delete and check).
    #[serde(default)]
    pub value: serde_json::Value,
}

/// Makes a batch conditional on the board's controller lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseFence {
    /// The controller the writer believes it is; empty compares only epoch and expiry.
    pub owner: String,
    /// The epoch the writer holds.
    pub epoch: u64,
    /// The writer's now, in ms since the Unix epoch: a lease expiring at or before it is
    /// stale.
    pub now_ms: u64,
}

/// A list of writes applied all or nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FencedBatch {
    /// The writes, applied in order after every check passed.
    pub writes: Vec<RecordWrite>,
    /// The controller lease fence, if any.
    pub lease: Option<LeaseFence>,
    /// When set, the board revision the writer read at: the batch is refused with
    /// `RevisionConflict{key: "revision"}` unless the board is still at it, so it commits
    /// at exactly this + 1. A grant uses it to learn its generation before it commits.
    pub expected_revision: Option<u64>,
    /// When set, the batch commits at `max(board revision + 1, this)`: raising a board's
    /// revision past every generation ever handed out (`row-fence store
    /// accept-regression`, a migration that keeps the source's revision). On the file store
    /// such a batch also accepts this machine's clock as it is now (the board's highest
    /// time is reset), so a board once written by a clock far ahead can be recovered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_revision: Option<u64>,
}

/// The board controller's lease, record `meta/lease`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerLease {
    /// The controller holding the lease.
    pub owner: String,
    /// +1 on every takeover.
    pub epoch: u64,
    /// Expiry, ms since the Unix epoch on the store's clock.
    pub expires_at_ms: u64,
}

/// A row lease, record `claims/<row>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowLease {
    /// The lane holding the row.
    pub holder: String,
    /// The fencing token: the board revision the lease was granted at.
    pub generation: u64,
    /// Expiry, ms since the Unix epoch on the store's clock.
    pub expires_at_ms: u64,
    /// The board's tenant, if the grant named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The SHA-256 of the grant's lease token (ARCHITECTURE.md, "Lease token"), never the
    /// token. Absent for a lease granted before lease tokens: no ask matches it until the
    /// holder reissues it. Never printed (`show`, `records` and migrations leave it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_sha256: Option<String>,
}

/// A consistent read of some sections of a board, with the board revision and the
/// store's clock at the time of the read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// The board revision (0 for a board never written).
    pub revision: u64,
    /// The store's clock, ms since the Unix epoch.
    pub now_ms: u64,
    /// Each section asked for (empty when absent).
    pub sections: BTreeMap<String, Section>,
    /// True when every section in it is whole, even where a keyed read asked for some
    /// keys only: a store that holds the board as one document answers so (it read the
    /// document anyway), and a change on it then needs no second read.
    pub complete: bool,
}

impl Snapshot {
    /// A record of a section, if present.
    pub fn record(&self, section: &str, key: &str) -> Option<&Record> {
        self.sections.get(section)?.get(key)
    }
}

/// What a keyed read ([`LeaseStore::read_records`]) loads of one section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keys {
    /// Every record of the section (a change that iterates or counts it).
    Whole,
    /// Only these keys (absent ones are simply missing from the answer).
    Some(BTreeSet<String>),
}

impl Keys {
    /// True when a read of `self` answers for `key` (loaded, or known absent).
    pub fn covers(&self, key: &str) -> bool {
        match self {
            Keys::Whole => true,
            Keys::Some(keys) => keys.contains(key),
        }
    }

    /// The keys asked for, `None` for a whole section.
    pub fn keys(&self) -> Option<&BTreeSet<String>> {
        match self {
            Keys::Whole => None,
            Keys::Some(keys) => Some(keys),
        }
    }
}

/// What a keyed read asks for: per section, the whole section or some of its keys. A
/// one-record change on a board of 100,000 records reads a handful of keys, not the
/// section (bytes received per fenced change stay flat as boards grow: `scripts/bench`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadSet {
    /// Section name → what to load of it.
    pub sections: BTreeMap<String, Keys>,
}

impl ReadSet {
    /// Every named section whole (what [`LeaseStore::sections`] reads).
    pub fn whole(names: &[&str]) -> ReadSet {
        ReadSet {
            sections: names.iter().map(|n| (n.to_string(), Keys::Whole)).collect(),
        }
    }

    /// Adds a whole section.
    pub fn add_whole(&mut self, section: &str) {
        self.sections.insert(section.to_string(), Keys::Whole);
    }

    /// Adds one key of a section (nothing when the section is already read whole); a
    /// section named with no key yet is [`ReadSet::add_section`].
    pub fn add_key(&mut self, section: &str, key: &str) {
        if let Keys::Some(keys) = self.add_section(section) {
            keys.insert(key.to_string());
        }
    }

    /// Names a section (with no keys unless it had some) and returns what is read of it.
    pub fn add_section(&mut self, section: &str) -> &mut Keys {
        self.sections
            .entry(section.to_string())
            .or_insert_with(|| Keys::Some(BTreeSet::new()))
    }

    /// True when `section` is read whole.
    pub fn is_whole(&self, section: &str) -> bool {
        matches!(self.sections.get(section), Some(Keys::Whole))
    }
}

/// What an ask asks the store: does `lane` hold `row` of `board` at `generation`?
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AskCheck {
    /// The board.
    pub board: String,
    /// The row.
    pub row: String,
    /// The lane asking.
    pub lane: String,
    /// The generation in its descriptor.
    pub generation: u64,
    /// The lease token its descriptor carries (`None`: it carries none, refused
    /// `token_mismatch`).
    pub token: Option<row_fence_contract::LeaseToken>,
    /// The least time, in ms, the lease must have left to be ALLOWED (ARCHITECTURE.md,
    /// "Margin"); less is REFUSED `lease_expiring`. 0 only for renew and release.
    pub margin_ms: u64,
    /// The fenced action (for the asks stream).
    pub action: String,
    /// The caller's session (for the asks stream).
    pub session: String,
    /// The location fence's stamp, only when the fence is on: the asks stream entry then
    /// carries `location` and `epoch`, and the fence's verdict when it fenced the ask.
    pub location: Option<AskLocation>,
    /// True for the heartbeat's probe: judged like any ask, recorded nowhere (no asks
    /// stream entry on a board no lane uses).
    pub probe: bool,
}

/// What the location fence decided for an ask, recorded with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AskLocation {
    /// This daemon's location.
    pub location: String,
    /// The tenant's epoch in the held map; -1 when it has no single row.
    pub epoch: i64,
    /// The fence's reason when it fenced the ask.
    pub fenced: Option<Reason>,
}

/// The store's judgement of an ask, decided atomically with the store's clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judgement {
    /// `None` when allowed, else the refusal reason (`not_held`, `different_holder`,
    /// `stale_generation`, `lease_expired`).
    pub refusal: Option<Reason>,
    /// The lease as stored, when there is one.
    pub lease: Option<RowLease>,
    /// The store's clock when it judged, ms since the Unix epoch.
    pub now_ms: u64,
    /// The board revision when it judged (0 for a board never written): a descriptor
    /// generation above it means the store went back in time.
    pub revision: u64,
}

/// The check of a store that keeps every acknowledged write by construction (the file
/// store: fsync'd renames).
pub fn durable_check(role: &str) -> StoreCheck {
    StoreCheck {
        role: role.to_string(),
        durable: true,
        checked_at_ms: row_fence_contract::ledger::now_ms(),
        ..StoreCheck::default()
    }
}

/// `Err(NotDurable)` naming every problem, unless the store is durable (or opted out).
pub fn require_durable(check: &StoreCheck) -> Result<(), StoreError> {
    if check.durable {
        return Ok(());
    }
    Err(StoreError::NotDurable(format!(
        "{}; grants and controller writes are refused until it is fixed (or the store URL says ?durability=volatile for a throwaway store)",
        check.problems.join("; ")
    )))
}

/// What went wrong in a store call. Ask it which kind it is (as redis-rs errors answer
/// `is_timeout()`): a refusal of a write, a conflict to retry, or "could not find out",
/// which is always COULD NOT READ. Unless a variant says otherwise, nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The controller lease fence failed: no lease, another owner, another epoch, or
    /// expired at the fence's now. Nothing was written.
    #[error("the controller lease is stale: {0}")]
    StaleLease(String),
    /// A write's expected revision did not match (the first mismatching key, as
    /// `section/key`, or `revision` for the board revision). Nothing was written.
    #[error("revision conflict on {key}")]
    RevisionConflict {
        /// The first mismatching key.
        key: String,
    },
    /// The store could not be connected to: refused, reset, or no answer while
    /// connecting. Only connection failures; an error the store sent is [`StoreError::Failed`].
    #[error("the store is unreachable: {0}")]
    Unreachable(#[source] Detail),
    /// The store answered with an error (OOM, BUSY, NOPERM, WRONGTYPE, a script error,
    /// a missing password, ENOSPC or EIO on the file store…). Nothing was written.
    #[error("the store answered with an error: {0}")]
    Failed(#[source] Detail),
    /// A cluster slot is moving between nodes and the call kept meeting it (MOVED, ASK,
    /// TRYAGAIN) after its retries. Nothing was written.
    #[error("slot migrating, retry: {0}")]
    SlotMigrating(#[source] Detail),
    /// The server is not the primary: `ROLE` is not master (a writable replica too), or
    /// it refused because it has fewer replicas than it must write to (NOREPLICAS).
    /// Nothing was written.
    #[error("the store is not the primary: {0}")]
    NotPrimary(#[source] Detail),
    /// The store holds an older history than one already seen (a descriptor generation
    /// above the board revision, or a revision below the highest seen). Both numbers are
    /// in the sentence. Nothing was written.
    #[error("the store went back in time: {0}")]
    Regressed(String),
    /// The judging or writing clock is behind a time already used. Nothing was written.
    #[error("the clock went back: {0}")]
    ClockRegressed(String),
    /// The store's settings cannot keep an acknowledged write (eviction of every key, no
    /// fsync'd persistence and no replica to wait for…): grants and controller writes are
    /// refused. The sentence names the setting and the fix. Nothing was written.
    #[error("the store is not durable: {0}")]
    NotDurable(String),
    /// The batch committed on the primary at `revision` but fewer replicas than required
    /// acknowledged it within the wait: it is not acknowledged (a failover may lose it),
    /// and a grant in it must not be handed out.
    #[error(
        "the write reached {acked} of {wanted} replicas within {wait_ms} ms (committed on the primary at revision {revision}, which a failover may lose); not acknowledged"
    )]
    Unacknowledged {
        /// The revision it committed at on the primary.
        revision: u64,
        /// Replicas that acknowledged it.
        acked: u64,
        /// Replicas required (`min_replicas`).
        wanted: u64,
        /// How long it waited, in ms.
        wait_ms: u64,
    },
    /// The write may or may not have committed (the connection broke with it in flight; a
    /// file was renamed into place but its directory could not be synced). Not
    /// acknowledged; read the board to find out.
    #[error("the write may have committed but was not acknowledged: {0}")]
    Indeterminate(#[source] Detail),
    /// The batch committed at `revision`, at or below `seen`, a revision this home had
    /// already seen of the board: the store went back in time, and the batch's revision
    /// (a grant's generation) was handed out before. Not acknowledged: nothing in it may
    /// be handed out.
    #[error(
        "board {board} committed this write at revision {revision}, but this home had already seen revision {seen} of it: the store went back in time (a restore, a failover that lost writes), so that revision was handed out before; the write is not acknowledged and nothing was handed out; an operator runs `row-fence store accept-regression {board}`"
    )]
    RegressedCommit {
        /// The board.
        board: String,
        /// The revision the batch committed at.
        revision: u64,
        /// The highest revision this home had seen before.
        seen: u64,
    },
    /// This home's floors (`revisions.json`) could not be written: a full or read-only
    /// home. A write that committed says at which revision; an ask is not judged (a floor
    /// no restart would see protects nothing). The sentence names the file and the fix.
    #[error("{0}")]
    HomeUnwritable(#[source] Detail),
    /// A stored record or document is not what row-fence writes.
    #[error("the store holds malformed data: {0}")]
    Corrupt(#[source] Detail),
    /// The board was moved to another layout or store; this one no longer serves it.
    #[error("the board has moved: {0}")]
    Moved(Moved),
    /// The request itself is invalid (a bad board name, a bad batch).
    #[error("{0}")]
    Invalid(#[source] Detail),
}

/// What happened, as a sentence, and the error beneath it where there is one (an I/O
/// error, the Redis or etcd client's): [`StoreError`]'s variants for failures of the
/// store, its connection or the home carry one, so a caller can walk
/// [`std::error::Error::source`] down to the cause (`io::ErrorKind`, the client's kind)
/// instead of reading the sentence. Two are equal when their sentences are: the cause is
/// what was met, the sentence what it meant.
#[derive(Debug, Clone)]
pub struct Detail {
    /// The sentence, with the cause's own text in it where it helps.
    text: String,
    /// The error beneath, shared so the error stays `Clone`.
    source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Detail {
    /// `text`, caused by `source`.
    pub fn caused_by(
        text: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Detail {
        Detail {
            text: text.into(),
            source: Some(std::sync::Arc::new(source)),
        }
    }

    /// The sentence.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The same cause, told as `text` (a sentence that says more about it).
    pub fn reworded(self, text: impl Into<String>) -> Detail {
        Detail {
            text: text.into(),
            ..self
        }
    }
}

impl From<String> for Detail {
    fn from(text: String) -> Detail {
        Detail { text, source: None }
    }
}

impl From<&str> for Detail {
    fn from(text: &str) -> Detail {
        Detail::from(text.to_string())
    }
}

impl PartialEq for Detail {
    fn eq(&self, other: &Detail) -> bool {
        self.text == other.text
    }
}

impl Eq for Detail {}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Detail {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Where a board went ([`StoreError::Moved`]): a sentence naming it and what to do.
///
/// Inside the store it also carries the Redis store's routing signal, private to the
/// crate: the board is served by the other layout of the same store than the adapter
/// asked (a document still to be migrated, or one migrated to records), so the store
/// tries that layout and never returns the signal; an adapter used alone, unrouted,
/// reports it as what it is to its caller, a board it does not serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The sentence.
    detail: String,
    /// The board is in this store's other layout (the routing signal).
    other_layout: bool,
}

impl Moved {
    /// A board moved to another store: `detail` says where and what to do.
    pub fn away(detail: String) -> Moved {
        Moved {
            detail,
            other_layout: false,
        }
    }

    /// The routing signal: the board is served by this store's other layout.
    pub(crate) fn other_layout(detail: String) -> Moved {
        Moved {
            detail,
            other_layout: true,
        }
    }

    /// True for the routing signal (the store tries the other layout).
    pub(crate) fn is_other_layout(&self) -> bool {
        self.other_layout
    }

    /// The sentence.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for Moved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

impl StoreError {
    /// True when a write was refused by the lease fence (exit 3 for a CLI).
    pub fn is_stale_lease(&self) -> bool {
        matches!(self, StoreError::StaleLease(_))
    }

    /// True when a write met a concurrent write: read again and retry.
    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::RevisionConflict { .. })
    }

    /// True when a write may have committed although it failed: the caller must not act
    /// on it (no descriptor), and must not say "nothing was written".
    pub fn may_have_committed(&self) -> bool {
        matches!(
            self,
            StoreError::Unacknowledged { .. }
                | StoreError::Indeterminate(_)
                | StoreError::HomeUnwritable(_)
                | StoreError::RegressedCommit { .. }
        )
    }

    /// The COULD NOT READ reason an ask reports for this error (ARCHITECTURE.md, "Fail closed"):
    /// `store_unreachable` only for connection failures.
    pub fn ask_reason(&self) -> Reason {
        match self {
            StoreError::Corrupt(_) | StoreError::Invalid(_) => Reason::ProtocolError,
            StoreError::Unreachable(_) | StoreError::Indeterminate(_) => Reason::StoreUnreachable,
            StoreError::NotPrimary(_) => Reason::StoreNotPrimary,
            StoreError::Regressed(_) | StoreError::RegressedCommit { .. } => Reason::StoreRegressed,
            StoreError::ClockRegressed(_) => Reason::ClockRegressed,
            StoreError::StaleLease(_)
            | StoreError::RevisionConflict { .. }
            | StoreError::Failed(_)
            | StoreError::SlotMigrating(_)
            | StoreError::NotDurable(_)
            | StoreError::Unacknowledged { .. }
            | StoreError::Moved(_)
            | StoreError::HomeUnwritable(_) => Reason::StoreError,
        }
    }
}

/// The lease store port. Adapters are interchangeable: the same contract tests run
/// against each. Every method is one logical round trip; callers bound it by their
/// deadline.
#[async_trait]
pub trait LeaseStore: Send + Sync + fmt::Debug {
    /// The layout the board is served from here: [`meta::Layout::Records`] (Redis
    /// per-record keys, marked or not) or [`meta::Layout::Document`] (the file store, a
    /// Redis board not yet migrated). A board moved to another store is
    /// [`StoreError::Moved`].
    async fn layout(&self, board: &str) -> Result<meta::Layout, StoreError>;

    /// Reads the named sections, the board revision and the store's clock at once.
    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError>;

    /// Reads what `reads` names — sections whole, or only some of their keys — with the
    /// board revision and the store's clock, at once (one round trip). In the answer every
    /// section asked for is present; a keyed section holds at least those of its keys that
    /// exist, and all of its records when the answer is [`Snapshot::complete`]. The
    /// default reads the sections whole (right for a store that holds the board as one
    /// document); the Redis records layout reads only the keys (`HMGET` in one script).
    async fn read_records(&self, board: &str, reads: &ReadSet) -> Result<Snapshot, StoreError> {
        let names: Vec<&str> = reads.sections.keys().map(String::as_str).collect();
        let snapshot = self.sections(board, &names).await?;
        Ok(Snapshot {
            complete: true,
            ..snapshot
        })
    }

    /// Reads one record.
    async fn record(
        &self,
        board: &str,
        section: &str,
        key: &str,
    ) -> Result<Option<Record>, StoreError>;

    /// Applies a fenced batch all or nothing and returns the revision it committed at.
    /// `StaleLease` or `RevisionConflict` mean nothing was written.
    async fn fenced_batch(&self, board: &str, batch: &FencedBatch) -> Result<u64, StoreError>;

    /// Judges an ask on the store side, atomically, with the store's clock, and records
    /// the verdict where the adapter keeps asks (Redis: refusals only, unless the store
    /// URL says `?asks=all`, so an ALLOWED ask writes nothing).
    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError>;

    /// The names of the board's sections that hold (or held) records, sorted.
    async fn section_names(&self, board: &str) -> Result<Vec<String>, StoreError>;

    /// The boards this store holds, sorted, when it can list them cheaply; `None` when it
    /// cannot (then a caller names its boards: `row-fence top --board`, the registry).
    /// Only `row-fence top` asks, to show "all boards"; nothing that fences depends on it.
    async fn boards(&self) -> Result<Option<Vec<String>>, StoreError> {
        Ok(None)
    }

    /// The newest `count` fence log entries, newest first.
    async fn log(&self, board: &str, count: usize) -> Result<Vec<LogEntry>, StoreError>;

    /// A cheap call that succeeds only when the store answers (the heartbeat's proof).
    async fn ping(&self) -> Result<(), StoreError>;

    /// The store's clock, ms since the Unix epoch.
    async fn now_ms(&self) -> Result<u64, StoreError>;

    /// Where this store is, for status and logs, with any password redacted.
    fn describe(&self) -> String;

    /// Where this store is, whatever its spelling (ARCHITECTURE.md, "The lease store"): the
    /// file store's canonical directory; Redis's resolved address, database and key prefix
    /// (Sentinel: the master name, database and prefix); etcd's members and prefix. The key
    /// of this home's floors while the store carries no identity (before its first write,
    /// or one an older version wrote), and the key older versions kept them under. No
    /// password in it.
    fn address(&self) -> String {
        self.describe()
    }

    /// Every address this store is reached at here, each the key under which a home
    /// remembers the identity it found there ([`crate::marks::Binding`]): the file store's
    /// directory as written and as resolved; each sentinel or etcd member named, with the
    /// key prefix. A store at an address whose identity is missing or another is not the
    /// store the home knew there. No password in them.
    fn addresses(&self) -> Vec<String> {
        vec![self.address()]
    }

    /// The identity this store carries ([`identity`]), `None` when it carries none (a store
    /// never written since identities, or one that cannot carry one). A read: never writes.
    async fn carried_identity(&self) -> Result<Option<identity::StoreId>, StoreError> {
        Ok(None)
    }

    /// Writes `fresh` as the store's identity unless it carries one already, race-free (of
    /// two writers, one identity stands), and returns the identity it carries after; `None`
    /// for a store that cannot carry one. Called on a write path only.
    async fn create_identity(
        &self,
        fresh: &identity::StoreId,
    ) -> Result<Option<identity::StoreId>, StoreError> {
        let _ = fresh;
        Ok(None)
    }

    /// Writes a board copied from another store ([`copy`]): `records` into board `board`,
    /// which must hold no record and no revision here, committing at `revision` (the
    /// source's) or above; the revision it committed at. All or nothing where one write
    /// holds a board (the default: one fenced batch); a store whose writes are bounded
    /// (etcd) writes it in parts and makes it usable last, so a failure leaves a partial
    /// copy that answers `store_regressed` until [`LeaseStore::import`] is run again
    /// (it resumes) or [`LeaseStore::drop_partial`] drops it. The error says how many
    /// records are in.
    async fn import(
        &self,
        board: &str,
        records: &[copy::CopiedRecord],
        revision: u64,
    ) -> Result<u64, copy::ImportError> {
        let refused = |error| copy::ImportError {
            written: 0,
            total: records.len(),
            partial: false,
            error,
        };
        // Records without a revision counter are no board this store wrote whole.
        let there = self.section_names(board).await.map_err(refused)?;
        if !there.is_empty() {
            return Err(refused(StoreError::Invalid(crate::Detail::from(format!(
                "{} holds records of board {board} (sections {}) but no revision; nothing was copied",
                self.describe(),
                there.join(", ")
            )))));
        }
        let batch = FencedBatch {
            writes: records.iter().map(copy::CopiedRecord::put).collect(),
            lease: None,
            expected_revision: Some(0),
            min_revision: Some(revision),
        };
        self.fenced_batch(board, &batch)
            .await
            .map_err(|error| copy::ImportError {
                written: 0,
                total: records.len(),
                partial: false,
                error,
            })
    }

    /// Drops a partial copy of `board` ([`LeaseStore::import`] that failed partway): every
    /// key of a board that has records but was never made usable; refused (`Invalid`,
    /// nothing dropped) for any other board. How many keys were dropped.
    async fn drop_partial(&self, board: &str) -> Result<usize, StoreError> {
        Err(StoreError::Invalid(crate::Detail::from(format!(
            "{} writes a copied board all or nothing: there is no partial copy of board {board} to drop",
            self.describe()
        ))))
    }

    /// How many times the store connection was found lost (each loss makes it
    /// reconnect); 0 for stores without a connection.
    fn connection_losses(&self) -> u64 {
        0
    }

    /// Checks the store's role and settings now (at start, at every reconnect, before a
    /// grant, and on the heartbeat's interval).
    async fn check(&self) -> Result<StoreCheck, StoreError> {
        Ok(durable_check("file"))
    }

    /// The last [`LeaseStore::check`] (or the one made at connect), if any.
    fn last_check(&self) -> Option<StoreCheck> {
        None
    }

    /// Store calls still running on a thread of their own, including ones whose asker
    /// already gave up (they count as in flight in `status` until they return).
    fn calls_in_flight(&self) -> u64 {
        0
    }
}

/// Opens the store `spec` names: the file store under `home` for `file`, a lazily
/// connected Redis or etcd store (keys under `prefix`) for a Redis or etcd URL. Never connects here, so a
/// daemon starts while its store is down.
pub fn open(
    spec: &StoreSpec,
    home: &std::path::Path,
    prefix: &str,
) -> Result<std::sync::Arc<dyn LeaseStore>, StoreError> {
    Ok(match spec {
        StoreSpec::File(None) => std::sync::Arc::new(file::FileStore::new(
            row_fence_contract::paths::file_store(home),
        )),
        StoreSpec::File(Some(dir)) => std::sync::Arc::new(file::FileStore::new(dir.clone())),
        StoreSpec::Redis(url) => std::sync::Arc::new(redis::RedisStore::open(url, prefix)?),
        StoreSpec::Etcd(url) => std::sync::Arc::new(etcd::EtcdStore::open(url, prefix)?),
    })
}

/// Checks a controller lease record against a lease fence: the rule the fenced batch
/// script and the document adapters share. No lease, another owner (when the fence names
/// one), another epoch, or expiry at or before the fence's `now_ms` is `StaleLease`.
pub fn check_lease_fence(record: Option<&Record>, fence: &LeaseFence) -> Result<(), StoreError> {
    let record =
        record.ok_or_else(|| StoreError::StaleLease("the board has no controller lease".into()))?;
    let lease: ControllerLease = serde_json::from_value(record.value.clone())
        .map_err(|_| StoreError::StaleLease("the controller lease is malformed".into()))?;
    if !fence.owner.is_empty() && lease.owner != fence.owner {
        return Err(StoreError::StaleLease(format!(
            "the controller lease is held by {}",
            lease.owner
        )));
    }
    if lease.epoch != fence.epoch {
        return Err(StoreError::StaleLease(format!(
            "the controller lease is at epoch {}",
            lease.epoch
        )));
    }
    if lease.expires_at_ms <= fence.now_ms {
        return Err(StoreError::StaleLease(
            "the controller lease expired".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_moved_away_is_no_routing_signal_and_both_read_as_a_move() {
        let away = Moved::away("board b moved to redis://x; point row-fence at that store".into());
        assert!(!away.is_other_layout());
        let signal = Moved::other_layout("board b has no document".into());
        assert!(signal.is_other_layout());
        for moved in [away, signal] {
            let e = StoreError::Moved(moved.clone());
            assert_eq!(
                e.to_string(),
                format!("the board has moved: {}", moved.detail())
            );
            assert_eq!(e.ask_reason(), Reason::StoreError);
        }
    }

    #[test]
    fn a_store_failure_keeps_the_error_beneath_it_and_compares_by_its_sentence() {
        use std::error::Error as _;
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = StoreError::Failed(Detail::caused_by("/h/store: denied", io));
        assert_eq!(
            e.to_string(),
            "the store answered with an error: /h/store: denied"
        );
        let cause = e
            .source()
            .and_then(|d| d.source())
            .and_then(|c| c.downcast_ref::<std::io::Error>())
            .expect("the I/O error beneath");
        assert_eq!(cause.kind(), std::io::ErrorKind::PermissionDenied);
        assert_eq!(e, StoreError::Failed(Detail::from("/h/store: denied")));
        let told = match e.clone() {
            StoreError::Failed(d) => d.reworded("/h/store: denied (check the home's owner)"),
            _ => unreachable!(),
        };
        assert!(told.source().is_some(), "rewording keeps the cause");
        assert!(
            StoreError::Unreachable(Detail::from("x"))
                .source()
                .unwrap()
                .source()
                .is_none()
        );
    }

    #[test]
    fn malformed_data_keeps_the_parse_error_beneath_it_and_its_sentence() {
        use std::error::Error as _;
        let e = document::parse_row_lease(&serde_json::json!({"lane": 3}))
            .expect_err("not a row lease");
        assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
        assert!(
            e.to_string().starts_with(
                "the store holds malformed data: a claims record is not a row lease: "
            ),
            "{e}"
        );
        let cause = e.source().and_then(|d| d.source());
        assert!(
            cause.is_some_and(|c| c.downcast_ref::<serde_json::Error>().is_some()),
            "the JSON error beneath: {cause:?}"
        );
    }
}
