//! The file store's fence log: one JSON line per committed batch in
//! `<dir>/<board>.log.jsonl`, appended by the writer that holds the board's exclusive lock.
//! It lives beside the document, not in it, so a read or write of the board does not
//! parse and rewrite a thousand log entries each time. When it grows past
//! [`TRIM_AT_BYTES`] it is rewritten (atomically) to its newest `LOG_CAP` entries; readers
//! only ever see the newest `LOG_CAP`.

use super::{LOG_CAP, LogEntry, StoreError};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The log file is trimmed once it reaches this many bytes (128 KiB, about three times
/// `LOG_CAP` entries).
pub const TRIM_AT_BYTES: u64 = 128 * 1024;

/// The log file of `board` in `dir`.
pub fn path(dir: &Path, board: &str) -> PathBuf {
    dir.join(format!("{board}.log.jsonl"))
}

/// Appends `entries` (caller holds the board's exclusive lock), trimming when due.
pub fn append(path: &Path, entries: &[LogEntry]) -> Result<(), StoreError> {
    if entries.is_empty() {
        return Ok(());
    }
    let fail = |e: io::Error| StoreError::Unreachable(format!("{}: {e}", path.display()));
    let mut lines = Vec::new();
    for entry in entries {
        serde_json::to_writer(&mut lines, entry).map_err(|e| StoreError::Invalid(e.to_string()))?;
        lines.push(b'\n');
    }
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(fail)?;
    file.write_all(&lines).map_err(fail)?;
    if file.metadata().map_err(fail)?.len() >= TRIM_AT_BYTES {
        trim(path).map_err(fail)?;
    }
    Ok(())
}

fn trim(path: &Path) -> io::Result<()> {
    let text = fs::read_to_string(path)?;
    let lines: Vec<&str> = text.lines().collect();
    let mut keep = lines[lines.len().saturating_sub(LOG_CAP)..].join("\n");
    keep.push('\n');
    crate::atomic_file::write(path, keep.as_bytes(), 0o600, false)
}

/// The newest `count` entries (at most `LOG_CAP`), newest first.
pub fn newest(path: &Path, count: usize) -> Result<Vec<LogEntry>, StoreError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::Unreachable(format!("{}: {e}", path.display()))),
    };
    text.lines()
        .rev()
        .take(count.min(LOG_CAP))
        .map(|l| {
            serde_json::from_str(l)
                .map_err(|e| StoreError::Corrupt(format!("{}: {e}", path.display())))
        })
        .collect()
}
