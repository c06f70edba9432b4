//! Replacing a file atomically, the one way every writer here does it: a temp file in the
//! same directory (the `tempfile` crate: a unique name, removed if anything fails), the
//! bytes written, its mode set, fsync'd, then renamed over the path. A reader sees the old
//! file or the new one, never half of one. With `sync_dir`, the directory is fsync'd too,
//! so the rename itself survives a crash (the lease store needs that; a heartbeat does
//! not). The temp file is named `.<file name>.<8 random characters>`, so the ones a killed
//! writer left behind can be told apart by target ([`leftovers`]) and removed by whoever
//! holds the target's lock.

use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Random characters in a temp file's name.
const RANDOM_CHARS: usize = 8;

fn temp_prefix(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(".{name}.")
}

/// The temp files a writer of `path` killed mid-write left in its directory. Only the
/// holder of `path`'s lock may remove them (another writer may be using its own).
pub fn leftovers(path: &Path) -> Vec<PathBuf> {
    let Some(dir) = path.parent() else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let prefix = temp_prefix(path);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix(&prefix).is_some_and(|rest| {
                rest.len() == RANDOM_CHARS && rest.chars().all(|c| c.is_ascii_alphanumeric())
            })
        })
        .map(|entry| entry.path())
        .collect()
}

/// Replaces `path` with `bytes`, mode `mode` (e.g. 0o600; not cut by the umask).
pub fn write(path: &Path, bytes: &[u8], mode: u32, sync_dir: bool) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(path))
        .rand_bytes(RANDOM_CHARS)
        .tempfile_in(dir)
        .map_err(|e| in_dir(dir, e))?;
    tmp.write_all(bytes)?;
    tmp.as_file()
        .set_permissions(Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if sync_dir {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// A file staged beside its target before the decision that fills it: created (mode
/// `mode`, fsync'd) with provisional bytes, so a directory that does not exist, cannot be
/// written or is full is found before anything depends on it; [`Staged::commit`] then
/// writes the final bytes and renames it over the target. Dropped uncommitted, the temp
/// file is removed. A grant stages its descriptor this way (ARCHITECTURE.md, "Lease token":
/// nothing is granted whose descriptor cannot be written).
pub struct Staged {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

/// Stages `path` with `provisional` bytes (see [`Staged`]). A target that is a directory
/// is an error here, not at the rename.
pub fn stage(path: &Path, provisional: &[u8], mode: u32) -> io::Result<Staged> {
    if path.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory",
        ));
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(&temp_prefix(path))
        .rand_bytes(RANDOM_CHARS)
        .tempfile_in(dir)
        .map_err(|e| in_dir(dir, e))?;
    tmp.as_file()
        .set_permissions(Permissions::from_mode(mode))?;
    tmp.write_all(provisional)?;
    tmp.as_file().sync_all()?;
    Ok(Staged {
        tmp,
        path: path.to_path_buf(),
    })
}

impl Staged {
    /// Replaces the staged bytes with `bytes`, fsyncs, renames over the target and fsyncs
    /// the directory.
    pub fn commit(mut self, bytes: &[u8]) -> io::Result<()> {
        use std::io::Seek;
        self.tmp.as_file().set_len(0)?;
        self.tmp.seek(io::SeekFrom::Start(0))?;
        self.tmp.write_all(bytes)?;
        self.tmp.as_file().sync_all()?;
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        self.tmp.persist(&self.path).map_err(|e| e.error)?;
        File::open(dir)?.sync_all()
    }
}

/// The temp file's error names the directory, never the temp file's internal name: the
/// caller knows only the path it asked for.
fn in_dir(dir: &Path, e: io::Error) -> io::Error {
    let why = match e.kind() {
        io::ErrorKind::NotFound => "the directory does not exist".to_string(),
        io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => io::Error::from(e.kind()).to_string(),
    };
    io::Error::new(
        e.kind(),
        format!("cannot create a file in {}: {why}", dir.display()),
    )
}

/// Replaces `path` with `text`, private to its user (0600), without a directory fsync.
pub fn write_private(path: &Path, text: &[u8]) -> io::Result<()> {
    write(path, text, 0o600, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_replaced_file_has_the_new_bytes_and_mode_and_no_temp_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, "old").unwrap();
        write(&path, b"new", 0o640, true).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o640);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let e = write(&dir.path().join("missing/f"), b"x", 0o600, false).unwrap_err();
        assert!(
            e.to_string()
                .contains("missing: the directory does not exist")
                && !e.to_string().contains(".row-fence."),
            "{e}"
        );
    }

    #[test]
    fn leftovers_are_the_temp_files_of_that_target_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.json");
        for name in [
            ".b.json.Ab3dE6gH",
            ".b.json.json.Ab3dE6gH",
            ".c.json.Ab3dE6gH",
            "b.json",
        ] {
            fs::write(dir.path().join(name), "x").unwrap();
        }
        assert_eq!(leftovers(&path), vec![dir.path().join(".b.json.Ab3dE6gH")]);
    }
}
