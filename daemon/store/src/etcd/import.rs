//! A copied board written into etcd (`row-fence store copy`, ARCHITECTURE.md, "The etcd
//! store"). One transaction holds at most 128 operations and 1.5 MiB, so a board is written
//! in parts: its records first, each part a transaction that lands only while the board has
//! no head, then the head and the log entry at the source's revision, which make it usable.
//! Until then the board's records stand above a head it does not have, so every ask and
//! write on it answers `store_regressed` ([`super::batch::head_behind`]): a partial copy is
//! never served. Running the copy again resumes it (a record already there must equal the
//! source's, and is not written again); [`drop_partial`] removes one in one transaction.

use super::EtcdStore;
use super::batch::MAX_WRITES;
use super::errors::Call;
use super::head::Head;
use super::keys::{BoardKeys, prefix_end};
use crate::copy::{CopiedRecord, ImportError};
use crate::{FencedBatch, LeaseStore, Record, StoreError};
use etcd_client::{Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp, TxnOpResponse};
use std::collections::BTreeMap;

/// Bytes of keys and values one part writes at most: under etcd's default
/// `--max-request-bytes` (1.5 MiB) with room for the request's own framing.
pub const MAX_PART_BYTES: usize = 1024 * 1024;

/// Writes `records` as board `board` at `revision` (see the module).
pub async fn import(
    store: &EtcdStore,
    board: &str,
    records: &[CopiedRecord],
    revision: u64,
) -> Result<u64, ImportError> {
    let total = records.len();
    let fail = |written: usize, error: StoreError| ImportError {
        written,
        total,
        partial: written > 0,
        error,
    };
    let keys = store.keys(board);
    let stored: Vec<(String, String)> = records
        .iter()
        .map(|r| {
            let record = Record {
                revision,
                value: r.value.clone(),
            };
            let value = serde_json::to_string(&record).unwrap_or_default();
            (keys.record(&r.section, &r.key), value)
        })
        .collect();
    check(board, records, &stored).map_err(|e| fail(0, e))?;
    let there = existing(store, &keys).await.map_err(|e| fail(0, e))?;
    let written_before = there.len();
    for key in there.keys() {
        let ours = stored.iter().find(|(k, _)| k == key);
        if ours.is_none_or(|(_, v)| Some(v) != there.get(key)) {
            return Err(fail(
                0,
                StoreError::Invalid(crate::Detail::from(format!(
                    "board {board} there holds a record the copy would not write ({key}): not a partial copy of this board; nothing was written"
                ))),
            ));
        }
    }
    let missing: Vec<&(String, String)> = stored
        .iter()
        .filter(|(k, _)| !there.contains_key(k))
        .collect();
    let mut written = written_before;
    for part in parts(&missing) {
        let puts = part
            .iter()
            .map(|(k, v)| TxnOp::put(k.as_str(), v.as_str(), None))
            .collect();
        land(store, &keys, puts)
            .await
            .map_err(|e| fail(written, e))?;
        written += part.len();
    }
    let nonce = rand::random::<u64>().max(1);
    let head = Head {
        revision,
        clock_ms: store.clock_ms(),
        batch: nonce,
    };
    let entry = serde_json::json!({
        "revision": revision,
        "owner": "",
        "records": total,
        "batch": nonce,
    });
    let finish = vec![
        TxnOp::put(
            keys.head(),
            serde_json::to_string(&head).unwrap_or_default(),
            None,
        ),
        TxnOp::put(keys.log_entry(revision), entry.to_string(), None),
    ];
    land(store, &keys, finish)
        .await
        .map_err(|e| fail(written, e))?;
    Ok(revision)
}

/// Refuses, before anything is written, a board whose names are not ones row-fence
/// writes or a record too large for one transaction.
fn check(
    board: &str,
    records: &[CopiedRecord],
    stored: &[(String, String)],
) -> Result<(), StoreError> {
    crate::document::validate_batch(&FencedBatch {
        writes: records.iter().map(CopiedRecord::put).collect(),
        ..FencedBatch::default()
    })?;
    for ((key, value), record) in stored.iter().zip(records) {
        let size = key.len() + value.len();
        if size > MAX_PART_BYTES {
            return Err(StoreError::Invalid(crate::Detail::from(format!(
                "record {}/{} of board {board} is {size} bytes, more than one etcd transaction writes ({MAX_PART_BYTES} bytes within --max-request-bytes 1.5 MiB); nothing was written",
                record.section, record.key
            ))));
        }
    }
    Ok(())
}

