//! Where a board lives in etcd's key space, spelled once (ARCHITECTURE.md, "The etcd store").
//! Every key of board `B` starts `<prefix>/board/B/`:
//!
//! | key | value |
//! |---|---|
//! | `…/head` | [`super::head::Head`]: the board revision and its time floor |
//! | `…/rec/<section>/<key>` | a [`crate::Record`] as JSON (`{"r":…,"v":…}`) |
//! | `…/log/<revision, 20 digits>` | a [`crate::LogEntry`]; the newest [`crate::LOG_CAP`] kept |
//! | `…/asks/<slot, 4 digits>` | one recorded refusal; [`crate::ASKS_CAP`] slots, reused in turn |
//!
//! Boards and sections are slugs (no `/`), so a record key may hold any byte after them.

/// The keys of one board.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoardKeys {
    /// `<prefix>/board/<board>/`.
    base: String,
}

/// The path segment after the key prefix that starts every board's keys; a key prefix
/// never holds it as a segment of its own, so two prefixes' keys never nest.
pub const BOARD_SEGMENT: &str = "board";

/// Digits of a log key's revision: keys sort in revision order.
const REVISION_DIGITS: usize = 20;

impl BoardKeys {
    /// The keys of `board` under `prefix` (a key prefix without a trailing `/`).
    pub fn new(prefix: &str, board: &str) -> BoardKeys {
        BoardKeys {
            base: format!("{prefix}/{BOARD_SEGMENT}/{board}/"),
        }
    }

    /// Every key of the board starts with this.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The head key: revision counter and time floor.
    pub fn head(&self) -> String {
        format!("{}head", self.base)
    }

    /// Every record key starts with this.
    pub fn records(&self) -> String {
        format!("{}rec/", self.base)
    }

    /// The prefix of one section's records.
    pub fn section(&self, section: &str) -> String {
        format!("{}rec/{section}/", self.base)
    }

    /// One record's key.
    pub fn record(&self, section: &str, key: &str) -> String {
        format!("{}rec/{section}/{key}", self.base)
    }

    /// Section and key of a record key of this board, if it is one.
    pub fn parse_record<'a>(&self, full: &'a str) -> Option<(&'a str, &'a str)> {
        full.strip_prefix(&self.base)?
            .strip_prefix("rec/")?
            .split_once('/')
    }

    /// The prefix of the fence log.
    pub fn log(&self) -> String {
        format!("{}log/", self.base)
    }

    /// The fence log entry of `revision`.
    pub fn log_entry(&self, revision: u64) -> String {
        format!("{}log/{revision:0REVISION_DIGITS$}", self.base)
    }

    /// The revision a log entry's key names, if `full` is one of this board's.
    pub fn parse_log_entry(&self, full: &[u8]) -> Option<u64> {
        std::str::from_utf8(full)
            .ok()?
            .strip_prefix(&self.base)?
            .strip_prefix("log/")?
            .parse()
            .ok()
    }

    /// One slot of the asks ring.
    pub fn ask_slot(&self, slot: usize) -> String {
        format!("{}asks/{slot:04}", self.base)
    }
}

/// The first key after every key starting with `prefix` (etcd's range end for a prefix).
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_and_parse() {
        let k = BoardKeys::new("rf", "b");
        assert_eq!(k.head(), "rf/board/b/head");
        assert_eq!(k.record("claims", "a/b"), "rf/board/b/rec/claims/a/b");
        assert_eq!(k.parse_record(&k.record("s", "a/b")), Some(("s", "a/b")));
        assert_eq!(k.parse_record("rf/board/c/rec/s/a"), None);
        assert!(k.log_entry(9) < k.log_entry(10));
        assert_eq!(k.parse_log_entry(k.log_entry(12).as_bytes()), Some(12));
        assert_eq!(k.parse_log_entry(b"rf/board/c/log/1"), None);
        assert_eq!(prefix_end("a/"), b"a0");
        // Board `b` and board `bb` never share a prefix.
        assert!(!BoardKeys::new("rf", "bb").head().starts_with(&k.records()));
    }
}
