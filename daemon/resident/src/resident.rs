//! The daemon's shared state and what it answers: an ask (stamp check, deadline, one gate
//! call bounded by it, the ledger), a ping and a status. The server owns the sockets;
//! this module owns the decisions. It caches the store connection, never a verdict:
//! every ask reaches the store (ARCHITECTURE.md, "The daemon").

use crate::config::Settings;
use crate::gate::Gated;
use crate::judge::{Claim, Judge};
use crate::own_code::OwnCode;
use crate::sync::lock;
use row_fence_contract::ledger::{self, DecidedBy, LedgerRecord};
use row_fence_contract::protocol::{Answer, Ask, Op, PROTOCOL_VERSION, Pong, Request};
use row_fence_contract::status::{Counts, Status};
use row_fence_contract::{Reason, Verdict, scope, stamp};
use row_fence_store::AskLocation;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The daemon exits with this code when it finds it runs old code (EX_TEMPFAIL), so its
/// supervisor (launchd KeepAlive, systemd Restart=always) starts it on the new code.
pub const EXIT_STALE_CODE: i32 = 75;

/// Everything a connection task needs.
pub struct Resident {
    /// The gate, counters and ledger every ask is judged through (shared with the key
    /// broker).
    pub judge: Arc<Judge>,
    /// What this daemon loaded, to tell whose code is stale.
    pub own_code: OwnCode,
    /// This daemon's code stamp.
    pub stamp: String,
    /// The uids served: our own plus `ROW_FENCE_ALLOWED_UIDS`.
    pub allowed_uids: Vec<u32>,
    /// Where things are.
    pub settings: Settings,
    /// When the heartbeat was last written, ms since the Unix epoch (0: never).
    pub heartbeat_ms: Arc<AtomicU64>,
    /// Cancelled to stop the daemon (signal, or stale code).
    pub shutdown: CancellationToken,
    /// The process exit code once stopped.
    exit_code: AtomicI32,
    /// When the daemon started, ms since the Unix epoch.
    started_at_ms: u64,
    /// The key broker's keys, bindings and counters, when the broker is on: built before
    /// the daemon, which answers their changes on its control socket.
    broker: Option<Arc<crate::broker::Shared>>,
    /// The forge API endpoint's token and counters, when it is on.
    forge_api: Option<Arc<crate::forge_api::Shared>>,
    /// The push proxy's HTTPS arm, when an HTTPS forge is configured: `token add` loads
    /// its token too (ARCHITECTURE.md, "Push proxy").
    push_https: Option<Arc<crate::push::https::Https>>,
    /// A service manager restarts this daemon (`--supervised`): on stale code it exits
    /// for it; otherwise it executes its new binary in place ([`crate::reexec`]).
    supervised: bool,
}

impl Resident {
    /// Builds the state around `judge` (built first: the key broker shares it).
    pub fn new(
        judge: Arc<Judge>,
        own_code: OwnCode,
        settings: Settings,
        allowed_uids: Vec<u32>,
    ) -> Resident {
        Resident {
            judge,
            stamp: own_code.stamp(),
            own_code,
            allowed_uids,
            settings,
            heartbeat_ms: Arc::new(AtomicU64::new(0)),
            shutdown: CancellationToken::new(),
            exit_code: AtomicI32::new(0),
            started_at_ms: ledger::now_ms(),
            broker: None,
            forge_api: None,
            push_https: None,
            supervised: false,
        }
    }

    /// The key broker's state, when it is on (built before the daemon).
    pub fn with_broker(mut self, broker: Option<Arc<crate::broker::Shared>>) -> Resident {
        self.broker = broker;
        self
    }

    /// The forge API endpoint's state, when it is on (built before the daemon).
    pub fn with_forge_api(mut self, forge_api: Option<Arc<crate::forge_api::Shared>>) -> Resident {
        self.forge_api = forge_api;
        self
    }

    /// The push proxy's HTTPS arm, when an HTTPS forge is configured.
    pub fn with_push_https(
        mut self,
        push_https: Option<Arc<crate::push::https::Https>>,
    ) -> Resident {
        self.push_https = push_https;
        self
    }

    /// Says whether a service manager restarts this daemon (`--supervised`).
    pub fn supervised(mut self, supervised: bool) -> Resident {
        self.supervised = supervised;
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
            let shared = self.broker.as_deref();
            return crate::broker::admin::answer(shared, request.op, uid);
        }
        if let Op::ForgeTokenAdd(add) = request.op {
            // The push proxy's HTTPS forges take the same token when they are configured.
            let shared = self.forge_api.as_deref();
            let https = self.push_https.as_deref();
            return crate::push::https::token::token_add(https, shared, add, uid);
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
        self.judge.count(verdict);
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
        self.judge.refusals.record(record);
        Answer::could_not_read(Reason::PeerRefused, detail)
    }

