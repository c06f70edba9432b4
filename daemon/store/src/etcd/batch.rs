//! A fenced batch as one etcd transaction (ARCHITECTURE.md, "The etcd store"): the rules are
//! the document model's (the lease fence, then the expected board revision, then every
//! non-blind expected record revision, absent = 0), judged on what one read transaction
//! found; the commit compares the head's `mod_revision` with the one read, so it lands only
//! on exactly that state, and puts the head, the records and the log entry and trims the
//! log at once. A batch past one transaction's size is refused before anything is read.
//!
//! The head is the only counter, so the commit also proves the head is not behind the
//! board's own keys (a head deleted or lowered by hand, or a record written without one):
//! it lands only while no log entry exists at or above its revision and, on a board
//! without a head, no record exists; a head found behind them is `store_regressed`, so a
//! generation is never handed out twice.

use super::MAX_TXN_OPS;
use super::head::Head;
use super::keys::{BoardKeys, prefix_end};
use crate::document::validate_batch;
use crate::{
    FencedBatch, LOG_CAP, LogEntry, META, Record, StoreError, WriteKind, check_lease_fence, meta,
};
use etcd_client::{
    Compare, CompareOp, DeleteOptions, GetOptions, SortOrder, SortTarget, Txn, TxnOp,
};
use std::collections::BTreeMap;

/// Operations a commit adds to the batch's writes: the head, the log entry, the log's trim.
pub const OVERHEAD_OPS: usize = 3;

/// The most writes one batch may hold on etcd: its commit stays within
/// [`MAX_TXN_OPS`], etcd's default `--max-txn-ops`.
pub const MAX_WRITES: usize = MAX_TXN_OPS - OVERHEAD_OPS;

/// A batch checked for shape and size.
#[derive(Debug)]
pub struct Plan;

/// What a judged batch commits.
#[derive(Debug)]
pub struct Commit {
    /// The revision it commits at.
    pub revision: u64,
    /// True when the batch raises the board to a revision (`min_revision`: an operator's
    /// accept, a copy): it lands on a board whose records outlived its head.
    raised: bool,
    head: Head,
    /// Record key (section, key) → its value after the batch (`None`: deleted).
    records: BTreeMap<(String, String), Option<serde_json::Value>>,
    entry: LogEntry,
    /// Random, in the head and the log entry it writes: a commit whose answer was lost is
    /// found by it ([`logged_nonce`]).
    nonce: u64,
}

/// A log entry as stored: the entry and its batch's nonce.
#[derive(serde::Serialize, serde::Deserialize)]
struct Logged {
    #[serde(flatten)]
    entry: LogEntry,
    #[serde(default)]
    batch: u64,
}

/// The batch nonce a stored log entry carries (`None`: not one, or written before nonces).
pub fn logged_nonce(value: &[u8]) -> Option<u64> {
    serde_json::from_slice::<Logged>(value)
        .ok()
        .map(|l| l.batch)
        .filter(|n| *n != 0)
}

impl Plan {
    /// Checks the batch's names and its size (`Invalid` past [`MAX_WRITES`]: nothing is
    /// read or written).
    pub fn new(batch: &FencedBatch) -> Result<Plan, StoreError> {
        validate_batch(batch)?;
        if batch.writes.len() > MAX_WRITES {
            return Err(StoreError::Invalid(crate::Detail::from(format!(
                "a batch of {} writes is more than one etcd transaction holds ({MAX_WRITES} writes within --max-txn-ops {MAX_TXN_OPS}); nothing was written",
                batch.writes.len()
            ))));
        }
        Ok(Plan)
    }

