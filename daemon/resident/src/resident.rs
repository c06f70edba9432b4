//! The daemon's shared state and what it answers: an ask (stamp check, deadline, one gate
//! call bounded by it, the ledger), a ping and a status. The server owns the sockets;
//! this module owns the decisions. It caches the store connection, never a verdict:
//! every ask reaches the store (ARCHITECTURE.md, "The daemon").

use crate::config::Settings;
use crate::gate::{self, Gated, Located};
use crate::location::LocationFence;
use crate::own_code::OwnCode;
use crate::refusals::Refusals;
use crate::registry::Registry;
use crate::sync::lock;
use row_fence_contract::ledger::{self, DecidedBy, LedgerRecord};
use row_fence_contract::protocol::{Answer, Ask, Op, PROTOCOL_VERSION, Pong, Request};
use row_fence_contract::status::{Counts, Status};
use row_fence_contract::{Reason, Verdict, stamp};
use row_fence_store::{AskCheck, AskLocation, LeaseStore};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The daemon exits with this code when it finds it runs old code (EX_TEMPFAIL), so its
/// supervisor (launchd KeepAlive, systemd Restart=always) starts it on the new code.
pub const EXIT_STALE_CODE: i32 = 75;

/// An ask's deadline is capped at this many ms whatever the asker sends.
pub const MAX_DEADLINE_MS: u64 = 30_000;

/// Work is not started with less than this many ms left: the answer would be `timeout`
/// anyway, so it is `busy` at once.
pub const MIN_WORK_MS: u64 = 2;

/// At most this many store calls in flight; an ask that cannot get one before its
/// deadline is `busy`. The connection is multiplexed, so this bounds memory, not speed.
pub const MAX_STORE_CALLS: usize = 1024;

/// Everything a connection task needs.
pub struct Resident {
    /// The one store (one warm connection for Redis).
    pub store: Arc<dyn LeaseStore>,
    /// What this daemon loaded, to tell whose code is stale.
    pub own_code: OwnCode,
    /// This daemon's code stamp.
    pub stamp: String,
    /// The uids served: our own plus `ROW_FENCE_ALLOWED_UIDS`.
    pub allowed_uids: Vec<u32>,
    /// Where things are.
    pub settings: Settings,
    /// The ledger writer, the recent refusals, the rate-limited log.
    pub refusals: Refusals,
    /// Counters for `status`.
    pub stats: Stats,
    /// When the heartbeat was last written, ms since the Unix epoch (0: never).
    pub heartbeat_ms: Arc<AtomicU64>,
    /// When asks last got answers from the store and last failed on it: the heartbeat
    /// beats only on answers.
    pub proof: Arc<crate::heartbeat::Proof>,
    /// Bounds store calls in flight.
    store_calls: Semaphore,
    /// Cancelled to stop the daemon (signal, or stale code).
    pub shutdown: CancellationToken,
    /// The process exit code once stopped.
    exit_code: AtomicI32,
    /// When the daemon started, ms since the Unix epoch.
    started_at_ms: u64,
    /// Board → tenant, as loaded with the code stamp.
    registry: Registry,
    /// The location fence; `None` unless `ROW_FENCE_LOCATION` is set (inert: no fetch,
    /// no check, no extra field).
    location: Option<Arc<LocationFence>>,
    /// The key broker's keys, bindings and counters, set once when the broker is on.
    pub broker: std::sync::OnceLock<Arc<crate::broker::Shared>>,
    /// The forge API endpoint's token and counters, set once when it is on.
    pub forge_api: std::sync::OnceLock<Arc<crate::forge_api::Shared>>,
    /// A service manager restarts this daemon (`--supervised`): on stale code it exits
    /// for it; otherwise it executes its new binary in place ([`crate::reexec`]).
    supervised: bool,
}

