//! The audit log of the key broker's changes (ARCHITECTURE.md, "Key broker"):
//! `<home>/audit.jsonl`, one JSON object a line, appended by whoever makes the change (the
//! daemon for keys and reloads, `row-fence lane` for bindings). It names keys by their
//! fingerprint only: no record carries key material. A change whose record cannot be
//! appended is not made, so the log misses no change.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The audit log, `<home>/audit.jsonl`.
pub fn path(home: &Path) -> PathBuf {
    home.join("audit.jsonl")
}

/// One change, or one refused attempt at one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When, ms since the Unix epoch.
    pub ts_ms: u64,
    /// `keys add`, `keys remove`, `lane add`, `lane remove`, `lanes reload`, `lane renew`,
    /// `lane release`.
    pub act: String,
    /// Whether it was done (false: refused or failed, and nothing changed).
    pub ok: bool,
    /// The uid that asked (the control socket's or broker socket's peer, or the CLI's own).
    pub by_uid: u32,
    /// The key's `SHA256:…` fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// `push` or `read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The lane's uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// What happened, or why not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl AuditRecord {
    /// A record of `act` by `by_uid`, stamped now.
    pub fn new(act: &str, by_uid: u32, ok: bool) -> AuditRecord {
        AuditRecord {
            ts_ms: row_fence_contract::ledger::now_ms(),
            act: act.to_string(),
            ok,
            by_uid,
            ..AuditRecord::default()
        }
    }
}

/// Appends `record` as one line (one `write` on an `O_APPEND` file, created 0600). A log
/// that is not this uid's, or that others may write, is refused: it could be a lane's.
pub fn append(home: &Path, record: &AuditRecord) -> io::Result<()> {
    let path = path(home);
    let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
    line.push(b'\n');
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&path)?;
    let meta = file.metadata()?;
    let uid = row_fence_contract::paths::euid();
    if meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(io::Error::other(format!(
            "{} is owned by uid {} with mode {:03o}; it must be uid {uid}'s and writable by no one else",
            path.display(),
            meta.uid(),
            meta.mode() & 0o777
        )));
    }
    file.write_all(&line)
}

/// Every record in `home`'s audit log, oldest first; a line that does not parse is left out.
pub fn read(home: &Path) -> io::Result<Vec<AuditRecord>> {
    let text = std::fs::read_to_string(path(home))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// Refused attempts recorded per uid per [`REFUSED_WINDOW`]; the rest are counted and the
/// count is named in the next one recorded. Any uid the ask socket serves can ask for a
/// key change, and the log does not rotate: unbounded, a lane asking in a loop would fill
/// the disk, and then no change could be recorded, so none made.
pub const REFUSED_PER_WINDOW: u32 = 20;

/// The window [`REFUSED_PER_WINDOW`] counts in.
pub const REFUSED_WINDOW: Duration = Duration::from_secs(60);

/// Bounds the refused attempts recorded per uid (changes made are always recorded).
#[derive(Debug, Default)]
pub struct RefusedThrottle {
    by_uid: Mutex<HashMap<u32, Window>>,
}

#[derive(Debug)]
struct Window {
    started: Instant,
    recorded: u32,
    /// Attempts left unrecorded since the last one recorded.
    unrecorded: u64,
}

impl RefusedThrottle {
    /// Whether `uid`'s refused attempt now is recorded: `Some(n)` with the `n` attempts
    /// left unrecorded before it (to name in its record), `None` when it is only counted.
    pub fn admit(&self, uid: u32) -> Option<u64> {
        self.admit_at(uid, Instant::now())
    }

    fn admit_at(&self, uid: u32, now: Instant) -> Option<u64> {
        let mut by_uid = self.by_uid.lock().unwrap_or_else(|p| p.into_inner());
        let window = by_uid.entry(uid).or_insert(Window {
            started: now,
            recorded: 0,
            unrecorded: 0,
        });
        if now.duration_since(window.started) >= REFUSED_WINDOW {
            window.started = now;
            window.recorded = 0;
        }
        if window.recorded >= REFUSED_PER_WINDOW {
            window.unrecorded += 1;
            return None;
        }
        window.recorded += 1;
        Some(std::mem::take(&mut window.unrecorded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_appended_one_a_line_private_to_their_uid() {
        let dir = tempfile::tempdir().unwrap();
        let mut record = AuditRecord::new("keys add", 0, true);
        record.fingerprint = Some("SHA256:x".into());
        append(dir.path(), &record).unwrap();
        append(dir.path(), &AuditRecord::new("keys remove", 0, false)).unwrap();
        let back = read(dir.path()).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], record);
        let mode = std::fs::metadata(path(dir.path())).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_uid_refused_in_a_loop_is_recorded_a_bounded_number_of_times_and_counted() {
        let throttle = RefusedThrottle::default();
        let start = Instant::now();
        let admitted: Vec<Option<u64>> = (0..100).map(|_| throttle.admit_at(7, start)).collect();
        assert_eq!(admitted.iter().filter(|a| a.is_some()).count(), 20);
        assert!(admitted[..20].iter().all(|a| *a == Some(0)));
        // Another uid has its own bound.
        assert_eq!(throttle.admit_at(8, start), Some(0));
        // The next window records again, naming the 80 left out.
        assert_eq!(throttle.admit_at(7, start + REFUSED_WINDOW), Some(80));
        assert_eq!(throttle.admit_at(7, start + REFUSED_WINDOW), Some(0));
    }
}
