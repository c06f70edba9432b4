//! Where row-fence keeps its files, shared by every binary so they agree on every path:
//! `$ROW_FENCE_HOME` (default `~/.row-fence`) holds `sock`, `heartbeat`, `refusals.jsonl`,
//! `registry/` and `store/`. Also the socket checks both sides make: the platform's path
//! limit and a socket directory we can trust (ARCHITECTURE.md, "The daemon").

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Environment variable naming the home directory.
pub const HOME_ENV: &str = "ROW_FENCE_HOME";
/// Environment variable naming the socket.
pub const SOCKET_ENV: &str = "ROW_FENCE_SOCKET";

/// The longest socket path the platform takes, in bytes including the terminating NUL
/// (`sizeof(sockaddr_un.sun_path)`): 104 on macOS and the BSDs, 108 on Linux.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub const SOCKET_PATH_LIMIT: usize = 108;
/// The longest socket path the platform takes, in bytes including the terminating NUL
/// (`sizeof(sockaddr_un.sun_path)`): 104 on macOS and the BSDs, 108 on Linux.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub const SOCKET_PATH_LIMIT: usize = 104;

/// Why there is no usable home (or socket: both are placed by [`absolute_path`]).
#[derive(Debug)]
pub enum HomeError {
    /// Neither `--home`, `ROW_FENCE_HOME` nor an absolute `HOME` is set: the default home
    /// (`~/.row-fence`) and a leading `~` both need a `HOME` that is absolute, or each
    /// directory a program runs from would get a home and a store of its own.
    Unset,
    /// The home was given relative (other than a leading `~/`): two worktrees would each
    /// get a home, and a store, of their own.
    Relative(PathBuf),
    /// The socket was given relative (other than a leading `~/`): programs run from
    /// two directories would ask two sockets, and a daemon would bind one no client finds.
    RelativeSocket(PathBuf),
    /// The home cannot be made absolute (the working directory is gone).
    NotAbsolute {
        /// The home as given.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl fmt::Display for HomeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HomeError::Unset => write!(
                f,
                "neither {HOME_ENV} nor an absolute HOME is set (a relative HOME would give each directory its own home and store)"
            ),
            HomeError::Relative(path) => write!(
                f,
                "the row-fence home {} is relative: give an absolute path (a leading ~/ is expanded), or each directory it is used from gets its own home and store",
                path.display()
            ),
            HomeError::RelativeSocket(path) => write!(
                f,
                "the row-fence socket {} is relative: give an absolute path (a leading ~/ is expanded), or each directory it is used from asks another socket",
                path.display()
            ),
            HomeError::NotAbsolute { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for HomeError {}

/// Resolves the home directory: `flag`, else `ROW_FENCE_HOME` (non-empty), else
/// `~/.row-fence`. A leading `~/` (or a lone `~`) is expanded from `$HOME`, as git
/// does for its paths; any other relative home is an error ([`HomeError::Relative`]), so
/// every program run from any directory finds the same home. The default is placed by the
/// same rule, so a relative `HOME` is [`HomeError::Unset`], never a home under the working
/// directory. Errors when none is set.
pub fn home(flag: Option<&Path>) -> Result<PathBuf, HomeError> {
    if let Some(path) = flag {
        return absolute_path(path, HomeError::Relative);
    }
    if let Some(value) = std::env::var_os(HOME_ENV).filter(|v| !v.is_empty()) {
        return absolute_path(Path::new(&value), HomeError::Relative);
    }
    absolute_path(Path::new("~/.row-fence"), HomeError::Relative)
}

/// The one rule for a path the operator gives row-fence (the home, the socket): absolute
/// as given, or a leading `~/` (or a lone `~`) expanded from an absolute `$HOME`, as git
/// does for its paths; anything else relative is `relative(path)` (a `~user/` form too:
/// no program should depend on the user database to find the fence).
pub fn absolute_path(
    path: &Path,
    relative: fn(PathBuf) -> HomeError,
) -> Result<PathBuf, HomeError> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let rest = if path == Path::new("~") {
        Some(Path::new(""))
    } else {
        path.strip_prefix("~").ok()
    };
    let user_home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    match (rest, user_home) {
        (Some(rest), Some(user_home)) if user_home.is_absolute() => {
            Ok(if rest.as_os_str().is_empty() {
                user_home
            } else {
                user_home.join(rest)
            })
        }
        (Some(_), _) => Err(HomeError::Unset),
        (None, _) => Err(relative(path.to_path_buf())),
    }
}

/// The socket: `flag`, else `ROW_FENCE_SOCKET` (non-empty), else `<home>/sock`. A socket
/// given relative is refused ([`HomeError::RelativeSocket`]) by the same rule as the home
/// ([`absolute_path`]), in every program that resolves it.
pub fn socket(flag: Option<&Path>, home: &Path) -> Result<PathBuf, HomeError> {
    let given = flag.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(SOCKET_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    match given {
        Some(path) => absolute_path(&path, HomeError::RelativeSocket),
        None => Ok(home.join("sock")),
    }
}

/// The refusal ledger, `<home>/refusals.jsonl`.
pub fn ledger(home: &Path) -> PathBuf {
    home.join("refusals.jsonl")
}

/// The heartbeat file, `<home>/heartbeat`.
pub fn heartbeat(home: &Path) -> PathBuf {
    home.join("heartbeat")
}

/// The lock one daemon holds (`flock`) on its home while it runs: `<home>/resident.lock`.
/// Two daemons on one home would overwrite each other's heartbeat, so a second one
/// refuses to start.
pub fn resident_lock(home: &Path) -> PathBuf {
    home.join("resident.lock")
}

/// The registry directory, part of the code stamp: `<home>/registry/`.
pub fn registry(home: &Path) -> PathBuf {
    home.join("registry")
}

/// The embedded file store's directory: `<home>/store/`.
pub fn file_store(home: &Path) -> PathBuf {
    home.join("store")
}

/// A socket path longer than the platform can bind or connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketPathTooLong {
    /// The path.
    pub path: PathBuf,
    /// Its length in bytes.
    pub len: usize,
}

impl fmt::Display for SocketPathTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "socket path {} is {} bytes; the limit on this platform is {} bytes (sun_path {SOCKET_PATH_LIMIT} with its NUL)",
            self.path.display(),
            self.len,
            SOCKET_PATH_LIMIT - 1
        )
    }
}

