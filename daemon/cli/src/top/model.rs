//! The console's model: one [`Snapshot`] of everything `row-fence top` shows, gathered by
//! `gather`, drawn by `draw`, printed whole by `--once --json` (ARCHITECTURE.md, "The
//! operator's console"). The view and the JSON come from this one value, so they cannot
//! disagree.
//!
//! Fields that a newer daemon, store or guard adds (a row's scope, the store's identity,
//! etcd's members and leader, a refusal's route) are `Option`s: `None` is drawn as "—",
//! never as a zero or an empty list, since "not known here" is not "none".

use serde::Serialize;

/// Refusals kept from the ledger, the newest: a snapshot holding this many may have
/// older ones only the ledger has.
pub const REFUSALS_KEPT: usize = 500;

/// One refresh.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Snapshot {
    /// When it was gathered, ms since the Unix epoch (this machine's clock): the time
    /// left of every row counts down from here.
    pub taken_at_ms: u64,
    /// The home read (`$ROW_FENCE_HOME`).
    pub home: String,
    /// The daemon as its socket answered, or why it did not.
    pub daemon: DaemonView,
    /// The boards shown, in name order.
    pub boards: Vec<BoardView>,
    /// Boards no store read could list, and why (a store that cannot list its boards: name
    /// them with `--board` or in the registry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boards_note: Option<String>,
    /// The refusal ledger's newest records, newest first.
    pub refusals: Vec<Refusal>,
    /// Why the refusal ledger could not be read, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusals_error: Option<String>,
    /// Quarantined agent sessions and the calls denied in quarantine.
    pub quarantine: QuarantineView,
}

/// The daemon: up with its figures, or gone with the reason. A daemon that goes away is
/// shown gone at the next refresh, never as its last answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DaemonView {
    /// True when the daemon answered this refresh's status request.
    pub up: bool,
    /// Why no status came (no daemon, a timeout, an answer that does not parse).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the operator can do about a daemon that is gone: start one (nothing
    /// listens), or look at the one that listens but does not answer (stopped, stuck).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_to_do: Option<String>,
    /// The socket asked.
    pub socket: String,
    /// The daemon's process id.
    pub pid: Option<u32>,
    /// Its package version.
    pub version: Option<String>,
    /// Its code stamp.
    pub stamp: Option<String>,
    /// ms since it started.
    pub uptime_ms: Option<u64>,
    /// ms since its heartbeat was written (written only after a store call succeeded).
    pub heartbeat_age_ms: Option<u64>,
    /// The store it fences with, as it describes it (no password).
    pub store: Option<String>,
    /// `file`, `redis` or `etcd`, from the store's URL.
    pub store_kind: Option<String>,
    /// The store's identity as the store itself records it; absent until the daemon
    /// reports one.
    pub store_identity: Option<String>,
    /// The store's role as last checked (`master`, `file`, …).
    pub role: Option<String>,
    /// Replicas connected to the primary when checked.
    pub replicas: Option<u64>,
    /// Replicas every write waits for.
    pub min_replicas: Option<u64>,
    /// True when grants may go ahead (nothing makes an acknowledged write losable).
    pub durable: Option<bool>,
    /// How long ago, in ms, the daemon last checked the store (role, replicas,
    /// durability): a store that went away keeps its last check, so its age is shown.
    #[serde(default)]
    pub store_checked_age_ms: Option<u64>,
    /// What makes acknowledged writes losable, each naming its fix.
    pub problems: Vec<String>,
    /// The read barrier of a primary with replicas, as the daemon reports it; absent
    /// until it does.
    pub read_barrier: Option<String>,
    /// etcd's members, as the daemon reports them; absent until it does.
    pub etcd_members: Option<Vec<String>>,
    /// etcd's leader, as the daemon reports it; absent until it does.
    pub etcd_leader: Option<String>,
    /// Asks answered since start.
    pub asks: Option<u64>,
    /// ALLOWED since start.
    pub allowed: Option<u64>,
    /// REFUSED since start.
    pub refused: Option<u64>,
    /// COULD NOT READ since start.
    pub could_not_read: Option<u64>,
    /// Asks answered per second between this refresh and the one before (absent on the
    /// first, and in `--once`).
    pub asks_per_second: Option<f64>,
    /// The key broker, when it is on.
    pub broker: Option<BrokerView>,
    /// The daemon fences with another store (or key prefix) than this console reads: the
    /// rows shown are not the ones it judges.
    pub mismatch: Option<String>,
}

