//! Redis: the production store. Two adapters behind the one port, as the fencing-records
//! source has them ("callers do not choose"):
//!
//! - [`RedisRecords`]: per-record keys (the `records` layout), the production layout; every
//!   key of a board carries the hash tag `{<board>}`, so its scripts run unchanged on
//!   standalone Redis/Valkey and on Redis Cluster. On standalone Redis every script guards
//!   the layout atomically: a board that still has a document to be migrated is refused
//!   (`FENCE_DOCUMENT`), never read or written as records.
//! - [`RedisDocument`]: the whole board as one JSON document in `P:state:fencing:current`
//!   (the `document` layout), for boards not yet migrated; standalone Redis only.
//! - [`RedisStore`]: what `ROW_FENCE_STORE=redis://…` opens. Every call goes to the records
//!   first. The ask is the records ask script alone, one round trip whatever the layout:
//!   for a board with a document it hands the document back in the same answer, judged
//!   here. The operator's commands (reads, writes, the log) that the records refuse as a
//!   document board are served by the board's document, and a document that moved since
//!   (`row-fence migrate`, once, never back) by the records again. Nothing is remembered
//!   between calls, so nothing remembered can go stale.
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `P:board:{B}:fence:meta` | hash | `lease`, `epoch`, `layout` as records |
//! | `P:board:{B}:fence:<section>` | hash | one field per record: `{"r":<revision>,"v":<value>}` |
//! | `P:board:{B}:fence:revision` | string | the board revision |
//! | `P:board:{B}:fence:log` | stream | one entry per committed batch, capped at `LOG_CAP` |
//! | `P:board:{B}:fence:asks` | stream | one entry per refusal (per verdict with `?asks=all`), capped at about `ASKS_CAP` |
//! | `P:board:{B}:fence:sections` | set | the names of the board's sections |
//! | `P:state:fencing:current` | hash | field `B`: a document-layout board; field `B:records`: the newest records revision |
//! | `P:state:fencing:history:B` | list | the last 2 previous copies of B's document |
//!
//! One connection ([`conn::Conn`]), created lazily and checked at every connect
//! ([`durability`]); the scripts go through `redis::Script` (EVALSHA with a fallback on
//! NOSCRIPT), so a flushed script cache heals on the next call. Every script starts with
//! the names Rust spells ([`names`]). Every write is refused on
//! a store whose settings can lose it, and waits (`WAIT`, pipelined with the script on the
//! same connection) for the replicas the URL names ([`url`]) before it is acknowledged.

pub mod barrier;
pub mod conn;
mod document;
pub mod durability;
pub mod identity;
pub mod keys;
pub mod migrate;
pub mod names;
mod records;
pub mod url;

pub use document::RedisDocument;
pub use records::RedisRecords;

use super::{
    AskCheck, FencedBatch, Judgement, LeaseStore, LogEntry, ReadSet, Record, Snapshot, StoreCheck,
    StoreError,
};
use crate::identity::StoreId;
use crate::meta::{self, Layout};
use async_trait::async_trait;
use conn::Conn;
use keys::{BoardKeys, StateKeys};
use redis::{RedisError, Script, ScriptInvocation, Value};
use row_fence_contract::Verdict;
use std::sync::{Arc, LazyLock};
use url::AsksLog;

/// The default key prefix (`ROW_FENCE_KEY_PREFIX`).
pub const DEFAULT_KEY_PREFIX: &str = "rowfence";

/// What the adapters share: the one connection, the key prefix, the scripts.
pub struct Shared {
    /// The one connection; clones share it.
    conn: Conn,
    /// How long a write waits for its replicas, in ms (`wait_ms`).
    wait_ms: u64,
    /// The URL with any password redacted, for status and logs.
    redacted: String,
    /// Which store this is, whatever the URL's spelling, prefix included: the key of the
    /// home's floors ([`identity::identity`]).
    identity: String,
    /// Every address it is reached at ([`identity::addresses`]).
    addresses: Vec<String>,
    /// The addresses the server said the last look at its identity reached
    /// ([`identity::served_addresses`]; none on a Cluster, or where the server would not
    /// say).
    served: std::sync::Mutex<Vec<String>>,
    /// The key prefix `P`.
    prefix: String,
    /// Which verdicts an ask records (`?asks=`).
    asks: AsksLog,
    /// The fenced batch script, hashed once.
    batch: Script,
    /// The ask script.
    ask: Script,
    /// The consistent read script.
    read: Script,
    /// The document compare-and-set script.
    cas: Script,
    /// The ask on a document-layout board.
    document_ask: Script,
}

