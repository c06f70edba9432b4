//! Gathering one [`Snapshot`]: the daemon's status through its socket (the same client
//! and checks as `row-fence status`), each board's row leases from the store (as
//! `row-fence show` reads them), the refusal ledger and the quarantine from the home
//! (ARCHITECTURE.md, "The operator's console"). Nothing here writes.

use super::model::{
    BoardView, BrokerView, DaemonView, Denial, QuarantineView, Refusal, RowView, Session, Snapshot,
};
use super::refusals::LedgerLine;
use super::tail::Tail;
use crate::open;
use row_fence_contract::client::{ExchangeError, StatusError};
use row_fence_contract::status::Status;
use row_fence_contract::{client, ledger, paths, quarantine};
use row_fence_resident::config::Settings;
use row_fence_resident::registry::{self, Registry};
use row_fence_store::{LeaseStore, StoreError, lease};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Denials kept from the quarantine's log.
const DENIALS_KEPT: usize = 200;

/// How long one refresh waits for the daemon's status, in ms: a daemon slower than this is
/// shown as not answering, and the console keeps its pace.
const STATUS_WAIT_MS: u64 = 1_000;

/// How long one refresh waits for the store, every board's read together: a store that
/// hangs costs each refresh this, not this per board, and the console keeps answering keys.
const STORE_WAIT: Duration = Duration::from_secs(2);

/// What one refresh reads from, and what it keeps between refreshes (the files'
/// positions, the last ask count).
pub struct Gatherer {
    settings: Settings,
    store: Arc<dyn LeaseStore>,
    /// `--board`: only these; empty: every board the store, the registry or the ledger
    /// names.
    named: Vec<String>,
    ledger: Tail<LedgerLine>,
    denials: Tail<quarantine::Denial>,
    registry: RegistryFile,
    /// Each board's rows as last read, with the board revision they were read at: a board
    /// whose revision did not move is not read and parsed again (its time left is counted
    /// from the store's new now), so a quiet board of 1,000 rows costs one small read.
    rows: BTreeMap<String, (u64, Vec<RowView>)>,
    /// (pid, asks answered, when read): the asks-per-second baseline.
    last_asks: Option<(u32, u64, Instant)>,
}

/// What to do about a daemon whose status did not come: one that listens but does not
/// answer in time is running (stopped with SIGSTOP, stuck, overloaded), so starting
/// another is no help (it would refuse: one daemon per home); anything else means none
/// listens.
fn what_to_do(e: &StatusError, home: &std::path::Path) -> String {
    match e {
        StatusError::NoAnswer {
            why: ExchangeError::Timeout,
            ..
        } => format!(
            "a daemon listens but does not answer within {STATUS_WAIT_MS} ms (stopped, stuck or overloaded): read its log ({}, or journalctl --user -u row-fence-resident) and restart it",
            row_fence_resident::detach::log_file(home).display()
        ),
        _ => "start it with row-fence-resident (same --home/--socket), or load its launchd/systemd job".to_string(),
    }
}

impl Gatherer {
    /// A gatherer over `settings`' home, socket and store (opened lazily: a store that is
    /// down is shown as such at each refresh).
    ///
    /// # Errors
    /// The store's settings do not name one the gatherer can open.
    pub fn new(
        settings: &Settings,
        named: Vec<String>,
    ) -> Result<Gatherer, row_fence_resident::config::ConfigError> {
        let store = settings.open_store()?;
        Ok(Gatherer {
            store,
            named,
            ledger: Tail::new(paths::ledger(&settings.home), super::model::REFUSALS_KEPT),
            denials: Tail::new(quarantine::denials_log(&settings.home), DENIALS_KEPT),
            registry: RegistryFile::default(),
            rows: BTreeMap::new(),
            last_asks: None,
            settings: settings.clone(),
        })
    }

