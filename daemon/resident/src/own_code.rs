//! What the daemon loaded: its executable on disk and the registry directory. On a stamp
//! mismatch the daemon asks whether **its own** files changed since it loaded: if so it
//! runs old code and must exit so the supervisor restarts it on the new code; if not, the
//! asker is the foreign one (ARCHITECTURE.md, "Code stamp").

use row_fence_contract::{paths, stamp};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The identity of a file on disk: replaced or rewritten files differ in one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileId {
    fn of(path: &Path) -> Option<FileId> {
        let m = std::fs::metadata(path).ok()?;
        Some(FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        })
    }
}

/// The daemon's own code as loaded.
#[derive(Clone, Debug)]
pub struct OwnCode {
    /// The build digest the binary carries (`row_fence_stamp::BUILD_DIGEST`).
    build: &'static str,
    /// The executable's path and identity at start (None if it could not be read).
    exe: Option<(PathBuf, FileId)>,
    /// `$ROW_FENCE_HOME/registry/`.
    registry: PathBuf,
    /// Its digest at start.
    registry_digest: [u8; 32],
}

impl OwnCode {
    /// Records the executable and the registry as they are now, for a binary whose build
    /// digest is `build`.
    pub fn capture(home: &Path, build: &'static str) -> Result<OwnCode, stamp::RegistryUnreadable> {
        let exe = std::env::current_exe()
            .ok()
            .and_then(|p| FileId::of(&p).map(|id| (p, id)));
        let registry = paths::registry(home);
        let registry_digest =
            stamp::registry_digest(&registry).map_err(|error| stamp::RegistryUnreadable {
                dir: registry.clone(),
                error,
            })?;
        Ok(OwnCode {
            build,
            exe,
            registry,
            registry_digest,
        })
    }

    /// The code stamp of what was loaded.
    pub fn stamp(&self) -> String {
        stamp::combine(self.build, &self.registry_digest)
    }

    /// The build digest of the code that was loaded.
    pub fn build(&self) -> &'static str {
        self.build
    }

    /// The directory the daemon's executable was started from, where the installers put
    /// the matching asker, guard and `row-fence` (None if it could not be read).
    pub fn dir(&self) -> Option<&Path> {
        self.exe.as_ref().and_then(|(path, _)| path.parent())
    }

    /// The registry's digest as loaded.
    pub fn registry_digest(&self) -> [u8; 32] {
        self.registry_digest
    }

    /// What changed on disk since the capture, if anything: a sentence for the log.
    pub fn changed(&self) -> Option<String> {
        if let Some((path, id)) = &self.exe
            && FileId::of(path) != Some(*id)
        {
            return Some(format!("the executable {} changed on disk", path.display()));
        }
        match stamp::registry_digest(&self.registry) {
            Ok(now) if now == self.registry_digest => None,
            Ok(_) => Some(format!("the registry {} changed", self.registry.display())),
            Err(e) => Some(format!(
                "the registry {} became unreadable: {e}",
                self.registry.display()
            )),
        }
    }
}