/// A write's durability check is redone before a write when older than this, in ms (the
/// CLI connects per command, so its check is always fresh; a long-lived writer's is not).
pub const RECHECK_MS: u64 = 10_000;

/// A committed script's answer and how many replicas acknowledged it.
struct Committed {
    answer: Value,
    acked: u64,
    wanted: u64,
}

/// The fenced batch script's source (also run inside the migration's transaction).
/// The `#!lua` shebang declares it as writing (Redis refuses it on a replica, short of
/// replicas, or out of memory, before it runs), and `write_checks.lua` gives it the checks
/// every writing script runs before its first write.
pub static FENCED_BATCH_LUA: LazyLock<String> = LazyLock::new(|| {
    names::script(
        true,
        &[
            include_str!("lua/write_checks.lua"),
            include_str!("lua/fenced_batch.lua"),
        ],
    )
});

/// The document layout's compare-and-set, built like [`FENCED_BATCH_LUA`].
static DOCUMENT_CAS_LUA: LazyLock<String> = LazyLock::new(|| {
    names::script(
        true,
        &[
            include_str!("lua/write_checks.lua"),
            include_str!("lua/document_cas.lua"),
        ],
    )
});

/// The ask script: declared writing (`#!lua`) even when it records nothing, so Redis
/// refuses it on a replica and with NOREPLICAS before it reads anything.
pub static ASK_LUA: LazyLock<String> =
    LazyLock::new(|| names::script(true, &[include_str!("lua/ask.lua")]));

/// The ask on a document-layout board, declared writing like [`ASK_LUA`].
static DOCUMENT_ASK_LUA: LazyLock<String> =
    LazyLock::new(|| names::script(true, &[include_str!("lua/document_ask.lua")]));

/// The consistent read script (read only).
static READ_LUA: LazyLock<String> =
    LazyLock::new(|| names::script(false, &[include_str!("lua/read.lua")]));

impl Shared {
    fn open(url: &str, prefix: &str) -> Result<Arc<Shared>, StoreError> {
        let redacted = super::spec::redact(&url::without_options(url));
        let parsed = url::StoreUrl::parse(url).map_err(|e| {
            StoreError::Invalid(crate::Detail::caused_by(
                format!("store {redacted}: {e}"),
                e,
            ))
        })?;
        let options = durability::Options {
            min_replicas: parsed.min_replicas,
            replicas: parsed.replicas,
            wait_ms: parsed.wait_ms,
            volatile: parsed.volatile,
            prefix: prefix.to_string(),
        };
        let conn = Conn::open(&parsed.location, options).map_err(|e| {
            StoreError::Invalid(crate::Detail::caused_by(
                format!("store {redacted}: {e}"),
                e,
            ))
        })?;
        Ok(Arc::new(Shared {
            conn,
            wait_ms: parsed.wait_ms,
            redacted,
            identity: identity::identity(url, prefix),
            addresses: identity::addresses(url, prefix),
            served: std::sync::Mutex::new(Vec::new()),
            prefix: prefix.to_string(),
            asks: parsed.asks,
            batch: Script::new(&FENCED_BATCH_LUA),
            ask: Script::new(&ASK_LUA),
            read: Script::new(&READ_LUA),
            cas: Script::new(&DOCUMENT_CAS_LUA),
            document_ask: Script::new(&DOCUMENT_ASK_LUA),
        }))
    }

    fn keys(&self, board: &str) -> BoardKeys {
        BoardKeys::new(&self.prefix, board)
    }

    fn state(&self) -> StateKeys {
        StateKeys::new(&self.prefix)
    }

    fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// Where this connection reached the server ([`identity::served_addresses`]): the
    /// address it dialed, `CLIENT INFO`, and `INFO server` for a socket. None where the
    /// server would not say (an ACL that refuses them): the URL's addresses are then all a
    /// home knows it by.
    async fn served_addresses(&self) -> Vec<String> {
        let Ok(info) = redis::cmd("CLIENT")
            .arg("INFO")
            .query_async::<String>(&mut self.conn())
            .await
        else {
            return Vec::new();
        };
        let port = if info.contains(" laddr=/") {
            redis::cmd("INFO")
                .arg("server")
                .query_async::<String>(&mut self.conn())
                .await
                .ok()
                .and_then(|server| identity::tcp_port(&server))
        } else {
            None
        };
        let dialed = self.conn.dialed();
        identity::served_addresses(
            &info,
            port,
            dialed.as_ref().map(|(h, p)| (h.as_str(), *p)),
            &self.prefix,
        )
    }

    /// The live link held for one read and its barrier ([`Shared::barrier`]).
    async fn pinned(&self) -> Result<conn::Pinned, StoreError> {
        self.conn.pin().await.map_err(|e| self.map_err(e))
    }

    /// The read barrier of a replicated primary after a read on `pinned`: an answer is
    /// given only once enough replicas acknowledged something the primary sent after it
    /// ([`barrier`]); a barrier they did not meet is `store_not_primary`.
    async fn barrier(&self, pinned: &conn::Pinned) -> Result<(), StoreError> {
        match pinned.barrier().await.map_err(|e| self.map_err(e))? {
            Some(round) if !round.met() => {
                Err(StoreError::NotPrimary(crate::Detail::from(format!(
                    "{}: the read barrier reached {} of {} replicas within {} ms after the read: this primary may be cut off from its replicas or deposed by a failover (a partition, a pause), so nothing it answered is used",
                    self.redacted, round.acked, round.wanted, round.wait_ms
                ))))
            }
            _ => Ok(()),
        }
    }

    /// What a Redis error means for row-fence: the scripts' own refusals, a demoted
    /// server, an error the store sent (`store_error`), or a connection that failed
    /// (`store_unreachable`, the only kind that is).
    fn map_err(&self, e: RedisError) -> StoreError {
        let (code, detail) = first_error(&e);
        let at = &self.redacted;
        match code.as_str() {
            "FENCE_STALE" => StoreError::StaleLease(detail),
            "FENCE_CONFLICT" => StoreError::RevisionConflict { key: detail },
            "FENCE_DOCUMENT" => StoreError::Moved(crate::Moved::other_layout(detail)),
            "FENCE_CORRUPT" => {
                StoreError::Corrupt(crate::Detail::caused_by(format!("{at}: {detail}"), e))
            }
            conn::NOT_PRIMARY => {
                StoreError::NotPrimary(crate::Detail::caused_by(format!("{at}: {detail}"), e))
            }
            "READONLY" => StoreError::NotPrimary(crate::Detail::caused_by(
                format!(
                    "{at} is a read-only replica (READONLY): row-fence reads and writes only the primary"
                ),
                e,
            )),
            "NOREPLICAS" => StoreError::NotPrimary(crate::Detail::caused_by(
                format!(
                    "{at} has fewer good replicas than its min-replicas-to-write (NOREPLICAS): a failover may have deposed it"
                ),
                e,
            )),
            "MASTERDOWN" => StoreError::NotPrimary(crate::Detail::caused_by(
                format!("{at} is a replica whose link to its primary is down (MASTERDOWN)"),
                e,
            )),
            "NOAUTH" => StoreError::Failed(crate::Detail::caused_by(
                format!(
                    "{at}: the store needs a password (NOAUTH); put it in the store URL (redis://:PASSWORD@host, or ?pass= for a socket)"
                ),
                e,
            )),
            "WRONGPASS" => StoreError::Failed(crate::Detail::caused_by(
                format!(
                    "{at}: the store refused the user or password in the store URL (WRONGPASS)"
                ),
                e,
            )),
            "MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN" => StoreError::SlotMigrating(
                crate::Detail::caused_by(format!("{at}: {code} {detail}"), e),
            ),
            "" => self.client_error(e),
            _ => StoreError::Failed(crate::Detail::caused_by(
                format!("{at}: {code} {detail}"),
                e,
            )),
        }
    }