impl std::error::Error for SocketPathTooLong {}

/// Refuses a socket path the platform cannot bind or connect to, naming the path, its
/// length and the limit.
pub fn check_socket_length(socket: &Path) -> Result<(), SocketPathTooLong> {
    let len = socket.as_os_str().len();
    if len < SOCKET_PATH_LIMIT {
        Ok(())
    } else {
        Err(SocketPathTooLong {
            path: socket.to_path_buf(),
            len,
        })
    }
}

/// Why a socket directory is not to be trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted(pub String);

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The effective uid of this process.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Checks the directory holding a socket: it must be a real directory (not a symlink),
/// owned by `uid` (or by root when `allow_root`), and not group or world writable —
/// otherwise another user could stand up a daemon there that answers ALLOWED.
pub fn check_socket_dir(socket: &Path, uid: u32, allow_root: bool) -> Result<(), Untrusted> {
    let dir = socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| Untrusted(format!("socket directory {}: {e}", dir.display())))?;
    if meta.file_type().is_symlink() {
        return Err(Untrusted(format!(
            "socket directory {} is a symlink",
            dir.display()
        )));
    }
    if !meta.is_dir() {
        return Err(Untrusted(format!(
            "socket directory {} is not a directory",
            dir.display()
        )));
    }
    let owner = meta.uid();
    if owner != uid && !(allow_root && owner == 0) {
        return Err(Untrusted(format!(
            "socket directory {} is owned by uid {owner}, not by uid {uid}",
            dir.display()
        )));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(Untrusted(format!(
            "socket directory {} (owner uid {owner}) is group or world writable (mode {mode:03o})",
            dir.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_home_is_refused_and_a_leading_tilde_is_expanded() {
        assert!(matches!(
            home(Some(Path::new(".rf"))),
            Err(HomeError::Relative(_))
        ));
        assert!(matches!(
            home(Some(Path::new("~other/x"))),
            Err(HomeError::Relative(_))
        ));
        assert_eq!(
            home(Some(Path::new("/a/b"))).unwrap(),
            PathBuf::from("/a/b")
        );
        if let Some(user) = std::env::var_os("HOME").filter(|h| Path::new(h).is_absolute()) {
            assert_eq!(
                home(Some(Path::new("~/x"))).unwrap(),
                Path::new(&user).join("x")
            );
        }
    }

    #[test]
    fn a_relative_socket_is_refused_by_the_home_rule() {
        let home = Path::new("/h");
        assert!(matches!(
            socket(Some(Path::new("rf/sock")), home),
            Err(HomeError::RelativeSocket(_))
        ));
        assert_eq!(
            socket(Some(Path::new("/s/sock")), home).unwrap(),
            PathBuf::from("/s/sock")
        );
        if let Some(user) = std::env::var_os("HOME").filter(|h| Path::new(h).is_absolute()) {
            assert_eq!(
                socket(Some(Path::new("~/s")), home).unwrap(),
                Path::new(&user).join("s")
            );
        }
    }

    #[test]
    fn a_socket_path_at_the_limit_is_refused_with_its_length() {
        let long = PathBuf::from(format!("/{}", "s".repeat(SOCKET_PATH_LIMIT)));
        let err = check_socket_length(&long).unwrap_err();
        assert_eq!(err.len, SOCKET_PATH_LIMIT + 1);
        assert!(
            err.to_string()
                .contains(&format!("{} bytes", SOCKET_PATH_LIMIT + 1)),
            "{err}"
        );
        let fits = PathBuf::from(format!("/{}", "s".repeat(SOCKET_PATH_LIMIT - 2)));
        assert!(check_socket_length(&fits).is_ok());
    }
}
