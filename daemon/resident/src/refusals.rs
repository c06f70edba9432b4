//! What the daemon does with every REFUSED and COULD NOT READ it decides: appends it to
//! the refusal ledger under the caller's session, lane, row, cwd and action (on a writer
//! thread, so an ask never waits on the disk), keeps the last 100 for `status`, and logs
//! at most one line a minute per (board, action, reason), and of those at most
//! [`LANE_LINES`] a minute per lane and [`ALL_LINES`] a minute in all, so one lane's
//! distinct refusals cannot grow the log without bound; what is over is counted and
//! reported in one "N refusal log lines suppressed" line (the ledger, which rotates, keeps
//! every refusal). A request may be 64 KiB: the
//! ledger gets each text field up to 4 KiB, and what is kept for `status` and the log is
//! cut to 240 bytes ([`budget`]). The writer's queue is bounded: a flood of refusals
//! faster than the disk takes them cannot grow the daemon without limit; records it had
//! no room for are counted (`status`'s `ledger_dropped`) and logged once a minute.

use crate::budget;
use crate::log_limit::{LineQuota, LogLimit, Quota};
use crate::sync::lock;
use row_fence_contract::ledger::{self, LedgerRecord};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How many recent refusals `status` shows.
pub const RECENT: usize = 100;

/// Records waiting for the ledger writer; past this many, new ones are counted, not kept.
pub const LEDGER_QUEUE: usize = 1024;

/// A log line per (board, action, reason) at most this often.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// Refusal log lines per lane (its descriptor's lane, else its session) a minute at most.
pub const LANE_LINES: u32 = 20;

/// Refusal log lines a minute at most, all lanes together.
pub const ALL_LINES: u32 = 200;

/// Records refusals; see the module docs.
pub struct Refusals {
    /// To the ledger writer thread; `None` once closed.
    ledger: Mutex<Option<mpsc::SyncSender<LedgerRecord>>>,
    /// Records the writer had no room for.
    dropped: AtomicU64,
    /// The writer thread, joined on close so no record is lost at exit.
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The newest refusals, oldest first.
    recent: Mutex<VecDeque<LedgerRecord>>,
    /// One log line per (board, action, reason) a minute, in bounded memory.
    logged: LogLimit,
    /// Of those, [`LANE_LINES`] per lane and [`ALL_LINES`] in all a minute.
    quota: LineQuota,
}

impl Refusals {
    /// Starts the ledger writer for the file at `path`.
    pub fn start(path: PathBuf) -> Refusals {
        let (tx, rx) = mpsc::sync_channel::<LedgerRecord>(LEDGER_QUEUE);
        let writer = std::thread::Builder::new()
            .name("refusal-ledger".into())
            .spawn(move || {
                for record in rx {
                    if let Err(e) = ledger::append(&path, &record) {
                        tracing::warn!(path = %path.display(), error = %e, "cannot append to the refusal ledger");
                    }
                }
            })
            .expect("spawning the ledger writer thread");
        Refusals {
            ledger: Mutex::new(Some(tx)),
            dropped: AtomicU64::new(0),
            writer: Mutex::new(Some(writer)),
            recent: Mutex::new(VecDeque::with_capacity(RECENT)),
            logged: LogLimit::new(LOG_EVERY),
            quota: LineQuota::new(LOG_EVERY, LANE_LINES, ALL_LINES),
        }
    }

    /// Records one refusal or COULD NOT READ.
    pub fn record(&self, record: LedgerRecord) {
        let short = shortened(&record);
        self.log(&short);
        {
            let mut recent = lock(&self.recent);
            if recent.len() == RECENT {
                recent.pop_front();
            }
            recent.push_back(short);
        }
        if let Some(tx) = lock(&self.ledger).as_ref()
            && let Err(mpsc::TrySendError::Full(_)) = tx.try_send(for_ledger(record))
        {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if self.logged.allow("ledger queue full") {
                tracing::warn!(
                    dropped,
                    "the refusal ledger's writer is behind ({LEDGER_QUEUE} records queued): refusals are not being recorded"
                );
            }
        }
    }

