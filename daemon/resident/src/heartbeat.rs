//! The heartbeat: `$ROW_FENCE_HOME/heartbeat` (JSON: pid, stamp, written_at_ms, store,
//! key_prefix, and the store's problems), rewritten atomically every interval **only after an ask
//! succeeded end to end on the store** since the last beat, or, when no ask came, after a
//! probe that runs the ask itself. A daemon that is up but whose asks fail (store down, a
//! replica, out of memory, regressed) goes stale. Each beat also re-checks the store's role
//! and settings; a store that cannot keep an acknowledged write is written into the beat,
//! and `row-fence health` reports it unhealthy (ARCHITECTURE.md, "The daemon").

use row_fence_contract::{Reason, Verdict};
use row_fence_store::{AskCheck, LeaseStore, StoreCheck};
use serde::{Deserialize, Serialize};
use std::fs::{self};
use std::io::{self};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Default interval between heartbeats, in ms (`ROW_FENCE_HEARTBEAT_MS`).
pub const DEFAULT_INTERVAL_MS: u64 = 30_000;

/// The longest a heartbeat's store calls may take, in ms.
const PROBE_TIMEOUT_MS: u64 = 5_000;

/// The board the probe asks about (a slug no lane uses; the probe records nothing).
pub const PROBE_BOARD: &str = row_fence_store::redis::durability::PROBE_BOARD;

/// The heartbeat file's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The daemon's pid.
    pub pid: u32,
    /// The daemon's code stamp.
    pub stamp: String,
    /// When written, ms since the Unix epoch (this machine's clock).
    pub written_at_ms: u64,
    /// The store, password redacted.
    pub store: String,
    /// The prefix of the daemon's Redis keys: a writer under another prefix writes where
    /// the daemon does not read.
    #[serde(default)]
    pub key_prefix: String,
    /// What makes the store unable to keep an acknowledged write (each names the setting
    /// and the fix); `row-fence health` is unhealthy while any is listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub store_problems: Vec<String>,
    /// What could not be checked, and opt-outs in force (not unhealthy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub store_notes: Vec<String>,
}

/// Who beats: what every heartbeat names besides its time and the store's findings.
#[derive(Clone, Debug)]
pub struct Identity {
    /// The daemon's code stamp.
    pub stamp: String,
    /// The prefix of its Redis keys.
    pub key_prefix: String,
}

/// When asks last got an answer from the store, and when they last failed on it: the
/// heartbeat's proof that the store answers asks (not just pings).
#[derive(Debug, Default)]
pub struct Proof {
    /// Last ask the store judged (ALLOWED or a lease refusal), ms since the Unix epoch.
    answered_ms: AtomicU64,
    /// Last ask that failed on the store (COULD NOT READ for a store reason or a timeout).
    failed_ms: AtomicU64,
}

impl Proof {
    /// Notes an ask's verdict: the store answered it, failed it, or was not what decided
    /// it (the location fence, the stamp, a busy daemon).
    pub fn note(&self, verdict: Verdict) {
        let now = row_fence_contract::ledger::now_ms();
        match verdict {
            Verdict::Allowed
            | Verdict::Refused(
                Reason::NotHeld
                | Reason::DifferentHolder
                | Reason::StaleGeneration
                | Reason::LeaseExpired
                | Reason::TokenMismatch
                | Reason::LeaseExpiring,
            ) => self.answered_ms.store(now, Ordering::Relaxed),
            Verdict::CouldNotRead(
                Reason::StoreUnreachable
                | Reason::StoreError
                | Reason::StoreNotPrimary
                | Reason::StoreRegressed
                | Reason::ClockRegressed
                | Reason::Timeout
                | Reason::ProtocolError,
            ) => self.failed_ms.store(now, Ordering::Relaxed),
            _ => {}
        }
    }
}

