//! Moving a board onto per-record keys, once, safely repeatable (the fencing-records
//! source, "Migrating a swarm"):
//!
//! - [`document_to_records`]: a Redis document-layout board. In one transaction that
//!   watches the document hash and the board revision, every record of the document is
//!   written through the fenced batch (with the `layout = records` marker), and the
//!   document is rewritten with `moved_to: "records"`. A concurrent write makes it plan
//!   again, up to 16 times. A document writer that read before the move fails its own
//!   compare-and-set, reads again, is routed to the records and lands there.
//! - [`file_to_records`]: a board of the embedded file store, copied into Redis per-record
//!   keys with the same transaction, then its file document is marked `moved_to` so a
//!   daemon still pointed at the file refuses instead of serving stale leases.
//!
//! Both return the number of records written (the layout marker included): 0 when the
//! board was already moved, and then nothing is written.

use super::{RedisStore, check_board, document};
use crate::document::BoardDocument;
use crate::file::FileStore;
use crate::meta::{self, Layout};
use crate::{BLIND, FencedBatch, META, RecordWrite, StoreError, WriteKind};
use redis::aio::MultiplexedConnection;
use serde_json::Value;

/// Attempts before giving up on a board that keeps changing under the migration.
pub const MAX_ATTEMPTS: usize = 16;

/// The refusal without `--writers-upgraded` (the source's wording).
pub const NEEDS_UPGRADED_WRITERS: &str =
    "upgrade every live fencing reader and writer before migrating to per record keys";

/// The batch that writes every record of `document` blind, plus the layout marker.
pub fn migration_batch(document: &BoardDocument) -> FencedBatch {
    let mut writes: Vec<RecordWrite> = document
        .sections
        .iter()
        .flat_map(|(section, records)| {
            records
                .iter()
                .filter(move |(key, _)| !(section == META && key.as_str() == meta::LAYOUT))
                .map(move |(key, record)| RecordWrite {
                    kind: WriteKind::Put,
                    section: section.clone(),
                    key: key.clone(),
                    expected: BLIND,
                    value: record.value.clone(),
                })
        })
        .collect();
    writes.push(RecordWrite {
        kind: WriteKind::Put,
        section: META.into(),
        key: meta::LAYOUT.into(),
        expected: BLIND,
        value: Value::String(Layout::Records.as_str().into()),
    });
    FencedBatch {
        writes,
        ..FencedBatch::default()
    }
}

/// A connection of the migration's own: WATCH/MULTI/EXEC must not share the daemon's
/// multiplexed connection with other callers.
async fn dedicated(store: &RedisStore) -> Result<MultiplexedConnection, StoreError> {
    if store.shared.conn.is_cluster() {
        return Err(StoreError::Invalid(crate::Detail::from(
            "migration needs a standalone Redis: the document hash and a board's keys are in different cluster slots",
        )));
    }
    store
        .shared
        .conn
        .dedicated()
        .await
        .map_err(|e| store.shared.map_err(e))
}

/// Moves a Redis document-layout board onto per-record keys.
pub async fn document_to_records(store: &RedisStore, board: &str) -> Result<usize, StoreError> {
    check_board(board)?;
    let mut con = dedicated(store).await?;
    let current = store.state_keys().current();
    let revision_key = store.keys(board).revision();
    for _ in 0..MAX_ATTEMPTS {
        query::<()>(
            store,
            &mut con,
            redis::cmd("WATCH").arg(&current).arg(&revision_key),
        )
        .await?;
        let raw: Option<String> =
            query(store, &mut con, redis::cmd("HGET").arg(&current).arg(board)).await?;
        let Some(raw) = raw else {
            query::<()>(store, &mut con, &redis::cmd("UNWATCH")).await?;
            return Ok(0);
        };
        let document = document::parse(board, &raw)?;
        if document.moved_to.is_some() {
            query::<()>(store, &mut con, &redis::cmd("UNWATCH")).await?;
            return Ok(0);
        }
        let records_revision: Option<u64> =
            query(store, &mut con, redis::cmd("GET").arg(&revision_key)).await?;
        let mut batch = migration_batch(&document);
        batch.min_revision = Some(document.revision.max(records_revision.unwrap_or(0)) + 1);
        let mut moved = document.clone();
        moved.moved_to = Some(Layout::Records.as_str().into());
        let moved = serde_json::to_string(&moved)
            .map_err(|e| StoreError::Invalid(crate::Detail::caused_by(e.to_string(), e)))?;
        if commit(store, &mut con, board, &batch, Some(&moved)).await? {
            return Ok(batch.writes.len());
        }
    }
    Err(StoreError::RevisionConflict {
        key: "document".into(),
    })
}

