//! The programs whose name alone makes a fenced write possible (git, gh, row-fence: their
//! records say [`crate::specs::Runs::Fenced`]), and
//! the same programs under another name: a program counts as one of them when it is a
//! symlink to it, a hard link to it, or a copy of its bytes (ARCHITECTURE.md, "The agent
//! guard's policy": a program is known by what it runs, not its name).

use row_fence_shell::lookup::search;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::OnceLock;

/// Programs whose name alone makes a fenced write possible: the fenced records' names
/// ([`crate::specs::Runs::Fenced`]) and their own `NAME-SUBCOMMAND` spellings
/// ([`crate::specs::dashed`]).
pub fn is_fenced_program(name: &str) -> bool {
    crate::specs::fenced_names().any(|n| n == name)
        || crate::specs::dashed(name)
            .is_some_and(|(spec, _)| matches!(spec.runs, crate::specs::Runs::Fenced(_)))
}

/// What git, gh and row-fence are on this machine: (name, device, inode, length).
fn references() -> &'static [(&'static str, u64, u64, u64)] {
    static REFS: OnceLock<Vec<(&'static str, u64, u64, u64)>> = OnceLock::new();
    REFS.get_or_init(|| {
        crate::specs::fenced_names()
            .filter_map(|name| {
                let path = search(name)?;
                let meta = std::fs::metadata(path).ok()?;
                Some((name, meta.dev(), meta.ino(), meta.len()))
            })
            .collect()
    })
}

/// The fenced program (`git`, `gh`, `row-fence`) the file at `path` is under another
/// name: the same file (a hard link) or the same bytes (a copy). `None` for anything else.
pub fn same_program(path: &Path) -> Option<&'static str> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    for (name, dev, ino, len) in references() {
        if meta.dev() == *dev && meta.ino() == *ino {
            return Some(name);
        }
        // Only a file of exactly the same length is read: a copy is rare, reading is not.
        if meta.len() == *len
            && let (Some(reference), Ok(bytes)) = (search(name), std::fs::read(path))
            && std::fs::read(reference).is_ok_and(|r| r == bytes)
        {
            return Some(name);
        }
    }
    None
}
