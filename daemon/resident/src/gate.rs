//! The gate: one function that turns an ask into a verdict against the lease store, used
//! by the daemon for every ask and by `row-fence check` (the cold path) — one spelling of
//! the fence ("a second spelling of a fence is a second fence"). Every store call is
//! bounded by the ask's deadline; every failure is COULD NOT READ (fail closed). With the
//! location fence on, an ask is allowed only when both the location fence and the lease
//! allow it; the location fence's answer is recorded with the ask either way.

use crate::location::LocationFence;
use row_fence_contract::{Reason, Verdict};
use row_fence_store::judge::{refusal_detail, rfc3339, span};
use row_fence_store::{AskCheck, AskLocation, Judgement, LeaseStore};
use std::sync::Arc;
use std::time::Instant;

/// A verdict with its human detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gated {
    /// The verdict.
    pub verdict: Verdict,
    /// A sentence: who holds the row, until when, or what failed.
    pub detail: String,
}

/// The location fence for one ask: the fence and the board's tenant (from the registry).
pub struct Located<'a> {
    /// The fence.
    pub fence: &'a Arc<LocationFence>,
    /// The board's tenant, if the registry names one.
    pub tenant: Option<&'a str>,
}

/// Gates an ask: the location fence first when it is on (its stamp travels with the ask
/// into the asks stream), then the lease. Returns the verdict and, with the fence on,
/// the stamp (for the ledger).
pub async fn gate_located(
    store: &dyn LeaseStore,
    check: &AskCheck,
    located: Option<Located<'_>>,
    deadline: Instant,
) -> (Gated, Option<AskLocation>) {
    let Some(Located { fence, tenant }) = located else {
        return (gate(store, check, deadline).await, None);
    };
    let decision = fence.check(tenant, deadline).await;
    fence.record(
        tenant,
        &check.board,
        &check.row,
        &check.lane,
        &check.action,
        &decision,
    );
    let stamp = AskLocation {
        location: fence.location().to_string(),
        epoch: decision.epoch,
        fenced: decision.fenced,
    };
    let stamped = AskCheck {
        location: Some(stamp.clone()),
        ..check.clone()
    };
    let leased = gate(store, &stamped, deadline).await;
    let gated = match decision.fenced {
        None => leased,
        Some(reason) => Gated {
            verdict: Verdict::from_reason(reason),
            detail: location_detail(reason, fence, tenant, decision.epoch),
        },
    };
    (gated, Some(stamp))
}

fn location_detail(
    reason: Reason,
    fence: &LocationFence,
    tenant: Option<&str>,
    epoch: i64,
) -> String {
    let here = fence.location();
    let tenant = tenant.unwrap_or("");
    match reason {
        Reason::MapMissing => format!(
            "location fence at {here}: no tenant map (set ROW_FENCE_TENANT_MAP_URL, or none was fetched yet)"
        ),
        Reason::MapUnreachable => format!(
            "location fence at {here}: the tenant map could not be fetched ({}) and none is held",
            fence
                .last_fetch_error()
                .map_or("no fetch finished".to_string(), |e| e.to_string())
        ),
        Reason::MapStale => {
            format!("location fence at {here}: the last good tenant map is over 60 s old")
        }
        Reason::TenantUnknown => {
            format!("location fence at {here}: the board has no tenant in registry/boards.toml")
        }
        Reason::TenantNotInMap => {
            format!("location fence at {here}: tenant {tenant} is not in the map")
        }
        Reason::TenantAmbiguous => {
            format!("location fence at {here}: tenant {tenant} has more than one row in the map")
        }
        Reason::MappedElsewhere => {
            let there = fence
                .row(Some(tenant))
                .and_then(|r| r.location)
                .unwrap_or_else(|| "no location".into());
            format!(
                "location fence at {here}: tenant {tenant} (epoch {epoch}) lives at {}, not here",
                there.trim()
            )
        }
        Reason::TenantNotActive => {
            format!("location fence at {here}: tenant {tenant} (epoch {epoch}) is not active here")
        }
        other => format!("location fence at {here}: {other}"),
    }
}

/// Asks the store whether `check.lane` holds `check.row` at `check.generation`, giving up
/// at `deadline` with `timeout`.
pub async fn gate(store: &dyn LeaseStore, check: &AskCheck, deadline: Instant) -> Gated {
    let left = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(left, store.ask(check)).await {
        Err(_) => Gated {
            verdict: Verdict::CouldNotRead(Reason::Timeout),
            detail: format!("the store did not answer within {} ms", left.as_millis()),
        },
        Ok(Err(e)) => Gated {
            verdict: Verdict::CouldNotRead(e.ask_reason()),
            detail: e.to_string(),
        },
        Ok(Ok(judgement)) => judged(check, &judgement),
    }
}

/// The verdict and detail for a store's judgement.
pub fn judged(check: &AskCheck, j: &Judgement) -> Gated {
    match j.refusal {
        None => {
            let until = j.lease.as_ref().map_or(0, |l| l.expires_at_ms);
            Gated {
                verdict: Verdict::Allowed,
                detail: format!(
                    "{} holds {}/{} at generation {} until {} (in {}; margin {} ms)",
                    check.lane,
                    check.board,
                    check.row,
                    check.generation,
                    rfc3339(until),
                    span(until.saturating_sub(j.now_ms)),
                    check.margin_ms
                ),
            }
        }
        Some(reason) => Gated {
            verdict: Verdict::Refused(reason),
            detail: refusal_detail(reason, check, j.lease.as_ref(), j.now_ms),
        },
    }
}