    /// An error redis-rs raised itself (no error reply from the server).
    fn client_error(&self, e: RedisError) -> StoreError {
        let at = &self.redacted;
        match e.kind() {
            redis::ErrorKind::AuthenticationFailed => StoreError::Failed(crate::Detail::caused_by(
                format!(
                    "{at}: the store needs a password, or refused the one in the store URL ({e})"
                ),
                e,
            )),
            redis::ErrorKind::Io
            | redis::ErrorKind::MasterNameNotFoundBySentinel
            | redis::ErrorKind::NoValidReplicasFoundBySentinel
            | redis::ErrorKind::EmptySentinelList
            | redis::ErrorKind::ClusterConnectionNotFound => {
                StoreError::Unreachable(crate::Detail::caused_by(format!("{at}: {e}"), e))
            }
            redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType => {
                StoreError::Corrupt(crate::Detail::caused_by(format!("{at}: {e}"), e))
            }
            _ => StoreError::Failed(crate::Detail::caused_by(format!("{at}: {e}"), e)),
        }
    }

    /// [`Shared::map_err`] for a write: a connection that broke after the write was sent
    /// may have committed it, so that is `Indeterminate`, not `Unreachable`.
    fn map_write_err(&self, e: RedisError) -> StoreError {
        let sent = e.is_io_error() && !e.is_connection_refusal() && !e.is_timeout();
        match self.map_err(e) {
            StoreError::Unreachable(why) if sent => StoreError::Indeterminate(why),
            other => other,
        }
    }

    /// The store's check, redone when older than [`RECHECK_MS`]; refuses (`NotDurable`,
    /// naming the setting and the fix) when the store cannot keep an acknowledged write.
    async fn durable_check(&self) -> Result<StoreCheck, StoreError> {
        let check = self
            .conn
            .fresh_check(RECHECK_MS)
            .await
            .map_err(|e| self.map_err(e))?;
        crate::require_durable(&check)?;
        Ok(check)
    }

    /// Runs a writing script and, when the store has replicas to wait for, `WAIT` right
    /// behind it on the same connection (one round trip); refused before anything is sent
    /// on a store that cannot keep it.
    async fn commit(
        &self,
        script: &Script,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<Committed, StoreError> {
        let check = self.durable_check().await?;
        let wanted = if self.conn.is_cluster() {
            0
        } else {
            check.min_replicas
        };
        let mut con = self.conn();
        if wanted == 0 {
            let answer: Value = invocation
                .invoke_async(&mut con)
                .await
                .map_err(|e| self.map_write_err(e))?;
            return Ok(Committed {
                answer,
                acked: 0,
                wanted,
            });
        }
        let pipeline = |load: bool| {
            let mut p = redis::pipe();
            if load {
                p.load_script(script).ignore();
            }
            p.invoke_script(invocation)
                .cmd("WAIT")
                .arg(wanted)
                .arg(self.wait_ms);
            p
        };
        let answered: Result<(Value, u64), RedisError> = match pipeline(false)
            .query_async(&mut con)
            .await
        {
            Err(e) if first_error(&e).0 == "NOSCRIPT" => pipeline(true).query_async(&mut con).await,
            other => other,
        };
        let (answer, acked) = answered.map_err(|e| self.map_write_err(e))?;
        Ok(Committed {
            answer,
            acked,
            wanted,
        })
    }

    /// PING: the cheapest proof the server answers.
    async fn ping(&self) -> Result<(), StoreError> {
        let _: String = redis::cmd("PING")
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.map_err(e))?;
        Ok(())
    }

