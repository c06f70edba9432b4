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
//!
//! Every record names the uid it came from, and no uid may crowd out another's: one uid
//! holds at most [`LEDGER_QUEUE_PER_UID`] places in the writer's queue, the ledger's
//! rotation keeps each uid's records within a fair share (`ledger`'s rotation), and the
//! recent refusals `status` shows make room by dropping the oldest record of the uid that
//! has the most. Any local uid can make the daemon refuse it (the key broker's socket is
//! open to all), so a flood from one must not erase what another was refused.

use crate::budget;
use crate::log_limit::{LineQuota, LogLimit, Quota};
use crate::sync::lock;
use row_fence_contract::ledger::{self, LedgerRecord};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How many recent refusals `status` shows.
pub const RECENT: usize = 100;

/// Records waiting for the ledger writer; past this many, new ones are counted, not kept.
pub const LEDGER_QUEUE: usize = 1024;

/// Of those, at most this many from one uid: a uid flooding refusals leaves three quarters
/// of the queue to everyone else.
pub const LEDGER_QUEUE_PER_UID: usize = LEDGER_QUEUE / 4;

/// Records in the writer's queue, by the uid they came from (`None`: not told).
type Queued = Arc<Mutex<HashMap<Option<u32>, usize>>>;

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
    /// Records queued per uid, taken back by the writer once written.
    queued: Queued,
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
        let queued = Queued::default();
        let written = queued.clone();
        let writer = std::thread::Builder::new()
            .name("refusal-ledger".into())
            .spawn(move || {
                for record in rx {
                    if let Err(e) = ledger::append(&path, &record) {
                        tracing::warn!(path = %path.display(), error = %e, "cannot append to the refusal ledger");
                    }
                    leave_queue(&written, record.uid);
                }
            })
            .expect("spawning the ledger writer thread");
        Refusals {
            ledger: Mutex::new(Some(tx)),
            dropped: AtomicU64::new(0),
            queued,
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
        make_room(&mut lock(&self.recent), RECENT).push_back(short);
        let uid = record.uid;
        if !enter_queue(&self.queued, uid) {
            self.drop_one(uid, "over its share of the queue");
            return;
        }
        let sent = match lock(&self.ledger).as_ref() {
            Some(tx) => tx.try_send(for_ledger(record)),
            None => Err(mpsc::TrySendError::Disconnected(record)),
        };
        if let Err(unsent) = sent {
            leave_queue(&self.queued, uid);
            if let mpsc::TrySendError::Full(_) = unsent {
                self.drop_one(uid, "the queue is full");
            }
        }
    }

    /// Counts a record the writer had no room for, and says so once a minute.
    fn drop_one(&self, uid: Option<u32>, why: &str) {
        let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        if self.logged.allow("ledger queue full") {
            let uid = uid.map_or("an unknown uid".to_string(), |u| format!("uid {u}"));
            tracing::warn!(
                dropped,
                "the refusal ledger's writer is behind: a refusal from {uid} is not recorded ({why}; {LEDGER_QUEUE} records in all, {LEDGER_QUEUE_PER_UID} per uid)"
            );
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

    /// The refusals that fit in [`budget::REFUSALS_BYTES`], oldest first, and how many
    /// were left out: taken newest first in turns across uids, so one uid's many refusals
    /// cannot push another's single one out of `status`.
    pub fn recent(&self) -> (Vec<LedgerRecord>, u64) {
        let recent = lock(&self.recent);
        let mut picked = Vec::new();
        let mut bytes = 0;
        for i in in_turns(&recent) {
            bytes += serde_json::to_vec(&recent[i]).map_or(usize::MAX / 2, |json| json.len() + 1);
            if bytes > budget::REFUSALS_BYTES {
                break;
            }
            picked.push(i);
        }
        picked.sort_unstable();
        let omitted = (recent.len() - picked.len()) as u64;
        (
            picked.into_iter().map(|i| recent[i].clone()).collect(),
            omitted,
        )
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

/// Takes one of `uid`'s places in the writer's queue; false when it holds all its share.
fn enter_queue(queued: &Queued, uid: Option<u32>) -> bool {
    let mut queued = lock(queued);
    let held = queued.entry(uid).or_default();
    if *held >= LEDGER_QUEUE_PER_UID {
        return false;
    }
    *held += 1;
    true
}

/// Gives one of `uid`'s places back (the map forgets a uid with none).
fn leave_queue(queued: &Queued, uid: Option<u32>) {
    let mut queued = lock(queued);
    if let Some(held) = queued.get_mut(&uid) {
        *held = held.saturating_sub(1);
        if *held == 0 {
            queued.remove(&uid);
        }
    }
}

/// Makes room for one more in `recent` (at most `cap`): the oldest record of the uid with
/// the most goes, so one uid's flood replaces only its own.
fn make_room(recent: &mut VecDeque<LedgerRecord>, cap: usize) -> &mut VecDeque<LedgerRecord> {
    if recent.len() >= cap {
        let mut counts: HashMap<Option<u32>, usize> = HashMap::new();
        for r in recent.iter() {
            *counts.entry(r.uid).or_default() += 1;
        }
        let most = counts
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(uid, _)| uid);
        if let Some(at) = recent.iter().position(|r| Some(r.uid) == most) {
            recent.remove(at);
        }
    }
    recent
}

/// The positions in `records` taken in turns across uids (the uid with the newest record
/// first), each uid's newest first.
fn in_turns(records: &VecDeque<LedgerRecord>) -> Vec<usize> {
    let mut by_uid: Vec<(Option<u32>, Vec<usize>)> = Vec::new();
    for (i, r) in records.iter().enumerate().rev() {
        match by_uid.iter_mut().find(|(uid, _)| *uid == r.uid) {
            Some((_, list)) => list.push(i),
            None => by_uid.push((r.uid, vec![i])),
        }
    }
    let mut order = Vec::with_capacity(records.len());
    for turn in 0.. {
        let before = order.len();
        order.extend(by_uid.iter().filter_map(|(_, list)| list.get(turn)));
        if order.len() == before {
            break;
        }
    }
    order
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
    fn one_uids_flood_leaves_another_uids_refusal_in_status_and_in_the_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refusals.jsonl");
        let refusals = Refusals::start(path.clone());
        let of = |uid: u32, detail: String| {
            LedgerRecord::new(
                DecidedBy::Daemon,
                Verdict::CouldNotRead(Reason::PeerRefused),
                detail,
            )
            .with_uid(Some(uid))
            .with_caller(None, None, &"ssh sign ".repeat(40))
        };
        refusals.record(of(7, "the quiet uid's refusal".into()));
        for i in 0..5_000 {
            refusals.record(of(9, format!("flood {i}")));
        }
        let (recent, omitted) = refusals.recent();
        assert!(
            recent.iter().any(|r| r.detail == "the quiet uid's refusal"),
            "{recent:?}"
        );
        assert!(omitted > 0);
        assert_eq!(recent.last().map(|r| r.detail.as_str()), Some("flood 4999"));
        refusals.close();
        let written = ledger::read(&path).unwrap();
        assert!(
            written
                .iter()
                .any(|r| r.detail == "the quiet uid's refusal")
        );
        // The flood got at most its share of the queue at any moment; what it lost is
        // counted, and nothing of the quiet uid's.
        assert_eq!(written.len() as u64 + refusals.dropped(), 5_001);
    }

    #[test]
    fn a_flood_of_long_refusals_is_written_cut_or_counted_never_queued_without_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refusals.jsonl");
        let refusals = Refusals::start(path.clone());
        let action = format!("git push {}", "x".repeat(60_000));
        // 1,500 records of 4 KiB stay under the 8 MiB rotation: a rotation keeps the
        // newest 8 MiB and lets older lines go (by design, not counted as dropped), which
        // would make the count below depend on how fast the writer kept up.
        let total = 1_500u64;
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