    /// The records the batch is judged on, as (section, key): the controller lease (when
    /// fenced), then each write's record, in order.
    pub fn wanted<'a>(&self, batch: &'a FencedBatch) -> Vec<(&'a str, &'a str)> {
        let lease = batch.lease.as_ref().map(|_| (META, meta::LEASE));
        lease
            .into_iter()
            .chain(
                batch
                    .writes
                    .iter()
                    .map(|w| (w.section.as_str(), w.key.as_str())),
            )
            .collect()
    }

    /// The reads the batch is judged on: the head, the newest log entry's key, then
    /// [`Plan::wanted`] in order (at most [`MAX_TXN_OPS`]: head, log, lease and
    /// [`MAX_WRITES`] records).
    pub fn reads(&self, keys: &BoardKeys, batch: &FencedBatch) -> Vec<TxnOp> {
        let newest_log = TxnOp::get(
            keys.log(),
            Some(
                GetOptions::new()
                    .with_range(prefix_end(&keys.log()))
                    .with_sort(SortTarget::Key, SortOrder::Descend)
                    .with_limit(1)
                    .with_keys_only(),
            ),
        );
        [TxnOp::get(keys.head(), None), newest_log]
            .into_iter()
            .chain(
                self.wanted(batch)
                    .into_iter()
                    .map(|(section, key)| TxnOp::get(keys.record(section, key), None)),
            )
            .collect()
    }

    /// Judges the batch on what [`Plan::reads`] found (`found` in the same order;
    /// `newest_log`: the newest log entry's revision, 0 when none or not read) at the
    /// store clock `now_ms`; `StaleLease` or `RevisionConflict` when it must not commit,
    /// `Regressed` when the board's keys are ahead of its head (unless the batch raises
    /// the board: then it commits above them).
    pub fn judge(
        &self,
        board: &str,
        batch: &FencedBatch,
        (head, newest_log): (&Head, u64),
        found: &[Option<Record>],
        now_ms: u64,
    ) -> Result<Commit, StoreError> {
        let ahead = found
            .iter()
            .flatten()
            .map(|r| r.revision)
            .fold(newest_log, u64::max);
        if ahead > head.revision && batch.min_revision.is_none() {
            return Err(head_behind(board, head.revision, Some(ahead)));
        }
        let (lease, records) = match &batch.lease {
            Some(fence) => {
                check_lease_fence(found.first().and_then(Option::as_ref), fence)?;
                (Some(fence), &found[1..])
            }
            None => (None, found),
        };
        if let Some(expected) = batch.expected_revision
            && expected != head.revision
        {
            return Err(StoreError::RevisionConflict {
                key: "revision".into(),
            });
        }
        for (write, have) in batch.writes.iter().zip(records) {
            let have = have.as_ref().map_or(0, |r| r.revision);
            if !write.expectation()?.holds(have) {
                return Err(StoreError::RevisionConflict {
                    key: format!("{}/{}", write.section, write.key),
                });
            }
        }
        let revision = (head.revision.max(ahead) + 1).max(batch.min_revision.unwrap_or(0));
        // An operator accepting a regression accepts this clock as it is now.
        let clock_ms = if batch.min_revision.is_some() {
            now_ms
        } else {
            head.clock_ms.max(now_ms)
        };
        let mut out = BTreeMap::new();
        for write in &batch.writes {
            let key = (write.section.clone(), write.key.clone());
            match write.kind {
                WriteKind::Put => {
                    out.insert(key, Some(write.value.clone()));
                }
                WriteKind::Delete => {
                    out.insert(key, None);
                }
                WriteKind::Check => {}
            }
        }
        let nonce = rand::random::<u64>().max(1);
        Ok(Commit {
            revision,
            raised: batch.min_revision.is_some(),
            nonce,
            head: Head {
                revision,
                clock_ms,
                batch: nonce,
            },
            records: out,
            entry: LogEntry {
                revision,
                owner: lease.map(|l| l.owner.clone()).unwrap_or_default(),
                records: batch.writes.len(),
            },
        })
    }
}

impl Commit {
    /// The nonce its head and log entry carry.
    pub fn nonce(&self) -> u64 {
        self.nonce
    }

