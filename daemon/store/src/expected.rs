//! What a write expects of its record's revision: the typed form of
//! [`RecordWrite::expected`](crate::RecordWrite) and of the fenced batch script's argument
//! (its `EXPECT_BLIND` comes from here, `redis::names`).

use crate::{Record, RecordWrite, StoreError};

/// What a write expects of its record's revision; on the wire (`RecordWrite::expected`,
/// a batch file, the fenced batch script's arguments) -1, 0 or the revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// No check (-1).
    Blind,
    /// The record must be absent (0).
    Absent,
    /// The record must be at this revision (≥ 1).
    At(u64),
}

impl Expected {
    /// The wire spelling: -1, 0 or the revision.
    pub const fn wire(self) -> i64 {
        match self {
            Expected::Blind => -1,
            Expected::Absent => 0,
            Expected::At(revision) => revision as i64,
        }
    }

    /// Reads a wire spelling; below -1 is `None`.
    pub fn from_wire(n: i64) -> Option<Expected> {
        match n {
            -1 => Some(Expected::Blind),
            0 => Some(Expected::Absent),
            n if n > 0 => Some(Expected::At(n as u64)),
            _ => None,
        }
    }

    /// What a writer that read `record` expects: its revision, or absent.
    pub fn of(record: Option<&Record>) -> Expected {
        record.map_or(Expected::Absent, |r| Expected::At(r.revision))
    }

    /// True when a record at `have` (0: absent) meets this expectation.
    pub fn holds(self, have: u64) -> bool {
        match self {
            Expected::Blind => true,
            Expected::Absent => have == 0,
            Expected::At(revision) => have == revision,
        }
    }
}

impl RecordWrite {
    /// What this write expects; `Invalid` for a wire value below -1.
    pub fn expectation(&self) -> Result<Expected, StoreError> {
        Expected::from_wire(self.expected).ok_or_else(|| {
            StoreError::Invalid(crate::Detail::from(format!(
                "expected revision {} of {}/{} is below -1",
                self.expected, self.section, self.key
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_spelling_round_trips_and_below_minus_one_is_refused() {
        for expected in [Expected::Blind, Expected::Absent, Expected::At(7)] {
            assert_eq!(Expected::from_wire(expected.wire()), Some(expected));
        }
        assert_eq!(crate::BLIND, -1);
        assert_eq!(Expected::from_wire(-2), None);
        assert!(Expected::Blind.holds(9) && Expected::Absent.holds(0));
        assert!(!Expected::Absent.holds(1) && !Expected::At(3).holds(4));
        let write = RecordWrite {
            kind: crate::WriteKind::Check,
            section: "s".into(),
            key: "k".into(),
            expected: -5,
            value: serde_json::Value::Null,
        };
        assert!(matches!(write.expectation(), Err(StoreError::Invalid(_))));
    }
}
