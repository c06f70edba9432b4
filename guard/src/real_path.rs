//! Where a file tool's path lands, resolved the way the kernel resolves it at check time
//! (ARCHITECTURE.md, "Quarantine"): component by component from `/`, a symbolic link
//! replaced by its target before the next component is read (so `link/..` is the parent of
//! where the link points, not the directory holding the link), and a dangling link
//! followed to where it points (a file opened with `O_CREAT` through one is created
//! there). Nothing is folded lexically. A name that does not exist yet lands where it is
//! named; a `..` after it climbs back, as it does once a tool creates the directory.
//!
//! A link swapped after this check by a process the lane started earlier is outside what
//! a check can see (docs/hard-mode.md, "Threat model", says so).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The most links followed while resolving one path: Linux's `MAXSYMLINKS` (40), past
/// which `open` fails with `ELOOP`.
pub const MAX_LINKS: usize = 40;

/// Where a path lands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Landing {
    /// The path with every link replaced by its target and every `..` taken from the
    /// directory reached so far: no component of it is a link (any that do not exist yet
    /// are named as given).
    pub real: PathBuf,
    /// True when the path's own last component is a link (dangling or not): a reader
    /// opening it reads another file than the one named.
    pub last_is_link: bool,
}

/// Why a path cannot be resolved (a file tool given it is denied).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unresolved {
    /// The path is relative: it must be joined to the directory it is taken from first.
    #[error("{} is not an absolute path", .0.display())]
    Relative(PathBuf),
    /// The path goes through a link under `/proc` (`/proc/self`, `/proc/<pid>/cwd`,
    /// `/proc/<pid>/root`, `/proc/<pid>/fd/<n>`, and `/dev/fd`, `/dev/stdin` through
    /// them): the kernel resolves such a link for the process that opens it, so where the
    /// harness lands is not where the guard would.
    #[error("{} goes through {}, a link the kernel resolves per process (the harness would not land where the guard looks)", .path.display(), .link.display())]
    ProcessRelative {
        /// The path given.
        path: PathBuf,
        /// The per-process link on its way.
        link: PathBuf,
    },
    /// More than [`MAX_LINKS`] links on the way (a loop).
    #[error("{} goes through more than {MAX_LINKS} symbolic links", .0.display())]
    TooManyLinks(PathBuf),
    /// A component could not be looked at (permission denied, not a directory…).
    #[error("{}: {source}", at.display())]
    Io {
        /// The component that could not be looked at.
        at: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Resolves `path` (absolute) as the kernel would open it now.
pub fn resolve(path: &Path) -> Result<Landing, Unresolved> {
    if !path.is_absolute() {
        return Err(Unresolved::Relative(path.to_path_buf()));
    }
    // Each component, and whether it is the path's own last name.
    let parts = names(path);
    let last = parts.len().checked_sub(1);
    let mut queue: VecDeque<(OsString, bool)> = parts
        .into_iter()
        .enumerate()
        .map(|(k, p)| (p, Some(k) == last))
        .collect();
    let mut real = PathBuf::from("/");
    let mut links = 0;
    let mut last_is_link = false;
    while let Some((part, is_last)) = queue.pop_front() {
        if part == ".." {
            // `real` holds no link, so its parent is the kernel's `..`.
            real.pop();
            continue;
        }
        let candidate = real.join(&part);
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if candidate.starts_with("/proc") {
                    return Err(Unresolved::ProcessRelative {
                        path: path.to_path_buf(),
                        link: candidate,
                    });
                }
                last_is_link |= is_last;
                links += 1;
                if links > MAX_LINKS {
                    return Err(Unresolved::TooManyLinks(path.to_path_buf()));
                }
                let target = std::fs::read_link(&candidate).map_err(|source| Unresolved::Io {
                    at: candidate.clone(),
                    source,
                })?;
                if target.is_absolute() {
                    real = PathBuf::from("/");
                }
                for p in names(&target).into_iter().rev() {
                    queue.push_front((p, false));
                }
            }
            Ok(_) => real = candidate,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => real = candidate,
            Err(source) => {
                return Err(Unresolved::Io {
                    at: candidate,
                    source,
                });
            }
        }
    }
    Ok(Landing { real, last_is_link })
}

