//! The location fence (ARCHITECTURE.md, "Location fence"; the location-fencing source), inert
//! unless `ROW_FENCE_LOCATION` is set. When the same boards are worked from more than one
//! site, a board's tenant may act only from its one active location: an ask is allowed
//! only when the tenant → location map is fresh, has exactly one row for the board's
//! tenant, and that row is here and `active` ([`policy`]).
//!
//! [`LocationFence`] holds the last good map ([`map`]) and fetches it ([`fetch`]): a map
//! younger than 30 s is served from memory; the first check after that starts one shared
//! refetch (concurrent checks share it); a failed refetch keeps the last good map until it
//! is 60 s old; while fetches fail the next try is 5 s later. A check waits for a fetch
//! only when it holds no usable map. It never throws: every failure is a reason.

pub mod fetch;
pub mod map;
pub mod policy;

use crate::budget;
use crate::log_limit::LogLimit;
use crate::sync::lock;
use fetch::{Fetcher, Source};
use map::{MapError, TenantMap};
use policy::{Decision, MapState};
use row_fence_contract::Reason;
use row_fence_contract::status::{LocationRefusal, LocationStatus};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A map younger than this (ms) is served from memory.
pub const REFRESH_MS: u64 = 30_000;

/// While fetches fail, the next try is this much later (ms): one timeout per 5 s, not one
/// per ask.
pub const RETRY_MS: u64 = 5_000;

/// How many location refusals `status` shows.
pub const RECENT: usize = 100;

/// A log line per (tenant, action, reason) at most this often.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// The fence's clock, ms since the Unix epoch: the system's, or a test's.
pub trait Clock: Send + Sync {
    /// Now.
    fn now_ms(&self) -> u64;
}

/// This machine's clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        row_fence_contract::ledger::now_ms()
    }
}

/// The fence's settings (env `ROW_FENCE_LOCATION`, `ROW_FENCE_TENANT_MAP_URL`,
/// `ROW_FENCE_TENANT_MAP_ACCESS_CLIENT_ID`, `…_SECRET`).
#[derive(Clone, Debug)]
pub struct Settings {
    /// This daemon's location id.
    pub location: String,
    /// Where the map is; `None`: every ask is `map_missing`.
    pub source: Option<Source>,
    /// Served from memory this long (ms); [`REFRESH_MS`] unless tuned.
    pub refresh_ms: u64,
}

/// The fence: settings, the held map, the shared fetch, recent refusals.
pub struct LocationFence {
    settings: Settings,
    clock: Arc<dyn Clock>,
    fetcher: Option<Fetcher>,
    state: Mutex<State>,
    /// Bumped after every fetch, so checks waiting on one wake up.
    fetched: tokio::sync::watch::Sender<u64>,
    /// Fetch requests sent, for status and tests.
    fetches: AtomicU64,
    /// The newest location refusals, for `status`.
    recent: Mutex<VecDeque<LocationRefusal>>,
    /// One log line per (tenant, action, reason) a minute, in bounded memory.
    logged: LogLimit,
}

#[derive(Default)]
struct State {
    /// The last good map and when we fetched it (our clock).
    held: Option<(TenantMap, u64)>,
    /// Why the last fetch failed, if it did.
    last_error: Option<MapError>,
    /// Not before this (ms) may the next fetch start (the retry spacing).
    next_try_ms: u64,
    /// A fetch is running.
    fetching: bool,
}

impl LocationFence {
    /// A fence for `settings` on `clock`; errors when the HTTP client cannot be built.
    pub fn new(settings: Settings, clock: Arc<dyn Clock>) -> Result<Arc<LocationFence>, MapError> {
        let fetcher = settings.source.clone().map(Fetcher::new).transpose()?;
        Ok(Arc::new(LocationFence {
            settings,
            clock,
            fetcher,
            state: Mutex::new(State::default()),
            fetched: tokio::sync::watch::channel(0).0,
            fetches: AtomicU64::new(0),
            recent: Mutex::new(VecDeque::with_capacity(RECENT)),
            logged: LogLimit::new(LOG_EVERY),
        }))
    }

