//! The file store's identity (ARCHITECTURE.md, "The lease store"): the file
//! [`crate::identity::FILE_NAME`] beside the boards, written once. It is created race-free:
//! written whole to a temp file of its own, fsync'd, then hard-linked to its name, which
//! fails when the name exists, so of two first writers one identity stands and the other
//! reads it. A restore that puts a backup of the directory back brings the backup's
//! identity with its boards.

use crate::StoreError;
use crate::identity::{FILE_NAME, StoreId};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The identity file of the store in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

/// The identity the store in `dir` carries (`None`: no file).
pub fn read(dir: &Path) -> Result<Option<StoreId>, StoreError> {
    let path = path(dir);
    match fs::read_to_string(&path) {
        Ok(text) => StoreId::parse(&text).map(Some).map_err(|e| {
            StoreError::Corrupt(crate::Detail::caused_by(
                format!("{}: {e}", path.display()),
                e,
            ))
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::Failed(crate::Detail::caused_by(
            format!("{}: {e}", path.display()),
            e,
        ))),
    }
}

/// Writes `fresh` as the identity of the store in `dir` (created 0700 if missing) unless it
/// has one, and returns the one it has after.
pub fn create(dir: &Path, fresh: &StoreId) -> Result<StoreId, StoreError> {
    let failed = |p: &Path, e: io::Error| {
        StoreError::Failed(crate::Detail::caused_by(format!("{}: {e}", p.display()), e))
    };
    {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| failed(dir, e))?;
    }
    if let Some(id) = read(dir)? {
        return Ok(id);
    }
    let target = path(dir);
    let temp = dir.join(format!(
        "{FILE_NAME}.{}.{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(format!("{fresh}\n").as_bytes())?;
        file.sync_all()
    })();
    let linked = written.and_then(|()| match fs::hard_link(&temp, &target) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = fs::remove_file(&temp);
    linked.map_err(|e| failed(&target, e))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| failed(dir, e))?;
    read(dir)?.ok_or_else(|| {
        StoreError::Failed(crate::Detail::from(format!(
            "{}: written, then not found (removed meanwhile?)",
            target.display()
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn of_two_first_writers_one_identity_stands() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        assert_eq!(read(&store).unwrap(), None);
        let ids: Vec<StoreId> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| create(&store, &StoreId::generate()).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
        assert_eq!(read(&store).unwrap(), Some(ids[0].clone()));
        assert_eq!(
            fs::read_dir(&store).unwrap().count(),
            1,
            "no temp file left"
        );
        fs::write(path(&store), "by hand").unwrap();
        assert!(matches!(read(&store), Err(StoreError::Corrupt(_))));
    }
}
