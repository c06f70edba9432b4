//! `row-fence top`: the operator's live console of boards, holders, time left, refusals,
//! quarantines and the daemon (ARCHITECTURE.md, "The operator's console").
//!
//! - `model`: the snapshot, the one value the console draws and `--once --json` prints.
//! - `gather`: fills a snapshot from the daemon's socket, the store and the home;
//!   `tail` follows the ledger and the denial log; `refusals` reads a ledger line and
//!   tells its route.
//! - `ui`: the console's state and keys; `draw`: the pure drawing; `terminal`: the loop.

mod draw;
mod gather;
mod model;
mod refusals;
#[cfg(test)]
mod snapshots;
mod tail;
mod terminal;
mod ui;

use row_fence_contract::descriptor::validate_board;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_resident::config::Settings;

/// The least `--refresh-ms`: a faster console would cost the daemon and the store more
/// than it shows.
const MIN_REFRESH_MS: u64 = 100;

/// The most `--refresh-ms`: the console reads the daemon only on a refresh, so a slower
/// one would show a daemon that went away, and every lease's time left, as its last
/// answer for that long (a frozen view is what the console must never show).
const MAX_REFRESH_MS: u64 = 10_000;

/// The `--board` names, each once, in the order given: a board named twice is read and
/// drawn once (it showed twice, every row doubled).
fn once_each(boards: &[String]) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    boards
        .iter()
        .filter(|b| seen.insert(b.as_str()))
        .cloned()
        .collect()
}

/// `--refresh-ms` as the console's period, or why not (a usage error).
fn refresh_period(ms: u64) -> Result<std::time::Duration, RefreshOutOfRange> {
    if ms < MIN_REFRESH_MS {
        return Err(RefreshOutOfRange::TooFast(ms));
    }
    if ms > MAX_REFRESH_MS {
        return Err(RefreshOutOfRange::TooSlow(ms));
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// A `--refresh-ms` outside the console's range.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum RefreshOutOfRange {
    /// Below [`MIN_REFRESH_MS`].
    #[error(
        "--refresh-ms {0} is below {MIN_REFRESH_MS}: a faster console costs the daemon more than it shows"
    )]
    TooFast(u64),
    /// Above [`MAX_REFRESH_MS`].
    #[error(
        "--refresh-ms {0} is above {MAX_REFRESH_MS}: the console would show a daemon gone or a lease run out only that late"
    )]
    TooSlow(u64),
}

#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// Only this board (repeatable) [default: every board the store, the registry or the refusal ledger names]
    #[arg(long, value_name = "BOARD")]
    board: Vec<String>,
    /// How often to read the daemon, the store and the home again, in ms (100 to 10000)
    #[arg(long, default_value_t = 250, value_name = "MS")]
    refresh_ms: u64,
    /// Print one snapshot and exit (with --json: the same data the console draws)
    #[arg(long)]
    once: bool,
    /// Print the snapshot as JSON (with --once)
    #[arg(long, requires = "once")]
    json: bool,
    /// Allow writes from the console: x on a row releases it, after a y (an expired lease, or one whose holder's descriptor this worktree holds)
    #[arg(long, conflicts_with = "once")]
    allow_writes: bool,
}

pub async fn run(args: TopArgs, settings: &Settings) -> Outcome {
    for board in &args.board {
        validate_board(board).map_err(Failure::usage)?;
    }
    let refresh = refresh_period(args.refresh_ms).map_err(|e| Failure::usage(e.to_string()))?;
    let mut gatherer = gather::Gatherer::new(settings, once_each(&args.board))
        .map_err(|e| Failure::could_not(e.to_string()))?;
    if args.once {
        let snapshot = gatherer.gather().await;
        if args.json {
            let text = serde_json::to_string(&snapshot)
                .map_err(|e| Failure::could_not(format!("cannot write the snapshot: {e}")))?;
            out(&text);
        } else {
            print_once(&snapshot);
        }
        // A daemon that is gone is the one thing a script must not miss.
        return Ok(if snapshot.daemon.up {
            exit::ALLOWED
        } else {
            exit::COULD_NOT_READ
        });
    }
    terminal::run(gatherer, settings, refresh, args.allow_writes).await
}

/// `--once` without `--json`: the overview as text, drawn by the console's own function at
/// 120 columns.
fn print_once(snapshot: &model::Snapshot) {
    let rows = snapshot
        .boards
        .iter()
        .map(|b| b.rows.len().max(1))
        .sum::<usize>();
    let height = (rows + snapshot.refusals.len().min(20) + 12).clamp(24, 400) as u16;
    for line in terminal::render_text(snapshot, 120, height, snapshot.taken_at_ms) {
        out(line.trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_board_named_twice_is_read_once() {
        let named = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            once_each(&named(&["b2", "b1", "b2", "b1"])),
            named(&["b2", "b1"])
        );
    }

    #[test]
    fn refresh_ms_outside_100_to_10000_is_a_usage_error() {
        assert_eq!(refresh_period(100), Ok(Duration::from_millis(100)));
        assert_eq!(refresh_period(250), Ok(Duration::from_millis(250)));
        assert_eq!(refresh_period(10_000), Ok(Duration::from_secs(10)));
        for ms in [0, 99, 10_001, u64::MAX] {
            assert!(refresh_period(ms).is_err(), "--refresh-ms {ms}");
        }
    }
}