    /// The server's clock (`TIME`), ms since the Unix epoch.
    async fn now_ms(&self) -> Result<u64, StoreError> {
        let time: Vec<String> = redis::cmd("TIME")
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.map_err(e))?;
        match time.as_slice() {
            [seconds, micros] => time_ms(seconds, micros),
            _ => Err(StoreError::Corrupt(crate::Detail::from(format!(
                "TIME answered {time:?}"
            )))),
        }
    }

    /// Appends an ask's verdict to the board's asks stream (for asks the ask script did
    /// not record itself: document-layout boards), with the same fields the script writes
    /// and by the same rule: refusals, every verdict with `?asks=all`, nothing for the
    /// probe.
    pub(super) async fn record_ask(
        &self,
        check: &AskCheck,
        judgement: &Judgement,
    ) -> Result<(), StoreError> {
        if check.probe {
            return Ok(());
        }
        let lease = match judgement.refusal {
            None => (Verdict::Allowed.wire_name(), ""),
            Some(r) => (Verdict::Refused(r).wire_name(), r.as_str()),
        };
        let fenced = check.location.as_ref().and_then(|l| l.fenced);
        let (verdict, reason) =
            fenced.map_or(lease, |r| (Verdict::from_reason(r).wire_name(), r.as_str()));
        if verdict == Verdict::Allowed.wire_name() && self.asks != AsksLog::All {
            return Ok(());
        }
        let generation = check.generation.to_string();
        let mut fields: Vec<(&str, &str)> = vec![
            ("row", &check.row),
            ("lane", &check.lane),
            ("generation", &generation),
            ("verdict", verdict),
            ("reason", reason),
            ("action", &check.action),
            ("session", &check.session),
        ];
        let epoch;
        if let Some(at) = &check.location {
            epoch = at.epoch.to_string();
            fields.extend([
                ("location", at.location.as_str()),
                ("epoch", epoch.as_str()),
            ]);
        }
        let _: String = redis::cmd("XADD")
            .arg(self.keys(&check.board).asks())
            .arg("MAXLEN")
            .arg("~")
            .arg(super::ASKS_CAP)
            .arg("*")
            .arg(&fields)
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.map_err(e))?;
        Ok(())
    }
}

/// Which adapter serves a board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Per-record keys.
    Records,
    /// The whole document (not yet migrated).
    Document,
}

/// The store `ROW_FENCE_STORE=redis://…` opens: the records adapter, and the document
/// adapter for the boards the records refuse as documents.
#[derive(Clone)]
pub struct RedisStore {
    shared: Arc<Shared>,
    /// The records adapter, whose scripts refuse a board still in the document layout.
    records: RedisRecords,
    /// The document adapter alone: a missing document is an empty board (tests and the
    /// benchmark start document boards with it; row-fence itself never starts one).
    document: RedisDocument,
    /// The document adapter for the boards the records refuse: a document that moved or
    /// is gone is the routing signal (`Moved::other_layout`: the records serve the board
    /// then), never an empty board.
    existing_document: RedisDocument,
}

/// How many times one call may find the board in another layout than it tried: records
/// (the script says "document"), document (it says "moved"), records again.
const ROUTE_TRIES: usize = 3;

/// Runs `$call` with `$a` bound to the records adapter and, while the one tried answers
/// with the routing signal (`Moved::other_layout`), the other layout's (a board moves
/// once, so the third try is a store changed by hand under the call).
macro_rules! either_layout {
    ($self:ident, $board:expr, |$a:ident| $call:expr) => {{
        let mut layout = Layout::Records;
        let mut tries = 0;
        loop {
            let $a: &dyn LeaseStore = $self.adapter(layout);
            match $call.await {
                Err(StoreError::Moved(why)) if why.is_other_layout() => {
                    tries += 1;
                    if tries >= ROUTE_TRIES {
                        break Err($self.kept_moving($board, why.detail()));
                    }
                    layout = other_layout(layout);
                }
                answer => break answer,
            }
        }
    }};
}

fn other_layout(layout: Layout) -> Layout {
    match layout {
        Layout::Records => Layout::Document,
        Layout::Document => Layout::Records,
    }
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.shared.redacted)
            .field("prefix", &self.shared.prefix)
            .finish()
    }
}

