//! The code stamp (DESIGN.md, "Code stamp"): a digest computed at build time over the
//! workspace sources (`build.rs`; both binaries built from one tree carry the same value),
//! combined at run time with a digest of the registry directory. A daemon whose stamp
//! differs from the asker's refuses to answer (`stale_code`).

use sha2::{Digest, Sha256};
use std::fs;
use std::io;
use std::path::Path;

/// The build half: SHA-256 (hex) over the workspace sources, set by `build.rs`.
pub const BUILD_DIGEST: &str = env!("ROW_FENCE_BUILD_DIGEST");

/// The digest of a registry directory: every file below it, sorted by relative path,
/// hashed with its path and length. A missing directory has the digest of an empty one.
/// Errors when a file or directory exists but cannot be read.
pub fn registry_digest(dir: &Path) -> io::Result<[u8; 32]> {
    let mut hasher = Sha256::new();
    match fs::symlink_metadata(dir) {
        Ok(_) => hash_tree(dir, Path::new(""), &mut hasher)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    Ok(hasher.finalize().into())
}

fn hash_tree(dir: &Path, rel: &Path, hasher: &mut Sha256) -> io::Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let rel = rel.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            hash_tree(&path, &rel, hasher)?;
            continue;
        }
        let bytes = if kind.is_symlink() {
            fs::read_link(&path)?.into_os_string().into_encoded_bytes()
        } else {
            fs::read(&path)?
        };
        hasher.update(rel.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(())
}

/// Combines the build digest with a registry digest into the stamp (64 hex characters).
pub fn combine(build: &str, registry: &[u8; 32]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"row-fence code stamp v1\0");
    hasher.update(build.as_bytes());
    hasher.update([0]);
    hasher.update(registry);
    hex(&hasher.finalize())
}

/// The registry under a home could not be read, so no stamp can be made.
#[derive(Debug)]
pub struct RegistryUnreadable {
    /// The registry directory.
    pub dir: std::path::PathBuf,
    /// Why.
    pub error: io::Error,
}

impl std::fmt::Display for RegistryUnreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot read the registry {}: {}",
            self.dir.display(),
            self.error
        )
    }
}

impl std::error::Error for RegistryUnreadable {}

/// The code stamp of this build with the registry under `home`.
pub fn code_stamp(home: &Path) -> Result<String, RegistryUnreadable> {
    let dir = crate::paths::registry(home);
    let registry = registry_digest(&dir).map_err(|error| RegistryUnreadable { dir, error })?;
    Ok(combine(BUILD_DIGEST, &registry))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `--version` of every row-fence program: the package version and the first 12 hex
/// digits of the build digest, e.g. `0.1.0 (build 3f2a…)`.
pub fn version() -> &'static str {
    static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "{} (build {})",
            env!("CARGO_PKG_VERSION"),
            &BUILD_DIGEST[..12]
        )
    });
    VERSION.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_registry_hashes_like_an_empty_one() {
        let missing = registry_digest(Path::new("/nonexistent/row-fence/registry")).unwrap();
        let dir = std::env::temp_dir().join(format!("rf-stamp-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        assert_eq!(registry_digest(&dir).unwrap(), missing);
        fs::write(dir.join("boards.toml"), "[boards]\n").unwrap();
        assert_ne!(registry_digest(&dir).unwrap(), missing);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_stamp_changes_with_the_build_or_the_registry() {
        let a = combine("one", &[0; 32]);
        assert_eq!(a.len(), 64);
        assert_ne!(a, combine("two", &[0; 32]));
        assert_ne!(a, combine("one", &[1; 32]));
    }
}