/// Copies a board of the embedded file store into Redis per-record keys and marks the
/// file document `moved_to` the (redacted) Redis URL, holding the file's exclusive lock
/// throughout so no file reader or writer gets at the board across the copy. An
/// interrupted earlier copy (Redis done, file not yet marked) is completed and counts 0.
pub async fn file_to_records(
    file: &FileStore,
    store: &RedisStore,
    board: &str,
) -> Result<usize, StoreError> {
    check_board(board)?;
    let mut con = dedicated(store).await?;
    let held = file.hold(board).await?;
    if held.document().moved_to.is_some() {
        return Ok(0);
    }
    let written = copy_into_redis(store, &mut con, board, held.document()).await?;
    held.mark_moved(&store.shared.redacted)?;
    Ok(written)
}

async fn copy_into_redis(
    store: &RedisStore,
    con: &mut MultiplexedConnection,
    board: &str,
    document: &BoardDocument,
) -> Result<usize, StoreError> {
    let keys = store.keys(board);
    let revision_key = keys.revision();
    let meta_key = keys.section(META);
    for _ in 0..MAX_ATTEMPTS {
        query::<()>(
            store,
            con,
            redis::cmd("WATCH").arg(&revision_key).arg(&meta_key),
        )
        .await?;
        let (layout, revision): (Option<String>, Option<u64>) = query(
            store,
            con,
            redis::cmd("EVAL")
                .arg("return {redis.call('HGET', KEYS[1], ARGV[1]), redis.call('GET', KEYS[2])}")
                .arg(2)
                .arg(&meta_key)
                .arg(&revision_key)
                .arg(meta::LAYOUT),
        )
        .await?;
        if layout.is_some_and(|raw| super::records::record_value_is(&raw, Layout::Records))
            || revision.unwrap_or(0) > 0
        {
            query::<()>(store, con, &redis::cmd("UNWATCH")).await?;
            if revision == Some(document.revision + 1) {
                return Ok(0); // our own earlier copy: only the file's marker was missing
            }
            return Err(StoreError::Invalid(crate::Detail::from(format!(
                "board {board} already has records in {} (revision {}); refusing to overwrite them",
                store.shared.redacted,
                revision.unwrap_or(0)
            ))));
        }
        let mut batch = migration_batch(document);
        batch.min_revision = Some(document.revision + 1);
        if commit(store, con, board, &batch, None).await? {
            return Ok(batch.writes.len());
        }
    }
    Err(StoreError::RevisionConflict {
        key: "revision".into(),
    })
}

/// Runs the migration's one fenced batch (the revision raised to the source's, and the
/// moved document, if any, written by the same script: all of it commits or none) as the
/// only command of a transaction on the watched keys, then waits for the store's
/// replicas like every write. `false` when a watched key changed (nothing was written).
/// A plain EVAL: an EVALSHA that met NOSCRIPT inside MULTI would fail alone.
async fn commit(
    store: &RedisStore,
    con: &mut MultiplexedConnection,
    board: &str,
    batch: &FencedBatch,
    moved_document: Option<&str>,
) -> Result<bool, StoreError> {
    let check = store.shared.durable_check().await?;
    let (keys, args) = store.records.batch_call(board, batch, moved_document)?;
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("EVAL")
        .arg(super::FENCED_BATCH_LUA.as_str())
        .arg(keys.len())
        .arg(keys)
        .arg(args);
    let committed: Option<(u64,)> = pipe
        .query_async(con)
        .await
        .map_err(|e| store.shared.map_write_err(e))?;
    let Some((revision,)) = committed else {
        return Ok(false);
    };
    if check.min_replicas > 0 {
        let acked: u64 = redis::cmd("WAIT")
            .arg(check.min_replicas)
            .arg(store.shared.wait_ms)
            .query_async(con)
            .await
            .map_err(|e| store.shared.map_write_err(e))?;
        if acked < check.min_replicas {
            return Err(StoreError::Unacknowledged {
                revision,
                acked,
                wanted: check.min_replicas,
                wait_ms: store.shared.wait_ms,
            });
        }
    }
    Ok(true)
}

async fn query<T: redis::FromRedisValue>(
    store: &RedisStore,
    con: &mut MultiplexedConnection,
    cmd: &redis::Cmd,
) -> Result<T, StoreError> {
    cmd.query_async(con)
        .await
        .map_err(|e| store.shared.map_err(e))
}
