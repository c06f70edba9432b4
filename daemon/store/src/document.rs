//! The whole board as one document with one revision (the `document` layout). The file
//! store keeps it on disk; the rules here are the same as the Redis scripts': the lease
//! fence, then every non-blind expected revision (absent = 0), then all writes or none,
//! revision +1, one capped log entry.

use super::{
    AskCheck, CLAIMS, FencedBatch, Judgement, LOG_CAP, LogEntry, META, Record, RowLease, Section,
    Snapshot, StoreError, WriteKind, check_lease_fence, judge,
};
use crate::meta;
use row_fence_contract::descriptor::validate_board;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Key parts that name Redis keys other than section hashes; no section may use them.
pub const RESERVED_SECTIONS: &[&str] = &["revision", "log", "asks", "sections"];

/// One board as one JSON document.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BoardDocument {
    /// The board's slug.
    pub board: String,
    /// The board revision: +1 per committed batch (0 for a board never written).
    pub revision: u64,
    /// Section name → key → record.
    #[serde(default)]
    pub sections: BTreeMap<String, Section>,
    /// Fence log entries, oldest first, at most `LOG_CAP`. On the file store these are the
    /// committed entries its log file may not hold yet (the document is the truth, the log
    /// file is brought up to it: `file_log`).
    #[serde(default)]
    pub log: Vec<LogEntry>,
    /// The highest time any writer has seen, ms since the Unix epoch (file store only): a
    /// judge or writer whose clock is below it is refused `clock_regressed`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clock_ms: u64,
    /// Set once the board has moved to another layout or store; it is then no longer
    /// served from this document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_to: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl BoardDocument {
    /// An empty board.
    pub fn new(board: &str) -> BoardDocument {
        BoardDocument {
            board: board.to_string(),
            ..BoardDocument::default()
        }
    }

    /// Refuses a document whose board has moved away (a daemon still pointed here must not
    /// serve stale leases).
    pub fn ensure_here(&self) -> Result<(), StoreError> {
        match &self.moved_to {
            Some(to) => Err(StoreError::Moved(crate::Moved::away(format!(
                "board {} moved to {to}; point row-fence at that store",
                self.board
            )))),
            None => Ok(()),
        }
    }

    /// The named sections, the revision and `now_ms` (whole: [`Snapshot::complete`]).
    pub fn snapshot(&self, names: &[&str], now_ms: u64) -> Snapshot {
        Snapshot {
            revision: self.revision,
            now_ms,
            complete: true,
            sections: names
                .iter()
                .map(|n| {
                    (
                        n.to_string(),
                        self.sections.get(*n).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
        }
    }

    /// One record.
    pub fn record(&self, section: &str, key: &str) -> Option<&Record> {
        self.sections.get(section)?.get(key)
    }

    /// The names of the sections holding records.
    pub fn section_names(&self) -> Vec<String> {
        self.sections.keys().cloned().collect()
    }

    /// The newest `count` log entries, newest first.
    pub fn newest_log(&self, count: usize) -> Vec<LogEntry> {
        self.log.iter().rev().take(count).cloned().collect()
    }

    /// Applies a batch all or nothing; returns the revision it committed at.
    pub fn apply(&mut self, batch: &FencedBatch) -> Result<u64, StoreError> {
        validate_batch(batch)?;
        self.check_fence(batch)?;
        if let Some(expected) = batch.expected_revision
            && expected != self.revision
        {
            return Err(StoreError::RevisionConflict {
                key: "revision".into(),
            });
        }
        for write in &batch.writes {
            let have = self
                .record(&write.section, &write.key)
                .map_or(0, |r| r.revision);
            if !write.expectation()?.holds(have) {
                return Err(StoreError::RevisionConflict {
                    key: format!("{}/{}", write.section, write.key),
                });
            }
        }
        self.revision = (self.revision + 1).max(batch.min_revision.unwrap_or(0));
        let revision = self.revision;
        for write in &batch.writes {
            match write.kind {
                WriteKind::Put => {
                    let record = Record {
                        revision,
                        value: write.value.clone(),
                    };
                    self.sections
                        .entry(write.section.clone())
                        .or_default()
                        .insert(write.key.clone(), record);
                }
                WriteKind::Delete => {
                    if let Some(section) = self.sections.get_mut(&write.section) {
                        section.remove(&write.key);
                        if section.is_empty() {
                            self.sections.remove(&write.section);
                        }
                    }
                }
                WriteKind::Check => {}
            }
        }
        self.log.push(LogEntry {
            revision,
            owner: batch
                .lease
                .as_ref()
                .map(|l| l.owner.clone())
                .unwrap_or_default(),
            records: batch.writes.len(),
        });
        if self.log.len() > LOG_CAP {
            let excess = self.log.len() - LOG_CAP;
            self.log.drain(..excess);
        }
        Ok(revision)
    }

    fn check_fence(&self, batch: &FencedBatch) -> Result<(), StoreError> {
        match &batch.lease {
            Some(fence) => check_lease_fence(self.record(META, meta::LEASE), fence),
            None => Ok(()),
        }
    }

    /// Judges an ask against this document at `now_ms`.
    pub fn judge_ask(&self, check: &AskCheck, now_ms: u64) -> Result<Judgement, StoreError> {
        let lease = match self.record(CLAIMS, &check.row) {
            None => None,
            Some(record) => Some(parse_row_lease(&record.value)?),
        };
        Ok(Judgement {
            refusal: judge(lease.as_ref(), check, now_ms),
            lease,
            now_ms,
            revision: self.revision,
        })
    }
}

/// Reads a row lease value; a value row-fence did not write is `Corrupt` (an ask on it is
/// COULD NOT READ, never ALLOWED).
pub fn parse_row_lease(value: &serde_json::Value) -> Result<RowLease, StoreError> {
    serde_json::from_value(value.clone()).map_err(|e| {
        StoreError::Corrupt(crate::Detail::caused_by(
            format!("a claims record is not a row lease: {e}"),
            e,
        ))
    })
}

/// Checks what a batch names before anything is read: section names are slugs that do not
/// collide with the board's other keys, keys are non-empty, expected revisions ≥ -1.
pub fn validate_batch(batch: &FencedBatch) -> Result<(), StoreError> {
    for write in &batch.writes {
        validate_section(&write.section)?;
        if write.key.is_empty() || write.key.len() > 1024 {
            return Err(StoreError::Invalid(crate::Detail::from(format!(
                "a record key must be 1-1024 bytes (section {})",
                write.section
            ))));
        }
        write.expectation()?;
    }
    Ok(())
}

/// A section name is a slug like a board's and is not one of [`RESERVED_SECTIONS`].
pub fn validate_section(section: &str) -> Result<(), StoreError> {
    validate_board(section).map_err(|_| {
        StoreError::Invalid(crate::Detail::from(format!(
            "section {section:?} is not a slug"
        )))
    })?;
    if RESERVED_SECTIONS.contains(&section) {
        return Err(StoreError::Invalid(crate::Detail::from(format!(
            "section {section:?} is reserved"
        ))));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BLIND, LeaseFence, RecordWrite};
    use serde_json::json;

    fn put(section: &str, key: &str, expected: i64, value: serde_json::Value) -> RecordWrite {
        RecordWrite {
            kind: WriteKind::Put,
            section: section.into(),
            key: key.into(),
            expected,
            value,
        }
    }

    #[test]
    fn a_conflict_names_the_first_mismatching_key_and_writes_nothing() {
        let mut doc = BoardDocument::new("b");
        doc.apply(&FencedBatch {
            writes: vec![put("s", "a", 0, json!(1))],
            ..Default::default()
        })
        .unwrap();
        let before = doc.clone();
        let batch = FencedBatch {
            writes: vec![
                put("s", "b", 0, json!(2)),
                put("s", "a", 0, json!(3)),
                put("s", "c", 5, json!(4)),
            ],
            ..Default::default()
        };
        assert_eq!(
            doc.apply(&batch),
            Err(StoreError::RevisionConflict { key: "s/a".into() })
        );
        assert_eq!(doc, before);
    }

    #[test]
    fn a_stale_fence_writes_nothing() {
        let mut doc = BoardDocument::new("b");
        let lease = json!({"owner": "c1", "epoch": 2, "expires_at_ms": 1000});
        doc.apply(&FencedBatch {
            writes: vec![put(META, "lease", 0, lease)],
            ..Default::default()
        })
        .unwrap();
        let before = doc.clone();
        for (owner, epoch, now) in [("c2", 2, 10), ("c1", 1, 10), ("c1", 2, 1000), ("", 3, 10)] {
            let batch = FencedBatch {
                writes: vec![put("s", "k", BLIND, json!(1))],
                lease: Some(LeaseFence {
                    owner: owner.into(),
                    epoch,
                    now_ms: now,
                }),
                ..Default::default()
            };
            assert!(
                doc.apply(&batch).unwrap_err().is_stale_lease(),
                "{owner} {epoch} {now}"
            );
            assert_eq!(doc, before);
        }
        let ok = FencedBatch {
            writes: vec![put("s", "k", BLIND, json!(1))],
            lease: Some(LeaseFence {
                owner: "".into(),
                epoch: 2,
                now_ms: 999,
            }),
            expected_revision: Some(1),
            ..Default::default()
        };
        assert_eq!(doc.apply(&ok), Ok(2));
    }

    #[test]
    fn the_log_is_capped() {
        let mut doc = BoardDocument::new("b");
        for _ in 0..LOG_CAP + 5 {
            doc.apply(&FencedBatch {
                writes: vec![put("s", "k", BLIND, json!(1))],
                ..Default::default()
            })
            .unwrap();
        }
        assert_eq!(doc.log.len(), LOG_CAP);
        assert_eq!(doc.log.last().unwrap().revision, (LOG_CAP + 5) as u64);
    }

    #[test]
    fn reserved_and_malformed_sections_are_refused() {
        for bad in ["revision", "log", "asks", "A", "", "a/b"] {
            let batch = FencedBatch {
                writes: vec![put(bad, "k", 0, json!(1))],
                ..Default::default()
            };
            assert!(
                matches!(
                    BoardDocument::new("b").apply(&batch),
                    Err(StoreError::Invalid(_))
                ),
                "{bad}"
            );
        }
    }
}