    /// One refresh.
    pub async fn gather(&mut self) -> Snapshot {
        let taken_at_ms = ledger::now_ms();
        let daemon = self.daemon();
        let (refusals, refusals_error) = self.refusals();
        let read_before = self.registry.modified;
        let registry_error = self.registry.reload(&self.settings.home);
        if self.registry.modified != read_before {
            // A row's scope may have changed with it.
            self.rows.clear();
        }
        let deadline = tokio::time::Instant::now() + STORE_WAIT;
        let (names, mut boards_note) = self.board_names(&refusals, deadline).await;
        if let Some(e) = registry_error {
            boards_note = Some(e);
        }
        let mut boards = Vec::with_capacity(names.len());
        for board in names {
            boards.push(self.board(board, deadline).await);
        }
        self.rows
            .retain(|name, _| boards.iter().any(|b| &b.board == name));
        Snapshot {
            taken_at_ms,
            home: self.settings.home.display().to_string(),
            daemon,
            boards,
            boards_note,
            refusals,
            refusals_error,
            quarantine: self.quarantine(),
        }
    }

    fn daemon(&mut self) -> DaemonView {
        let socket = self.settings.socket.display().to_string();
        let deadline = Instant::now() + Duration::from_millis(STATUS_WAIT_MS);
        let mut raw = match client::status_json(&self.settings.socket, deadline) {
            Ok(raw) => raw,
            Err(e) => {
                self.last_asks = None;
                return DaemonView {
                    what_to_do: Some(what_to_do(&e, &self.settings.home)),
                    error: Some(e.to_string()),
                    socket,
                    ..DaemonView::default()
                };
            }
        };
        // The refusals are the ledger's (read whole there, the asker's own too): the
        // answer's copy is dropped before the rest is read, a refresh's largest part.
        if let Some(refusals) = raw.get_mut("recent_refusals") {
            *refusals = Value::Array(Vec::new());
        }
        let status: Status = match serde_json::from_value(raw.clone()) {
            Ok(status) => status,
            Err(e) => {
                return DaemonView {
                    error: Some(format!(
                        "{socket} answered a status this build cannot read ({e}): is it another version of row-fence?"
                    )),
                    socket,
                    ..DaemonView::default()
                };
            }
        };
        let now = Instant::now();
        let asks_per_second = match self.last_asks {
            Some((pid, asks, then)) if pid == status.pid && status.counts.asks >= asks => {
                let secs = now.duration_since(then).as_secs_f64();
                (secs > 0.0).then(|| (status.counts.asks - asks) as f64 / secs)
            }
            _ => None,
        };
        self.last_asks = Some((status.pid, status.counts.asks, now));
        let check = status.store_check.clone();
        let mismatch = open::mismatch(&self.settings, self.store.as_ref(), status.clone())
            .map(|m| m.to_string());
        let mut view = DaemonView {
            up: true,
            error: None,
            socket,
            pid: Some(status.pid),
            version: Some(status.version.clone()),
            stamp: Some(status.stamp.clone()),
            uptime_ms: Some(status.uptime_ms),
            heartbeat_age_ms: status.heartbeat_age_ms,
            store_kind: Some(store_kind(&status.store).to_string()),
            store: Some(status.store.clone()),
            role: check.as_ref().map(|c| c.role.clone()),
            replicas: check.as_ref().map(|c| c.replicas),
            min_replicas: check.as_ref().map(|c| c.min_replicas),
            durable: check.as_ref().map(|c| c.durable),
            store_checked_age_ms: check
                .as_ref()
                .map(|c| ledger::now_ms().saturating_sub(c.checked_at_ms)),
            problems: check.map(|c| c.problems).unwrap_or_default(),
            asks: Some(status.counts.asks),
            allowed: Some(status.counts.allowed),
            refused: Some(status.counts.refused),
            could_not_read: Some(status.counts.could_not_read),
            asks_per_second,
            broker: status.broker.map(|b| BrokerView {
                keys: b.keys,
                read_keys: b.read_keys,
                lanes: b.lanes,
                signed: b.signed,
                sign_refused: b.sign_refused,
            }),
            mismatch,
            ..DaemonView::default()
        };
        fields_a_daemon_may_lack(&raw, &mut view);
        view
    }

    fn refusals(&mut self) -> (Vec<Refusal>, Option<String>) {
        let error = self
            .ledger
            .refresh()
            .err()
            .map(|e| format!("{}: {e}", self.ledger.path().display()));
        let refusals = self
            .ledger
            .newest_first()
            .cloned()
            .map(Refusal::from)
            .collect();
        (refusals, error)
    }

