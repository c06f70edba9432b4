//! The settings files `install claude-hook` created, recorded under the home
//! (`$ROW_FENCE_HOME/hooks/created-settings.json`, a JSON array of absolute paths), so
//! rollback removes a settings file only when install made it. A file that held `{}`
//! before install holds `{}` again after rollback: its content never decides.

use row_fence_store::atomic_file::write_private;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The record's file name under `$ROW_FENCE_HOME/hooks/`.
pub const FILE: &str = "created-settings.json";

/// The record of files install created.
pub struct Created {
    /// The record file.
    record: PathBuf,
}

impl Created {
    /// The record under `home`.
    pub fn under(home: &Path) -> Created {
        Created {
            record: home.join("hooks").join(FILE),
        }
    }

    fn read(&self) -> io::Result<Vec<PathBuf>> {
        match fs::read(&self.record) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: {e}", self.record.display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn write(&self, files: &[PathBuf]) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(files).map_err(io::Error::other)?;
        bytes.push(b'\n');
        write_private(&self.record, &bytes)
    }

    /// True when install created `file` (and rollback has not yet removed it).
    pub fn contains(&self, file: &Path) -> io::Result<bool> {
        Ok(self.read()?.iter().any(|f| f == file))
    }

    /// Records that install created `file`.
    pub fn add(&self, file: &Path) -> io::Result<()> {
        let mut files = self.read()?;
        if !files.iter().any(|f| f == file) {
            files.push(file.to_path_buf());
        }
        self.write(&files)
    }

    /// Forgets `file` (it was removed, or it now holds more than the entry and stays).
    pub fn forget(&self, file: &Path) -> io::Result<()> {
        let mut files = self.read()?;
        let before = files.len();
        files.retain(|f| f != file);
        if files.len() == before {
            return Ok(());
        }
        self.write(&files)
    }
}
