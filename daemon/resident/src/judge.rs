//! The daemon's one judge of claims (ARCHITECTURE.md, "The daemon"): the gate bounded by
//! a deadline and by the store calls in flight, the counters and the refusal ledger. The
//! ask socket ([`crate::resident`]) and the key broker's sign requests
//! ([`crate::broker`]) both judge through it, so a signature is judged, counted and
//! recorded as an ask is. It is built first and handed to both; it knows neither.

use crate::config::Settings;
use crate::gate::{self, Gated, Located};
use crate::heartbeat::Proof;
use crate::location::LocationFence;
use crate::refusals::Refusals;
use crate::registry::Registry;
use crate::sync::lock;
use row_fence_contract::ledger::{DecidedBy, LedgerRecord};
use row_fence_contract::{Reason, Verdict};
use row_fence_store::{AskCheck, AskLocation, LeaseStore};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// At most this many store calls in flight; an ask that cannot get one before its
/// deadline is `busy`. The connection is multiplexed, so this bounds memory, not speed.
pub const MAX_STORE_CALLS: usize = 1024;

/// An ask's deadline is capped at this many ms whatever the asker sends.
pub const MAX_DEADLINE_MS: u64 = 30_000;

/// Work is not started with less than this many ms left: the answer would be `timeout`
/// anyway, so it is `busy` at once.
pub const MIN_WORK_MS: u64 = 2;

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

/// The store, what bounds its calls, the registry and location fence a claim is judged
/// with, and where verdicts are counted and denials recorded.
pub struct Judge {
    /// The one store (one warm connection for Redis).
    pub store: Arc<dyn LeaseStore>,
    /// The ledger writer, the recent refusals, the rate-limited log.
    pub refusals: Refusals,
    /// Counters for `status`.
    pub stats: Stats,
    /// When asks last got answers from the store and last failed on it: the heartbeat
    /// beats only on answers.
    pub proof: Arc<Proof>,
    /// Bounds store calls in flight.
    store_calls: Semaphore,
    /// Board → tenant and margin, as loaded with the code stamp.
    registry: Registry,
    /// The location fence; `None` unless `ROW_FENCE_LOCATION` is set (inert: no fetch,
    /// no check, no extra field).
    pub(crate) location: Option<Arc<LocationFence>>,
    /// The margin of a board the registry gives none, in ms.
    margin_ms: u64,
}

impl Judge {
    /// A judge on `store` with `settings`' ledger and margin; the ledger writer starts
    /// here. No registry and no location fence until [`Judge::with_location`].
    pub fn new(store: Arc<dyn LeaseStore>, settings: &Settings) -> Judge {
        Judge {
            store,
            refusals: Refusals::start(row_fence_contract::paths::ledger(&settings.home)),
            stats: Stats::default(),
            proof: Arc::default(),
            store_calls: Semaphore::new(MAX_STORE_CALLS),
            registry: Registry::default(),
            location: None,
            margin_ms: settings.margin_ms,
        }
    }

    /// Sets the registry (each board's tenant and margin) and turns the location fence on
    /// when `fence` is given.
    pub fn with_location(mut self, registry: Registry, fence: Option<Arc<LocationFence>>) -> Judge {
        self.registry = registry;
        self.location = fence;
        self
    }

    /// Judges a claim the daemon read itself (the key broker's sign requests carry no
    /// descriptor: the daemon reads the bound lane's): the same gate, counters and ledger
    /// as an ask, within `deadline_ms` of now.
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
            let _in_flight = self.in_flight();
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

    /// Counts a claim as in flight for as long as the guard lives.
    pub(crate) fn in_flight(&self) -> InFlight<'_> {
        InFlight::enter(&self.stats.in_flight)
    }

    /// The gate on `claim`, within `deadline_ms` of `started` and one of the store calls
    /// in flight; neither counted nor recorded (the caller does both).
    pub(crate) async fn judge_claim(
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
            margin_ms: self.registry.margin_ms(&d.board, self.margin_ms),
            action: claim.action.to_string(),
            session: claim.session.unwrap_or_default().to_string(),
            ..AskCheck::default()
        };
        let located = self.location.as_ref().map(|fence| Located {
            fence,
            tenant: self.registry.tenant(&d.board),
        });
        let (mut gated, located) =
            gate::gate_located(self.store.as_ref(), &check, located, deadline).await;
        // The ALLOWED line says what the row's holder may push (ARCHITECTURE.md, "Forge hook").
        if gated.verdict == Verdict::Allowed
            && let Some(scope) = self.registry.scope(&d.board)
        {
            gated
                .detail
                .push_str(&format!("; scope: {}", scope.summary(&d.row)));
        }
        (gated, located)
    }

    /// The board registry this daemon loaded with its code stamp (margins, tenants,
    /// rows' scopes).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Counts one answer with `verdict`.
    pub(crate) fn count(&self, verdict: Verdict) {
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
}

/// Counts an ask in flight for as long as it lives, also when its task is torn down.
pub(crate) struct InFlight<'a>(&'a AtomicU64);

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

/// The ledger record of a denied claim.
fn claim_record(claim: &Claim<'_>, gated: &Gated, located: Option<&AskLocation>) -> LedgerRecord {
    LedgerRecord::new(DecidedBy::Daemon, gated.verdict, gated.detail.clone())
        .with_uid(claim.uid)
        .with_descriptor(Some(claim.descriptor))
        .with_caller(claim.session, None, claim.action)
        .with_location(located.map(|l| (l.location.as_str(), l.epoch)))
}