/// Writes the heartbeat atomically (temp file, fsync, rename), 0600.
pub fn write(path: &Path, heartbeat: &Heartbeat) -> io::Result<()> {
    let mut bytes = serde_json::to_vec(heartbeat).map_err(io::Error::other)?;
    bytes.push(b'\n');
    row_fence_store::atomic_file::write_private(path, &bytes)
}

/// Reads a heartbeat file.
pub fn read(path: &Path) -> io::Result<Heartbeat> {
    let bytes = fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// What one beat's store calls found.
enum Found {
    /// Asks (or the probe) got answers; the store's check.
    Answers(StoreCheck),
    /// Why not.
    Failed(String),
}

/// Beats until `stop`: each interval the store's role and settings are checked, and the
/// file is rewritten (and `last_ms` set) only when asks got answers from the store since
/// the last beat, or, with no asks in between, the probe did. A failing store writes
/// nothing.
pub async fn run(
    store: Arc<dyn LeaseStore>,
    path: std::path::PathBuf,
    identity: Identity,
    interval: Duration,
    last_ms: Arc<AtomicU64>,
    proof: Arc<Proof>,
    stop: CancellationToken,
) {
    // The daemon is the heartbeat's only writer: temp files a killed one left are garbage.
    for leftover in row_fence_store::atomic_file::leftovers(&path) {
        let _ = fs::remove_file(leftover);
    }
    let mut since = 0;
    loop {
        let started = row_fence_contract::ledger::now_ms();
        match beat(store.as_ref(), &proof, since).await {
            Found::Answers(check) => {
                let beat = Heartbeat {
                    pid: std::process::id(),
                    stamp: identity.stamp.clone(),
                    written_at_ms: row_fence_contract::ledger::now_ms(),
                    store: store.describe(),
                    key_prefix: identity.key_prefix.clone(),
                    store_problems: check.problems,
                    store_notes: check.notes,
                };
                // A slow disk must not hold the thread that answers asks.
                let written_at_ms = beat.written_at_ms;
                let target = path.clone();
                let written = tokio::task::spawn_blocking(move || write(&target, &beat))
                    .await
                    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
                match written {
                    Ok(()) => last_ms.store(written_at_ms, Ordering::Relaxed),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "cannot write the heartbeat")
                    }
                }
            }
            Found::Failed(why) => tracing::warn!("heartbeat: {why}; not beating"),
        }
        since = started;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}

/// One beat's store calls: the check, then the proof that asks get answers.
async fn beat(store: &dyn LeaseStore, proof: &Proof, since: u64) -> Found {
    let limit = Duration::from_millis(PROBE_TIMEOUT_MS);
    let check = match tokio::time::timeout(limit, store.check()).await {
        Ok(Ok(check)) => check,
        Ok(Err(e)) => return Found::Failed(format!("the store check failed: {e}")),
        Err(_) => {
            return Found::Failed(format!(
                "the store check did not answer within {PROBE_TIMEOUT_MS} ms"
            ));
        }
    };
    let answered = proof.answered_ms.load(Ordering::Relaxed);
    let failed = proof.failed_ms.load(Ordering::Relaxed);
    if answered >= since && answered > 0 {
        return Found::Answers(check);
    }
    if failed >= since && failed > 0 {
        return Found::Failed("every ask since the last beat failed on the store".into());
    }
    let probe = AskCheck {
        board: PROBE_BOARD.into(),
        row: "heartbeat".into(),
        lane: "row-fence-resident".into(),
        generation: 0,
        action: "heartbeat probe".into(),
        probe: true,
        ..AskCheck::default()
    };
    match tokio::time::timeout(limit, store.ask(&probe)).await {
        Ok(Ok(_)) => Found::Answers(check),
        Ok(Err(e)) => Found::Failed(format!("the probe ask failed: {e}")),
        Err(_) => Found::Failed(format!(
            "the probe ask did not answer within {PROBE_TIMEOUT_MS} ms"
        )),
    }
}
