//! Fenced writes: the change → batch engine (the fencing-records source, "How a fenced
//! write becomes a batch"). Every write to a board goes through [`write`]: it reads meta
//! and what the change touches in one round trip, runs the change on a tracked [`View`],
//! turns the difference into puts and deletes (each expecting the revision it was read
//! at) plus a check for every record read but not written, and sends one fenced batch. A
//! conflict reruns the change on a fresh read; a stale controller lease fails at once.
//!
//! The view loads on demand (a one-record change on a board of 100,000 records
//! reads a few keys, not the board). A change that touches a key not loaded yet, or
//! iterates a section not loaded whole, sees it as absent on that run; its result is
//! thrown away, the engine reads again with those keys (or that section whole) added, in
//! one consistent read, and reruns the change. Only a run that touched nothing unloaded
//! becomes a batch, so every key it read is checked at the revision it was read at, as
//! before. [`write_reading`] names keys to load with the first read (a row lease's row),
//! which saves the extra round trip.

use crate::{
    BLIND, FencedBatch, Keys, LeaseFence, LeaseStore, META, ReadSet, Record, RecordWrite, Section,
    Snapshot, StoreError, WriteKind, check_lease_fence,
};
use rand::Rng;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// At most this many attempts (the first included) before giving up on a board whose
/// records keep changing.
pub const MAX_ATTEMPTS: usize = 16;

/// The jitter before a retry, in ms (inclusive): spreads writers that met on a record.
pub const RETRY_SLEEP_MS: (u64, u64) = (1, 32);

/// After this many reads that each found the change touching something not loaded yet, a
/// section it still misses keys of is read whole: a change whose keys depend on what it
/// reads (a chain of records) still ends, in at most one more read.
pub const MAX_KEYED_READS: usize = 4;

/// The controller a write is fenced on: its owner (empty: epoch and expiry only) and
/// epoch. The engine adds the store's now from its read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Controller {
    /// The controller's owner id, or empty.
    pub owner: String,
    /// The epoch it holds.
    pub epoch: u64,
}

/// Why a fenced write did not commit.
#[derive(Debug, thiserror::Error)]
pub enum WriteError<E> {
    /// The change itself refused (nothing was sent).
    #[error("{0}")]
    Change(E),
    /// The controller lease fence failed, at the read or at the write.
    #[error("the controller lease is stale ({0})")]
    StaleLease(String),
    /// Every attempt met a concurrent write.
    #[error("the board's fencing state kept changing; nothing was committed")]
    Contention,
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

/// What a committed (or empty) change returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Written<T> {
    /// The change's result.
    pub value: T,
    /// The revision the batch committed at; `None` when the change wrote nothing.
    pub revision: Option<u64>,
    /// How many attempts it took (1 without a conflict; a read of keys the change touched
    /// but had not loaded is not an attempt).
    pub attempts: usize,
    /// Reads the write made (1 when everything the change touched was loaded by the first
    /// read; each conflict and each on-demand load adds one).
    pub reads: usize,
    /// The records the last read loaded, meta not counted: the keys the change touched
    /// that exist (and whole sections only where it iterated one, or where the store
    /// holds the board as one document): what a change read, whatever the board's size.
    pub records_loaded: usize,
}

/// Runs `change` on `board`'s meta and `sections` and commits what it changed as one
/// fenced batch, retrying on conflict (1–32 ms jitter, at most [`MAX_ATTEMPTS`]). The
/// change may touch only the sections named (and meta); what it touches is loaded on
/// demand (see the module docs).
pub async fn write<T, E>(
    store: &dyn LeaseStore,
    board: &str,
    sections: &[&str],
    change: impl FnMut(&mut View) -> Result<T, E>,
    fence: Option<&Controller>,
) -> Result<Written<T>, WriteError<E>> {
    let mut reads = ReadSet::default();
    for name in sections {
        reads.add_section(name);
    }
    write_reading(store, board, reads, change, fence).await
}

