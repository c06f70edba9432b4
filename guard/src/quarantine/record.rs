//! A session's quarantine, remembered: `$ROW_FENCE_HOME/quarantine/<session>.json` (0600,
//! in a 0700 directory; the file name is the binding's), written when an ask for the
//! session is REFUSED and removed when one is ALLOWED. A record that is there but cannot
//! be read counts as quarantined (fail closed).

use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// One quarantine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quarantine {
    /// The session id.
    pub session: String,
    /// The descriptor whose ask was refused.
    pub descriptor: PathBuf,
    /// The refusal's verdict line, as the agent was shown it.
    pub refusal: String,
    /// When, in ms since the Unix epoch.
    pub since_ms: u64,
}

/// The directory of quarantine records under the home.
pub fn dir(home: &Path) -> PathBuf {
    row_fence_contract::quarantine::dir(home)
}

/// The record of `session` (named as its binding file is).
pub fn path(home: &Path, session: &str) -> PathBuf {
    let binding = crate::binding::path(home, session);
    dir(home).join(binding.file_name().unwrap_or_default())
}

/// True when the session is quarantined, or its record cannot be read.
pub fn is_quarantined(home: &Path, session: &str) -> bool {
    match fs::symlink_metadata(path(home, session)) {
        Ok(_) => true,
        Err(e) => e.kind() != io::ErrorKind::NotFound,
    }
}

/// The session's record: `Ok(None)` when it has none; an error when one is there but
/// cannot be read or is not a plain file with one name (it still quarantines: see
/// [`is_quarantined`]).
pub fn read(home: &Path, session: &str) -> io::Result<Option<Quarantine>> {
    let file = path(home, session);
    if !crate::binding::plain_file(&file)? {
        return Ok(None);
    }
    let bytes = fs::read(&file)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(io::Error::other)
}

/// The most records [`names_any`] reads: past it, the answer is yes (fail closed).
pub const MAX_RECORDS_READ: usize = 1000;

/// True when any session's record names one of `descriptors` (a fresh session of a lane
/// another of whose sessions was refused), or the records cannot be read (fail closed).
/// A descriptor is the same whatever path spells it (a worktree reached through a link):
/// records and descriptors are compared by [`identity`].
pub fn names_any(home: &Path, descriptors: &[PathBuf]) -> bool {
    if descriptors.is_empty() {
        return false;
    }
    let keys: Vec<PathBuf> = descriptors.iter().map(|d| identity(d)).collect();
    let entries = match fs::read_dir(dir(home)) {
        Ok(entries) => entries,
        Err(e) => return e.kind() != io::ErrorKind::NotFound,
    };
    for (k, entry) in entries.enumerate() {
        if k >= MAX_RECORDS_READ {
            return true;
        }
        let Ok(entry) = entry else {
            return true;
        };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        let record: Option<Quarantine> = fs::read(entry.path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        match record {
            Some(q)
                if descriptors.contains(&q.descriptor)
                    || keys.contains(&identity(&q.descriptor)) =>
            {
                return true;
            }
            Some(_) => {}
            None => return true,
        }
    }
    false
}

/// The path a descriptor is known by, whatever spells it: its canonical path (every link
/// resolved), or, when it no longer exists, its directory's canonical path and its name,
/// or the path as given.
pub fn identity(descriptor: &Path) -> PathBuf {
    if let Ok(real) = fs::canonicalize(descriptor) {
        return real;
    }
    match (descriptor.parent(), descriptor.file_name()) {
        (Some(dir), Some(name)) => fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or_else(|_| descriptor.to_path_buf()),
        _ => descriptor.to_path_buf(),
    }
}

/// Records the quarantine (replacing an older record): a temporary file renamed into
/// place, so a reader never sees half a file.
pub fn mark(home: &Path, q: &Quarantine) -> io::Result<()> {
    let dir = dir(home);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    let target = path(home, &q.session);
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        std::process::id(),
        row_fence_contract::ledger::now_ms()
    ));
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)?;
    let mut line = serde_json::to_vec(q).map_err(io::Error::other)?;
    line.push(b'\n');
    let done = file
        .write_all(&line)
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&temp, &target));
    if done.is_err() {
        let _ = fs::remove_file(&temp);
    }
    done
}

/// Lifts the quarantine (an ask was ALLOWED): no record is the same as lifted.
pub fn lift(home: &Path, session: &str) -> io::Result<()> {
    match fs::remove_file(path(home, session)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_its_descriptor_through_any_spelling() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let tree = tmp.path().join("wt");
        std::fs::create_dir_all(tree.join(".git")).unwrap();
        let descriptor = tree.join(".git/row-fence.json");
        std::fs::write(&descriptor, "{}").unwrap();
        std::os::unix::fs::symlink(&tree, tmp.path().join("link")).unwrap();
        mark(
            &home,
            &Quarantine {
                session: "s-1".into(),
                descriptor: descriptor.clone(),
                refusal: "REFUSED".into(),
                since_ms: 1,
            },
        )
        .unwrap();
        let linked = tmp.path().join("link/.git/row-fence.json");
        assert!(names_any(&home, std::slice::from_ref(&linked)));
        assert!(names_any(
            &home,
            &[tmp.path().join("link/.git/../.git/row-fence.json")]
        ));
        assert!(!names_any(&home, &[tmp.path().join("other.json")]));
        // Gone, it is still known by its directory.
        std::fs::remove_file(&descriptor).unwrap();
        assert_eq!(identity(&linked), identity(&descriptor));
    }

    #[test]
    fn a_quarantine_is_marked_lifted_and_an_unreadable_one_counts() {
        let home = std::env::temp_dir().join(format!("rf-quarantine-{}", std::process::id()));
        assert!(!is_quarantined(&home, "s-1"));
        let q = Quarantine {
            session: "s-1".into(),
            descriptor: "/d.json".into(),
            refusal: "REFUSED".into(),
            since_ms: 1,
        };
        mark(&home, &q).unwrap();
        assert!(is_quarantined(&home, "s-1"));
        assert!(!is_quarantined(&home, "s-2"));
        mark(&home, &q).unwrap();
        lift(&home, "s-1").unwrap();
        assert!(!is_quarantined(&home, "s-1"));
        lift(&home, "s-1").unwrap();
        fs::remove_dir_all(&home).unwrap();
    }
}
