//! What the daemon does with every REFUSED and COULD NOT READ it decides: appends it to
//! the refusal ledger under the caller's session, lane, row, cwd and action (on a writer
//! thread, so an ask never waits on the disk), keeps the last 100 for `status`, and logs
//! at most one line a minute per (board, action, reason). The ledger gets the whole
//! record; what is kept for `status` and the log is cut to size, since a request may be
//! 64 KiB and a `status` answer must stay within the protocol's 64 KiB.

use crate::budget;
use crate::log_limit::LogLimit;
use crate::sync::lock;
use row_fence_ask::ledger::{self, LedgerRecord};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How many recent refusals `status` shows.
pub const RECENT: usize = 100;

/// A log line per (board, action, reason) at most this often.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// Records refusals; see the module docs.
pub struct Refusals {
    /// To the ledger writer thread; `None` once closed.
    ledger: Mutex<Option<mpsc::Sender<LedgerRecord>>>,
    /// The writer thread, joined on close so no record is lost at exit.
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The newest refusals, oldest first.
    recent: Mutex<VecDeque<LedgerRecord>>,
    /// One log line per (board, action, reason) a minute, in bounded memory.
    logged: LogLimit,
}

impl Refusals {
    /// Starts the ledger writer for the file at `path`.
    pub fn start(path: PathBuf) -> Refusals {
        let (tx, rx) = mpsc::channel::<LedgerRecord>();
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
            writer: Mutex::new(Some(writer)),
            recent: Mutex::new(VecDeque::with_capacity(RECENT)),
            logged: LogLimit::new(LOG_EVERY),
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
        if let Some(tx) = lock(&self.ledger).as_ref() {
            let _ = tx.send(record);
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
        tracing::warn!(
            verdict = r.verdict.wire_name(),
            reason,
            board = r.board.as_deref().unwrap_or(""),
            row = r.row.as_deref().unwrap_or(""),
            lane = r.lane.as_deref().unwrap_or(""),
            action = %r.action,
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

    /// Stops taking records and waits until every one is written.
    pub fn close(&self) {
        drop(lock(&self.ledger).take());
        if let Some(writer) = lock(&self.writer).take() {
            let _ = writer.join();
        }
    }
}

/// A copy of `record` with every text field cut to [`budget::FIELD_BYTES`].
fn shortened(record: &LedgerRecord) -> LedgerRecord {
    let mut r = record.clone();
    budget::cut(&mut r.detail);
    budget::cut(&mut r.action);
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
        budget::cut(text);
    }
    r
}