    /// The boards to show: `--board`'s, else every board the store lists (when it can),
    /// the registry names, or a refusal names.
    async fn board_names(
        &self,
        refusals: &[Refusal],
        deadline: tokio::time::Instant,
    ) -> (Vec<String>, Option<String>) {
        if !self.named.is_empty() {
            return (self.named.clone(), None);
        }
        let mut names: BTreeSet<String> = self
            .registry
            .registry
            .boards()
            .map(str::to_string)
            .collect();
        names.extend(refusals.iter().filter_map(|r| r.board.clone()));
        let note = match tokio::time::timeout_at(deadline, self.store.boards()).await {
            Ok(Ok(Some(listed))) => {
                names.extend(listed);
                None
            }
            Ok(Ok(None)) => Some(
                "this store cannot list its boards: showing the registry's and those refused lately (--board names others)".to_string(),
            ),
            Ok(Err(e)) => Some(format!("cannot list the store's boards: {e}")),
            Err(_) => Some("the store did not list its boards in time".to_string()),
        };
        names.retain(|b| row_fence_contract::descriptor::validate_board(b).is_ok());
        (names.into_iter().collect(), note)
    }

    async fn board(&mut self, board: String, deadline: tokio::time::Instant) -> BoardView {
        let margin_ms = self
            .registry
            .registry
            .margin_ms(&board, self.settings.margin_ms);
        let failed = |error: String| BoardView {
            error: Some(error),
            board: board.clone(),
            margin_ms,
            rows: Vec::new(),
        };
        let late = || format!("the store did not answer within {} s", STORE_WAIT.as_secs());
        // The revision and the store's now, without the board's records.
        let head = match tokio::time::timeout_at(deadline, self.store.sections(&board, &[])).await {
            Ok(Ok(head)) => head,
            Ok(Err(e)) => return failed(board_error(&e)),
            Err(_) => return failed(late()),
        };
        let rows = match self.rows.get(&board) {
            Some((revision, rows)) if *revision == head.revision => rows
                .iter()
                .map(|r| RowView {
                    left_ms: left_ms(r.expires_at_ms, head.now_ms),
                    ..r.clone()
                })
                .collect(),
            _ => {
                let read = tokio::time::timeout_at(
                    deadline,
                    lease::list(self.store.as_ref(), &board, None),
                );
                let (leases, now) = match read.await {
                    Ok(Ok(read)) => read,
                    Ok(Err(e)) => return failed(board_error(&e)),
                    Err(_) => return failed(late()),
                };
                let rows: Vec<RowView> = leases
                    .into_iter()
                    .map(|l| RowView {
                        scope: self.registry.scope(&board, &l.row),
                        left_ms: left_ms(l.lease.expires_at_ms, now),
                        row: l.row,
                        holder: l.lease.holder,
                        generation: l.lease.generation,
                        expires_at_ms: l.lease.expires_at_ms,
                        tenant: l.lease.tenant,
                    })
                    .collect();
                // Read after the head: a write between the two is read again next time.
                self.rows
                    .insert(board.clone(), (head.revision, rows.clone()));
                rows
            }
        };
        BoardView {
            board,
            margin_ms,
            rows,
            error: None,
        }
    }

    fn quarantine(&mut self) -> QuarantineView {
        let mut errors = Vec::new();
        let sessions = quarantine::sessions(&self.settings.home).unwrap_or_else(|e| {
            errors.push(format!(
                "{}: {e}",
                quarantine::dir(&self.settings.home).display()
            ));
            Vec::new()
        });
        if let Err(e) = self.denials.refresh() {
            errors.push(format!("{}: {e}", self.denials.path().display()));
        }
        let denials: Vec<Denial> = self
            .denials
            .newest_first()
            .map(|d| Denial {
                ts_ms: d.ts_ms,
                session: d.session.clone(),
                tool: d.tool.clone(),
            })
            .collect();
        let mut per_session: BTreeMap<&str, u64> = BTreeMap::new();
        for d in &denials {
            *per_session.entry(d.session.as_str()).or_default() += 1;
        }
        let mut sessions: Vec<Session> = sessions
            .into_iter()
            .map(|s| Session {
                denials: per_session.get(s.session.as_str()).copied().unwrap_or(0),
                session: s.session,
                since_ms: s.since_ms,
                descriptor: s.descriptor,
                refusal: s.refusal,
                unreadable: s.unreadable,
            })
            .collect();
        sessions.sort_by_key(|s| std::cmp::Reverse(s.since_ms));
        QuarantineView {
            sessions,
            denials_total: self.denials.lines(),
            denials,
            error: (!errors.is_empty()).then(|| errors.join("; ")),
        }
    }
}

