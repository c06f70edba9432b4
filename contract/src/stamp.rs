//! The code stamp's run-time half (ARCHITECTURE.md, "Code stamp"): the build digest
//! (computed over the workspace sources by the `row-fence-stamp` crate, which only the
//! binaries link, and handed to the functions here as a value) combined with a digest of
//! the registry directory. A daemon whose stamp differs from the asker's refuses to answer
//! (`stale_code`).

use sha2::{Digest, Sha256};
use std::fs;
use std::io;
use std::path::Path;

use crate::protocol::Caller;

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

/// The code stamp of the build whose digest is `build` (the binary's
/// `row_fence_stamp::BUILD_DIGEST`) with the registry under `home`.
pub fn code_stamp(home: &Path, build: &str) -> Result<String, RegistryUnreadable> {
    let dir = crate::paths::registry(home);
    let registry = registry_digest(&dir).map_err(|error| RegistryUnreadable { dir, error })?;
    Ok(combine(build, &registry))
}

/// The detail of a `stale_code` answer when the daemon's own files did not change, so
/// the caller is the foreign one: with the caller's build digest, home and program path
/// (sent in the request's `caller`) it says whether the caller runs other code than the
/// daemon's build `our_build` or the same build over another registry (usually another
/// `ROW_FENCE_HOME`), which binary is foreign, and where the matching one is (`our_dir`,
/// the daemon's own directory, where the installers put every binary).
pub fn foreign_detail(
    theirs: &str,
    caller: &Caller,
    ours: &str,
    our_build: &str,
    our_home: &Path,
    our_dir: Option<&Path>,
) -> String {
    let program = caller.program.as_deref().map(Path::new);
    let name = program
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "row-fence-ask".to_string());
    let who = match program {
        Some(p) => format!("the caller {}", p.display()),
        None => "the asker".to_string(),
    };
    let stamps = format!(
        "{who}'s code stamp {} is not the daemon's {}",
        short(theirs),
        short(ours)
    );
    let our_home = our_home.display().to_string();
    match (caller.build.as_deref(), caller.home.as_deref()) {
        (Some(build), Some(home)) if build == our_build && home != our_home => format!(
            "{stamps}: same build, other registry: {who} read {home}/registry, the daemon {our_home}/registry; \
             run it with ROW_FENCE_HOME={our_home} (row-fence install git-hook and claude-hook set it)"
        ),
        (Some(build), _) if build == our_build => format!(
            "{stamps}: same build, other registry: the registry {who} read under {our_home} is not the one the daemon loaded"
        ),
        (Some(build), _) => {
            let fix = match (our_dir, program.and_then(Path::parent)) {
                (Some(dir), Some(theirs)) if dir == theirs => format!(
                    "{name} in {} is another build than the daemon there: install every binary from one build (README, \"Upgrading\")",
                    dir.display()
                ),
                (Some(dir), _) => format!(
                    "run the {name} installed beside the daemon, {}",
                    dir.join(&name).display()
                ),
                (None, _) => format!("run the {name} installed beside the daemon"),
            };
            format!(
                "{stamps}: {who} runs other code than the daemon (build {}, the daemon's {}); {fix}",
                short(build),
                short(our_build)
            )
        }
        (None, _) => format!("{stamps}: {who} runs other code than the daemon"),
    }
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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

    fn caller(build: Option<&str>, home: Option<&str>, program: Option<&str>) -> Caller {
        Caller {
            build: build.map(str::to_string),
            home: home.map(str::to_string),
            program: program.map(str::to_string),
            ..Caller::default()
        }
    }

    #[test]
    fn a_foreign_stamp_from_another_home_says_so_and_names_both_registries() {
        let home = Path::new("/daemon/home");
        let build = "f".repeat(64);
        let said = foreign_detail(
            "a".repeat(64).as_str(),
            &caller(Some(&build), Some("/other"), None),
            "b",
            &build,
            home,
            None,
        );
        assert!(said.contains("same build, other registry"), "{said}");
        assert!(
            said.contains("/other/registry") && said.contains("/daemon/home/registry"),
            "{said}"
        );
        assert!(said.contains("ROW_FENCE_HOME=/daemon/home"), "{said}");
        let said = foreign_detail(
            "a",
            &caller(Some("0123456789abcdef"), Some("/daemon/home"), None),
            "b",
            &build,
            home,
            None,
        );
        assert!(
            said.contains("runs other code") && said.contains("0123456789ab"),
            "{said}"
        );
        let said = foreign_detail("a", &Caller::default(), "b", &build, home, None);
        assert!(
            said.ends_with("the asker runs other code than the daemon"),
            "{said}"
        );
    }

    #[test]
    fn a_foreign_binary_is_named_with_the_matching_one_beside_the_daemon() {
        let home = Path::new("/daemon/home");
        let build = "f".repeat(64);
        let said = foreign_detail(
            "a",
            &caller(Some("0123"), None, Some("/old/bin/row-fence-guard")),
            "b",
            &build,
            home,
            Some(Path::new("/new/bin")),
        );
        assert!(
            said.contains("the caller /old/bin/row-fence-guard"),
            "{said}"
        );
        assert!(
            said.contains(
                "run the row-fence-guard installed beside the daemon, /new/bin/row-fence-guard"
            ),
            "{said}"
        );
        assert!(!said.contains("row-fence-ask"), "{said}");
        let said = foreign_detail(
            "a",
            &caller(Some("0123"), None, Some("/new/bin/row-fence-guard")),
            "b",
            &build,
            home,
            Some(Path::new("/new/bin")),
        );
        assert!(
            said.contains("row-fence-guard in /new/bin is another build than the daemon there"),
            "{said}"
        );
    }

    #[test]
    fn the_stamp_changes_with_the_build_or_the_registry() {
        let a = combine("one", &[0; 32]);
        assert_eq!(a.len(), 64);
        assert_ne!(a, combine("two", &[0; 32]));
        assert_ne!(a, combine("one", &[1; 32]));
    }
}
