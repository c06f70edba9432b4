//! The one rule that judges a row lease against an ask, and the sentences that explain a
//! judgement (holder, generation, expiry as stored). Used by every adapter (the Lua ask
//! script implements the same rule), by the row-lease writes and by the gate, so a refusal
//! reads the same wherever it was decided.

use crate::{AskCheck, RowLease};
use row_fence_contract::{LeaseToken, Reason};
use std::time::Duration;

/// Judges a row lease against an ask at `now_ms`: the one rule every adapter applies
/// (ARCHITECTURE.md, "Verdicts and exit codes"; the Lua ask script judges the first four
/// steps in the store and the Redis adapter then calls this on the lease it returned, so
/// the token and the margin are judged in one place for every adapter). Holder first, so a
/// takeover reads `different_holder`; then generation; then expiry (at or before now); then
/// the lease token ([`token_matches`]); then the margin (less than `margin_ms` left is
/// `lease_expiring`: the write the verdict allows happens after it).
pub fn judge(lease: Option<&RowLease>, ask: &AskCheck, now_ms: u64) -> Option<Reason> {
    let Some(lease) = lease else {
        return Some(Reason::NotHeld);
    };
    if lease.holder != ask.lane {
        Some(Reason::DifferentHolder)
    } else if lease.generation != ask.generation {
        Some(Reason::StaleGeneration)
    } else if lease.expires_at_ms <= now_ms {
        Some(Reason::LeaseExpired)
    } else if !token_matches(lease, ask.token.as_ref()) {
        Some(Reason::TokenMismatch)
    } else if lease.expires_at_ms - now_ms < ask.margin_ms {
        Some(Reason::LeaseExpiring)
    } else {
        None
    }
}

/// True when `presented` is the lease's token: its SHA-256 equals the stored
/// `token_sha256` (constant-time). No token presented, or a lease that stores no hash (granted
/// before lease tokens), never matches: such a lease is armed by `acquire --reissue`.
pub fn token_matches(lease: &RowLease, presented: Option<&LeaseToken>) -> bool {
    match (presented, lease.token_sha256.as_deref()) {
        (Some(token), Some(stored)) => token.matches(stored),
        _ => false,
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
        (Reason::TokenMismatch, Some(l)) if l.token_sha256.is_none() => {
            use row_fence_contract::spelling::{Word, command_line};
            format!(
                "{} holds {row} at generation {}, granted before lease tokens: its holder arms it with {}",
                l.holder,
                l.generation,
                command_line(
                    "acquire",
                    &[
                        Word::Positional(&check.board),
                        Word::Positional(&check.row),
                        Word::Option("--lane", &l.holder),
                        Word::Flag("--reissue"),
                        Word::Flag("--write-descriptor"),
                    ],
                )
            )
        }
        (Reason::TokenMismatch, Some(l)) => format!(
            "{} holds {row} at generation {}, but this descriptor does not carry that lease's token (only the descriptor written by the grant does)",
            l.holder, l.generation
        ),
        (Reason::LeaseExpiring, Some(l)) => format!(
            "{}'s lease on {row} at generation {} has {} ms left, less than the {} ms margin a write needs (renew it: row-fence renew)",
            l.holder,
            l.generation,
            l.expires_at_ms.saturating_sub(now_ms),
            check.margin_ms
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

/// Formats ms since the Unix epoch as RFC 3339 (seconds).
/// Total: a time past what RFC 3339 can write (the year 9999), as a stored record may
/// hold, prints as its number instead of failing.
pub fn rfc3339(ms: u64) -> String {
    /// 9999-12-31T23:59:59.999Z, the last instant RFC 3339 can write.
    const LAST_MS: u64 = 253_402_300_799_999;
    if ms > LAST_MS {
        return format!("{ms} ms after the Unix epoch (past the year 9999)");
    }
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn any_stored_expiry_prints_without_panicking() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert!(rfc3339(u64::MAX).contains("past the year 9999"));
        assert!(rfc3339(253_402_300_800_000).contains("past the year 9999"));
    }
}