/// [`write`] with a first read of `reads`: the sections the change may touch (meta is
/// always read whole), each whole or with the keys the caller knows it will touch. Keys it
/// touches beyond them are still loaded on demand.
pub async fn write_reading<T, E>(
    store: &dyn LeaseStore,
    board: &str,
    mut reads: ReadSet,
    mut change: impl FnMut(&mut View) -> Result<T, E>,
    fence: Option<&Controller>,
) -> Result<Written<T>, WriteError<E>> {
    reads.add_whole(META);
    let (mut attempt, mut read_count, mut keyed_reads) = (1, 0, 0);
    loop {
        let snapshot = store
            .read_records(board, &reads)
            .await
            .map_err(WriteError::Store)?;
        read_count += 1;
        let lease_fence = fence.map(|c| LeaseFence {
            owner: c.owner.clone(),
            epoch: c.epoch,
            now_ms: snapshot.now_ms,
        });
        if let Some(f) = &lease_fence {
            check_lease_fence(snapshot.record(META, "lease"), f)
                .map_err(|e| WriteError::StaleLease(stale_detail(e)))?;
        }
        let mut view = View::new(snapshot, &reads);
        let outcome = change(&mut view);
        if view.load_missed(&mut reads, keyed_reads >= MAX_KEYED_READS) {
            // This run saw absent what was only not loaded: its result does not count.
            keyed_reads += 1;
            continue;
        }
        let value = outcome.map_err(WriteError::Change)?;
        let records_loaded = view.records_loaded();
        let Some(batch) = view.into_batch(lease_fence) else {
            return Ok(Written {
                value,
                revision: None,
                attempts: attempt,
                reads: read_count,
                records_loaded,
            });
        };
        match store.fenced_batch(board, &batch).await {
            Ok(revision) => {
                return Ok(Written {
                    value,
                    revision: Some(revision),
                    attempts: attempt,
                    reads: read_count,
                    records_loaded,
                });
            }
            Err(StoreError::RevisionConflict { .. }) if attempt < MAX_ATTEMPTS => {
                attempt += 1;
                let ms = rand::rng().random_range(RETRY_SLEEP_MS.0..=RETRY_SLEEP_MS.1);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Err(StoreError::RevisionConflict { .. }) => return Err(WriteError::Contention),
            Err(StoreError::StaleLease(why)) => return Err(WriteError::StaleLease(why)),
            Err(e) => return Err(WriteError::Store(e)),
        }
    }
}

fn stale_detail(e: StoreError) -> String {
    match e {
        StoreError::StaleLease(why) => why,
        other => other.to_string(),
    }
}

/// The board as a change sees it: each section tracked for what was loaded, read and
/// written, the store's clock, and the revision the batch would commit at.
#[derive(Debug)]
pub struct View {
    snapshot_revision: u64,
    now_ms: u64,
    sections: BTreeMap<String, TrackedSection>,
    /// True once the change asked for the commit revision: the batch then requires the
    /// board to be unchanged, so the revision it promised is the one it gets.
    read_revision: bool,
}

impl View {
    /// The view of `snapshot`, which answered `reads`.
    fn new(mut snapshot: Snapshot, reads: &ReadSet) -> View {
        View {
            snapshot_revision: snapshot.revision,
            now_ms: snapshot.now_ms,
            sections: reads
                .sections
                .iter()
                .map(|(name, keys)| {
                    let section = snapshot.sections.remove(name).unwrap_or_default();
                    let scope = if snapshot.complete {
                        Keys::Whole
                    } else {
                        keys.clone()
                    };
                    (name.clone(), TrackedSection::new(section, scope))
                })
                .collect(),
            read_revision: false,
        }
    }

    /// The store's clock at the read, ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// The revision this change's batch will commit at (the read revision + 1). Asking
    /// for it makes the batch conditional on the board revision being unchanged.
    pub fn commit_revision(&mut self) -> u64 {
        self.read_revision = true;
        self.snapshot_revision + 1
    }

    /// A section named to [`write`]. Panics on a section not named: that is a bug in the
    /// change, not bad input.
    pub fn section(&mut self, name: &str) -> &mut TrackedSection {
        self.sections
            .get_mut(name)
            .unwrap_or_else(|| panic!("section {name:?} was not loaded for this change"))
    }

    /// Adds to `reads` what the change touched but was not loaded (a section it
    /// iterated, whole; keys, by key, or the section whole when `whole`); true when there
    /// was any, so the change must run again on a new read.
    fn load_missed(&self, reads: &mut ReadSet, whole: bool) -> bool {
        let mut missed = false;
        for (name, section) in &self.sections {
            if section.missed_whole || (whole && !section.missed_keys.is_empty()) {
                reads.add_whole(name);
                missed = true;
            } else {
                for key in &section.missed_keys {
                    reads.add_key(name, key);
                    missed = true;
                }
            }
        }
        missed
    }

    /// The records loaded, meta not counted.
    fn records_loaded(&self) -> usize {
        self.sections
            .iter()
            .filter(|(name, _)| *name != META)
            .map(|(_, section)| section.loaded.len())
            .sum()
    }

    fn into_batch(self, lease: Option<LeaseFence>) -> Option<FencedBatch> {
        let fenced = lease.is_some();
        let mut writes = Vec::new();
        let mut checks = Vec::new();
        for (name, section) in self.sections {
            section.diff(&name, fenced, &mut writes, &mut checks);
        }
        if writes.is_empty() {
            return None;
        }
        writes.extend(checks);
        Some(FencedBatch {
            writes,
            lease,
            expected_revision: self.read_revision.then_some(self.snapshot_revision),
            min_revision: None,
        })
    }
}

/// A section as loaded (whole or some keys), the change's copy of it, what the change
/// read, and what it touched that was not loaded.
#[derive(Debug)]
pub struct TrackedSection {
    loaded: Section,
    /// What the read loaded: the whole section, or these keys (present or absent).
    scope: Keys,
    current: BTreeMap<String, Value>,
    read_keys: BTreeSet<String>,
    read_whole: bool,
    /// Keys the change touched that the read did not load.
    missed_keys: BTreeSet<String>,
    /// True when the change iterated or counted a section not loaded whole.
    missed_whole: bool,
}

impl TrackedSection {
    fn new(loaded: Section, scope: Keys) -> TrackedSection {
        let current = loaded
            .iter()
            .map(|(k, r)| (k.clone(), r.value.clone()))
            .collect();
        TrackedSection {
            loaded,
            scope,
            current,
            read_keys: BTreeSet::new(),
            read_whole: false,
            missed_keys: BTreeSet::new(),
            missed_whole: false,
        }
    }

    /// Notes a key the change touches: one not loaded is loaded for the next run.
    fn touch(&mut self, key: &str) {
        if !self.scope.covers(key) {
            self.missed_keys.insert(key.to_string());
        }
    }

    /// Notes that the change reads the section whole.
    fn touch_whole(&mut self) {
        self.read_whole = true;
        if self.scope != Keys::Whole {
            self.missed_whole = true;
        }
    }

    /// Reads one record's value (checked at the write unless written).
    pub fn get(&mut self, key: &str) -> Option<&Value> {
        self.touch(key);
        self.read_keys.insert(key.to_string());
        self.current.get(key)
    }

    /// The revision a record was loaded at (0 when absent); reading it counts as a read.
    pub fn revision(&mut self, key: &str) -> u64 {
        self.touch(key);
        self.read_keys.insert(key.to_string());
        self.loaded.get(key).map_or(0, |r| r.revision)
    }

    /// Sets a record's value (a put expecting the revision it was loaded at).
    pub fn insert(&mut self, key: &str, value: Value) {
        self.touch(key);
        self.current.insert(key.to_string(), value);
    }

    /// Removes a record (a delete expecting the revision it was loaded at).
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.touch(key);
        self.read_keys.insert(key.to_string());
        self.current.remove(key)
    }

    /// Every record, in key order: reads the section whole, so every record it held is
    /// checked at the write.
    pub fn iter(&mut self) -> impl Iterator<Item = (&String, &Value)> {
        self.touch_whole();
        self.current.iter()
    }

    /// The number of records: reads the section whole.
    pub fn len(&mut self) -> usize {
        self.touch_whole();
        self.current.len()
    }

    /// True when the section is empty: reads the section whole.
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }

    /// A copy of every value: reads the section whole.
    pub fn to_map(&mut self) -> BTreeMap<String, Value> {
        self.touch_whole();
        self.current.clone()
    }

    fn diff(
        self,
        name: &str,
        fenced: bool,
        writes: &mut Vec<RecordWrite>,
        checks: &mut Vec<RecordWrite>,
    ) {
        let expected = |record: Option<&Record>| record.map_or(0, |r| r.revision as i64);
        let keys: BTreeSet<&String> = self.loaded.keys().chain(self.current.keys()).collect();
        let mut written = BTreeSet::new();
        for key in keys {
            let before = self.loaded.get(key);
            let after = self.current.get(key);
            let write = match (before, after) {
                (Some(b), Some(a)) if b.value == *a => None,
                (_, Some(a)) => Some((WriteKind::Put, a.clone())),
                (Some(_), None) => Some((WriteKind::Delete, Value::Null)),
                (None, None) => None,
            };
            if let Some((kind, value)) = write {
                written.insert(key.clone());
                writes.push(RecordWrite {
                    kind,
                    section: name.to_string(),
                    key: key.clone(),
                    expected: expected(before),
                    value,
                });
            }
        }
        let read: BTreeSet<String> = if self.read_whole {
            self.loaded.keys().cloned().chain(self.read_keys).collect()
        } else {
            self.read_keys
        };
        for key in read.difference(&written) {
            if fenced && name == META && key == "lease" {
                continue; // left to the lease fence
            }
            checks.push(RecordWrite {
                kind: WriteKind::Check,
                section: name.to_string(),
                key: key.clone(),
                expected: expected(self.loaded.get(key)),
                value: Value::Null,
            });
        }
    }
}