    fn log(&self, r: &LedgerRecord) {
        let reason = r.verdict.reason().map_or("", |r| r.as_str());
        if !self
            .logged
            .allow((r.board.as_deref(), r.action.as_str(), reason))
        {
            return;
        }
        let who = r.lane.as_deref().or(r.session.as_deref()).unwrap_or("");
        match self.quota.allow(who) {
            Quota::Suppress => return,
            Quota::Log { suppressed } => log_suppressed(suppressed),
        }
        tracing::warn!(
            verdict = r.verdict.wire_name(),
            reason,
            board = r.board.as_deref().unwrap_or(""),
            row = r.row.as_deref().unwrap_or(""),
            lane = r.lane.as_deref().unwrap_or(""),
            // Debug-quoted: an action has spaces (`git push origin`).
            action = ?r.action,
            session = r.session.as_deref().unwrap_or(""),
            "{}",
            r.detail
        );
    }

    /// The newest refusals that fit in [`budget::REFUSALS_BYTES`], oldest first, and how
    /// many older ones were left out.
    pub fn recent(&self) -> (Vec<LedgerRecord>, u64) {
        let (mut kept, omitted) =
            budget::within(lock(&self.recent).iter().rev(), budget::REFUSALS_BYTES);
        kept.reverse();
        (kept, omitted)
    }

    /// Refusals the ledger writer had no room for since start.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Stops taking records and waits until every one is written; logs how many refusal
    /// lines were suppressed since the last summary.
    pub fn close(&self) {
        log_suppressed(self.quota.take_unreported());
        drop(lock(&self.ledger).take());
        if let Some(writer) = lock(&self.writer).take() {
            let _ = writer.join();
        }
    }
}

/// The summary of refusal log lines the quota suppressed (nothing when none were).
fn log_suppressed(suppressed: u64) {
    if suppressed > 0 {
        tracing::warn!(
            suppressed,
            "{suppressed} refusal log lines suppressed (over {LANE_LINES} a minute from one lane or {ALL_LINES} in all); the refusal ledger has each refusal"
        );
    }
}

/// A copy of `record` with every text field cut to [`budget::FIELD_BYTES`].
fn shortened(record: &LedgerRecord) -> LedgerRecord {
    cut_fields(record.clone(), budget::FIELD_BYTES)
}

/// `record` as the ledger keeps it: every text field cut to [`budget::LEDGER_FIELD_BYTES`].
fn for_ledger(record: LedgerRecord) -> LedgerRecord {
    cut_fields(record, budget::LEDGER_FIELD_BYTES)
}

fn cut_fields(mut r: LedgerRecord, max: usize) -> LedgerRecord {
    budget::cut_to(&mut r.detail, max);
    budget::cut_to(&mut r.action, max);
    for text in [
        &mut r.board,
        &mut r.row,
        &mut r.lane,
        &mut r.session,
        &mut r.cwd,
        &mut r.descriptor,
        &mut r.location,
    ]
    .into_iter()
    .flatten()
    {
        budget::cut_to(text, max);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use row_fence_contract::ledger::DecidedBy;
    use row_fence_contract::verdict::{Reason, Verdict};

    #[test]
    fn a_flood_of_long_refusals_is_written_cut_or_counted_never_queued_without_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refusals.jsonl");
        let refusals = Refusals::start(path.clone());
        let action = format!("git push {}", "x".repeat(60_000));
        let total = 3_000u64;
        for i in 0..total {
            let record = LedgerRecord::new(
                DecidedBy::Daemon,
                Verdict::Refused(Reason::DifferentHolder),
                format!("refusal {i}"),
            )
            .with_caller(Some("s"), None, &action);
            refusals.record(record);
        }
        refusals.close();
        // Both generations: 3,000 records of 4 KiB may pass the 8 MiB rotation.
        let mut written = ledger::read(&ledger::rotated(&path)).unwrap_or_default();
        written.extend(ledger::read(&path).unwrap());
        assert_eq!(written.len() as u64 + refusals.dropped(), total);
        assert!(!written.is_empty());
        for r in &written {
            assert!(
                r.action.len() <= budget::LEDGER_FIELD_BYTES,
                "{}",
                r.action.len()
            );
            assert!(r.action.starts_with("git push xxx") && r.action.ends_with('…'));
        }
        let (recent, omitted) = refusals.recent();
        assert_eq!(recent.len() as u64 + omitted, RECENT as u64);
        assert!(recent.iter().all(|r| r.action.len() <= budget::FIELD_BYTES));
    }
}