    /// Why the last fetch failed, if it did (for `map_unreachable`'s detail).
    pub fn last_fetch_error(&self) -> Option<MapError> {
        lock(&self.state).last_error.clone()
    }

    /// This daemon's location.
    pub fn location(&self) -> &str {
        &self.settings.location
    }

    /// How many fetches were started.
    pub fn fetches(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }

    /// Decides for `tenant`, fetching the map when it is due. A check with no usable map
    /// waits (at most until `deadline`) for the fetch it started or joined; past the
    /// deadline it is `fence_error`.
    pub async fn check(self: &Arc<Self>, tenant: Option<&str>, deadline: Instant) -> Decision {
        let mut waiter = self.fetched.subscribe();
        let wait = {
            let mut state = lock(&self.state);
            let now = self.clock.now_ms();
            self.start_fetch_if_due(&mut state, now);
            let usable = state
                .held
                .as_ref()
                .is_some_and(|(_, at)| now.saturating_sub(*at) <= policy::STALE_AFTER_MS);
            state.fetching && !usable
        };
        if wait {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, waiter.changed()).await {
                Ok(Ok(())) => {}
                _ => {
                    return Decision {
                        fenced: Some(Reason::FenceError),
                        epoch: self.peek_epoch(tenant),
                    };
                }
            }
        }
        self.decide(tenant)
    }

    /// The decision the held map gives now, without fetching.
    pub fn decide(&self, tenant: Option<&str>) -> Decision {
        let state = lock(&self.state);
        policy::decide(
            &self.settings.location,
            tenant,
            &self.map_state(&state),
            self.clock.now_ms(),
        )
    }

    /// The tenant's one row in the held map, if it has exactly one (for messages).
    pub fn row(&self, tenant: Option<&str>) -> Option<map::TenantRow> {
        let tenant = tenant?;
        let state = lock(&self.state);
        let (map, _) = state.held.as_ref()?;
        let mut rows = map.tenants.iter().filter(|r| policy::same(&r.id, tenant));
        match (rows.next(), rows.next()) {
            (Some(row), None) => Some(row.clone()),
            _ => None,
        }
    }

    fn peek_epoch(&self, tenant: Option<&str>) -> i64 {
        self.decide(tenant).epoch
    }

    fn map_state(&self, state: &State) -> MapState {
        MapState {
            configured: self.fetcher.is_some(),
            held: state
                .held
                .as_ref()
                .map(|(map, at)| (map.tenants.clone(), *at)),
            last_fetch_failed: state.last_error.is_some(),
        }
    }

    fn start_fetch_if_due(self: &Arc<Self>, state: &mut State, now: u64) {
        if self.fetcher.is_none() || state.fetching || now < state.next_try_ms {
            return;
        }
        let due = state
            .held
            .as_ref()
            .is_none_or(|(_, at)| now.saturating_sub(*at) >= self.settings.refresh_ms);
        if !due {
            return;
        }
        state.fetching = true;
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let fence = self.clone();
        tokio::spawn(async move {
            // Reset `fetching` and wake waiters even if the fetch task is torn down.
            let _done = FetchDone(fence.clone());
            let result = match &fence.fetcher {
                Some(fetcher) => fetcher.fetch().await,
                None => Err(MapError::NoUrl),
            };
            fence.finish_fetch(result);
        });
    }

    fn finish_fetch(&self, result: Result<TenantMap, MapError>) {
        let now = self.clock.now_ms();
        let mut state = lock(&self.state);
        match result {
            Ok(map) => {
                state.held = Some((map, now));
                state.last_error = None;
                state.next_try_ms = 0;
            }
            Err(error) => {
                tracing::warn!(url = %self.fetcher.as_ref().map(Fetcher::endpoint).unwrap_or_default(), "tenant map fetch failed: {error}");
                state.last_error = Some(error);
                state.next_try_ms = now + RETRY_MS;
            }
        }
    }

    /// Records a location refusal for `status` and logs it at most once a minute per
    /// (tenant, action, reason).
    pub fn record(
        &self,
        tenant: Option<&str>,
        board: &str,
        row: &str,
        lane: &str,
        action: &str,
        decision: &Decision,
    ) {
        let Some(reason) = decision.fenced else {
            return;
        };
        let tenant = tenant.unwrap_or("").to_string();
        let entry = LocationRefusal {
            ts_ms: self.clock.now_ms(),
            tenant: tenant.clone(),
            board: board.to_string(),
            row: row.to_string(),
            lane: lane.to_string(),
            action: action.to_string(),
            reason,
            epoch: decision.epoch,
        };
        let entry = shortened(entry);
        if self.logged.allow((tenant.as_str(), action, reason)) {
            tracing::warn!(
                "location fence: fenced {} for {} at {} (board {}): {reason}",
                named("the action", &entry.action),
                named("the tenant", &entry.tenant),
                self.settings.location,
                entry.board
            );
        }
        let mut recent = lock(&self.recent);
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back(entry);
    }

    /// The status object: location, map age, rows, last fetch error, last 100 refusals.
    /// It never fetches.
    pub fn status(&self) -> LocationStatus {
        let state = lock(&self.state);
        let now = self.clock.now_ms();
        let no_rows = Vec::new();
        let held_rows = state.held.as_ref().map_or(&no_rows, |(m, _)| &m.tenants);
        let (rows, rows_omitted) = budget::within(held_rows.iter(), budget::MAP_ROWS_BYTES);
        let (mut recent_refusals, recent_refusals_omitted) = budget::within(
            lock(&self.recent).iter().rev(),
            budget::LOCATION_REFUSALS_BYTES,
        );
        recent_refusals.reverse();
        LocationStatus {
            location: self.settings.location.clone(),
            map_url: self.fetcher.as_ref().map(Fetcher::endpoint),
            map_age_ms: state.held.as_ref().map(|(_, at)| now.saturating_sub(*at)),
            map_generated_at: state
                .held
                .as_ref()
                .and_then(|(m, _)| m.generated_at.as_ref())
                .map(bounded_value),
            last_fetch_error: state.last_error.as_ref().map(|e| {
                let mut text = e.to_string();
                budget::cut_to(&mut text, budget::FETCH_ERROR_BYTES);
                text
            }),
            fetches: self.fetches(),
            rows,
            rows_omitted,
            recent_refusals,
            recent_refusals_omitted,
        }
    }
}