/// A path's names and `..`s, in order (`/` and `.` say nothing to a walk from the root).
fn names(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

/// True when `name` is git's own directory name as a file system may spell it: `.git` in
/// any letter case (a case-insensitive disk opens `.GIT` as `.git`), with the code points
/// HFS+ ignores removed and the trailing dots and spaces NTFS drops, or NTFS's short name
/// `git~1` (git's own `is_hfs_dotgit`/`is_ntfs_dotgit` rules).
pub fn is_dot_git(name: &std::ffi::OsStr) -> bool {
    names_dir(name, ".git") || name.to_string_lossy().eq_ignore_ascii_case("git~1")
}

/// True when `name` spells `dir` (a dot-name such as `.git` or `.claude`) on some disk:
/// any letter case — Unicode's, not only ASCII's, since a case-insensitive disk folds
/// `ſ` (long s) to `s` and the Kelvin sign to `k`, and NTFS upper-cases `ı` to `I` — with
/// HFS+'s ignored code points removed and NTFS's trailing dots and spaces dropped.
pub fn names_dir(name: &std::ffi::OsStr, dir: &str) -> bool {
    let text = name.to_string_lossy();
    let kept: String = text.chars().filter(|c| !hfs_ignored(*c)).collect();
    let trimmed = kept.trim_end_matches(['.', ' ']);
    trimmed.eq_ignore_ascii_case(dir)
        || trimmed.to_uppercase() == dir.to_uppercase()
        || trimmed.to_lowercase() == dir.to_lowercase()
}

/// The code points HFS+ ignores in a name (git's `next_hfs_char` list).
fn hfs_ignored(c: char) -> bool {
    matches!(c as u32, 0x200c..=0x200f | 0x202a..=0x202e | 0x206a..=0x206f | 0xfeff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_resolve_before_dot_dot_and_dangling_links_are_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let tree = root.join("wt");
        let home = root.join("home").join("sessions");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        symlink(&home, tree.join("qlink")).unwrap();
        symlink(root.join("outside/new"), tree.join("dangling")).unwrap();
        symlink("../wt/loop", tree.join("loop")).unwrap();
        let at = |p: &str| resolve(&tree.join(p)).unwrap();
        // `qlink/..` is the home, not the worktree.
        assert_eq!(at("qlink/../x.json").real, root.join("home/x.json"));
        assert_eq!(at("qlink/s.json").real, home.join("s.json"));
        // A dangling link lands where it points, and is a link.
        let d = at("dangling");
        assert_eq!(d.real, root.join("outside/new"));
        assert!(d.last_is_link);
        assert!(!at("qlink/s.json").last_is_link);
        assert!(at("qlink").last_is_link);
        // A name that does not exist yet, and `..` past it.
        assert_eq!(at("new/dir/../f").real, tree.join("new/f"));
        assert!(matches!(
            resolve(&tree.join("loop")),
            Err(Unresolved::TooManyLinks(_))
        ));
        assert!(matches!(
            resolve(Path::new("rel")),
            Err(Unresolved::Relative(_))
        ));
        // Links the kernel resolves per process lead where the guard cannot follow.
        for p in [
            "/proc/self/root/etc/passwd",
            "/proc/self/cwd/x",
            "/proc/thread-self/root/x",
            "/dev/fd/0",
            "/dev/stdin",
        ] {
            assert!(
                matches!(
                    resolve(Path::new(p)),
                    Err(Unresolved::ProcessRelative { .. })
                ),
                "{p}"
            );
        }
        let pid = std::process::id();
        assert!(matches!(
            resolve(Path::new(&format!("/proc/{pid}/root/x"))),
            Err(Unresolved::ProcessRelative { .. })
        ));
    }

    #[test]
    fn git_s_directory_is_known_in_every_spelling_a_disk_opens() {
        for name in [
            ".git",
            ".GIT",
            ".Git",
            ".git.",
            ".git ",
            ".g\u{200c}it",
            "GIT~1",
        ] {
            assert!(is_dot_git(name.as_ref()), "{name:?}");
        }
        for name in [".gitattributes", "git", ".github", ".gi"] {
            assert!(!is_dot_git(name.as_ref()), "{name:?}");
        }
        assert!(names_dir(".CLAUDE".as_ref(), ".claude"));
        // Unicode case: a case-insensitive disk opens these as the ASCII names.
        assert!(names_dir(".cur\u{17f}or".as_ref(), ".cursor"));
        assert!(is_dot_git(".g\u{131}t".as_ref()));
        assert!(names_dir(".\u{212a}eep".as_ref(), ".keep"));
        assert!(!names_dir(".claude-x".as_ref(), ".claude"));
    }
}