/// Counters, all since start.
#[derive(Default)]
pub struct Stats {
    /// Asks answered.
    pub asks: AtomicU64,
    /// ALLOWED answers.
    pub allowed: AtomicU64,
    /// REFUSED answers.
    pub refused: AtomicU64,
    /// COULD NOT READ answers.
    pub could_not_read: AtomicU64,
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Asks being judged now.
    pub in_flight: AtomicU64,
    /// Denials by reason.
    pub by_reason: Mutex<BTreeMap<Reason, u64>>,
}

impl Resident {
    /// Builds the state; the ledger writer starts here.
    pub fn new(
        store: Arc<dyn LeaseStore>,
        own_code: OwnCode,
        settings: Settings,
        allowed_uids: Vec<u32>,
    ) -> Resident {
        let refusals = Refusals::start(row_fence_contract::paths::ledger(&settings.home));
        Resident {
            stamp: own_code.stamp(),
            store,
            own_code,
            allowed_uids,
            settings,
            refusals,
            stats: Stats::default(),
            heartbeat_ms: Arc::new(AtomicU64::new(0)),
            proof: Arc::default(),
            store_calls: Semaphore::new(MAX_STORE_CALLS),
            shutdown: CancellationToken::new(),
            exit_code: AtomicI32::new(0),
            started_at_ms: ledger::now_ms(),
            registry: Registry::default(),
            location: None,
            broker: std::sync::OnceLock::new(),
            forge_api: std::sync::OnceLock::new(),
            supervised: false,
        }
    }

    /// Says whether a service manager restarts this daemon (`--supervised`).
    pub fn supervised(mut self, supervised: bool) -> Resident {
        self.supervised = supervised;
        self
    }

    /// Sets the registry (each board's tenant and margin) and turns the location fence on
    /// when `fence` is given.
    pub fn with_location(
        mut self,
        registry: Registry,
        fence: Option<Arc<LocationFence>>,
    ) -> Resident {
        self.registry = registry;
        self.location = fence;
        self
    }

    /// Stops the daemon with `code` (in-flight asks finish first).
    pub fn stop(&self, code: i32) {
        self.exit_code.store(code, Ordering::SeqCst);
        self.shutdown.cancel();
    }

    /// The exit code the daemon stops with.
    pub fn exit_code(&self) -> i32 {
        self.exit_code.load(Ordering::SeqCst)
    }

    /// True when `uid` may be served.
    pub fn serves(&self, uid: u32) -> bool {
        self.allowed_uids.contains(&uid)
    }

    /// Answers one parsed request from a peer we serve, whose uid is `uid` (the key
    /// broker's operations answer only the daemon's own uid).
    pub async fn answer(&self, request: Request, uid: u32) -> Answer {
        if crate::broker::admin::is_admin(&request.op) {
            let shared = self.broker.get().map(|shared| shared.as_ref());
            return crate::broker::admin::answer(shared, request.op, uid);
        }
        if let Op::ForgeTokenAdd(add) = request.op {
            let shared = self.forge_api.get().map(|shared| shared.as_ref());
            return crate::forge_api::admin::token_add(shared, add, uid);
        }
        match request.op {
            Op::Ask(ask) => self.ask(*ask, uid).await,
            Op::Ping => Answer {
                v: PROTOCOL_VERSION,
                pong: Some(Pong {
                    pid: std::process::id(),
                    stamp: self.stamp.clone(),
                }),
                ..Answer::default()
            },
            Op::Status => Answer {
                v: PROTOCOL_VERSION,
                status: Some(Box::new(self.status())),
                ..Answer::default()
            },
            Op::KeysAdd(_)
            | Op::KeysList
            | Op::KeysRemove { .. }
            | Op::LanesReload
            | Op::ForgeTokenAdd(_) => {
                unreachable!("answered above (broker::admin::is_admin, forge_api::admin)")
            }
        }
    }