    /// The commit transaction: lands only while the head's `mod_revision` is still
    /// `head_mod_revision` (0: the board has no head yet), no log entry exists at or above
    /// this revision, and, on a board without a head, no record exists (unless the batch
    /// raises the board); when it does not, it runs `reads_back` instead ([`Plan::reads`]),
    /// so the caller judges again on what the board holds now without another round trip.
    pub fn txn(&self, keys: &BoardKeys, head_mod_revision: i64, reads_back: Vec<TxnOp>) -> Txn {
        // An empty range compares as one absent key (create_revision 0).
        let mut when = vec![
            Compare::mod_revision(keys.head(), CompareOp::Equal, head_mod_revision),
            Compare::create_revision(keys.log_entry(self.revision), CompareOp::Equal, 0)
                .with_range(prefix_end(&keys.log())),
        ];
        if head_mod_revision == 0 && !self.raised {
            when.push(
                Compare::create_revision(keys.records(), CompareOp::Equal, 0)
                    .with_range(prefix_end(&keys.records())),
            );
        }
        let mut ops = vec![TxnOp::put(keys.head(), json(&self.head), None)];
        for ((section, key), value) in &self.records {
            let full = keys.record(section, key);
            ops.push(match value {
                Some(value) => TxnOp::put(
                    full,
                    json(&Record {
                        revision: self.revision,
                        value: value.clone(),
                    }),
                    None,
                ),
                None => TxnOp::delete(full, None),
            });
        }
        ops.push(TxnOp::put(
            keys.log_entry(self.revision),
            json(&Logged {
                entry: self.entry.clone(),
                batch: self.nonce,
            }),
            None,
        ));
        if self.revision > LOG_CAP as u64 {
            // Keeps exactly the newest LOG_CAP revisions' entries.
            let start = keys.log();
            let end = keys.log_entry(self.revision - LOG_CAP as u64 + 1);
            debug_assert!(end.as_bytes() < prefix_end(&start).as_slice());
            ops.push(TxnOp::delete(
                start,
                Some(DeleteOptions::new().with_range(end)),
            ));
        }
        Txn::new().when(when).and_then(ops).or_else(reads_back)
    }
}

/// A board whose keys show revision `ahead` (`None`: a key the reads did not show, a
/// record on a board without a head or a log key at or above the next revision) while its
/// head says `head`: committing would hand out a generation again.
pub fn head_behind(board: &str, head: u64, ahead: Option<u64>) -> StoreError {
    let keys = match ahead {
        Some(ahead) => format!("keys written at revision {ahead}"),
        None => "keys it does not account for (a record on a board without a head, or a log entry at or above its next revision)".into(),
    };
    StoreError::Regressed(format!(
        "board {board}'s head (its revision counter) is at revision {head} but the board holds {keys}: the head was deleted or lowered (by hand?), or keys were written without it; nothing was written; an operator runs `row-fence store accept-regression {board}`"
    ))
}

