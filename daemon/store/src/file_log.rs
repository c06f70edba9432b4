//! The file store's fence log: one JSON line per committed batch in
//! `<dir>/<board>.log.jsonl`. It lives beside the document, not in it, so a read or write
//! of the board does not parse and rewrite a thousand log entries each time.
//!
//! The document is the truth and the log file is brought up to it: the rename of the
//! document commits a batch, and the document carries the entries its log file may not
//! hold yet (`BoardDocument::log`). The next writer, under the board's lock, appends those
//! entries, syncs the file and only then lets the document forget them ([`reconcile`]).
//! So after any crash the log holds exactly one entry per committed revision (none for an
//! uncommitted one), and a log that cannot be written (a directory, a full disk) never
//! fails a committed write: its entries wait in the document. A torn last line (a writer
//! killed mid-append) is cut off before the next append and skipped by readers. When the
//! file grows past [`TRIM_AT_BYTES`] it is rewritten (atomically) to its newest `LOG_CAP`
//! entries; readers only ever see the newest `LOG_CAP`.

use super::{LOG_CAP, LogEntry, StoreError};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The log file is trimmed once it reaches this many bytes (128 KiB, about three times
/// `LOG_CAP` entries).
pub const TRIM_AT_BYTES: u64 = 128 * 1024;

/// A log file is read up to this many bytes (a log replaced by a device that never ends,
/// such as `/dev/zero`, must not be read for ever).
const READ_LIMIT: u64 = 4 * TRIM_AT_BYTES;

/// The log file of `board` in `dir`.
pub fn path(dir: &Path, board: &str) -> PathBuf {
    dir.join(format!("{board}.log.jsonl"))
}

/// What a log file holds: its entries, each with the byte offset its line ends at (a torn
/// last line, with no newline yet, is not an entry), and the file's length.
struct Contents {
    entries: Vec<(LogEntry, u64)>,
    len: u64,
}

fn fail(path: &Path, e: io::Error) -> StoreError {
    StoreError::Failed(crate::Detail::caused_by(
        format!("the fence log {}: {e}", path.display()),
        e,
    ))
}

/// Reads the log file: `None` when it does not exist. Only regular files are logs.
fn read(path: &Path) -> Result<Option<Contents>, StoreError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail(path, e)),
    };
    let meta = file.metadata().map_err(|e| fail(path, e))?;
    if !meta.is_file() {
        return Err(fail(path, io::Error::other("not a regular file")));
    }
    let mut bytes = Vec::new();
    file.take(READ_LIMIT)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(path, e))?;
    let mut entries = Vec::new();
    let mut start = 0;
    for (i, byte) in bytes.iter().enumerate() {
        if *byte != b'\n' {
            continue;
        }
        let line = &bytes[start..i];
        start = i + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let entry = serde_json::from_slice(line).map_err(|e| {
            StoreError::Corrupt(crate::Detail::caused_by(
                format!("{}: {e}", path.display()),
                e,
            ))
        })?;
        entries.push((entry, start as u64));
    }
    Ok(Some(Contents {
        entries,
        len: bytes.len() as u64,
    }))
}

/// Brings the log file up to the document (the caller holds the board's exclusive lock):
/// cuts a torn last line and any entries above `revision` (a history the document no
/// longer has), appends the `pending` entries the file lacks, and syncs it. Returns the
/// revision the file now holds entries through, so the document may forget its pending
/// entries up to it; an error leaves them pending.
pub fn reconcile(path: &Path, pending: &[LogEntry], revision: u64) -> Result<u64, StoreError> {
    let Some(contents) = read(path)? else {
        if pending.is_empty() {
            return Ok(0);
        }
        return write_missing(path, 0, 0, pending.iter().collect());
    };
    let kept: Vec<&(LogEntry, u64)> = contents
        .entries
        .iter()
        .take_while(|(e, _)| e.revision <= revision)
        .collect();
    let cut = kept.last().map_or(0, |(_, end)| *end);
    let last = kept.last().map_or(0, |(e, _)| e.revision);
    let missing: Vec<&LogEntry> = pending.iter().filter(|e| e.revision > last).collect();
    if cut == contents.len && missing.is_empty() {
        sync(path)?;
        return Ok(last);
    }
    write_missing(path, cut, last, missing)
}

