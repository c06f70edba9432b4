//! The file store as boards grow: the daemon's ask p50 on boards of 10, 1,000
//! and 10,000 rows, each board a document of its own in one `file:DIR` store served by
//! one daemon. The boards are filled in process through the store crate's own
//! `fenced_batch` (other lanes' row leases), then the lane's row is granted through the
//! real `row-fence acquire`, so the descriptor is the product's own. The asks are
//! in-process clients speaking the wire protocol (as [`crate::throughput`] does), so no
//! process start hides what the store's read costs; the boards are interleaved ask by
//! ask, so a neighbour's build slows every size alike.

use crate::fixture::{self, Binaries, Daemon};
use crate::stats::Summary;
use crate::throughput::ask_once;
use row_fence_store::file::FileStore;
use row_fence_store::{BLIND, FencedBatch, LeaseStore, RecordWrite, RowLease, WriteKind};
use std::path::Path;
use std::time::{Duration, Instant};

/// Row leases written per fenced batch while filling a board.
const FILL_BATCH: usize = 500;

/// One board's figures.
#[derive(Clone, Debug)]
pub struct Board {
    /// Rows on the board (row leases in its `claims` section, the lane's own included).
    pub rows: usize,
    /// Each ask's round trip (connect, request, answer), ALLOWED ones only.
    pub latency: Summary,
    /// The same round trips, in ms, for the plots.
    pub samples_ms: Vec<f64>,
    /// Asks not answered ALLOWED.
    pub failed: u64,
}

/// What the case measured, smallest board first.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// One entry per board size.
    pub boards: Vec<Board>,
}

/// Fills one board per entry of `sizes` (ascending) under `work`, starts a daemon on
/// that store and takes `asks` asks per board, after `warmup` untimed ones.
pub fn measure(
    bins: &Binaries,
    work: &Path,
    sizes: &[usize],
    asks: usize,
    warmup: usize,
) -> Result<Figures, String> {
    let dir = work.join("file-store");
    let store = FileStore::new(dir.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let spec = format!("file:{}", dir.display());
    let home = work.join("home-file");
    let cold_home = work.join("cold-home-file");
    let mut descriptors = Vec::new();
    for &rows in sizes {
        let board = board_name(rows);
        runtime.block_on(fill(&store, &board, rows.saturating_sub(1)))?;
        let path = work.join(format!("descriptor-{board}.json"));
        let descriptor = fixture::acquire_on(bins, &cold_home, &spec, &board, &path)?;
        descriptors.push((rows, descriptor));
    }
    let mut daemon = Daemon::start(bins, &home, &spec, &[])?;
    let mut requests = Vec::new();
    for (rows, descriptor) in &descriptors {
        requests.push((*rows, crate::fixture::ask_line(bins, &home, descriptor)?));
    }
    for (rows, request) in &requests {
        crate::throughput::check_allowed(&daemon.socket, request).map_err(|why| {
            format!("the file store ask on the board of {rows} rows is not ALLOWED: {why}")
        })?;
        for _ in 0..warmup {
            let _ = ask_once(&daemon.socket, request);
        }
    }
    let mut walls: Vec<Vec<Duration>> = vec![Vec::with_capacity(asks); requests.len()];
    let mut failed = vec![0u64; requests.len()];
    for _ in 0..asks {
        crate::interrupt::check()?;
        for (i, (_, request)) in requests.iter().enumerate() {
            let started = Instant::now();
            match ask_once(&daemon.socket, request) {
                Ok(true) => walls[i].push(started.elapsed()),
                _ => failed[i] += 1,
            }
        }
    }
    daemon.check_alive()?;
    Ok(Figures {
        boards: requests
            .iter()
            .zip(walls)
            .zip(failed)
            .map(|(((rows, _), walls), failed)| Board {
                rows: *rows,
                latency: Summary::of(&walls),
                samples_ms: walls.iter().map(|w| w.as_secs_f64() * 1e3).collect(),
                failed,
            })
            .collect(),
    })
}

/// The board holding `rows` rows.
fn board_name(rows: usize) -> String {
    format!("file-{rows}")
}

/// Writes `others` row leases of other lanes to `board`, unexpiring within any run.
pub(crate) async fn fill(store: &FileStore, board: &str, others: usize) -> Result<(), String> {
    let expires_at_ms = row_fence_store::file::system_now_ms() + 24 * 3600 * 1000;
    let writes: Vec<RecordWrite> = (0..others)
        .map(|i| {
            let lease = RowLease {
                holder: format!("lane-{}", i % 64),
                generation: 1,
                expires_at_ms,
                tenant: None,
                token_sha256: None,
            };
            Ok(RecordWrite {
                kind: WriteKind::Put,
                section: "claims".into(),
                key: format!("other-{i}"),
                expected: BLIND,
                value: serde_json::to_value(lease).map_err(|e| e.to_string())?,
            })
        })
        .collect::<Result<_, String>>()?;
    for chunk in writes.chunks(FILL_BATCH) {
        let batch = FencedBatch {
            writes: chunk.to_vec(),
            ..FencedBatch::default()
        };
        store
            .fenced_batch(board, &batch)
            .await
            .map_err(|e| format!("filling {board}: {e}"))?;
    }
    Ok(())
}
