//! The operator's ways out (ARCHITECTURE.md, "The generation never goes back", "The
//! store's clock judges"): [`accept_regression`] past `store_regressed` (with the store's
//! identity at its addresses, [`Monotonic::accept_identity`]), and [`accept_clock`] past
//! `clock_regressed` after a clock that ran ahead was corrected.

use super::{Access, Monotonic, another_store, epoch_of, lock, row_floor};
use crate::identity::StoreId;
use crate::marks::Mark;
use crate::meta;
use crate::{
    CLAIMS, ControllerLease, Expected, FencedBatch, META, Record, RecordWrite, RowLease,
    StoreError, WriteKind,
};
use serde::Serialize;

/// Which identity an operator's accept accepted at the store's addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AcceptedIdentity {
    /// The identity the store carries now (`None`: a store that cannot carry one).
    pub identity: Option<String>,
    /// True when the accept wrote it (the store carried none).
    pub created: bool,
    /// The identities this home knew at those addresses before, whose floors carry over.
    pub replaced: Vec<String>,
}

impl Monotonic {
    /// Accepts the store at its addresses as it is: the identity it carries (written now if
    /// it carries none) replaces any other this home knew there, and the floors kept under
    /// that other one carry over to it, so a board of the replacing store is raised above
    /// every generation the replaced one handed out.
    pub async fn accept_identity(&self) -> Result<AcceptedIdentity, StoreError> {
        self.marks.refresh();
        let carried = self.inner.carried_identity().await?;
        let addresses = self.inner.addresses();
        let (id, created) = match carried {
            Some(id) => (id, false),
            None => match self.inner.create_identity(&StoreId::generate()).await? {
                Some(id) => (id, true),
                None => return Ok(AcceptedIdentity::default()),
            },
        };
        let mut replaced: Vec<String> = self
            .marks
            .bound(&addresses)
            .into_iter()
            .map(|(_, known)| known)
            .filter(|known| known != id.as_str())
            .collect();
        replaced.sort();
        replaced.dedup();
        self.marks
            .bind(&addresses, id.as_str(), &self.legacy_keys(&addresses), true)
            .map_err(|c| another_store(&c, &id))?;
        *lock(&self.resolved) = None;
        Ok(AcceptedIdentity {
            identity: Some(id.to_string()),
            created,
            replaced,
        })
    }
}

/// What [`accept_regression`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Accepted {
    /// The board revision before.
    pub from_revision: u64,
    /// The revision it committed at: above every generation ever seen.
    pub revision: u64,
    /// The controller epoch counter now: the next controller grant gets one above it.
    pub epoch: u64,
    /// Row leases dropped (their lanes re-acquire).
    pub leases_dropped: usize,
    /// The store identity accepted at its addresses.
    pub identity: AcceptedIdentity,
}