    /// The answer for a peer whose uid we do not serve: no store call is made. The probe
    /// is recorded like any COULD NOT READ (a ledger line, a WARN at most once a minute),
    /// filed under what the request claims, if it parses as an ask.
    pub fn refuse_peer(&self, uid: Option<u32>, pid: Option<i32>, line: &[u8]) -> Answer {
        let who = match (uid, pid) {
            (Some(uid), Some(pid)) => format!("uid {uid} (pid {pid})"),
            (Some(uid), None) => format!("uid {uid}"),
            (None, _) => "an unknown uid".to_string(),
        };
        let detail = format!(
            "this daemon serves uid(s) {:?}, not {who}",
            self.allowed_uids
        );
        let verdict = Verdict::CouldNotRead(Reason::PeerRefused);
        self.count(verdict);
        let claimed = match Request::parse(line).map(|r| r.op) {
            Ok(Op::Ask(ask)) => Some(ask),
            _ => None,
        };
        let record = LedgerRecord::new(DecidedBy::Daemon, verdict, detail.clone())
            .with_uid(uid)
            .with_descriptor(claimed.as_ref().map(|a| &a.descriptor))
            .with_caller(
                claimed.as_ref().and_then(|a| a.caller.session.as_deref()),
                claimed.as_ref().and_then(|a| a.caller.cwd.as_deref()),
                claimed.as_ref().map_or("", |a| a.action.as_str()),
            );
        self.refusals.record(record);
        Answer::could_not_read(Reason::PeerRefused, detail)
    }

    /// A `protocol_error` answer for a malformed request.
    pub fn malformed(&self, detail: String) -> Answer {
        self.count(Verdict::CouldNotRead(Reason::ProtocolError));
        Answer::could_not_read(Reason::ProtocolError, detail)
    }

    async fn ask(&self, ask: Ask, uid: u32) -> Answer {
        let started = Instant::now();
        let d = &ask.descriptor;
        if let Err(e) = d.validate() {
            return self.malformed(format!("the descriptor in the request is invalid: {e}"));
        }
        let (gated, located) = {
            let _in_flight = InFlight::enter(&self.stats.in_flight);
            self.judge(&ask, started).await
        };
        self.count(gated.verdict);
        self.proof.note(gated.verdict);
        if gated.verdict.is_denial() {
            self.refusals
                .record(ledger_record(&ask, &gated, located.as_ref()).with_uid(Some(uid)));
        }
        Answer::verdict(gated.verdict, gated.detail, Some(d))
    }

    async fn judge(&self, ask: &Ask, started: Instant) -> (Gated, Option<AskLocation>) {
        if ask.stamp != self.stamp {
            return (self.stale_code(ask), None);
        }
        let claim = Claim {
            descriptor: &ask.descriptor,
            action: &ask.action,
            session: ask.caller.session.as_deref(),
            uid: None,
        };
        self.judge_claim(&claim, ask.deadline_ms, started).await
    }

    /// Judges a claim the daemon read itself (the key broker's sign requests carry no
    /// descriptor: the daemon reads the bound lane's): the same gate, counters and ledger
    /// as an ask, within `deadline_ms` of `started`.
    pub async fn gate_claim(&self, claim: &Claim<'_>, deadline_ms: u64) -> Gated {
        let started = Instant::now();
        if let Err(e) = claim.descriptor.validate() {
            let gated = Gated {
                verdict: Verdict::CouldNotRead(Reason::DescriptorUnreadable),
                detail: format!("the lane's descriptor is invalid: {e}"),
            };
            self.count(gated.verdict);
            self.refusals.record(claim_record(claim, &gated, None));
            return gated;
        }
        let (gated, located) = {
            let _in_flight = InFlight::enter(&self.stats.in_flight);
            self.judge_claim(claim, deadline_ms, started).await
        };
        self.count(gated.verdict);
        self.proof.note(gated.verdict);
        if gated.verdict.is_denial() {
            self.refusals
                .record(claim_record(claim, &gated, located.as_ref()));
        }
        gated
    }

