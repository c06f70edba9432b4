//! Copying boards between any two stores (`row-fence store copy`, ARCHITECTURE.md, "The
//! etcd store"): every record of every section, read at one revision, written to a board the
//! target has never written, committing at or above the source's revision, so the target
//! hands out no generation the source already did. Larger boards are written in batches
//! that each fit one transaction of the target ([`crate::etcd::batch::MAX_WRITES`]).

use crate::{BLIND, FencedBatch, LeaseStore, RecordWrite, StoreError, WriteKind};

/// What a copy did, per board.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Copied {
    /// The board.
    pub board: String,
    /// Records copied.
    pub records: usize,
    /// The source's revision when it was read.
    pub from_revision: u64,
    /// The target's revision after the copy (≥ `from_revision`).
    pub revision: u64,
}

/// Copies `board` from `from` to `to`. Refuses (`Invalid`, nothing written) a board the
/// source never wrote, or one the target already holds (a revision, or any record); a failure partway leaves the
/// target's board at or above the source's revision and can be finished by copying again
/// after dropping it.
pub async fn copy_board(
    from: &dyn LeaseStore,
    to: &dyn LeaseStore,
    board: &str,
) -> Result<Copied, StoreError> {
    let names = from.section_names(board).await?;
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let snapshot = from.sections(board, &refs).await?;
    if snapshot.revision == 0 {
        return Err(StoreError::Invalid(format!(
            "board {board} was never written on {}; nothing was copied",
            from.describe()
        )));
    }
    let there = to.sections(board, &[]).await?.revision;
    // A board's revision counter alone does not say it is empty: records may have
    // outlived it (a counter deleted by hand), and a copy would mix the two boards.
    let sections_there = to.section_names(board).await?;
    if there != 0 || !sections_there.is_empty() {
        return Err(StoreError::Invalid(format!(
            "{} already holds board {board} (revision {there}, sections {}); nothing was copied",
            to.describe(),
            sections_there.join(", ")
        )));
    }
    let writes: Vec<RecordWrite> = snapshot
        .sections
        .iter()
        .flat_map(|(section, records)| {
            records.iter().map(move |(key, record)| RecordWrite {
                kind: WriteKind::Put,
                section: section.clone(),
                key: key.clone(),
                expected: BLIND,
                value: record.value.clone(),
            })
        })
        .collect();
    let records = writes.len();
    let mut revision = 0;
    let mut expected = Some(0);
    let chunks: Vec<&[RecordWrite]> = if writes.is_empty() {
        vec![&[]]
    } else {
        writes.chunks(crate::etcd::batch::MAX_WRITES).collect()
    };
    for chunk in chunks {
        revision = to
            .fenced_batch(
                board,
                &FencedBatch {
                    writes: chunk.to_vec(),
                    lease: None,
                    // The first batch lands only on a board still unwritten.
                    expected_revision: expected.take(),
                    min_revision: Some(snapshot.revision),
                },
            )
            .await?;
    }
    Ok(Copied {
        board: board.to_string(),
        records,
        from_revision: snapshot.revision,
        revision,
    })
}