impl RedisStore {
    /// Prepares a store for `url` (keys under `prefix`) without connecting: the first
    /// call connects.
    pub fn open(url: &str, prefix: &str) -> Result<RedisStore, StoreError> {
        let shared = Shared::open(url, prefix)?;
        Ok(RedisStore {
            records: RedisRecords {
                shared: shared.clone(),
            },
            document: RedisDocument {
                shared: shared.clone(),
                routed: false,
            },
            existing_document: RedisDocument {
                shared: shared.clone(),
                routed: true,
            },
            shared,
        })
    }

    /// The records adapter (tests, migration, the benchmark).
    pub fn records(&self) -> &RedisRecords {
        &self.records
    }

    /// The document adapter alone (tests, migration).
    pub fn document(&self) -> &RedisDocument {
        &self.document
    }

    /// The keys of a board.
    pub fn keys(&self, board: &str) -> BoardKeys {
        self.shared.keys(board)
    }

    /// The document layout's keys.
    pub fn state_keys(&self) -> StateKeys {
        self.shared.state()
    }

    /// Which adapter serves `board`: one round trip (the meta marker and whether a
    /// document exists). On a cluster every board is served from records.
    pub async fn route(&self, board: &str) -> Result<Route, StoreError> {
        if self.shared.conn.is_cluster() {
            return Ok(Route::Records);
        }
        let (layout, has_document): (Option<String>, bool) = redis::pipe()
            .cmd("HGET")
            .arg(self.shared.keys(board).section(super::META))
            .arg(meta::LAYOUT)
            .cmd("HEXISTS")
            .arg(self.shared.state().current())
            .arg(board)
            .query_async(&mut self.shared.conn())
            .await
            .map_err(|e| self.shared.map_err(e))?;
        let marked = layout.is_some_and(|raw| records::record_value_is(&raw, Layout::Records));
        Ok(if !marked && has_document {
            Route::Document
        } else {
            Route::Records
        })
    }

    /// The adapter serving `layout`: the records, or the board's existing document.
    fn adapter(&self, layout: Layout) -> &dyn LeaseStore {
        match layout {
            Layout::Records => &self.records,
            Layout::Document => &self.existing_document,
        }
    }

    /// The adapter `route` names.
    fn routed_to(&self, route: Route) -> &dyn LeaseStore {
        match route {
            Route::Records => &self.records,
            Route::Document => &self.document,
        }
    }

    /// One round trip whatever the board's layout: the records ask script, which judges
    /// the row's record, or, on a board that still has a document to be migrated (checked
    /// in the same script, atomically), hands the document back to be judged here. On a
    /// replicated primary the answer waits for the read barrier ([`barrier`]).
    async fn ask_once(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        let board = check.board.as_str();
        match self.records.ask_records(check).await? {
            records::Asked::Judged(judgement) => Ok(judgement),
            records::Asked::Document { now_ms, document } => {
                let document = document::parse(board, &document)?;
                if document.moved_to.is_some() {
                    // The marker and the moved document are written by one script; a
                    // moved document without the marker is a store changed by hand.
                    return Err(StoreError::Corrupt(crate::Detail::from(format!(
                        "board {board} is marked moved but not migrated"
                    ))));
                }
                let judgement = document.judge_ask(check, now_ms)?;
                self.shared.record_ask(check, &judgement).await?;
                Ok(judgement)
            }
        }
    }

    /// The error for a board that kept changing layout under one call (it moves once, so
    /// this is a store changed by hand, or restored, while the call ran): `store_error`.
    fn kept_moving(&self, board: &str, why: &str) -> StoreError {
        StoreError::Failed(crate::Detail::from(format!(
            "board {board} changed layout {ROUTE_TRIES} times during one call ({why}); retry"
        )))
    }
}

#[async_trait]
impl LeaseStore for RedisStore {
    async fn layout(&self, board: &str) -> Result<Layout, StoreError> {
        let route = self.route(board).await?;
        self.routed_to(route).layout(board).await
    }

    async fn sections(&self, board: &str, names: &[&str]) -> Result<Snapshot, StoreError> {
        either_layout!(self, board, |a| a.sections(board, names))
    }