/// The key broker's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BrokerView {
    /// Push keys held.
    pub keys: u64,
    /// Read keys held.
    pub read_keys: u64,
    /// Uids bound to lanes.
    pub lanes: u64,
    /// Signatures made since start.
    pub signed: u64,
    /// Sign requests refused since start.
    pub sign_refused: u64,
}

/// One board's row leases.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BoardView {
    /// The board.
    pub board: String,
    /// The margin its asks are judged with, in ms (under it, ALLOWED becomes
    /// `lease_expiring`): the registry's, else the install's.
    pub margin_ms: u64,
    /// Its row leases, in row order.
    pub rows: Vec<RowView>,
    /// Why the board could not be read this refresh (no rows are shown for it then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One row lease.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RowView {
    /// The row.
    pub row: String,
    /// The lane holding it.
    pub holder: String,
    /// Its generation (fencing token).
    pub generation: u64,
    /// Its expiry, ms since the Unix epoch (the store's clock).
    pub expires_at_ms: u64,
    /// ms it had left at the store's clock when read (negative: expired that long ago).
    pub left_ms: i64,
    /// The board's tenant recorded in the lease.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The refs (and repositories) its holder may write, one line (`Scope::summary`);
    /// `None` when the board has no scope (any ref).
    pub scope: Option<Vec<String>>,
}

impl RowView {
    /// ms left `elapsed_ms` after the read.
    pub fn left_after(&self, elapsed_ms: u64) -> i64 {
        self.left_ms
            .saturating_sub(i64::try_from(elapsed_ms).unwrap_or(i64::MAX))
    }
}

/// Which route a refusal came through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Route {
    /// git's pre-push hook.
    PrePush,
    /// git's transport gate (ssh command, credential helper, proxy).
    TransportGate,
    /// The agent guard (a harness's pre-tool hook).
    Guard,
    /// The key broker (a sign request, a lane's renew or release).
    Broker,
    /// A write to a forge's API through the daemon.
    ForgeApi,
    /// `row-fence check`, the cold path.
    Check,
    /// An ask whose route its record does not tell (`row-fence-ask` run by hand).
    Ask,
}

impl Route {
    /// The spelling in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Route::PrePush => "pre_push",
            Route::TransportGate => "transport_gate",
            Route::Guard => "guard",
            Route::Broker => "broker",
            Route::ForgeApi => "forge_api",
            Route::Check => "check",
            Route::Ask => "ask",
        }
    }

    /// The spelling on screen.
    pub fn label(self) -> &'static str {
        match self {
            Route::PrePush => "pre-push",
            Route::TransportGate => "transport gate",
            Route::Guard => "guard",
            Route::Broker => "broker",
            Route::ForgeApi => "forge API",
            Route::Check => "check",
            Route::Ask => "ask",
        }
    }
}

impl Serialize for Route {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One refusal ledger record, as the console reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// When it was decided, ms since the Unix epoch.
    pub ts_ms: u64,
    /// `refused` or `could_not_read`.
    pub verdict: String,
    /// The reason's spelling.
    pub reason: String,
    /// The route it came through.
    pub route: Route,
    /// The lane, when a descriptor was read.
    pub lane: Option<String>,
    /// The board, when a descriptor was read.
    pub board: Option<String>,
    /// The row, when a descriptor was read.
    pub row: Option<String>,
    /// The fenced action.
    pub action: String,
    /// The caller's session.
    pub session: Option<String>,
    /// The verdict's sentence.
    pub detail: String,
}

/// Quarantines now and the calls they denied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QuarantineView {
    /// Sessions quarantined now, newest first.
    pub sessions: Vec<Session>,
    /// Calls denied in quarantine, ever (lines of the denial log).
    pub denials_total: u64,
    /// The newest denials, newest first.
    pub denials: Vec<Denial>,
    /// Why the quarantine directory or its log could not be read, if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One quarantined session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Session {
    /// The session id (from the record, else its file name).
    pub session: String,
    /// Since when, ms since the Unix epoch.
    pub since_ms: Option<u64>,
    /// The descriptor whose ask was refused.
    pub descriptor: Option<String>,
    /// The refusal's verdict line, as the agent was shown it.
    pub refusal: Option<String>,
    /// Its calls denied among the newest denials read.
    pub denials: u64,
    /// The record is there but cannot be read (the session counts as quarantined).
    pub unreadable: bool,
}

/// One call denied in quarantine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Denial {
    /// When, ms since the Unix epoch.
    pub ts_ms: u64,
    /// The session.
    pub session: String,
    /// The tool the call was for.
    pub tool: String,
}
