//! The quarantine's counts, kept in the home (ARCHITECTURE.md, "Quarantine"): the guard is
//! a process per tool call, so what it counts lives in files the daemon's home holds and
//! `row-fence status` and `health --prometheus` read.
//!
//! - `$ROW_FENCE_HOME/quarantine/<session>.json`: one record per session quarantined now
//!   (written by the guard when an ask for the session is REFUSED, removed when one is
//!   ALLOWED again; `.`-prefixed names are its temporary files).
//! - `$ROW_FENCE_HOME/quarantine/denials.log`: one line per call the quarantine denied,
//!   appended (`O_APPEND`, one `write` per line, so concurrent guards never interleave),
//!   never rewritten: a counter that only grows.

use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The directory of quarantine records under the home.
pub fn dir(home: &Path) -> PathBuf {
    home.join("quarantine")
}

/// The denial log under the home.
pub fn denials_log(home: &Path) -> PathBuf {
    dir(home).join("denials.log")
}

/// What the home says of quarantines now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Sessions quarantined now (records present).
    pub sessions: u64,
    /// Calls the quarantine has denied, ever (lines in the denial log).
    pub denials: u64,
}

/// Reads the counts; a home with no quarantine directory counts zero. An unreadable
/// directory or log is an error, never a zero.
pub fn counts(home: &Path) -> io::Result<Counts> {
    let entries = match fs::read_dir(dir(home)) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Counts::default()),
        Err(e) => return Err(e),
    };
    let mut sessions = 0;
    for entry in entries {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".json") && !name.starts_with('.') {
            sessions += 1;
        }
    }
    let denials = match fs::read(denials_log(home)) {
        Ok(bytes) => bytes.iter().filter(|b| **b == b'\n').count() as u64,
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e),
    };
    Ok(Counts { sessions, denials })
}

/// Quarantine records read at most by [`sessions`]: a home flooded with records is shown
/// in part, never read without bound.
pub const MAX_SESSIONS_READ: usize = 1000;

/// A quarantine record as read back (the guard writes `{session, descriptor, refusal,
/// since_ms}`); every field is optional, so a record of an older or newer guard reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Session {
    /// The session id; the file name's when the record does not say (or cannot be read).
    pub session: String,
    /// The descriptor whose ask was refused.
    pub descriptor: Option<String>,
    /// The refusal's verdict line, as the agent was shown it.
    pub refusal: Option<String>,
    /// Since when, ms since the Unix epoch.
    pub since_ms: Option<u64>,
    /// The record is there but cannot be read or parsed: the session counts as
    /// quarantined all the same (the guard fails closed on it).
    #[serde(skip)]
    pub unreadable: bool,
}

/// The sessions quarantined now (at most [`MAX_SESSIONS_READ`], each record up to 64 KiB),
/// in file-name order. A home with no quarantine directory has none; one that cannot be
/// listed is an error, never "none".
pub fn sessions(home: &Path) -> io::Result<Vec<Session>> {
    use std::io::Read;
    let entries = match fs::read_dir(dir(home)) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") && !name.starts_with('.') {
            names.push(name);
        }
    }
    names.sort();
    names.truncate(MAX_SESSIONS_READ);
    Ok(names
        .into_iter()
        .map(|name| {
            let mut text = Vec::new();
            let read = fs::File::open(dir(home).join(&name))
                .and_then(|f| f.take(64 * 1024).read_to_end(&mut text));
            let fallback = name.trim_end_matches(".json").to_string();
            match read
                .ok()
                .and_then(|_| serde_json::from_slice::<Session>(&text).ok())
            {
                Some(mut s) => {
                    if s.session.is_empty() {
                        s.session = fallback;
                    }
                    s
                }
                None => Session {
                    session: fallback,
                    unreadable: true,
                    ..Session::default()
                },
            }
        })
        .collect())
}

/// One denial, as the log holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// When, in ms since the Unix epoch.
    pub ts_ms: u64,
    /// The session id.
    pub session: String,
    /// The tool the call was for (`Bash`, `mcp__github__merge_pull_request`, …).
    pub tool: String,
}

/// Appends one denial to the log (0600 in a 0700 directory, made if missing).
pub fn record_denial(home: &Path, denial: &Denial) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir(home))?;
    let mut line = serde_json::to_vec(denial).map_err(io::Error::other)?;
    line.push(b'\n');
    let mut file = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(denials_log(home))?;
    // One write: O_APPEND places it whole at the end, whatever other guards append.
    file.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_denials_are_counted_and_an_empty_home_counts_zero() {
        let home = std::env::temp_dir().join(format!("rf-qcounts-{}", std::process::id()));
        assert_eq!(counts(&home).unwrap(), Counts::default());
        fs::create_dir_all(dir(&home)).unwrap();
        fs::write(dir(&home).join("s-1.json"), "{}\n").unwrap();
        fs::write(dir(&home).join(".s-2.json.tmp"), "").unwrap();
        for _ in 0..3 {
            record_denial(
                &home,
                &Denial {
                    ts_ms: 1,
                    session: "s-1".into(),
                    tool: "Bash".into(),
                },
            )
            .unwrap();
        }
        assert_eq!(
            counts(&home).unwrap(),
            Counts {
                sessions: 1,
                denials: 3
            }
        );
        fs::remove_dir_all(&home).unwrap();
    }
}