    async fn read_records(&self, board: &str, reads: &ReadSet) -> Result<Snapshot, StoreError> {
        match self.records.read_records(board, reads).await {
            Err(StoreError::Moved(why)) if why.is_other_layout() => {
                self.document.read_records(board, reads).await
            }
            other => other,
        }
    }

    async fn record(
        &self,
        board: &str,
        section: &str,
        key: &str,
    ) -> Result<Option<Record>, StoreError> {
        let mut reads = ReadSet::default();
        reads.add_key(section, key);
        let snapshot = self.read_records(board, &reads).await?;
        Ok(snapshot.record(section, key).cloned())
    }

    async fn fenced_batch(&self, board: &str, batch: &FencedBatch) -> Result<u64, StoreError> {
        either_layout!(self, board, |a| a.fenced_batch(board, batch))
    }

    /// [`RedisStore::ask_once`], once more on a new connection when the first one found
    /// its link broken or its server demoted.
    async fn ask(&self, check: &AskCheck) -> Result<Judgement, StoreError> {
        let losses = self.shared.conn.losses();
        match self.ask_once(check).await {
            // The link broke, or its server stopped being the primary, and was dropped:
            // an ask is a read, so it is asked once more on a new connection (the
            // sentinels asked again) within its deadline, rather than failing on what
            // the old one left.
            Err(StoreError::Unreachable(_) | StoreError::NotPrimary(_))
                if self.shared.conn.losses() > losses =>
            {
                self.ask_once(check).await
            }
            other => other,
        }
    }

    async fn section_names(&self, board: &str) -> Result<Vec<String>, StoreError> {
        let route = self.route(board).await?;
        self.routed_to(route).section_names(board).await
    }

    async fn log(&self, board: &str, count: usize) -> Result<Vec<LogEntry>, StoreError> {
        let route = self.route(board).await?;
        self.routed_to(route).log(board, count).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.shared.ping().await
    }

    async fn now_ms(&self) -> Result<u64, StoreError> {
        self.shared.now_ms().await
    }

    fn describe(&self) -> String {
        self.shared.redacted.clone()
    }

    fn address(&self) -> String {
        self.shared.identity.clone()
    }

    /// The URL's addresses and the one the server said it is at when its identity was last
    /// read: a socket or Sentinel spelling of a server is also known at its TCP address, so
    /// a home that knew the server by one spelling finds it emptied or replaced by any other.
    fn addresses(&self) -> Vec<String> {
        let mut all = self.shared.addresses.clone();
        all.extend(
            self.shared
                .served
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        );
        all.sort();
        all.dedup();
        all
    }

    async fn carried_identity(&self) -> Result<Option<StoreId>, StoreError> {
        let raw: Option<String> = redis::cmd("GET")
            .arg(self.shared.state().identity())
            .query_async(&mut self.shared.conn())
            .await
            .map_err(|e| self.shared.map_err(e))?;
        if !self.shared.conn.is_cluster() {
            let served = self.shared.served_addresses().await;
            *self.shared.served.lock().unwrap_or_else(|p| p.into_inner()) = served;
        }
        raw.map(|text| StoreId::parse(&text)).transpose()
    }

    /// `SET NX` and a read back in one round trip, waiting for the replicas a grant waits
    /// for: an identity a failover could lose would make every home that saw it find the
    /// new primary a stranger.
    async fn create_identity(&self, fresh: &StoreId) -> Result<Option<StoreId>, StoreError> {
        let shared = &self.shared;
        let check = shared.durable_check().await?;
        let wanted = if shared.conn.is_cluster() {
            0
        } else {
            check.min_replicas
        };
        let key = shared.state().identity();
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(&key)
            .arg(fresh.as_str())
            .arg("NX")
            .ignore()
            .cmd("GET")
            .arg(&key);
        if wanted > 0 {
            pipe.cmd("WAIT").arg(wanted).arg(shared.wait_ms);
        }
        let (held, acked): (String, u64) = if wanted > 0 {
            pipe.query_async(&mut shared.conn())
                .await
                .map_err(|e| shared.map_write_err(e))?
        } else {
            let (held,): (String,) = pipe
                .query_async(&mut shared.conn())
                .await
                .map_err(|e| shared.map_write_err(e))?;
            (held, 0)
        };
        if acked < wanted {
            return Err(StoreError::Indeterminate(crate::Detail::from(format!(
                "{}: the store's identity reached {acked} of {wanted} replicas within {} ms (written on the primary, which a failover may lose); nothing else was written",
                shared.redacted, shared.wait_ms
            ))));
        }
        StoreId::parse(&held).map(Some)
    }

