//! Copying boards between any two stores (`row-fence store copy`, ARCHITECTURE.md, "The
//! etcd store"): every record of every section, read at one revision, written to a board the
//! target holds nothing of, committing at or above the source's revision, so the target
//! hands out no generation the source already did. The target gets an identity of its own
//! (its first write), never the source's.
//!
//! All or nothing where one write holds a board (the file store, Redis). On etcd, whose
//! transactions are bounded (128 operations, 1.5 MiB), the board is written in parts and
//! made usable last ([`crate::etcd::import`]): a copy that fails partway leaves a partial
//! board that answers `store_regressed` to every ask and write, and the same copy run
//! again finishes it (the records already there are checked, not written again), or
//! `--drop-partial` drops it. The error says how many records are in.

use crate::identity::StoreId;
use crate::{BLIND, LeaseStore, RecordWrite, StoreError, WriteKind};

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

/// One record of a copied board.
#[derive(Clone, Debug, PartialEq)]
pub struct CopiedRecord {
    /// Its section.
    pub section: String,
    /// Its key.
    pub key: String,
    /// Its value.
    pub value: serde_json::Value,
}

impl CopiedRecord {
    /// The record as a blind put.
    pub fn put(&self) -> RecordWrite {
        RecordWrite {
            kind: WriteKind::Put,
            section: self.section.clone(),
            key: self.key.clone(),
            expected: BLIND,
            value: self.value.clone(),
        }
    }
}

/// A copy that failed: how far it got, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {error}", progress(*written, *total, *partial))]
pub struct ImportError {
    /// Records of the board now in the target (0 when nothing was written).
    pub written: usize,
    /// Records of the board.
    pub total: usize,
    /// True when the target holds a partial copy (some records, not usable yet).
    pub partial: bool,
    /// Why it stopped.
    pub error: StoreError,
}

fn progress(written: usize, total: usize, partial: bool) -> String {
    if partial {
        format!(
            "{written} of {total} records are in the target as a partial copy, which answers store_regressed to every ask and write until finished; run the same store copy again to finish it (records already there are checked, not written again), or `row-fence store copy --drop-partial --to URL BOARD` to drop it"
        )
    } else if written == 0 {
        format!("nothing was written ({total} records)")
    } else {
        format!("{written} of {total} records were written")
    }
}

/// Why a copy did not run or did not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CopyError {
    /// Refused before anything was written (the reason says why).
    #[error("{0}")]
    Refused(StoreError),
    /// The write failed; what it left in the target is said.
    #[error("{0}")]
    Import(ImportError),
}

/// Copies `board` from `from` to `to`. Refuses (nothing written) a board the source never
/// wrote, and one the target holds a revision or a record of, unless it is a partial copy
/// (records but no revision, each equal to the source's: the target resumes it).
pub async fn copy_board(
    from: &dyn LeaseStore,
    to: &dyn LeaseStore,
    board: &str,
) -> Result<Copied, CopyError> {
    let names = from
        .section_names(board)
        .await
        .map_err(CopyError::Refused)?;
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let snapshot = from
        .sections(board, &refs)
        .await
        .map_err(CopyError::Refused)?;
    if snapshot.revision == 0 {
        return Err(CopyError::Refused(StoreError::Invalid(
            crate::Detail::from(format!(
                "board {board} was never written on {}; nothing was copied",
                from.describe()
            )),
        )));
    }
    let there = to
        .sections(board, &[])
        .await
        .map_err(CopyError::Refused)?
        .revision;
    if there != 0 {
        let sections_there = to.section_names(board).await.unwrap_or_default();
        return Err(CopyError::Refused(StoreError::Invalid(
            crate::Detail::from(format!(
                "{} already holds board {board} (revision {there}, sections {}); nothing was copied",
                to.describe(),
                sections_there.join(", ")
            )),
        )));
    }
    // The target's own identity, never the source's: written before its first record.
    to.create_identity(&StoreId::generate())
        .await
        .map_err(CopyError::Refused)?;
    let records: Vec<CopiedRecord> = snapshot
        .sections
        .iter()
        .flat_map(|(section, records)| {
            records.iter().map(move |(key, record)| CopiedRecord {
                section: section.clone(),
                key: key.clone(),
                value: record.value.clone(),
            })
        })
        .collect();
    let revision = to
        .import(board, &records, snapshot.revision)
        .await
        .map_err(CopyError::Import)?;
    Ok(Copied {
        board: board.to_string(),
        records: records.len(),
        from_revision: snapshot.revision,
        revision,
    })
}

/// The identities two stores carry, when both carry the same one: a copy between them
/// would give the target the source's identity (one is a copy of the other's files).
pub async fn same_identity(
    from: &dyn LeaseStore,
    to: &dyn LeaseStore,
) -> Result<Option<StoreId>, StoreError> {
    let (a, b) = (from.carried_identity().await?, to.carried_identity().await?);
    Ok(a.filter(|a| b.as_ref() == Some(a)))
}