    /// Records a denial decided before any store call (the key broker's peer bound to no
    /// lane, its descriptor unreadable, a sign request for no allowed login), counted like
    /// any ask, filed under the peer's `uid` (none when the socket could not tell).
    pub fn record_denial(
        &self,
        claim: Option<&Claim<'_>>,
        action: &str,
        gated: &Gated,
        uid: Option<u32>,
    ) {
        self.count(gated.verdict);
        let record = match claim {
            Some(claim) => claim_record(claim, gated, None),
            None => LedgerRecord::new(DecidedBy::Daemon, gated.verdict, gated.detail.clone())
                .with_uid(uid)
                .with_caller(None, None, action),
        };
        self.refusals.record(record);
    }

    async fn judge_claim(
        &self,
        claim: &Claim<'_>,
        deadline_ms: u64,
        started: Instant,
    ) -> (Gated, Option<AskLocation>) {
        let budget = deadline_ms.min(MAX_DEADLINE_MS);
        // Leave time to write the answer back before the asker gives up.
        let margin = (budget / 10).min(50);
        let deadline = started + Duration::from_millis(budget - margin);
        let busy = |detail: String| Gated {
            verdict: Verdict::CouldNotRead(Reason::Busy),
            detail,
        };
        if deadline.saturating_duration_since(Instant::now()) < Duration::from_millis(MIN_WORK_MS) {
            return (
                busy(format!("{} ms left is too little to ask the store", budget)),
                None,
            );
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(Ok(_permit)) = tokio::time::timeout(left, self.store_calls.acquire()).await else {
            return (
                busy(format!(
                    "{MAX_STORE_CALLS} store calls were in flight for the whole {budget} ms"
                )),
                None,
            );
        };
        let d = claim.descriptor;
        let check = AskCheck {
            board: d.board.clone(),
            row: d.row.clone(),
            lane: d.lane.clone(),
            generation: d.generation,
            token: d.token.clone(),
            margin_ms: self.registry.margin_ms(&d.board, self.settings.margin_ms),
            action: claim.action.to_string(),
            session: claim.session.unwrap_or_default().to_string(),
            ..AskCheck::default()
        };
        let located = self.location.as_ref().map(|fence| Located {
            fence,
            tenant: self.registry.tenant(&d.board),
        });
        gate::gate_located(self.store.as_ref(), &check, located, deadline).await
    }

    /// The asker runs other code than we loaded. If our own files changed, we are the
    /// stale one: answer, then stop, for the supervisor to restart us on the new code or
    /// (not supervised) to execute it in place.
    fn stale_code(&self, ask: &Ask) -> Gated {
        let detail = match self.own_code.changed() {
            Some(what) if self.supervised => {
                // The normal upgrade, not a fault.
                tracing::info!(
                    "{what}: exiting with {EXIT_STALE_CODE} so the supervisor restarts this daemon on the new code"
                );
                self.stop(EXIT_STALE_CODE);
                format!(
                    "the daemon runs old code ({what}); its supervisor is restarting it on the new code, retry in a few seconds"
                )
            }
            Some(what) => {
                tracing::info!(
                    "{what}: stopping to execute the new code in place (no supervisor restarts this daemon)"
                );
                self.stop(EXIT_STALE_CODE);
                format!(
                    "the daemon runs old code ({what}); it is restarting on the new code, retry in a few seconds"
                )
            }
            None => stamp::foreign_detail(
                &ask.stamp,
                &ask.caller,
                &self.stamp,
                self.own_code.build(),
                &self.settings.home,
                self.own_code.dir(),
            ),
        };
        Gated {
            verdict: Verdict::CouldNotRead(Reason::StaleCode),
            detail,
        }
    }

    fn count(&self, verdict: Verdict) {
        let counter = match verdict {
            Verdict::Allowed | Verdict::Unfenced => &self.stats.allowed,
            Verdict::Refused(_) => &self.stats.refused,
            Verdict::CouldNotRead(_) => &self.stats.could_not_read,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.stats.asks.fetch_add(1, Ordering::Relaxed);
        if let Some(reason) = verdict.reason() {
            *lock(&self.stats.by_reason).entry(reason).or_default() += 1;
        }
    }

    /// The status object (`row-fence status`).
    pub fn status(&self) -> Status {
        let now = ledger::now_ms();
        let beat = self.heartbeat_ms.load(Ordering::Relaxed);
        let s = &self.stats;
        let (recent_refusals, recent_refusals_omitted) = self.refusals.recent();
        Status {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            stamp: self.stamp.clone(),
            socket: self.settings.socket.display().to_string(),
            home: self.settings.home.display().to_string(),
            store: self.store.describe(),
            key_prefix: self.settings.key_prefix.clone(),
            store_reconnects: self.store.connection_losses(),
            started_at_ms: self.started_at_ms,
            uptime_ms: now.saturating_sub(self.started_at_ms),
            heartbeat_age_ms: (beat > 0).then(|| now.saturating_sub(beat)),
            asks_in_flight: s.in_flight.load(Ordering::Relaxed),
            store_calls_in_flight: self.store.calls_in_flight(),
            store_check: self.store.last_check(),
            connections: s.connections.load(Ordering::Relaxed),
            counts: Counts {
                asks: s.asks.load(Ordering::Relaxed),
                allowed: s.allowed.load(Ordering::Relaxed),
                refused: s.refused.load(Ordering::Relaxed),
                could_not_read: s.could_not_read.load(Ordering::Relaxed),
                by_reason: lock(&s.by_reason).clone(),
            },
            recent_refusals,
            recent_refusals_omitted,
            ledger_dropped: self.refusals.dropped(),
            supervised: self.supervised,
            location_fence: self.location.as_ref().map(|fence| fence.status()),
            broker: self.broker.get().map(|shared| shared.status()),
            forge_api: self.forge_api.get().map(|shared| shared.status()),
        }
    }
}

/// What is judged: a lane's descriptor, the fenced action and the caller's session.
pub struct Claim<'a> {
    /// The descriptor (sent by the asker, or read by the daemon for a bound lane).
    pub descriptor: &'a row_fence_contract::descriptor::Descriptor,
    /// The fenced action, as recorded in the asks stream and the ledger.
    pub action: &'a str,
    /// The caller's session (the key broker puts the peer's uid and pid here).
    pub session: Option<&'a str>,
    /// The peer's uid, for the ledger's share per uid; `None` where the caller is filed
    /// under its uid elsewhere (an ask's answer adds it) or the socket could not tell.
    pub uid: Option<u32>,
}

/// Counts an ask in flight for as long as it lives, also when its task is torn down.
struct InFlight<'a>(&'a AtomicU64);

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicU64) -> InFlight<'a> {
        counter.fetch_add(1, Ordering::Relaxed);
        InFlight(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn ledger_record(ask: &Ask, gated: &Gated, located: Option<&AskLocation>) -> LedgerRecord {
    LedgerRecord::new(DecidedBy::Daemon, gated.verdict, gated.detail.clone())
        .with_descriptor(Some(&ask.descriptor))
        .with_caller(
            ask.caller.session.as_deref(),
            ask.caller.cwd.as_deref(),
            &ask.action,
        )
        .with_location(located.map(|l| (l.location.as_str(), l.epoch)))
}

fn claim_record(claim: &Claim<'_>, gated: &Gated, located: Option<&AskLocation>) -> LedgerRecord {
    LedgerRecord::new(DecidedBy::Daemon, gated.verdict, gated.detail.clone())
        .with_uid(claim.uid)
        .with_descriptor(Some(claim.descriptor))
        .with_caller(claim.session, None, claim.action)
        .with_location(located.map(|l| (l.location.as_str(), l.epoch)))
}
