//! The refusal ledger, `$ROW_FENCE_HOME/refusals.jsonl` (ARCHITECTURE.md, "The daemon"): one JSON
//! line per REFUSED or COULD NOT READ, filed under the caller's session, lane, row, cwd and
//! action. The daemon records what it decides; the asker what it decides itself. One
//! `write` per line on an `O_APPEND` file, so concurrent writers never interleave within
//! a line; rotated by size to `refusals.jsonl.1`. Each record names the uid it came from,
//! and a rotation keeps every uid's newest records within a fair share of the rotated
//! generation ([`rotate`]), so one uid's flood of refusals cannot rotate another's out.

mod rotate;

use crate::descriptor::Descriptor;
use crate::verdict::Verdict;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The ledger is rotated once it reaches this many bytes (8 MiB): one old generation is
/// kept, so the ledger never takes more than about twice this.
pub const MAX_LEDGER_BYTES: u64 = 8 * 1024 * 1024;

/// Who decided a verdict the ledger records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DecidedBy {
    /// `row-fence-ask`, about what it decides itself (its descriptor, the daemon unreachable).
    Asker,
    /// The resident daemon, about every ask it judges.
    Daemon,
    /// `row-fence check`, the cold path.
    Check,
    /// The agent guard, about what it decides itself.
    Guard,
}

/// One ledger line: `{"ts_ms","decided_by","verdict","reason","detail","board",…}`. Built
/// once with [`LedgerRecord::new`] and its `with_*` steps by everyone who writes the ledger,
/// so the asker's, the daemon's and `row-fence check`'s lines carry the same fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRecord {
    /// When it was decided, ms since the Unix epoch (the decider's clock).
    pub ts_ms: u64,
    /// Who decided.
    pub decided_by: DecidedBy,
    /// `refused` or `could_not_read`, and the reason (as `"verdict"` and `"reason"`).
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The verdict's detail sentence.
    #[serde(default)]
    pub detail: String,
    /// The board, when a descriptor was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board: Option<String>,
    /// The row, when a descriptor was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<String>,
    /// The lane, when a descriptor was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The generation, when a descriptor was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// The caller's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The caller's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The fenced action.
    #[serde(default)]
    pub action: String,
    /// The deciding process.
    pub pid: u32,
    /// The descriptor path, when the asker decided about one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor: Option<String>,
    /// Location fence only: this daemon's location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Location fence only: the tenant's epoch in the held map, -1 when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i64>,
    /// The uid the attempt came from: the peer's for what the daemon decides (none when
    /// the socket could not tell), else the deciding process's own. A rotation keeps each
    /// uid's records within its share ([`rotate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
}

impl LedgerRecord {
    /// A record of `verdict` decided now by this process.
    pub fn new(decided_by: DecidedBy, verdict: Verdict, detail: impl Into<String>) -> LedgerRecord {
        LedgerRecord {
            ts_ms: now_ms(),
            decided_by,
            verdict,
            detail: detail.into(),
            board: None,
            row: None,
            lane: None,
            generation: None,
            session: None,
            cwd: None,
            action: String::new(),
            pid: std::process::id(),
            descriptor: None,
            location: None,
            epoch: None,
            uid: Some(crate::paths::euid()),
        }
    }

    /// Files it under the uid the attempt came from (the daemon's peer), `None` when the
    /// socket could not tell.
    pub fn with_uid(mut self, uid: Option<u32>) -> LedgerRecord {
        self.uid = uid;
        self
    }

    /// Files it under the descriptor judged (board, row, lane, generation), if one was read.
    pub fn with_descriptor(mut self, d: Option<&Descriptor>) -> LedgerRecord {
        if let Some(d) = d {
            self.board = Some(d.board.clone());
            self.row = Some(d.row.clone());
            self.lane = Some(d.lane.clone());
            self.generation = Some(d.generation);
        }
        self
    }

    /// Files it under the caller: its session, working directory and fenced action.
    pub fn with_caller(
        mut self,
        session: Option<&str>,
        cwd: Option<&str>,
        action: &str,
    ) -> LedgerRecord {
        self.session = session.filter(|s| !s.is_empty()).map(str::to_string);
        self.cwd = cwd.map(str::to_string);
        self.action = action.to_string();
        self
    }

    /// Names the descriptor file decided about.
    pub fn with_descriptor_path(mut self, path: Option<&Path>) -> LedgerRecord {
        self.descriptor = path.map(|p| p.display().to_string());
        self
    }

    /// Location fence on: this daemon's location and the tenant's epoch in the held map.
    pub fn with_location(mut self, location: Option<(&str, i64)>) -> LedgerRecord {
        if let Some((location, epoch)) = location {
            self.location = Some(location.to_string());
            self.epoch = Some(epoch);
        }
        self
    }
}

/// Appends one record as one line with one `write`, creating the file 0600 (and its
/// directory 0700) when missing, and rotating it first when it has reached
/// `MAX_LEDGER_BYTES` ([`rotate`]: each uid's newest records within a fair share).
pub fn append(path: &Path, record: &LedgerRecord) -> io::Result<()> {
    append_within(path, record, MAX_LEDGER_BYTES)
}

/// How many times a writer reopens a ledger that was rotated under it before it gives up.
const REOPENS: usize = 16;

/// [`append`] with the rotation size as a parameter (tests use a small one). A writer
/// holds a shared lock on the file while it writes and the rotation an exclusive one,
/// and a writer that finds the path names another file than the one it opened (rotated
/// meanwhile) opens it again: a line is never written into a generation being rotated.
fn append_within(path: &Path, record: &LedgerRecord, max: u64) -> io::Result<()> {
    let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
    line.push(b'\n');
    for _ in 0..REOPENS {
        let file = open_append(path)?;
        file.lock_shared()?;
        if !rotate::still_names(path, &file)? {
            continue;
        }
        if file.metadata()?.len() >= max {
            file.unlock()?;
            rotate::rotate(path, &file, max)?;
            continue;
        }
        return (&file).write_all(&line);
    }
    Err(io::Error::other(format!(
        "{} was rotated under this writer {REOPENS} times in a row",
        path.display()
    )))
}

fn open_append(path: &Path) -> io::Result<File> {
    let open = || {
        OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
    };
    match open() {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)?;
            }
            open()
        }
        other => other,
    }
}

/// The rotated generation: `refusals.jsonl.1`.
pub fn rotated(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

/// Reads the records of a ledger file, skipping lines that do not parse.
pub fn read(path: &Path) -> io::Result<Vec<LedgerRecord>> {
    let text = fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// Milliseconds since the Unix epoch on this machine's clock.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::Reason;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn records_append_as_lines_and_read_back() {
        let dir = std::env::temp_dir().join(format!("rf-ledger-{}", std::process::id()));
        let path = dir.join("nested").join("refusals.jsonl");
        let record = LedgerRecord::new(
            DecidedBy::Asker,
            Verdict::Refused(Reason::NotHeld),
            "no lease on b/r",
        );
        append(&path, &record).unwrap();
        append(&path, &record).unwrap();
        assert_eq!(read(&path).unwrap(), vec![record.clone(), record]);
        let line = fs::read_to_string(&path).unwrap();
        let json: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        assert_eq!(json["decided_by"], "asker");
        assert_eq!(json["verdict"], "refused");
        assert_eq!(json["reason"], "not_held");
        let mode = fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        fs::remove_dir_all(&dir).unwrap();
    }
}