/// ms from `now` to `expires_at` (negative once passed).
fn left_ms(expires_at_ms: u64, now_ms: u64) -> i64 {
    i64::try_from(expires_at_ms)
        .unwrap_or(i64::MAX)
        .saturating_sub(i64::try_from(now_ms).unwrap_or(i64::MAX))
}

/// `file`, `redis` or `etcd`, from the store as the daemon describes it.
fn store_kind(store: &str) -> &'static str {
    if store.starts_with("redis") || store.starts_with("rediss") {
        "redis"
    } else if store.starts_with("etcd") {
        "etcd"
    } else {
        "file"
    }
}

/// A board read's failure, with the command that clears it when there is one.
fn board_error(e: &StoreError) -> String {
    match e {
        StoreError::Regressed(_) => format!("{e} (row-fence store accept-regression BOARD)"),
        StoreError::ClockRegressed(_) => format!("{e} (row-fence store accept-clock BOARD)"),
        _ => e.to_string(),
    }
}

/// The store's identity, etcd's members and leader (the store check's `identity`,
/// `members`, `leader`) and the read barrier, read from the answer as sent, so a daemon
/// older than a field (or a store without it) shows it absent, never an error. Each is
/// looked for where its sibling fields are (top level, or beside the store's check).
fn fields_a_daemon_may_lack(raw: &Value, view: &mut DaemonView) {
    let find = |names: &[&str]| -> Option<&Value> {
        names.iter().find_map(|name| {
            raw.get(*name)
                .or_else(|| raw.get("store_check").and_then(|c| c.get(*name)))
                .filter(|v| !v.is_null())
        })
    };
    view.store_identity = find(&["store_identity", "identity"]).map(text);
    view.read_barrier = find(&["read_barrier", "barrier"]).map(text);
    view.etcd_leader = find(&["etcd_leader", "leader"]).map(text);
    view.etcd_members = find(&["etcd_members", "members"]).map(|v| match v {
        Value::Array(items) => items.iter().map(text).collect(),
        other => vec![text(other)],
    });
}

/// A JSON value as one line of text: a string as itself, anything else as JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The registry as last read, read again when its file changes: the boards it names,
/// their margins and their rows' scopes.
#[derive(Default)]
struct RegistryFile {
    modified: Option<SystemTime>,
    registry: Registry,
}

impl RegistryFile {
    /// Reads the file again if it changed; the error says why it cannot be used (the
    /// install's margin is shown meanwhile).
    fn reload(&mut self, home: &std::path::Path) -> Option<String> {
        let path = registry::path(home);
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        if modified == self.modified && modified.is_some() {
            return None;
        }
        self.modified = modified;
        match Registry::load(home) {
            Ok(registry) => self.registry = registry,
            Err(e) => {
                *self = RegistryFile::default();
                return Some(e.to_string());
            }
        }
        None
    }

    /// The scope the registry gives `row` of `board` (`[boards.B.scope]`), as one line:
    /// the row's refs, repositories and flags ([`row_fence_contract::scope::Scope::summary`]);
    /// absent when the board has none (any ref).
    fn scope(&self, board: &str, row: &str) -> Option<Vec<String>> {
        Some(vec![self.registry.scope(board)?.summary(row)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    #[test]
    fn a_daemon_that_listens_but_does_not_answer_is_not_told_to_be_started() {
        let socket = PathBuf::from("/h/sock");
        let hung = StatusError::NoAnswer {
            socket: socket.clone(),
            why: ExchangeError::Timeout,
        };
        let said = what_to_do(&hung, Path::new("/h"));
        assert!(
            said.starts_with("a daemon listens but does not answer"),
            "{said}"
        );
        assert!(said.contains("/h/log/resident.log"), "{said}");
        let none = StatusError::NoAnswer {
            socket,
            why: ExchangeError::Unreachable("connection refused".into()),
        };
        assert!(what_to_do(&none, Path::new("/h")).starts_with("start it"));
    }
}