/// A stored value's JSON text (records, heads, log entries: plain data, which always
/// serializes).
fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LeaseFence, RecordWrite};
    use serde_json::json;

    fn put(key: &str, expected: i64) -> RecordWrite {
        RecordWrite {
            kind: WriteKind::Put,
            section: "s".into(),
            key: key.into(),
            expected,
            value: json!(1),
        }
    }

    #[test]
    fn a_batch_past_one_transaction_is_refused_before_anything_is_read() {
        let batch = FencedBatch {
            writes: (0..=MAX_WRITES).map(|i| put(&i.to_string(), 0)).collect(),
            ..Default::default()
        };
        let err = Plan::new(&batch).unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{err}");
        assert!(err.to_string().contains("--max-txn-ops"));
        let fits = FencedBatch {
            writes: batch.writes[..MAX_WRITES].to_vec(),
            lease: Some(LeaseFence {
                owner: "c".into(),
                epoch: 1,
                now_ms: 10,
            }),
            ..Default::default()
        };
        assert!(Plan::new(&fits).is_ok());
        // Its reads (head, newest log entry, controller lease, records) fit one
        // transaction too, and so does its commit's failure branch, which runs them.
        assert_eq!(
            Plan.reads(&BoardKeys::new("rf", "b"), &fits).len(),
            MAX_TXN_OPS
        );
    }

    #[test]
    fn the_rules_are_the_documents() {
        let head = Head {
            revision: 4,
            clock_ms: 50,
            batch: 0,
        };
        let stored = Some(Record {
            revision: 3,
            value: json!(1),
        });
        let batch = FencedBatch {
            writes: vec![put("a", 3), put("b", 0)],
            ..Default::default()
        };
        let commit = Plan
            .judge("b", &batch, (&head, 4), &[stored.clone(), None], 40)
            .unwrap();
        assert_eq!((commit.revision, commit.head.clock_ms), (5, 50));
        assert_eq!(commit.head.batch, commit.nonce());
        let conflict = Plan.judge(
            "b",
            &batch,
            (&head, 4),
            &[stored.clone(), stored.clone()],
            40,
        );
        assert_eq!(
            conflict.unwrap_err(),
            StoreError::RevisionConflict { key: "s/b".into() }
        );
        let fenced = FencedBatch {
            lease: Some(LeaseFence {
                owner: "c".into(),
                epoch: 1,
                now_ms: 10,
            }),
            ..batch.clone()
        };
        assert!(
            Plan.judge("b", &fenced, (&head, 4), &[None, stored, None], 40)
                .unwrap_err()
                .is_stale_lease()
        );
        let raised = FencedBatch {
            min_revision: Some(100),
            ..batch
        };
        let commit = Plan
            .judge(
                "b",
                &raised,
                (&head, 4),
                &[
                    Some(Record {
                        revision: 3,
                        value: json!(0),
                    }),
                    None,
                ],
                40,
            )
            .unwrap();
        assert_eq!((commit.revision, commit.head.clock_ms), (100, 40));
    }

    /// A commit whose answer was lost is told from another writer's by the nonce its log
    /// entry carries; an entry written before nonces carries none.
    #[test]
    fn a_commits_nonce_reads_back_from_its_log_entry() {
        let batch = FencedBatch {
            writes: vec![put("a", crate::BLIND)],
            ..Default::default()
        };
        let commit = Plan
            .judge("b", &batch, (&Head::default(), 0), &[None], 40)
            .unwrap();
        let logged = json(&Logged {
            entry: commit.entry.clone(),
            batch: commit.nonce(),
        });
        assert_eq!(logged_nonce(logged.as_bytes()), Some(commit.nonce()));
        let entry: LogEntry = serde_json::from_str(&logged).unwrap();
        assert_eq!(entry, commit.entry, "readers of the log ignore the nonce");
        assert_eq!(
            logged_nonce(br#"{"revision":1,"owner":"","records":1}"#),
            None
        );
        let other = Plan
            .judge("b", &batch, (&Head::default(), 0), &[None], 40)
            .unwrap();
        assert_ne!(other.nonce(), commit.nonce());
    }

    #[test]
    fn a_head_behind_its_boards_keys_is_regressed_unless_the_batch_raises_it() {
        let head = Head {
            revision: 2,
            clock_ms: 50,
            batch: 0,
        };
        let batch = FencedBatch {
            writes: vec![put("a", crate::BLIND)],
            ..Default::default()
        };
        let logged = Plan.judge("b", &batch, (&head, 7), &[None], 40);
        assert!(
            matches!(logged, Err(StoreError::Regressed(_))),
            "{logged:?}"
        );
        let stray = Some(Record {
            revision: 5,
            value: json!(1),
        });
        let recorded = Plan.judge("b", &batch, (&Head::default(), 0), &[stray], 40);
        assert!(
            matches!(recorded, Err(StoreError::Regressed(_))),
            "{recorded:?}"
        );
        let raised = FencedBatch {
            min_revision: Some(3),
            ..batch
        };
        let commit = Plan.judge("b", &raised, (&head, 7), &[None], 40).unwrap();
        assert_eq!(commit.revision, 8, "raised past every key the board shows");
    }
}