    fn connection_losses(&self) -> u64 {
        self.shared.conn.losses()
    }

    async fn check(&self) -> Result<StoreCheck, StoreError> {
        self.shared
            .conn
            .recheck()
            .await
            .map_err(|e| self.shared.map_err(e))
    }

    fn last_check(&self) -> Option<StoreCheck> {
        self.shared.conn.last_check()
    }
}

/// The code and detail of the first error reply in `e` (a pipeline's included); empty
/// when the server sent none.
fn first_error(e: &RedisError) -> (String, String) {
    match e.clone().into_server_errors() {
        Some(items) if !items.is_empty() => {
            let (_, first) = &items[0];
            (
                first.code().to_string(),
                first.details().unwrap_or("").to_string(),
            )
        }
        _ => (String::new(), String::new()),
    }
}

impl Committed {
    /// The revision a batch committed at, if every replica it waited for acknowledged it.
    fn revision(self, wait_ms: u64) -> Result<u64, StoreError> {
        let revision: u64 = decode(self.answer)?;
        if self.acked < self.wanted {
            return Err(StoreError::Unacknowledged {
                revision,
                acked: self.acked,
                wanted: self.wanted,
                wait_ms,
            });
        }
        Ok(revision)
    }
}

/// Parses a stored `{"r","v"}` record.
fn parse_record(raw: &str) -> Result<Record, StoreError> {
    serde_json::from_str(raw).map_err(|e| {
        StoreError::Corrupt(crate::Detail::caused_by(
            format!("a record is not {{\"r\",\"v\"}}: {e}"),
            e,
        ))
    })
}

/// Reads a Redis `TIME` answer as ms since the Unix epoch.
fn time_ms(seconds: &str, micros: &str) -> Result<u64, StoreError> {
    match (seconds.parse::<u64>(), micros.parse::<u64>()) {
        (Ok(s), Ok(us)) => Ok(s * 1000 + us / 1000),
        _ => Err(StoreError::Corrupt(crate::Detail::from(format!(
            "TIME answered {seconds:?} {micros:?}"
        )))),
    }
}

fn decode<T: redis::FromRedisValue>(value: redis::Value) -> Result<T, StoreError> {
    redis::from_redis_value(value)
        .map_err(|e| StoreError::Corrupt(crate::Detail::caused_by(e.to_string(), e)))
}

fn check_board(board: &str) -> Result<(), StoreError> {
    row_fence_contract::descriptor::validate_board(board)
        .map_err(|e| StoreError::Invalid(crate::Detail::caused_by(e.to_string(), e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_demoted_server_or_a_moving_slot_keeps_the_redis_error_beneath_it() {
        let shared = Shared::open("redis://127.0.0.1:1", "rowfence").unwrap();
        for (code, kind) in [
            ("READONLY", "NotPrimary"),
            ("NOREPLICAS", "NotPrimary"),
            ("MASTERDOWN", "NotPrimary"),
            ("TRYAGAIN", "SlotMigrating"),
            ("CLUSTERDOWN", "SlotMigrating"),
        ] {
            let e = shared.map_err(redis::make_extension_error(
                code.into(),
                Some("the server said so".into()),
            ));
            let (StoreError::NotPrimary(detail) | StoreError::SlotMigrating(detail)) = &e else {
                panic!("{code}: {e:?}");
            };
            assert!(format!("{e:?}").starts_with(kind), "{code}: {e:?}");
            let beneath = detail.source().and_then(|s| s.downcast_ref::<RedisError>());
            assert_eq!(beneath.map(|r| r.code()), Some(Some(code)), "{code}: {e:?}");
        }
    }
}
