//! Opening a file without following a symbolic link anywhere in its path
//! (ARCHITECTURE.md, "Key broker"). The daemon reads a bound lane's descriptor with its own
//! rights, at a path the lane may be able to change: a link in any component would make
//! the daemon read (and judge, or quote in its ledger) a file the lane picked, such as
//! another lease's descriptor that the lane itself cannot read. Linux's `openat2` with
//! `RESOLVE_NO_SYMLINKS` refuses a link in every component in one call; where the kernel
//! lacks it (before 5.6, or a seccomp filter that refuses it) the same rule is walked by
//! hand, one component at a time, each opened with `O_NOFOLLOW` beneath the last.

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

/// Why a path was not opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum NoFollowError {
    /// The path is relative or has a `..` component: only a plain absolute path is walked.
    NotPlain,
    /// A component of the path is a symbolic link.
    Symlink,
    /// Nothing is at the path (or a component is missing).
    Missing,
    /// Opening failed otherwise (permission, not a directory on the way, …).
    Io(io::Error),
}

impl std::fmt::Display for NoFollowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoFollowError::NotPlain => {
                f.write_str("is not a plain absolute path (relative, or with a `..`)")
            }
            NoFollowError::Symlink => {
                f.write_str("has a symbolic link in its path, and links are not followed there")
            }
            NoFollowError::Missing => f.write_str("does not exist"),
            NoFollowError::Io(e) => write!(f, "cannot open: {e}"),
        }
    }
}

impl std::error::Error for NoFollowError {}

/// Opens `path` read-only and non-blocking (a FIFO opens at once and can be refused by
/// its type), refusing a symbolic link in any component, the last one included.
pub fn open_read(path: &Path) -> Result<File, NoFollowError> {
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        return Err(NoFollowError::NotPlain);
    }
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
    #[cfg(target_os = "linux")]
    match open_resolve_no_symlinks(path, flags) {
        // The kernel has no openat2, or a filter refuses it: the walk by hand.
        Err(Errno::ENOSYS) | Err(Errno::EPERM) => {}
        done => return done.map(File::from).map_err(errno_error),
    }
    walk(path, flags).map(File::from)
}

#[cfg(target_os = "linux")]
fn open_resolve_no_symlinks(path: &Path, flags: OFlag) -> nix::Result<OwnedFd> {
    use nix::fcntl::{OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    openat2(nix::fcntl::AT_FDCWD, path, how)
}

/// The same rule by hand: every directory on the way opened with `O_PATH` (no read
/// right needed, as a path walk needs none) and `O_NOFOLLOW` beneath the one before, and
/// checked to be a directory, not a link; the file itself opened with `O_NOFOLLOW`.
fn walk(path: &Path, flags: OFlag) -> Result<OwnedFd, NoFollowError> {
    let names: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let Some((last, dirs)) = names.split_last() else {
        return Err(NoFollowError::NotPlain);
    };
    let dir_flags = directory_flags();
    let mut dir = nix::fcntl::open("/", dir_flags, Mode::empty()).map_err(errno_error)?;
    for name in dirs {
        let next = openat(&dir, *name, dir_flags, Mode::empty()).map_err(errno_error)?;
        let kind = nix::sys::stat::fstat(&next).map_err(errno_error)?.st_mode & nix::libc::S_IFMT;
        if kind == nix::libc::S_IFLNK {
            return Err(NoFollowError::Symlink);
        }
        if kind != nix::libc::S_IFDIR {
            return Err(NoFollowError::Io(io::Error::from_raw_os_error(
                nix::libc::ENOTDIR,
            )));
        }
        dir = next;
    }
    openat(&dir, *last, flags, Mode::empty()).map_err(errno_error)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn directory_flags() -> OFlag {
    OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn directory_flags() -> OFlag {
    // No O_PATH: a directory opened to walk beneath must be searchable and readable.
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

fn errno_error(e: Errno) -> NoFollowError {
    match e {
        // ELOOP: a link where O_NOFOLLOW or RESOLVE_NO_SYMLINKS met one; EMLINK is what
        // some BSDs answer for the same.
        Errno::ELOOP | Errno::EMLINK => NoFollowError::Symlink,
        Errno::ENOENT => NoFollowError::Missing,
        // A directory opened O_NOFOLLOW|O_DIRECTORY that is a link answers ENOTDIR on
        // some systems: told apart by looking at it, never guessed.
        e => NoFollowError::Io(io::Error::from(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn read(path: &Path) -> Result<String, NoFollowError> {
        let mut text = String::new();
        open_read(path)?
            .read_to_string(&mut text)
            .map_err(NoFollowError::Io)?;
        Ok(text)
    }

    #[test]
    fn a_link_in_any_component_is_refused_by_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("d.json"), "lease").unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("via")).unwrap();
        std::os::unix::fs::symlink(real.join("d.json"), real.join("link.json")).unwrap();
        let plain = real.join("d.json");
        let through_dir = dir.path().join("via").join("d.json");
        let last_is_link = real.join("link.json");
        assert_eq!(read(&plain).unwrap(), "lease");
        assert!(matches!(read(&through_dir), Err(NoFollowError::Symlink)));
        assert!(matches!(read(&last_is_link), Err(NoFollowError::Symlink)));
        assert!(matches!(
            read(&real.join("none.json")),
            Err(NoFollowError::Missing)
        ));
        assert!(matches!(
            read(Path::new("relative/d.json")),
            Err(NoFollowError::NotPlain)
        ));
        assert!(matches!(
            read(&real.join("..").join("real").join("d.json")),
            Err(NoFollowError::NotPlain)
        ));
        // The walk by hand, as on a kernel without openat2.
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
        assert!(walk(&plain, flags).is_ok());
        assert!(matches!(
            walk(&through_dir, flags),
            Err(NoFollowError::Symlink)
        ));
        assert!(matches!(
            walk(&last_is_link, flags),
            Err(NoFollowError::Symlink)
        ));
        assert!(matches!(
            walk(&real.join("none.json"), flags),
            Err(NoFollowError::Missing)
        ));
    }
}