/// Raises `board`'s revision above every generation ever seen (this home's marks, every
/// stored lease, the board itself), drops every row lease and the controller lease, and
/// raises the epoch counter above every epoch seen: one fenced batch, pinned to the
/// revision it read (retried on a concurrent write, at most 16 times). With no lease left
/// to come back to life, it also accepts the store's clock as it is now (as
/// [`accept_clock`] does). A board another home's accept already raised past everything
/// this home saw (every lease on it newer than this home's row floors) is only recorded:
/// `leases_dropped` 0, the revision as it is.
pub async fn accept_regression(store: &Monotonic, board: &str) -> Result<Accepted, StoreError> {
    let identity = store.accept_identity().await?;
    let key = store.store_key(Access::Write).await?;
    let inner = store.inner();
    for _ in 0..crate::fencing::MAX_ATTEMPTS {
        let seen = store.known(&key, board)?;
        let floors = store.marks.floors(&key, board);
        let rows_seen = floors.rows.values().copied().max().unwrap_or(0);
        let snapshot = inner.sections(board, &[META, CLAIMS]).await?;
        let claims = snapshot.sections.get(CLAIMS).cloned().unwrap_or_default();
        let highest_generation = claims
            .values()
            .filter_map(|r| r.value.get("generation").and_then(|g| g.as_u64()))
            .max()
            .unwrap_or(0);
        let revision = seen
            .revision
            .max(snapshot.revision)
            .max(highest_generation)
            .max(rows_seen)
            + 1;
        let epoch = seen.epoch.max(epoch_of(&snapshot));
        // Another home's accept already raised the board past everything this home saw,
        // and every lease on it now is newer than what this home saw of its row: nothing
        // to raise or drop (dropping again would cost the lanes that re-acquired since).
        let raised_past = snapshot.revision > seen.revision.max(rows_seen)
            && epoch_of(&snapshot) >= seen.epoch
            && claims.iter().all(|(row, r)| {
                r.value.get("generation").and_then(|g| g.as_u64())
                    >= Some(row_floor(&floors, row).0)
            });
        if raised_past {
            store.accepted(
                &key,
                board,
                Mark {
                    revision: snapshot.revision,
                    epoch,
                    lost: 0,
                    accepted: seen.accepted + 1,
                    ..seen
                },
            )?;
            return Ok(Accepted {
                from_revision: snapshot.revision,
                revision: snapshot.revision,
                epoch,
                leases_dropped: 0,
                identity,
            });
        }
        let mut writes: Vec<RecordWrite> = claims
            .iter()
            .map(|(row, r)| delete(CLAIMS, row, r))
            .collect();
        if let Some(lease) = snapshot.record(META, meta::LEASE) {
            writes.push(delete(META, meta::LEASE, lease));
        }
        writes.push(RecordWrite {
            kind: WriteKind::Put,
            section: META.into(),
            key: meta::EPOCH.into(),
            expected: Expected::of(snapshot.record(META, meta::EPOCH)).wire(),
            value: serde_json::json!(epoch),
        });
        let batch = FencedBatch {
            writes,
            lease: None,
            expected_revision: Some(snapshot.revision),
            min_revision: Some(revision),
        };
        match inner.fenced_batch(board, &batch).await {
            Ok(committed) => {
                store.accepted(
                    &key,
                    board,
                    Mark {
                        revision: committed,
                        epoch,
                        expired_ms: snapshot.now_ms,
                        clock_era: seen.clock_era + 1,
                        lost: 0,
                        accepted: seen.accepted + 1,
                    },
                )?;
                return Ok(Accepted {
                    from_revision: snapshot.revision,
                    revision: committed,
                    epoch,
                    leases_dropped: claims.len(),
                    identity,
                });
            }
            Err(StoreError::RevisionConflict { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::RevisionConflict {
        key: "revision".into(),
    })
}

/// What [`accept_clock`] did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AcceptedClock {
    /// The floor before: the latest lease expiry this home had found passed, ms since the
    /// Unix epoch (0: none).
    pub from_floor_ms: u64,
    /// The store's clock accepted as it is, ms since the Unix epoch: the new floor.
    pub clock_ms: u64,
    /// The revision the accept committed at.
    pub revision: u64,
    /// Rows whose leases were dropped: found passed under the clock that ran ahead but
    /// live again under the corrected one (their lanes re-acquire).
    pub rows_dropped: Vec<String>,
    /// True when the controller lease was dropped for the same reason (the epoch counter
    /// stays, so the next controller grant gets a new epoch).
    pub controller_dropped: bool,
}

/// The operator's way out of `clock_regressed` after a clock that ran ahead was corrected:
/// accepts the store's clock as it is now. Every lease that expired at or before the old
/// floor but after the clock's now (found passed under the clock that ran ahead, live
/// again under the corrected one) is dropped, so no lease found expired ever comes back;
/// the home's floor becomes the store's now (in a new clock era, which every process of
/// the home adopts), and on the file store the board's highest written time too. One
/// fenced batch pinned to the revision it read (retried on a concurrent write).
///
/// What it gives up: a lease granted or renewed while the clock ran ahead keeps the
/// expiry that clock gave it (up to the step longer than its TTL), and an expiry found
/// passed only by another home is not known here.
pub async fn accept_clock(store: &Monotonic, board: &str) -> Result<AcceptedClock, StoreError> {
    let key = store.store_key(Access::Write).await?;
    let inner = store.inner();
    for _ in 0..crate::fencing::MAX_ATTEMPTS {
        let seen = store.floor(&key, board)?;
        let snapshot = inner.sections(board, &[META, CLAIMS]).await?;
        let now = snapshot.now_ms;
        let revived = |expires_at_ms: u64| expires_at_ms > now && expires_at_ms <= seen.expired_ms;
        let claims = snapshot.sections.get(CLAIMS).cloned().unwrap_or_default();
        let rows: Vec<(&String, &Record)> = claims
            .iter()
            .filter(|(_, r)| {
                serde_json::from_value::<RowLease>(r.value.clone())
                    .is_ok_and(|l| revived(l.expires_at_ms))
            })
            .collect();
        let controller = snapshot.record(META, meta::LEASE).filter(|r| {
            serde_json::from_value::<ControllerLease>(r.value.clone())
                .is_ok_and(|l| revived(l.expires_at_ms))
        });
        let mut writes: Vec<RecordWrite> =
            rows.iter().map(|(row, r)| delete(CLAIMS, row, r)).collect();
        writes.extend(controller.map(|r| delete(META, meta::LEASE, r)));
        let batch = FencedBatch {
            writes,
            lease: None,
            expected_revision: Some(snapshot.revision),
            // Commits at the next revision, as any batch; on the file store a batch that
            // names it also accepts this machine's clock (the board's highest time).
            min_revision: Some(snapshot.revision + 1),
        };
        match inner.fenced_batch(board, &batch).await {
            Ok(committed) => {
                store.accepted(
                    &key,
                    board,
                    Mark {
                        revision: committed,
                        expired_ms: now,
                        clock_era: seen.clock_era + 1,
                        ..seen
                    },
                )?;
                return Ok(AcceptedClock {
                    from_floor_ms: seen.expired_ms,
                    clock_ms: now,
                    revision: committed,
                    rows_dropped: rows.iter().map(|(row, _)| row.to_string()).collect(),
                    controller_dropped: controller.is_some(),
                });
            }
            Err(StoreError::RevisionConflict { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::RevisionConflict {
        key: "revision".into(),
    })
}

/// A delete of `record` at the revision it was read at.
fn delete(section: &str, key: &str, record: &Record) -> RecordWrite {
    RecordWrite {
        kind: WriteKind::Delete,
        section: section.into(),
        key: key.into(),
        expected: Expected::At(record.revision).wire(),
        value: serde_json::Value::Null,
    }
}

impl Monotonic {
    /// Records an operator's accept in the home's file at once: the accept is done only
    /// when every process of the home will judge with it.
    fn accepted(&self, key: &str, board: &str, mark: Mark) -> Result<(), StoreError> {
        self.marks.observe(key, board, mark);
        self.marks.flush().map_err(|e| {
            StoreError::Indeterminate(crate::Detail::caused_by(format!(
                "board {board} was committed at revision {}, but this home's floors could not be written ({e}); run the accept again",
                mark.revision
            ), e))
        })
    }
}
