//! The last read of each board, kept for the batch that follows it (ARCHITECTURE.md, "The
//! etcd store"). A fenced write reads its records and then commits a batch judged on what
//! it read; on etcd that batch would read the same keys again, one more linearizable round
//! trip per write. Instead the batch is judged on the read kept here and commits only if
//! the board's head still has the `mod_revision` that read saw: every change of a board
//! rewrites its head, so a commit that lands proves nothing changed since the read, exactly
//! as a fresh read would. A read is used at most once, and only when it covered every key
//! the batch is judged on; otherwise the batch reads for itself.

use crate::ReadSet;
use etcd_client::KeyValue;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// The most records a kept read may hold: a larger read (a whole big section) is not
/// copied for a batch that usually touches a few of its keys.
pub const MAX_KEPT_RECORDS: usize = 256;

/// The most boards with a kept read: reads no batch followed are dropped past it.
const MAX_BOARDS: usize = 64;

/// One consistent read of a board (one read transaction).
#[derive(Debug)]
pub struct Seen {
    /// The head as read (`None`: the board had none).
    pub head: Option<KeyValue>,
    /// What was read: sections whole, or these keys.
    covered: ReadSet,
    /// Every record found, by (section, key).
    records: BTreeMap<(String, String), KeyValue>,
}

impl Seen {
    /// A read of `covered` that found `head` and `records`.
    pub fn new(
        head: Option<KeyValue>,
        covered: ReadSet,
        records: BTreeMap<(String, String), KeyValue>,
    ) -> Seen {
        Seen {
            head,
            covered,
            records,
        }
    }

    /// What the read found of each (section, key) in turn, or `None` when it did not read
    /// one of them (the batch then reads for itself).
    pub fn found(&self, wanted: &[(&str, &str)]) -> Option<Vec<Option<KeyValue>>> {
        wanted
            .iter()
            .map(|(section, key)| {
                let covered = self.covered.sections.get(*section)?.covers(key);
                covered.then(|| {
                    self.records
                        .get(&(section.to_string(), key.to_string()))
                        .cloned()
                })
            })
            .collect()
    }
}

/// The kept reads, one per board, shared by every task using the store.
#[derive(Debug, Default)]
pub struct Kept {
    boards: Mutex<HashMap<String, Seen>>,
}

impl Kept {
    /// Keeps `seen` as `board`'s last read (replacing an older one).
    pub fn keep(&self, board: &str, seen: Seen) {
        let mut boards = self.boards.lock().unwrap_or_else(|p| p.into_inner());
        if boards.len() >= MAX_BOARDS && !boards.contains_key(board) {
            boards.clear();
        }
        boards.insert(board.to_string(), seen);
    }

    /// Takes `board`'s last read, if one is kept (each read serves one batch).
    pub fn take(&self, board: &str) -> Option<Seen> {
        self.boards
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(board)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_was_read_is_answered() {
        let mut covered = ReadSet::default();
        covered.add_whole("meta");
        covered.add_key("s", "a");
        covered.add_key("s", "b");
        let seen = Seen::new(None, covered, BTreeMap::new());
        let found = seen.found(&[("meta", "lease"), ("s", "a")]).unwrap();
        assert!(found.len() == 2 && found.iter().all(Option::is_none));
        assert!(seen.found(&[("s", "a"), ("s", "c")]).is_none());
        assert!(seen.found(&[("t", "a")]).is_none());
        let kept = Kept::default();
        kept.keep("b", seen);
        assert!(kept.take("b").is_some());
        assert!(kept.take("b").is_none(), "a read serves one batch");
    }
}
