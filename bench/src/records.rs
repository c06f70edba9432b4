//! The fencing-records cases, measured in process through the daemon crate's
//! own library, against a redis-server of their own (so nothing else's traffic counts):
//!
//! - bytes sent to (and received from) Redis for one single-record change through
//!   `fencing::write`, on the records layout at boards of 100, 5,000 and 100,000 records
//!   (flat as boards grow), and on the document layout at 5,000 (the source
//!   measured 2,013,213 vs 6,758 bytes on a large swarm), read from the server's own
//!   `total_net_input_bytes` / `total_net_output_bytes`;
//! - fenced batches per second with 1 and 16 writers (each its own connection, each on
//!   its own record, so nothing conflicts), on Redis records and on the file store.

use crate::redis_server::RedisServer;
use row_fence_store::fencing;
use row_fence_store::file::FileStore;
use row_fence_store::redis::RedisStore;
use row_fence_store::{BLIND, FencedBatch, LeaseStore, RecordWrite, WriteKind};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The per-record layout's name in the report.
pub const RECORDS: &str = "records";
/// The whole-document layout's name in the report.
pub const DOCUMENT: &str = "document";

/// Writer counts the batch-rate case runs.
pub const WRITERS: [usize; 2] = [1, 16];

/// Bytes one single-record change cost on one layout.
#[derive(Clone, Debug)]
pub struct Bytes {
    /// [`RECORDS`] or [`DOCUMENT`].
    pub layout: &'static str,
    /// Records on the board the change touched one of.
    pub board_records: usize,
    /// Sent to Redis (the server's input), in bytes.
    pub sent: u64,
    /// Received from Redis (the server's output), in bytes.
    pub received: u64,
}

/// Fenced batches per second for one store and writer count.
#[derive(Clone, Debug)]
pub struct Rate {
    /// `redis records` or `file`.
    pub store: &'static str,
    /// Concurrent writers.
    pub writers: usize,
    /// Committed batches.
    pub batches: u64,
    /// Conflict retries (0 expected: the writers touch different records).
    pub retries: u64,
    /// Wall time, in s.
    pub seconds: f64,
}

impl Rate {
    /// Committed batches per second.
    pub fn per_second(&self) -> f64 {
        self.batches as f64 / self.seconds.max(f64::EPSILON)
    }
}

/// What the records cases measured.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// Bytes per single-record change: the records layout at each board size (smallest
    /// first), then the document layout.
    pub bytes: Vec<Bytes>,
    /// Batch rates.
    pub rates: Vec<Rate>,
}

/// Runs both cases: the byte case on the records layout at each of `sizes` (records on
/// the board, ascending) and on the document layout at `document_size`; each rate for
/// `rate_for`. `work` holds the redis-server and the file store.
pub fn measure(
    work: &Path,
    rate_for: Duration,
    sizes: &[usize],
    document_size: usize,
) -> Result<Figures, String> {
    let redis_dir = work.join("records-redis");
    std::fs::create_dir_all(&redis_dir).map_err(|e| e.to_string())?;
    let redis = RedisServer::start(&redis_dir, None)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    runtime.block_on(async {
        // The server is durable (AOF, fsync always): no opt-out, as a user runs it.
        let url = redis.unix_url();
        let mut figures = Figures::default();
        for &size in sizes {
            figures
                .bytes
                .push(bytes_per_change(&redis, &url, RECORDS, size).await?);
        }
        figures
            .bytes
            .push(bytes_per_change(&redis, &url, DOCUMENT, document_size).await?);
        for writers in WRITERS {
            let open_redis = || -> Result<Arc<dyn LeaseStore>, String> {
                Ok(Arc::new(
                    RedisStore::open(&url, "rfbench").map_err(|e| e.to_string())?,
                ))
            };
            figures
                .rates
                .push(batch_rate("redis records", writers, rate_for, open_redis).await?);
            let dir = work.join(format!("records-file-{writers}"));
            let open_file = || -> Result<Arc<dyn LeaseStore>, String> {
                Ok(Arc::new(FileStore::new(dir.clone())))
            };
            figures
                .rates
                .push(batch_rate("file", writers, rate_for, open_file).await?);
        }
        Ok(figures)
    })
}

