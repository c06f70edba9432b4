//! The heartbeat: `$ROW_FENCE_HOME/heartbeat` (JSON: pid, stamp, written_at_ms, store),
//! rewritten atomically every interval **only after a store call succeeded**, so a daemon
//! that is up but disconnected goes stale. `row-fence health` reads it: the liveness
//! signal for monitoring (DESIGN.md, "The daemon").

use row_fence_store::LeaseStore;
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

/// The longest a heartbeat's store call may take, in ms.
const PING_TIMEOUT_MS: u64 = 5_000;

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

/// Beats until `stop`: each interval, one store ping; on success the file is rewritten
/// and `last_ms` set to its time. A failing store writes nothing.
pub async fn run(
    store: Arc<dyn LeaseStore>,
    path: std::path::PathBuf,
    stamp: String,
    interval: Duration,
    last_ms: Arc<AtomicU64>,
    stop: CancellationToken,
) {
    loop {
        let ping = tokio::time::timeout(Duration::from_millis(PING_TIMEOUT_MS), store.ping()).await;
        match ping {
            Ok(Ok(())) => {
                let beat = Heartbeat {
                    pid: std::process::id(),
                    stamp: stamp.clone(),
                    written_at_ms: row_fence_ask::ledger::now_ms(),
                    store: store.describe(),
                };
                match write(&path, &beat) {
                    Ok(()) => last_ms.store(beat.written_at_ms, Ordering::Relaxed),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "cannot write the heartbeat")
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "heartbeat: the store call failed; not beating")
            }
            Err(_) => tracing::warn!(
                "heartbeat: the store did not answer within {PING_TIMEOUT_MS} ms; not beating"
            ),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
    }
}
