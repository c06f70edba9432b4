//! What the home's floors cost an ask (ARCHITECTURE.md, "The lease store"): the store's
//! own ask on the file store, in one process, bare and through the floors (`Monotonic`:
//! the identity, the board's and the row's floors taken before the read, the checks
//! after), and what re-reading `revisions.json` costs the one ask that follows a change
//! of it, with 10 boards of 1,024 row floors each (the most a board keeps).

use row_fence_store::file::FileStore;
use row_fence_store::marks::{MAX_ROWS, Marks};
use row_fence_store::monotonic::Monotonic;
use row_fence_store::{AskCheck, LeaseStore};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Boards in the full floors file.
pub const BOARDS: usize = 10;

/// The store identity the full floors file is kept under.
const STORE: &str = "id:0123456789abcdef0123456789abcdef";

/// The figures.
#[derive(Clone, Debug)]
pub struct FloorFigures {
    /// p50 of the file store's own ask, in µs.
    pub bare_p50_us: f64,
    /// p50 of the same ask through the floors, in µs.
    pub guarded_p50_us: f64,
    /// The floors file with [`BOARDS`] boards of [`MAX_ROWS`] rows, in bytes.
    pub file_bytes: u64,
    /// p50 of reading it and one board's floors from it, in µs (what the first ask after
    /// another process changed it pays).
    pub reread_p50_us: f64,
    /// Asks per figure.
    pub samples: usize,
}

fn p50(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied().unwrap_or(f64::NAN)
}

async fn timed(store: &dyn LeaseStore, check: &AskCheck, samples: usize) -> Result<f64, String> {
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        let judged = store.ask(check).await.map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
        if judged.refusal.is_some() {
            return Err(format!("the warm ask was refused: {judged:?}"));
        }
    }
    Ok(p50(times))
}

/// Measures in `dir` with `samples` asks per figure.
pub fn run(dir: &Path, samples: usize) -> Result<FloorFigures, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let marks_path = dir.join("revisions.json");
    let store_dir = dir.join("store");
    rt.block_on(async {
        let bare = Arc::new(FileStore::new(&store_dir));
        let guarded = Monotonic::new(bare.clone(), Some(marks_path.clone()), true);
        let check = crate::grant::grant(&guarded).await?;
        timed(bare.as_ref(), &check, 50).await?;
        timed(&guarded, &check, 50).await?;
        let bare_p50_us = timed(bare.as_ref(), &check, samples).await?;
        let guarded_p50_us = timed(&guarded, &check, samples).await?;
        // The fullest floors file a home keeps for ten boards.
        let full = Marks::load(Some(dir.join("full.json")));
        let names: Vec<String> = (0..MAX_ROWS).map(|i| format!("row-{i:05}")).collect();
        for b in 0..BOARDS {
            let rows = names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.as_str(), i as u64 + 1));
            full.observe_rows(
                "id:0123456789abcdef0123456789abcdef",
                &format!("board-{b}"),
                rows,
            );
        }
        full.flush().map_err(|e| e.to_string())?;
        let file_bytes = std::fs::metadata(dir.join("full.json"))
            .map_err(|e| e.to_string())?
            .len();
        let mut rereads = Vec::new();
        for _ in 0..50 {
            let t = Instant::now();
            let loaded = Marks::load(Some(dir.join("full.json")));
            // What the ask judges with: one board's floors and one row's.
            let _ = loaded.row(STORE, "board-3", "row-00007");
            rereads.push(t.elapsed().as_secs_f64() * 1e6);
            drop(loaded);
        }
        Ok(FloorFigures {
            bare_p50_us,
            guarded_p50_us,
            file_bytes,
            reread_p50_us: p50(rereads),
            samples,
        })
    })
}

/// The report's part.
pub fn markdown(f: &FloorFigures) -> String {
    format!(
        "\n### What the home's floors cost an ask\n\nThe file store's own ask, in one process, {} asks each: bare p50 {:.1} µs, through the floors (the store's identity, the board's and the row's floors, taken before the read and checked after) p50 {:.1} µs, {:+.1} µs. The floors file with {} boards of {} row floors each is {} bytes; reading it again and the asked board's floors from it, what the first ask after another process changed it pays, p50 {:.0} µs (the other boards are parsed when an ask needs them).\n",
        f.samples,
        f.bare_p50_us,
        f.guarded_p50_us,
        f.guarded_p50_us - f.bare_p50_us,
        BOARDS,
        MAX_ROWS,
        f.file_bytes,
        f.reread_p50_us
    )
}