fn item(i: usize) -> Value {
    json!({"n": i, "title": format!("row {i} of the board"), "holder": format!("lane-{}", i % 16), "notes": "x".repeat(64)})
}

/// Fills board `board` with `count` records through `adapter`.
async fn fill(adapter: &dyn LeaseStore, board: &str, count: usize) -> Result<(), String> {
    let writes: Vec<RecordWrite> = (0..count)
        .map(|i| RecordWrite {
            kind: WriteKind::Put,
            section: "items".into(),
            key: format!("item-{i}"),
            expected: BLIND,
            value: item(i),
        })
        .collect();
    for chunk in writes.chunks(500) {
        let batch = FencedBatch {
            writes: chunk.to_vec(),
            ..FencedBatch::default()
        };
        adapter
            .fenced_batch(board, &batch)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One single-record change through the router (as every writer makes it).
async fn change_one(store: &RedisStore, board: &str, n: u64) -> Result<(), String> {
    fencing::write(
        store,
        board,
        &["items"],
        |view| {
            view.section("items")
                .insert("item-17", json!({"n": n, "title": "changed"}));
            Ok::<_, ()>(())
        },
        None,
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("{e:?}"))
}

fn net_bytes(redis: &RedisServer) -> Result<(u64, u64), String> {
    let info = redis.cli(&["INFO", "stats"])?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .strip_prefix(':')?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .ok_or_else(|| format!("INFO stats has no {name}"))
    };
    Ok((
        field("total_net_input_bytes")?,
        field("total_net_output_bytes")?,
    ))
}

async fn bytes_per_change(
    redis: &RedisServer,
    url: &str,
    layout: &'static str,
    board_records: usize,
) -> Result<Bytes, String> {
    let store = RedisStore::open(url, "rfbench").map_err(|e| e.to_string())?;
    let board = format!("bytes-{layout}-{board_records}");
    if layout == RECORDS {
        fill(store.records(), &board, board_records).await?;
    } else {
        fill(store.document(), &board, board_records).await?;
    }
    // Warm: the scripts are loaded and the connection is up before counting.
    change_one(&store, &board, 0).await?;
    // What counting itself costs (the INFO commands), to subtract.
    let (a_in, a_out) = net_bytes(redis)?;
    let (b_in, b_out) = net_bytes(redis)?;
    let (info_in, info_out) = (b_in - a_in, b_out - a_out);
    let (before_in, before_out) = net_bytes(redis)?;
    change_one(&store, &board, 1).await?;
    let (after_in, after_out) = net_bytes(redis)?;
    Ok(Bytes {
        layout,
        board_records,
        sent: (after_in - before_in).saturating_sub(info_in),
        received: (after_out - before_out).saturating_sub(info_out),
    })
}

async fn batch_rate(
    store: &'static str,
    writers: usize,
    run_for: Duration,
    open: impl Fn() -> Result<Arc<dyn LeaseStore>, String>,
) -> Result<Rate, String> {
    let board = format!("rate-{writers}");
    let started = Instant::now();
    let until = started + run_for;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let handle = open()?;
        let board = board.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("counter-{w}");
            let (mut batches, mut retries) = (0u64, 0u64);
            while Instant::now() < until {
                let written = fencing::write(
                    handle.as_ref(),
                    &board,
                    &["counts"],
                    |view| {
                        let counts = view.section("counts");
                        let n = counts.get(&key).and_then(Value::as_u64).unwrap_or(0);
                        counts.insert(&key, json!(n + 1));
                        Ok::<_, ()>(())
                    },
                    None,
                )
                .await
                .map_err(|e| format!("{e:?}"))?;
                batches += 1;
                retries += written.attempts as u64 - 1;
            }
            Ok::<_, String>((batches, retries))
        }));
    }
    let (mut batches, mut retries) = (0, 0);
    for task in tasks {
        let (b, r) = task.await.map_err(|e| e.to_string())??;
        batches += b;
        retries += r;
    }
    Ok(Rate {
        store,
        writers,
        batches,
        retries,
        seconds: started.elapsed().as_secs_f64(),
    })
}