/// Cuts the file to `cut` bytes, appends `missing`, syncs; returns the last revision.
fn write_missing(
    path: &Path,
    cut: u64,
    last: u64,
    missing: Vec<&LogEntry>,
) -> Result<u64, StoreError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| fail(path, e))?;
    file.set_len(cut).map_err(|e| fail(path, e))?;
    let mut lines = Vec::new();
    for entry in &missing {
        serde_json::to_writer(&mut lines, entry)
            .map_err(|e| StoreError::Invalid(crate::Detail::caused_by(e.to_string(), e)))?;
        lines.push(b'\n');
    }
    file.seek(io::SeekFrom::Start(cut))
        .map_err(|e| fail(path, e))?;
    file.write_all(&lines).map_err(|e| fail(path, e))?;
    file.sync_data().map_err(|e| fail(path, e))?;
    if cut + lines.len() as u64 >= TRIM_AT_BYTES {
        trim(path).map_err(|e| fail(path, e))?;
    }
    Ok(missing.last().map_or(last, |e| e.revision))
}

fn sync(path: &Path) -> Result<(), StoreError> {
    File::open(path)
        .and_then(|f| f.sync_data())
        .map_err(|e| fail(path, e))
}

/// Appends a just-committed entry (the caller holds the board's exclusive lock). Best
/// effort: the entry is also in the document until a later [`reconcile`] confirms it.
pub fn append(path: &Path, entry: &LogEntry) -> Result<(), StoreError> {
    if fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(fail(path, io::Error::other("not a regular file")));
    }
    let mut line = serde_json::to_vec(entry)
        .map_err(|e| StoreError::Invalid(crate::Detail::caused_by(e.to_string(), e)))?;
    line.push(b'\n');
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| fail(path, e))?;
    file.write_all(&line).map_err(|e| fail(path, e))
}

fn trim(path: &Path) -> io::Result<()> {
    let text = fs::read_to_string(path)?;
    let lines: Vec<&str> = text.lines().collect();
    let mut keep = lines[lines.len().saturating_sub(LOG_CAP)..].join("\n");
    keep.push('\n');
    crate::atomic_file::write(path, keep.as_bytes(), 0o600, false)
}

/// The newest `count` entries (at most `LOG_CAP`), newest first: the file's entries up to
/// `revision` and then the document's `pending` ones it does not hold yet.
pub fn newest(
    path: &Path,
    pending: &[LogEntry],
    revision: u64,
    count: usize,
) -> Result<Vec<LogEntry>, StoreError> {
    let mut entries: Vec<LogEntry> = match read(path) {
        Ok(found) => found
            .map(|c| c.entries.into_iter().map(|(e, _)| e).collect())
            .unwrap_or_default(),
        Err(e) if pending.is_empty() => return Err(e),
        Err(e) => {
            return Err(StoreError::Failed(crate::Detail::caused_by(
                format!(
                    "{e}; the board's document keeps the newest {} entries until the log can be written",
                    pending.len()
                ),
                e,
            )));
        }
    };
    entries.retain(|e| e.revision <= revision);
    let last = entries.last().map_or(0, |e| e.revision);
    entries.extend(pending.iter().filter(|e| e.revision > last).cloned());
    Ok(entries.into_iter().rev().take(count.min(LOG_CAP)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(revision: u64) -> LogEntry {
        LogEntry {
            revision,
            owner: String::new(),
            records: 1,
        }
    }

    #[test]
    fn reconcile_cuts_a_torn_line_and_a_lost_history_and_appends_what_is_pending() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path(), "b");
        append(&path, &entry(1)).unwrap();
        append(&path, &entry(2)).unwrap();
        append(&path, &entry(9)).unwrap();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"revision\":10,\"own").unwrap();
        let through = reconcile(&path, &[entry(2), entry(3), entry(4)], 4).unwrap();
        assert_eq!(through, 4);
        let revisions: Vec<u64> = newest(&path, &[], 4, 10)
            .unwrap()
            .iter()
            .map(|e| e.revision)
            .collect();
        assert_eq!(revisions, vec![4, 3, 2, 1]);
    }

    #[test]
    fn a_log_that_is_not_a_file_keeps_its_entries_pending() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path(), "b");
        fs::create_dir(&path).unwrap();
        assert!(reconcile(&path, &[entry(1)], 1).is_err());
        assert!(append(&path, &entry(1)).is_err());
        let err = newest(&path, &[entry(1)], 1, 10).unwrap_err();
        assert!(err.to_string().contains("keeps the newest 1"), "{err}");
    }
}
