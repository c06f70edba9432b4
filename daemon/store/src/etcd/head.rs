//! A board's head key: its revision counter and its time floor (ARCHITECTURE.md, "The etcd
//! store"). Every fenced batch rewrites it in the same transaction as its records, and
//! commits only if the head is still the one it read (etcd's `mod_revision`), so the
//! revision, and the generations taken from it, rise by exactly one per batch and never
//! repeat; etcd's quorum keeps them from going back across leader changes.
//!
//! etcd has no clock a caller can read, so the etcd store's clock is the daemon's, plus
//! the URL's `max_skew_ms`: a lease is judged expired while any clock within the bound still
//! reads it as live, never after. Every writer raises the head's floor to its clock; a
//! judge or writer whose clock is more than the skew bound below the floor is refused
//! `clock_regressed` (its clock went back, or it is not within the bound).

use crate::StoreError;
use crate::judge::{rfc3339, span};
use serde::{Deserialize, Serialize};

/// The head of a board.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// The board revision: +1 per committed batch (0 for a board never written).
    pub revision: u64,
    /// The highest store clock any writer of the board used, ms since the Unix epoch.
    pub clock_ms: u64,
    /// The nonce of the batch that wrote it (0: written before nonces): how a writer
    /// whose answer was lost tells its own commit from another's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batch: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Head {
    /// Parses the head's stored value (`None`: the board was never written).
    pub fn parse(value: Option<&[u8]>) -> Result<Head, StoreError> {
        match value {
            None => Ok(Head::default()),
            Some(bytes) => serde_json::from_slice(bytes).map_err(|e| {
                StoreError::Corrupt(crate::Detail::caused_by(
                    format!("a board head is not one: {e}"),
                    e,
                ))
            }),
        }
    }

    /// `now_ms` (the store clock), unless it is more than `max_skew_ms` below the floor.
    pub fn check_clock(
        &self,
        board: &str,
        now_ms: u64,
        max_skew_ms: u64,
    ) -> Result<u64, StoreError> {
        if now_ms.saturating_add(max_skew_ms) < self.clock_ms {
            return Err(StoreError::ClockRegressed(format!(
                "this machine's clock (+{max_skew_ms} ms allowed skew) reads {}, {} before the time board {board} was last written with ({}); fix the clock (every machine within max_skew_ms of the others), or, if it ran ahead and was corrected, run `row-fence store accept-clock {board}`",
                rfc3339(now_ms),
                span(self.clock_ms - now_ms),
                rfc3339(self.clock_ms),
            )));
        }
        Ok(now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_within_the_skew_passes_and_one_below_is_refused() {
        let head = Head {
            revision: 3,
            clock_ms: 10_000,
            batch: 0,
        };
        assert_eq!(head.check_clock("b", 9_000, 1_000), Ok(9_000));
        assert!(matches!(
            head.check_clock("b", 8_999, 1_000),
            Err(StoreError::ClockRegressed(_))
        ));
        assert_eq!(Head::parse(None), Ok(Head::default()));
        assert!(matches!(
            Head::parse(Some(b"{")),
            Err(StoreError::Corrupt(_))
        ));
    }
}