struct FetchDone(Arc<LocationFence>);

impl Drop for FetchDone {
    fn drop(&mut self) {
        lock(&self.0.state).fetching = false;
        self.0.fetched.send_modify(|n| *n += 1);
    }
}

/// `entry` with its text fields cut for `status` ([`budget::cut`]).
fn shortened(mut entry: LocationRefusal) -> LocationRefusal {
    for text in [
        &mut entry.tenant,
        &mut entry.board,
        &mut entry.row,
        &mut entry.lane,
        &mut entry.action,
    ] {
        budget::cut(text);
    }
    entry
}

/// The map's own `generatedAt` for `status`: as it is when small, else its JSON text cut
/// ([`budget::cut`]); the map server, not the operator, decides its size.
fn bounded_value(value: &serde_json::Value) -> serde_json::Value {
    let mut text = value.to_string();
    if text.len() <= budget::FIELD_BYTES {
        return value.clone();
    }
    budget::cut(&mut text);
    serde_json::Value::String(text)
}

/// `what "value"` for the log, or `no what` when the value is empty (an ask that named no
/// action, a board no tenant owns): never a bare `""`.
fn named(what: &str, value: &str) -> String {
    match value {
        "" => format!("no {}", what.trim_start_matches("the ")),
        v => format!("{what} {v:?}"),
    }
}