/// The records of a board without a head, key → stored value; `Invalid` for a board with
/// a head (it is in use: nothing is copied into it).
async fn existing(
    store: &EtcdStore,
    keys: &BoardKeys,
) -> Result<BTreeMap<String, String>, StoreError> {
    let start = keys.records();
    let answers = store
        .read(vec![
            TxnOp::get(keys.head(), None),
            TxnOp::get(
                start.clone(),
                Some(GetOptions::new().with_range(prefix_end(&start))),
            ),
        ])
        .await?;
    let mut answers = answers.into_iter();
    if let Some(head) = answers.next().and_then(|kvs| kvs.into_iter().next()) {
        let head = Head::parse(Some(head.value()))?;
        return Err(StoreError::Invalid(crate::Detail::from(format!(
            "{} already holds the board (revision {}, head {}); nothing was copied",
            store.describe(),
            head.revision,
            keys.head()
        ))));
    }
    Ok(answers
        .next()
        .unwrap_or_default()
        .into_iter()
        .map(|kv| {
            (
                String::from_utf8_lossy(kv.key()).into_owned(),
                String::from_utf8_lossy(kv.value()).into_owned(),
            )
        })
        .collect())
}

/// `missing` in parts that each fit one transaction (the head's compare, then puts).
fn parts<'a>(missing: &'a [&'a (String, String)]) -> Vec<Vec<&'a (String, String)>> {
    let mut parts: Vec<Vec<&(String, String)>> = Vec::new();
    let mut bytes = 0;
    for record in missing {
        let size = record.0.len() + record.1.len();
        let full = parts
            .last()
            .is_none_or(|p| p.len() >= MAX_WRITES || bytes + size > MAX_PART_BYTES);
        if full {
            parts.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        if let Some(last) = parts.last_mut() {
            last.push(record);
        }
    }
    parts
}

/// One transaction of `ops` that lands only while the board has no head.
async fn land(store: &EtcdStore, keys: &BoardKeys, ops: Vec<TxnOp>) -> Result<(), StoreError> {
    let txn = Txn::new()
        .when(vec![Compare::create_revision(
            keys.head(),
            CompareOp::Equal,
            0,
        )])
        .and_then(ops);
    let answered = store.txn(txn, Call::Write).await?;
    if answered.value.succeeded() {
        return Ok(());
    }
    Err(StoreError::Invalid(crate::Detail::from(format!(
        "the board got a head while it was being copied (another writer made it usable): {}",
        keys.head()
    ))))
}

/// Drops a partial copy: every key of a board without a head, in one transaction.
pub async fn drop_partial(store: &EtcdStore, board: &str) -> Result<usize, StoreError> {
    let keys = store.keys(board);
    let base = keys.base().to_string();
    let txn = Txn::new()
        .when(vec![Compare::create_revision(
            keys.head(),
            CompareOp::Equal,
            0,
        )])
        .and_then(vec![TxnOp::delete(
            base.clone(),
            Some(
                DeleteOptions::new()
                    .with_range(prefix_end(&base))
                    .with_prev_key(),
            ),
        )]);
    let response = store.txn(txn, Call::Write).await?.value;
    if !response.succeeded() {
        return Err(StoreError::Invalid(crate::Detail::from(format!(
            "board {board} has a head: it is not a partial copy (it was finished, or written by row-fence); nothing was dropped"
        ))));
    }
    let dropped = response
        .op_responses()
        .into_iter()
        .map(|r| match r {
            TxnOpResponse::Delete(d) => d.deleted() as usize,
            _ => 0,
        })
        .sum();
    if dropped == 0 {
        return Err(StoreError::Invalid(crate::Detail::from(format!(
            "there is no partial copy of board {board} to drop"
        ))));
    }
    Ok(dropped)
}
