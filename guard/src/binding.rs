//! Session binding: the first time a session's working directory resolves to a
//! descriptor, the guard records session → descriptor in
//! `$ROW_FENCE_HOME/sessions/<session>.json` (0600, in a 0700 directory, created
//! atomically; the first binding stands). Every later call of that session is judged with
//! that descriptor too, from any directory, so a bound lane cannot step outside its
//! worktree (a fresh clone, `/tmp`) to write.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A binding file is at most this many bytes (64 KiB).
pub const MAX_BINDING_BYTES: u64 = 64 * 1024;

/// One binding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// The session id, as Claude Code sent it.
    pub session: String,
    /// The descriptor the session is bound to.
    pub descriptor: PathBuf,
    /// The directory it was bound from.
    pub cwd: PathBuf,
    /// When, in ms since the Unix epoch.
    pub bound_at_ms: u64,
}

/// A binding file that is there but cannot be read or written. The session may be bound:
/// the caller fails closed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BindingError {
    /// The file cannot be opened or read.
    #[error("session binding {}: {source}", path.display())]
    Read {
        /// The binding file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The file is not a binding's JSON.
    #[error("session binding {} is not a binding: {source}", path.display())]
    NotABinding {
        /// The binding file.
        path: PathBuf,
        /// serde's reason.
        source: serde_json::Error,
    },
    /// The file names another session than the one it is named after.
    #[error("session binding {} names another session", path.display())]
    OtherSession {
        /// The binding file.
        path: PathBuf,
    },
    /// The binding cannot be written.
    #[error("cannot write session binding {}: {source}", path.display())]
    Write {
        /// The binding file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The directory of binding files under the home.
pub fn dir(home: &Path) -> PathBuf {
    home.join("sessions")
}

/// The binding file of `session`: the id itself when it is a plain token (Claude Code's
/// are UUIDs), so the hook's shell fallback can find it; else a digest of it.
pub fn path(home: &Path, session: &str) -> PathBuf {
    let plain = !session.is_empty()
        && session.len() <= 128
        && !session.starts_with('.')
        && session
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let name = if plain {
        session.to_string()
    } else {
        let digest: String = Sha256::digest(session.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("sha256-{digest}")
    };
    dir(home).join(format!("{name}.json"))
}

/// The session's binding: `Ok(None)` when it has none; an error when a file is there but
/// cannot be read, or is not a plain file with one name (the session may be bound: the
/// caller fails closed).
pub fn read(home: &Path, session: &str) -> Result<Option<Binding>, BindingError> {
    let file = path(home, session);
    let unread = |source| BindingError::Read {
        path: file.clone(),
        source,
    };
    match plain_file(&file) {
        Ok(false) => return Ok(None),
        Ok(true) => {}
        Err(e) => return Err(unread(e)),
    }
    let bytes = match fs::File::open(&file) {
        Ok(f) => {
            let mut bytes = Vec::new();
            io::Read::read_to_end(&mut io::Read::take(f, MAX_BINDING_BYTES + 1), &mut bytes)
                .map_err(unread)?;
            bytes
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(unread(e)),
    };
    let binding: Binding =
        serde_json::from_slice(&bytes).map_err(|source| BindingError::NotABinding {
            path: file.clone(),
            source,
        })?;
    if binding.session != session {
        return Err(BindingError::OtherSession { path: file });
    }
    Ok(Some(binding))
}

/// `Ok(true)` when `file` is a plain file with one name, `Ok(false)` when it is not there;
/// an error for a link, a directory, or a file with a second name (a hard link planted
/// elsewhere, through which a file tool could rewrite it): a binding or quarantine record
/// the lane could have written is not one the guard trusts. A second name seen once is
/// looked at again after [`SECOND_LOOK`]: [`bind`] links a finished file into place and
/// then removes its temporary name.
pub fn plain_file(file: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let look = || match fs::symlink_metadata(file) {
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    };
    let mut meta = look()?;
    if meta.as_ref().is_some_and(|m| m.nlink() > 1) {
        std::thread::sleep(SECOND_LOOK);
        meta = look()?;
    }
    match meta {
        None => Ok(false),
        Some(m) if !m.file_type().is_file() => Err(io::Error::other(
            "not a plain file (a link or a directory), so not one the guard wrote",
        )),
        Some(m) if m.nlink() > 1 => Err(io::Error::other(
            "the file has a second name, through which it could have been rewritten",
        )),
        Some(_) => Ok(true),
    }
}

/// How long [`plain_file`] waits before it looks at a file with a second name again
/// (20 ms): far longer than [`bind`] keeps its temporary name.
pub const SECOND_LOOK: std::time::Duration = std::time::Duration::from_millis(20);

/// Records `binding` unless the session already has one (the first binding stands):
/// written to a temporary file and linked into place, so a reader never sees half a file
/// and two racing calls cannot both win. Returns the binding in force.
pub fn bind(home: &Path, binding: &Binding) -> Result<Binding, BindingError> {
    let target = path(home, &binding.session);
    let fail = |source: io::Error| BindingError::Write {
        path: target.clone(),
        source,
    };
    let dir = dir(home);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(fail)?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        std::process::id(),
        row_fence_contract::ledger::now_ms()
    ));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .map_err(fail)?;
    let mut line = serde_json::to_vec(binding).map_err(|e| fail(io::Error::other(e)))?;
    line.push(b'\n');
    let written = file.write_all(&line).and_then(|()| file.sync_all());
    let linked = written.and_then(|()| fs::hard_link(&temp, &target));
    let _ = fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(binding.clone()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            read(home, &binding.session)?.ok_or_else(|| fail(e))
        }
        Err(e) => Err(fail(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_first_binding_stands_and_is_private() {
        let home = std::env::temp_dir().join(format!("rf-binding-{}", std::process::id()));
        let b = |d: &str| Binding {
            session: "abc-123".into(),
            descriptor: d.into(),
            cwd: "/w".into(),
            bound_at_ms: 1,
        };
        assert_eq!(read(&home, "abc-123").unwrap(), None);
        assert_eq!(bind(&home, &b("/a")).unwrap(), b("/a"));
        assert_eq!(bind(&home, &b("/b")).unwrap(), b("/a"));
        assert_eq!(read(&home, "abc-123").unwrap(), Some(b("/a")));
        let meta = fs::metadata(path(&home, "abc-123")).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(dir(&home)).unwrap().mode() & 0o777, 0o700);
        assert!(
            path(&home, "../x").ends_with(format!("sha256-{}.json", ""))
                || path(&home, "../x").to_string_lossy().contains("sha256-")
        );
        fs::write(path(&home, "abc-123"), "{").unwrap();
        assert!(
            read(&home, "abc-123").is_err(),
            "an unreadable binding fails closed"
        );
        fs::remove_dir_all(&home).unwrap();
    }
}
