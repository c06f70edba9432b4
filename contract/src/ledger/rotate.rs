//! The ledger's rotation, with a share per uid (ARCHITECTURE.md, "The daemon"). A plain
//! rotation (the full file renamed over the old generation) lets whoever writes fastest
//! decide what is kept: any local uid that can make the daemon refuse it (the key broker's
//! socket is open to every uid) could rotate another uid's refusal out of both files in
//! seconds. So a rotation rebuilds the rotated generation from both files, keeping each
//! uid's newest records within a max-min fair share of `max` bytes: a uid whose records
//! fit in an equal share keeps them all, and only the uids over it lose their oldest. One
//! uid's flood then costs only its own records; another uid loses a record only once as
//! many uids as it would take to fill the generation are each over their share.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Whose a line is: the record's `uid`, `None` for a record without one (older lines,
/// a peer whose uid the socket could not tell) or a line that does not parse.
type Owner = Option<u32>;

/// True when `path` still names the file `file` was opened as (not rotated since).
pub(super) fn still_names(path: &Path, file: &File) -> io::Result<bool> {
    let ours = file.metadata()?;
    Ok(fs::metadata(path)
        .map(|m| m.ino() == ours.ino() && m.dev() == ours.dev())
        .unwrap_or(false))
}

/// Rotates the full ledger `file` at `path`: under an exclusive lock, and only when the
/// path still names it and it is still full (a writer that lost the race finds it done).
/// The new rotated generation is written beside it and renamed into place before the full
/// file is unlinked, so a crash between the two leaves a record twice, never lost.
pub(super) fn rotate(path: &Path, file: &File, max: u64) -> io::Result<()> {
    file.lock()?;
    if !still_names(path, file)? || file.metadata()?.len() < max {
        return file.unlock();
    }
    let old = super::rotated(path);
    let sources = [old.as_path(), path];
    let mut lines = Vec::new();
    for source in sources {
        scan(source, &mut lines)?;
    }
    let keep = kept(&lines, max);
    let staged = staging(&old);
    write_kept(&sources, &keep, &staged)?;
    fs::rename(&staged, &old)?;
    fs::remove_file(path)?;
    file.unlock()
}

/// Each line of `path` (missing: none) as its owner and its length in bytes, in order.
fn scan(path: &Path, lines: &mut Vec<(Owner, u64)>) -> io::Result<()> {
    #[derive(serde::Deserialize)]
    struct OwnerOnly {
        #[serde(default)]
        uid: Option<u32>,
    }
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let owner = serde_json::from_slice::<OwnerOnly>(&line)
            .ok()
            .and_then(|o| o.uid);
        lines.push((owner, line.len() as u64));
    }
}

/// Which lines to keep: each owner's newest lines within its share of `max` bytes.
fn kept(lines: &[(Owner, u64)], max: u64) -> Vec<bool> {
    let mut totals: HashMap<Owner, u64> = HashMap::new();
    for (owner, len) in lines {
        *totals.entry(*owner).or_default() += len;
    }
    let mut left = shares(&totals, max);
    let mut keep = vec![false; lines.len()];
    for (i, (owner, len)) in lines.iter().enumerate().rev() {
        let share = left.entry(*owner).or_default();
        if *len <= *share {
            *share -= len;
            keep[i] = true;
        } else {
            // Older lines of this owner are past its share too: none is kept out of order.
            *share = 0;
        }
    }
    keep
}

/// The max-min fair share of `budget` bytes among owners wanting `totals`: owners wanting
/// less than an equal share of what is left get all they want, the rest split it equally.
fn shares(totals: &HashMap<Owner, u64>, budget: u64) -> HashMap<Owner, u64> {
    let mut wants: Vec<(Owner, u64)> = totals.iter().map(|(o, t)| (*o, *t)).collect();
    wants.sort_by_key(|(_, t)| *t);
    let mut left = budget;
    let mut shares = HashMap::new();
    for (i, (owner, want)) in wants.iter().enumerate() {
        let equal = left / (wants.len() - i) as u64;
        let share = (*want).min(equal);
        left -= share;
        shares.insert(*owner, share);
    }
    shares
}

/// `<old>.tmp`: the new rotated generation while it is written.
fn staging(old: &Path) -> PathBuf {
    let mut name = old.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// Copies the kept lines of `sources` (in order, as [`scan`] numbered them) into `staged`
/// (0600), flushed to disk.
fn write_kept(sources: &[&Path], keep: &[bool], staged: &Path) -> io::Result<()> {
    let out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(staged)?;
    let mut out = BufWriter::new(out);
    let mut index = 0;
    let mut line = Vec::new();
    for source in sources {
        let file = match File::open(source) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut reader = BufReader::new(file);
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            // Under the exclusive lock nothing is appended meanwhile; a line past what
            // was scanned (never expected) is kept rather than lost.
            if keep.get(index).copied().unwrap_or(true) {
                out.write_all(&line)?;
            }
            index += 1;
        }
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::super::{DecidedBy, LedgerRecord, append_within, read, rotated};
    use super::*;
    use crate::verdict::{Reason, Verdict};

    #[test]
    fn shares_give_small_owners_all_and_split_the_rest() {
        let totals: HashMap<Owner, u64> = [
            (Some(1), 100),
            (Some(2), 10_000),
            (None, 300),
            (Some(3), 5_000),
        ]
        .into();
        let given = shares(&totals, 4_000);
        assert_eq!(given[&Some(1)], 100);
        assert_eq!(given[&None], 300);
        assert_eq!(given[&Some(3)], 1_800);
        assert_eq!(given[&Some(2)], 1_800);
        let all: HashMap<Owner, u64> = [(Some(1), 10), (Some(2), 20)].into();
        assert_eq!(shares(&all, 4_000), all);
    }

    #[test]
    fn one_uid_flooding_the_ledger_keeps_another_uids_record_and_bounds_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("refusals.jsonl");
        let max = 8 * 1024;
        let record = |uid: u32, detail: String| {
            LedgerRecord::new(
                DecidedBy::Daemon,
                Verdict::Refused(Reason::DifferentHolder),
                detail,
            )
            .with_uid(Some(uid))
        };
        append_within(&path, &record(7, "the quiet uid's refusal".into()), max).unwrap();
        for i in 0..2_000 {
            append_within(
                &path,
                &record(9, format!("flood {i} {}", "x".repeat(100))),
                max,
            )
            .unwrap();
        }
        let mut all = read(&rotated(&path)).unwrap();
        all.extend(read(&path).unwrap());
        assert!(
            all.iter().any(|r| r.detail == "the quiet uid's refusal"),
            "the quiet uid's record was rotated out"
        );
        // The flood's newest records are there, its oldest are not, in order.
        assert!(all.iter().any(|r| r.detail.starts_with("flood 1999 ")));
        assert!(!all.iter().any(|r| r.detail.starts_with("flood 0 ")));
        let floods: Vec<u64> = all
            .iter()
            .filter_map(|r| r.detail.strip_prefix("flood "))
            .filter_map(|d| d.split(' ').next()?.parse().ok())
            .collect();
        assert!(floods.windows(2).all(|w| w[0] < w[1]), "{floods:?}");
        let size = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        assert!(size(&rotated(&path)) <= max, "{}", size(&rotated(&path)));
        assert!(size(&path) <= max + 200, "{}", size(&path));
        assert!(!staging(&rotated(&path)).exists());
    }
}
