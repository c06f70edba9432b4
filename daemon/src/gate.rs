//! The gate: one function that turns an ask into a verdict against the lease store, used
//! by the daemon for every ask and by `row-fence check` (the cold path) — one spelling of
//! the fence ("a second spelling of a fence is a second fence"). Every store call is
//! bounded by the ask's deadline; every failure is COULD NOT READ (fail closed).

use crate::store::{AskCheck, Judgement, LeaseStore, RowLease};
use row_fence_ask::{Reason, Verdict};
use std::time::{Duration, Instant};

/// A verdict with its human detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gated {
    /// The verdict.
    pub verdict: Verdict,
    /// A sentence: who holds the row, until when, or what failed.
    pub detail: String,
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
                    "{} holds {}/{} at generation {} until {} (in {})",
                    check.lane,
                    check.board,
                    check.row,
                    check.generation,
                    crate::lease::rfc3339(until),
                    span(until.saturating_sub(j.now_ms))
                ),
            }
        }
        Some(reason) => Gated {
            verdict: Verdict::Refused(reason),
            detail: refusal_detail(reason, check, j.lease.as_ref(), j.now_ms),
        },
    }
}

/// The sentence for a refusal, naming the holder, generation and expiry as stored.
pub fn refusal_detail(
    reason: Reason,
    check: &AskCheck,
    lease: Option<&RowLease>,
    now_ms: u64,
) -> String {
    let row = format!("{}/{}", check.board, check.row);
    match (reason, lease) {
        (Reason::DifferentHolder, Some(l)) => format!(
            "{row} is held by {} at generation {}, not by {}",
            l.holder, l.generation, check.lane
        ),
        (Reason::StaleGeneration, Some(l)) => format!(
            "{} holds {row} at generation {}, not {}",
            l.holder, l.generation, check.generation
        ),
        (Reason::LeaseExpired, Some(l)) => format!(
            "{}'s lease on {row} at generation {} expired {} ago",
            l.holder,
            l.generation,
            span(now_ms.saturating_sub(l.expires_at_ms))
        ),
        _ => format!("no lease on {row}"),
    }
}

/// A duration in ms, rounded to seconds, as `1h 59m 3s`.
pub fn span(ms: u64) -> String {
    humantime::format_duration(Duration::from_secs(ms / 1000)).to_string()
}