    /// A `protocol_error` answer for a malformed request.
    pub fn malformed(&self, detail: String) -> Answer {
        self.judge
            .count(Verdict::CouldNotRead(Reason::ProtocolError));
        Answer::could_not_read(Reason::ProtocolError, detail)
    }

    async fn ask(&self, ask: Ask, uid: u32) -> Answer {
        let started = Instant::now();
        let d = &ask.descriptor;
        if let Err(e) = d.validate() {
            return self.malformed(format!("the descriptor in the request is invalid: {e}"));
        }
        let (gated, located) = {
            let _in_flight = self.judge.in_flight();
            self.judge_ask(&ask, started).await
        };
        self.judge.count(gated.verdict);
        self.judge.proof.note(gated.verdict);
        if gated.verdict.is_denial() {
            self.judge
                .refusals
                .record(ledger_record(&ask, &gated, located.as_ref()).with_uid(Some(uid)));
        }
        Answer::verdict(gated.verdict, gated.detail, Some(d))
    }

    async fn judge_ask(&self, ask: &Ask, started: Instant) -> (Gated, Option<AskLocation>) {
        if ask.stamp != self.stamp {
            return (self.stale_code(ask), None);
        }
        if let Some(refused) = self.outside_scope(ask) {
            return (refused, None);
        }
        let claim = Claim {
            descriptor: &ask.descriptor,
            action: &ask.action,
            session: ask.caller.session.as_deref(),
            uid: None,
        };
        self.judge
            .judge_claim(&claim, ask.deadline_ms, started)
            .await
    }

    /// The refs an ask names (the pre-push hook's), judged against the row's scope before
    /// the lease: a push outside the row's refs is refused however the lease stands, as
    /// the forge hook and the daemon's proxy refuse it at the write. An ask naming no refs,
    /// or a board with no scope, is the lease's alone.
    fn outside_scope(&self, ask: &Ask) -> Option<Gated> {
        if ask.updates.is_empty() {
            return None;
        }
        if ask.updates.len() > scope::MAX_UPDATES {
            return Some(Gated {
                verdict: Verdict::CouldNotRead(Reason::ProtocolError),
                detail: format!(
                    "the ask names {} ref updates, more than the {} one ask judges",
                    ask.updates.len(),
                    scope::MAX_UPDATES
                ),
            });
        }
        if let Err(e) = scope::check_updates(&ask.updates) {
            return Some(Gated {
                verdict: Verdict::CouldNotRead(Reason::ProtocolError),
                detail: format!("the ask's {e}"),
            });
        }
        let d = &ask.descriptor;
        let refused = self
            .judge
            .registry()
            .scope(&d.board)?
            .judge_refs(&d.row, &ask.updates)
            .err()?;
        Some(Gated {
            verdict: Verdict::Refused(Reason::OutsideScope),
            detail: format!("{}/{}: {refused}", d.board, d.row),
        })
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

    /// The status object (`row-fence status`).
    pub fn status(&self) -> Status {
        let now = ledger::now_ms();
        let beat = self.heartbeat_ms.load(Ordering::Relaxed);
        let s = &self.judge.stats;
        let (recent_refusals, recent_refusals_omitted) = self.judge.refusals.recent();
        Status {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            stamp: self.stamp.clone(),
            socket: self.settings.socket.display().to_string(),
            home: self.settings.home.display().to_string(),
            home_bytes: Status::home_bytes_of(&self.settings.home),
            store: self.judge.store.describe(),
            key_prefix: self.settings.key_prefix.clone(),
            store_reconnects: self.judge.store.connection_losses(),
            started_at_ms: self.started_at_ms,
            uptime_ms: now.saturating_sub(self.started_at_ms),
            heartbeat_age_ms: (beat > 0).then(|| now.saturating_sub(beat)),
            asks_in_flight: s.in_flight.load(Ordering::Relaxed),
            store_calls_in_flight: self.judge.store.calls_in_flight(),
            store_check: self.judge.store.last_check(),
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
            ledger_dropped: self.judge.refusals.dropped(),
            supervised: self.supervised,
            location_fence: self.judge.location.as_ref().map(|fence| fence.status()),
            broker: self.broker.as_ref().map(|shared| shared.status()),
            forge_api: self.forge_api.as_ref().map(|shared| shared.status()),
        }
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
