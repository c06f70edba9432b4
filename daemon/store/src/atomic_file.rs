//! Replacing a file atomically, the one way every writer here does it: a temp file in the
//! same directory (the `tempfile` crate: a unique name, removed if anything fails), the
//! bytes written, its mode set, fsync'd, then renamed over the path. A reader sees the old
//! file or the new one, never half of one. With `sync_dir`, the directory is fsync'd too,
//! so the rename itself survives a crash (the lease store needs that; a heartbeat does
//! not).

use std::fs::{File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Replaces `path` with `bytes`, mode `mode` (e.g. 0o600; not cut by the umask).
pub fn write(path: &Path, bytes: &[u8], mode: u32, sync_dir: bool) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".row-fence.")
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
}