/// A blind put (no revision check): for writers that own a key outright.
pub fn blind_put(section: &str, key: &str, value: Value) -> RecordWrite {
    RecordWrite {
        kind: WriteKind::Put,
        section: section.into(),
        key: key.into(),
        expected: BLIND,
        value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A batch's writes as (kind, key, expected revision), in the order it sends them.
    fn writes(batch: &FencedBatch) -> Vec<(WriteKind, &str, i64)> {
        batch
            .writes
            .iter()
            .map(|w| (w.kind, w.key.as_str(), w.expected))
            .collect()
    }

    fn view(records: &[(&str, u64, Value)]) -> View {
        let section: Section = records
            .iter()
            .map(|(k, r, v)| {
                (
                    k.to_string(),
                    Record {
                        revision: *r,
                        value: v.clone(),
                    },
                )
            })
            .collect();
        let snapshot = Snapshot {
            revision: 9,
            now_ms: 1,
            sections: [
                ("s".to_string(), section),
                (META.to_string(), Section::new()),
            ]
            .into(),
            complete: true,
        };
        View::new(snapshot, &ReadSet::whole(&["s", META]))
    }

    #[test]
    fn a_change_that_writes_nothing_sends_no_batch() {
        let mut v = view(&[("a", 3, json!(1))]);
        let _ = v.section("s").get("a");
        assert!(v.into_batch(None).is_none());
    }

    #[test]
    fn puts_and_deletes_expect_their_read_revisions_and_reads_are_checked() {
        let mut v = view(&[("a", 3, json!(1)), ("b", 4, json!(2)), ("c", 5, json!(3))]);
        let s = v.section("s");
        let _ = s.get("c");
        let _ = s.get("absent");
        s.insert("a", json!(10));
        s.remove("b");
        s.insert("new", json!(0));
        let batch = v.into_batch(None).unwrap();
        assert_eq!(
            writes(&batch),
            vec![
                (WriteKind::Put, "a", 3),
                (WriteKind::Delete, "b", 4),
                (WriteKind::Put, "new", 0),
                (WriteKind::Check, "absent", 0),
                (WriteKind::Check, "c", 5),
            ]
        );
        assert_eq!(batch.expected_revision, None);
    }

    #[test]
    fn a_section_read_whole_checks_every_record_it_held() {
        let mut v = view(&[("a", 3, json!(1)), ("b", 4, json!(2))]);
        let total: i64 = v
            .section("s")
            .iter()
            .map(|(_, v)| v.as_i64().unwrap())
            .sum();
        v.section("s").insert("sum", json!(total));
        let batch = v.into_batch(None).unwrap();
        let checks: Vec<&str> = batch
            .writes
            .iter()
            .filter(|w| w.kind == WriteKind::Check)
            .map(|w| w.key.as_str())
            .collect();
        assert_eq!(checks, vec!["a", "b"]);
    }

    #[test]
    fn asking_for_the_commit_revision_pins_the_board_revision() {
        let mut v = view(&[]);
        let generation = v.commit_revision();
        assert_eq!(generation, 10);
        v.section("s")
            .insert("row", json!({"generation": generation}));
        assert_eq!(v.into_batch(None).unwrap().expected_revision, Some(9));
    }

    /// A view of section `s` loaded by key: `loaded` keys were read (those in `records`
    /// exist).
    fn keyed_view(records: &[(&str, u64, Value)], loaded: &[&str]) -> (View, ReadSet) {
        let mut reads = ReadSet::whole(&[META]);
        reads.add_section("s");
        for key in loaded {
            reads.add_key("s", key);
        }
        let section: Section = records
            .iter()
            .map(|(k, r, v)| {
                let record = Record {
                    revision: *r,
                    value: v.clone(),
                };
                (k.to_string(), record)
            })
            .collect();
        let snapshot = Snapshot {
            revision: 9,
            now_ms: 1,
            sections: [("s".to_string(), section)].into(),
            complete: false,
        };
        (View::new(snapshot, &reads), reads)
    }

    #[test]
    fn touching_a_key_not_loaded_asks_for_it_and_nothing_else() {
        let (mut v, mut reads) = keyed_view(&[], &[]);
        v.section("s").insert("item-17", json!(1));
        assert!(v.load_missed(&mut reads, false));
        assert_eq!(
            reads.sections["s"],
            Keys::Some(BTreeSet::from(["item-17".to_string()]))
        );
        assert!(reads.is_whole(META));
    }

    #[test]
    fn a_change_on_loaded_keys_misses_nothing_and_checks_what_it_read() {
        let (mut v, mut reads) = keyed_view(&[("a", 3, json!(1))], &["a", "b", "absent"]);
        let s = v.section("s");
        let _ = s.get("absent");
        let a = s.get("a").cloned();
        s.insert("b", a.unwrap());
        assert!(!v.load_missed(&mut reads, false));
        let batch = v.into_batch(None).unwrap();
        assert_eq!(
            writes(&batch),
            vec![
                (WriteKind::Put, "b", 0),
                (WriteKind::Check, "a", 3),
                (WriteKind::Check, "absent", 0),
            ]
        );
    }

    #[test]
    fn iterating_a_section_loaded_by_key_asks_for_it_whole() {
        let (mut v, mut reads) = keyed_view(&[("a", 3, json!(1))], &["a"]);
        let _ = v.section("s").len();
        assert!(v.load_missed(&mut reads, false));
        assert!(reads.is_whole("s"));
    }

    #[test]
    fn after_too_many_keyed_reads_a_missing_section_is_read_whole() {
        let (mut v, mut reads) = keyed_view(&[], &[]);
        let _ = v.section("s").get("next");
        assert!(v.load_missed(&mut reads, true));
        assert!(reads.is_whole("s"));
    }
}
