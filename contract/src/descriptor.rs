//! The lane's descriptor: which board row this worktree holds, as which lane, at which
//! generation; and how the asker finds it (ARCHITECTURE.md, "Descriptor resolution"). Std only,
//! no subprocess: it runs on every fenced write.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A descriptor is at most this many bytes (64 KiB); a larger file is unreadable.
pub const MAX_DESCRIPTOR_BYTES: u64 = 64 * 1024;

/// The file name of the descriptor inside a worktree's git dir.
pub const DESCRIPTOR_FILE: &str = "row-fence.json";

/// Environment variable naming a descriptor explicitly.
pub const DESCRIPTOR_ENV: &str = "ROW_FENCE_DESCRIPTOR";

/// `{board, row, lane, generation}` (+ optional `tenant`, and the `token` a grant
/// creates): what a lane claims to hold.
/// Unknown members are ignored so older askers read newer descriptors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Descriptor {
    /// Board slug, `[a-z0-9][a-z0-9._-]{0,63}`.
    pub board: String,
    /// Row id: 1–128 of ASCII letters, digits, `-`, `_`, `.` (ARCHITECTURE.md, "One spelling").
    pub row: String,
    /// Lane (lease holder) id: 1–128 of ASCII letters, digits, `-`, `_`, `.`, `/`.
    pub lane: String,
    /// The fencing token: the board revision the lease was granted at (≥ 1).
    pub generation: u64,
    /// The board's tenant, when the location fence is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The lease token the grant created (ARCHITECTURE.md, "Lease token"): only this file
    /// holds it (mode 0600). Absent in a descriptor written before lease tokens, which is
    /// then refused `token_mismatch` until `row-fence acquire … --reissue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<crate::LeaseToken>,
}

/// Why a name is not valid (ARCHITECTURE.md, "Vocabulary").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidName(pub String);

impl fmt::Display for InvalidName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidName {}

/// Checks a board slug: `[a-z0-9][a-z0-9._-]{0,63}`.
pub fn validate_board(board: &str) -> Result<(), InvalidName> {
    let bytes = board.as_bytes();
    let first_ok = bytes
        .first()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'));
    if first_ok && rest_ok && bytes.len() <= 64 {
        Ok(())
    } else {
        Err(InvalidName(format!(
            "board {board:?} is not a slug ([a-z0-9][a-z0-9._-]{{0,63}})"
        )))
    }
}

/// Checks a row id: 1–128 of ASCII letters, digits, `-`, `_`, `.` (ARCHITECTURE.md, "One
/// spelling": [`crate::spelling::check_name`]); the error names the character refused.
pub fn validate_row(row: &str) -> Result<(), InvalidName> {
    crate::spelling::check_name("row", row, false).map_err(|e| InvalidName(e.to_string()))
}

/// Checks a lane id: 1–128 of ASCII letters, digits, `-`, `_`, `.`, `/` (ARCHITECTURE.md,
/// "One spelling"); the error names the character refused.
pub fn validate_lane(lane: &str) -> Result<(), InvalidName> {
    crate::spelling::check_name("lane", lane, true).map_err(|e| InvalidName(e.to_string()))
}

/// Checks a tenant id: 1–128 of ASCII letters, digits, `-`, `_`, `.` — the rows' rule
/// (ARCHITECTURE.md, "One spelling"), so a tenant in the registry, a lease, a descriptor
/// and the tenant map has one spelling; the error names the character refused.
pub fn validate_tenant(tenant: &str) -> Result<(), InvalidName> {
    crate::spelling::check_name("tenant", tenant, false).map_err(|e| InvalidName(e.to_string()))
}

/// Why a descriptor file cannot be read, parsed or validated (`descriptor_unreadable`;
/// [`DescriptorError::is_missing`]: there is none). Each message follows the file's path.
#[derive(Debug)]
#[non_exhaustive]
pub enum DescriptorError {
    /// The path does not exist.
    Missing,
    /// A symlink to nothing: a descriptor that visibly exists but cannot be read.
    DanglingSymlink,
    /// It cannot be opened.
    Open(io::Error),
    /// Its metadata cannot be read.
    Stat(io::Error),
    /// It is not a regular file: `a directory`, `a FIFO`, `a socket` or `not a regular
    /// file`.
    NotRegular(&'static str),
    /// It is over [`MAX_DESCRIPTOR_BYTES`] (its length in bytes).
    TooLarge(u64),
    /// It grew over [`MAX_DESCRIPTOR_BYTES`] while read.
    Grew,
    /// Reading it failed.
    Read(io::Error),
    /// It holds only whitespace.
    Empty,
    /// Not JSON, or not a descriptor's shape; serde's reason.
    NotADescriptor(serde_json::Error),
    /// Read without following links ([`read_no_symlinks`]): a component of its path is a
    /// symbolic link, or the path is not a plain absolute one.
    LinkInPath(crate::no_follow::NoFollowError),
    /// A field breaks the vocabulary (ARCHITECTURE.md, "Vocabulary").
    Invalid(InvalidName),
}

impl DescriptorError {
    /// True when there is no file at the path (not row-bound there, or
    /// `descriptor_missing` when it was named).
    pub fn is_missing(&self) -> bool {
        matches!(self, DescriptorError::Missing)
    }
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DescriptorError::Missing => f.write_str("does not exist"),
            DescriptorError::DanglingSymlink => f.write_str("is a symlink to a missing file"),
            DescriptorError::Open(e) => write!(f, "cannot open: {e}"),
            DescriptorError::Stat(e) => write!(f, "cannot stat: {e}"),
            DescriptorError::NotRegular(what) => write!(f, "is {what}, not a regular file"),
            DescriptorError::TooLarge(len) => write!(
                f,
                "is {len} bytes, over the {MAX_DESCRIPTOR_BYTES}-byte limit"
            ),
            DescriptorError::Grew => write!(
                f,
                "grew over the {MAX_DESCRIPTOR_BYTES}-byte limit while read"
            ),
            DescriptorError::Read(e) => write!(f, "cannot read: {e}"),
            DescriptorError::Empty => f.write_str("the file is empty"),
            DescriptorError::NotADescriptor(e) => write!(f, "not a descriptor: {e}"),
            DescriptorError::Invalid(e) => e.fmt(f),
            DescriptorError::LinkInPath(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DescriptorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DescriptorError::Open(e) | DescriptorError::Stat(e) | DescriptorError::Read(e) => {
                Some(e)
            }
            DescriptorError::NotADescriptor(e) => Some(e),
            DescriptorError::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

impl Descriptor {
    /// Checks every field against the vocabulary (ARCHITECTURE.md, "Vocabulary").
    pub fn validate(&self) -> Result<(), InvalidName> {
        validate_board(&self.board)?;
        validate_row(&self.row)?;
        validate_lane(&self.lane)?;
        if self.generation == 0 {
            return Err(InvalidName("generation must be at least 1".into()));
        }
        if let Some(tenant) = &self.tenant {
            validate_tenant(tenant)?;
        }
        if self.token.as_ref().is_some_and(|t| !t.is_well_formed()) {
            return Err(InvalidName(
                "token must be 64 lowercase hex digits (as row-fence acquire writes it)".into(),
            ));
        }
        Ok(())
    }

    /// Parses and validates descriptor bytes. The error names what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Descriptor, DescriptorError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(DescriptorError::Empty);
        }
        let descriptor: Descriptor =
            serde_json::from_slice(bytes).map_err(DescriptorError::NotADescriptor)?;
        descriptor.validate().map_err(DescriptorError::Invalid)?;
        Ok(descriptor)
    }
}

/// Where a descriptor was looked for and what was found.
#[derive(Debug)]
pub enum Resolution {
    /// No descriptor resolves: not row-bound (UNFENCED). Says where it looked.
    Unbound(String),
    /// A valid descriptor.
    Found(PathBuf, Descriptor),
    /// An explicitly named descriptor does not exist (`descriptor_missing`).
    Missing(PathBuf),
    /// A descriptor exists but cannot be read, parsed or validated
    /// (`descriptor_unreadable`), with the detail.
    Unreadable(PathBuf, String),
}

/// Environment variable git sets for its hooks (and a user may set): the repository's
/// git dir.
pub const GIT_DIR_ENV: &str = "GIT_DIR";

/// Where [`resolve`] looks.
#[derive(Clone, Copy, Debug)]
pub struct Lookup<'a> {
    /// `--descriptor PATH`.
    pub explicit: Option<&'a Path>,
    /// `ROW_FENCE_DESCRIPTOR` (ignored when empty).
    pub descriptor_env: Option<&'a str>,
    /// `GIT_DIR` (ignored when empty).
    pub git_dir_env: Option<&'a str>,
    /// The working directory relative paths start from, and the walk starts at.
    pub cwd: &'a Path,
}

/// Resolves the lane's descriptor: `explicit` (the `--descriptor` flag) else a non-empty
/// `ROW_FENCE_DESCRIPTOR`, else `$GIT_DIR/row-fence.json` when `GIT_DIR` is set (git
/// exports it to its hooks, and `git --git-dir DIR push` from anywhere sets it), else
/// `<git dir>/row-fence.json` found by walking up from `cwd` to the first `.git` (a
/// directory, or a `gitdir:` file of a linked worktree) or bare git dir, as git finds it
/// ([`find_git_dir`]). A git dir without a descriptor
/// defers to its superproject's (a submodule's git dir is `<super git dir>/modules/<name>`:
/// ARCHITECTURE.md, "Descriptor resolution"), and the walk goes on past a repository with none
/// to the worktrees around it. Never blocks on a FIFO, never reads more than 64 KiB + 1
/// bytes.
pub fn resolve(lookup: &Lookup) -> Resolution {
    let cwd = lookup.cwd;
    let absolute = |path: PathBuf| {
        if path.is_relative() {
            cwd.join(path)
        } else {
            path
        }
    };
    let named = lookup.explicit.map(Path::to_path_buf).or_else(|| {
        lookup
            .descriptor_env
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    if let Some(path) = named {
        let path = absolute(path);
        return match read(&path) {
            Ok(Some(d)) => Resolution::Found(path, d),
            Ok(None) => Resolution::Missing(path),
            Err(detail) => Resolution::Unreadable(path, detail.to_string()),
        };
    }
    match lookup.git_dir_env.filter(|v| !v.is_empty()) {
        Some(dir) => {
            let dir = absolute(PathBuf::from(dir));
            match fs::metadata(&dir) {
                Ok(meta) if meta.is_dir() => in_git_dir(&dir)
                    .unwrap_or_else(|| Resolution::Unbound(no_descriptor_at(&[dir]))),
                Ok(_) => Resolution::Unreadable(dir, "GIT_DIR is not a directory".into()),
                Err(e) => Resolution::Unreadable(dir, format!("GIT_DIR: {e}")),
            }
        }
        None => walk(cwd),
    }
}

/// Walks up from `cwd` through every enclosing worktree: the first `.git` whose git dir
/// (or whose superprojects' git dirs) holds a descriptor decides. A repository with no
/// descriptor nested inside a row-bound worktree (a clone under it, a submodule that keeps
/// its own `.git` directory) is that lane's: a push from it is the lane's push.
fn walk(cwd: &Path) -> Resolution {
    let mut looked = Vec::new();
    let mut start = cwd.to_path_buf();
    loop {
        match find_worktree(&start) {
            Ok(None) if looked.is_empty() => {
                return Resolution::Unbound(format!("no .git above {}", cwd.display()));
            }
            Ok(None) => return Resolution::Unbound(no_descriptor_at(&looked)),
            Ok(Some((worktree, git_dir))) => {
                if let Some(found) = in_git_dir(&git_dir) {
                    return found;
                }
                // From inside a `.git` directory the walk meets it twice.
                if !looked.contains(&git_dir) {
                    looked.push(git_dir);
                }
                match worktree.parent() {
                    Some(parent) => start = parent.to_path_buf(),
                    None => return Resolution::Unbound(no_descriptor_at(&looked)),
                }
            }
            Err(broken) => return Resolution::Unreadable(broken.dot_git, broken.why.to_string()),
        }
    }
}

/// The descriptor in `git_dir`, else in the git dir of its superproject (a submodule's git
/// dir lives in `<super git dir>/modules/`), and so on outward: `Found` or `Unreadable`.
/// `None`: none of them has one.
pub fn in_git_dir(git_dir: &Path) -> Option<Resolution> {
    let mut dir = git_dir.to_path_buf();
    // A bound on the chain: git nests submodules, not without end.
    for _ in 0..64 {
        let path = dir.join(DESCRIPTOR_FILE);
        match read(&path) {
            Ok(Some(d)) => return Some(Resolution::Found(path, d)),
            Ok(None) => {}
            Err(detail) => return Some(Resolution::Unreadable(path, detail.to_string())),
        }
        dir = crate::git_layout::superproject(&dir)?;
    }
    None
}

fn no_descriptor_at(git_dirs: &[PathBuf]) -> String {
    let paths: Vec<String> = git_dirs
        .iter()
        .map(|d| d.join(DESCRIPTOR_FILE).display().to_string())
        .collect();
    format!("no descriptor at {}", paths.join(", nor at "))
}

/// Resolves the descriptor for this process: `explicit`, `ROW_FENCE_DESCRIPTOR`,
/// `GIT_DIR`, then the worktree around the current directory. A current directory that
/// cannot be read is `Unreadable` unless an absolute path says where to look: we cannot
/// tell whether the lane is bound, and that is never UNFENCED (fail closed).
pub fn resolve_here(explicit: Option<&Path>) -> Resolution {
    let descriptor_env = std::env::var(DESCRIPTOR_ENV).ok();
    let git_dir_env = std::env::var(GIT_DIR_ENV).ok();
    let lookup = |cwd| Lookup {
        explicit,
        descriptor_env: descriptor_env.as_deref(),
        git_dir_env: git_dir_env.as_deref(),
        cwd,
    };
    match std::env::current_dir() {
        Ok(cwd) => resolve(&lookup(&cwd)),
        Err(e) => {
            let said = explicit
                .map(Path::to_path_buf)
                .or_else(|| {
                    descriptor_env
                        .as_deref()
                        .filter(|v| !v.is_empty())
                        .map(PathBuf::from)
                })
                .or_else(|| {
                    git_dir_env
                        .as_deref()
                        .filter(|v| !v.is_empty())
                        .map(PathBuf::from)
                });
            match said {
                Some(path) if path.is_absolute() => resolve(&lookup(Path::new("/"))),
                _ => Resolution::Unreadable(
                    PathBuf::from("."),
                    format!(
                        "cannot read the working directory ({e}), so cannot tell whether this lane is row-bound"
                    ),
                ),
            }
        }
    }
}

/// A `.git` that exists but does not lead to a git dir: we cannot tell whether the lane
/// is bound (fail closed). Reads `<.git path>: <why>`.
#[derive(Debug)]
pub struct BrokenGitDir {
    /// The `.git` directory or file.
    pub dot_git: PathBuf,
    /// What is wrong with it.
    pub why: BrokenWhy,
}

/// What is wrong with a `.git` ([`BrokenGitDir`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum BrokenWhy {
    /// Its metadata cannot be read.
    Stat(io::Error),
    /// A `.git` file that cannot be read (as a descriptor is read: bounded, no FIFO).
    Unreadable(DescriptorError),
    /// A `.git` file that is not UTF-8.
    NotUtf8,
    /// A `.git` file without a `gitdir:` line.
    NoGitdirLine,
    /// The git dir the file names is not a directory.
    NotADirectory(PathBuf),
    /// The git dir the file names is not there (a broken worktree).
    Gone(PathBuf, io::Error),
}

impl fmt::Display for BrokenWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BrokenWhy::Stat(e) => write!(f, "cannot stat: {e}"),
            BrokenWhy::Unreadable(e) => e.fmt(f),
            BrokenWhy::NotUtf8 => f.write_str("not UTF-8"),
            BrokenWhy::NoGitdirLine => f.write_str("no 'gitdir:' line"),
            BrokenWhy::NotADirectory(dir) => {
                write!(f, "gitdir {} is not a directory", dir.display())
            }
            BrokenWhy::Gone(dir, e) => write!(f, "gitdir {}: {e}", dir.display()),
        }
    }
}

impl fmt::Display for BrokenGitDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.dot_git.display(), self.why)
    }
}

impl std::error::Error for BrokenGitDir {}

/// Walks up from `start` to the first git dir, as git discovers it: at each level a `.git`
/// (a directory, or a `gitdir:` file), else the level itself when it is a git dir (a bare
/// repository, where git runs with no `.git` around it). `Ok(None)`: there is none. An
/// `Err` names a `.git` that exists but does not lead to a git dir (fail closed: we cannot
/// tell whether the lane is bound).
pub fn find_git_dir(start: &Path) -> Result<Option<PathBuf>, BrokenGitDir> {
    find_worktree(start).map(|found| found.map(|(_, git_dir)| git_dir))
}

/// Like [`find_git_dir`], also naming the directory that holds the `.git` (a bare
/// repository's git dir holds itself).
pub fn find_worktree(start: &Path) -> Result<Option<(PathBuf, PathBuf)>, BrokenGitDir> {
    for dir in start.ancestors() {
        let dot_git = dir.join(".git");
        let meta = match fs::metadata(&dot_git) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if crate::git_layout::is_git_dir(dir) {
                    return Ok(Some((dir.to_path_buf(), dir.to_path_buf())));
                }
                continue;
            }
            Err(e) => {
                return Err(BrokenGitDir {
                    dot_git,
                    why: BrokenWhy::Stat(e),
                });
            }
        };
        let git_dir = if meta.is_dir() {
            dot_git
        } else {
            gitdir_from_file(&dot_git)?
        };
        return Ok(Some((dir.to_path_buf(), git_dir)));
    }
    Ok(None)
}

/// Reads a linked worktree's `.git` file: `gitdir: <path>`, relative to its directory.
fn gitdir_from_file(dot_git: &Path) -> Result<PathBuf, BrokenGitDir> {
    let fail = |why: BrokenWhy| BrokenGitDir {
        dot_git: dot_git.to_path_buf(),
        why,
    };
    let bytes = read_bounded(dot_git).map_err(|e| fail(BrokenWhy::Unreadable(e)))?;
    let text = String::from_utf8(bytes).map_err(|_| fail(BrokenWhy::NotUtf8))?;
    let target = text
        .lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| fail(BrokenWhy::NoGitdirLine))?;
    let base = dot_git.parent().unwrap_or(Path::new("/"));
    let git_dir = base.join(target);
    // A `.git` file naming a git dir that is not there is a broken worktree: we cannot
    // tell whether its lane is bound, and that is never UNFENCED.
    match fs::metadata(&git_dir) {
        Ok(meta) if meta.is_dir() => Ok(git_dir),
        Ok(_) => Err(fail(BrokenWhy::NotADirectory(git_dir))),
        Err(e) => Err(fail(BrokenWhy::Gone(git_dir, e))),
    }
}

/// Reads and validates a descriptor file. `Ok(None)` when it does not exist.
pub fn read(path: &Path) -> Result<Option<Descriptor>, DescriptorError> {
    match read_bounded(path) {
        Ok(bytes) => Descriptor::parse(&bytes).map(Some),
        // A symlink to nothing is a descriptor that visibly exists but cannot be read.
        Err(e) if e.is_missing() && fs::symlink_metadata(path).is_ok() => {
            Err(DescriptorError::DanglingSymlink)
        }
        Err(e) if e.is_missing() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads and validates a descriptor the way the daemon reads a bound lane's, with its own
/// rights at a path the lane may change: no symbolic link is followed in any component
/// ([`crate::no_follow`]), so the lane cannot point the daemon at a file of its choosing.
/// `Ok(None)` when it does not exist. The asker's and the guard's [`read`] follow links
/// (a lane reading its own descriptor with its own rights gains nothing from one).
pub fn read_no_symlinks(path: &Path) -> Result<Option<Descriptor>, DescriptorError> {
    use crate::no_follow::{self, NoFollowError};
    let file = match no_follow::open_read(path) {
        Ok(file) => file,
        Err(NoFollowError::Missing) => return Ok(None),
        Err(NoFollowError::Io(e)) => return Err(DescriptorError::Open(e)),
        Err(e) => return Err(DescriptorError::LinkInPath(e)),
    };
    read_open(file).and_then(|bytes| Descriptor::parse(&bytes).map(Some))
}

/// Opens without blocking (a FIFO opens at once and is then refused), requires a regular
/// file, and reads at most `MAX_DESCRIPTOR_BYTES` + 1 bytes.
fn read_bounded(path: &Path) -> Result<Vec<u8>, DescriptorError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => DescriptorError::Missing,
            _ => DescriptorError::Open(e),
        })?;
    read_open(file)
}

/// Of a file opened: requires a regular file, reads at most `MAX_DESCRIPTOR_BYTES` + 1
/// bytes.
fn read_open(file: File) -> Result<Vec<u8>, DescriptorError> {
    let meta = file.metadata().map_err(DescriptorError::Stat)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "a special file"
        };
        return Err(DescriptorError::NotRegular(what));
    }
    if meta.len() > MAX_DESCRIPTOR_BYTES {
        return Err(DescriptorError::TooLarge(meta.len()));
    }
    read_at_most(file)
}

fn read_at_most(file: File) -> Result<Vec<u8>, DescriptorError> {
    let mut bytes = Vec::new();
    file.take(MAX_DESCRIPTOR_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(DescriptorError::Read)?;
    if bytes.len() as u64 > MAX_DESCRIPTOR_BYTES {
        return Err(DescriptorError::Grew);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Descriptor, DescriptorError> {
        Descriptor::parse(text.as_bytes())
    }

    #[test]
    fn a_broken_dot_git_says_which_and_why() {
        let dir = tempdir("rf-broken-git");
        fs::write(dir.join(".git"), "not a pointer\n").unwrap();
        let broken = find_git_dir(&dir).unwrap_err();
        assert!(matches!(broken.why, BrokenWhy::NoGitdirLine));
        assert_eq!(
            broken.to_string(),
            format!("{}: no 'gitdir:' line", dir.join(".git").display())
        );
        fs::write(dir.join(".git"), "gitdir: /nonexistent/wt\n").unwrap();
        let broken = find_git_dir(&dir).unwrap_err();
        assert!(
            matches!(&broken.why, BrokenWhy::Gone(gone, _) if gone == Path::new("/nonexistent/wt"))
        );
        let _ = fs::remove_dir_all(&dir);
    }

    fn tempdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn an_unreadable_descriptor_has_a_kind_and_reads_as_before() {
        let dir = std::env::temp_dir().join(format!("rf-desc-kinds-{}", std::process::id()));
        fs::create_dir_all(dir.join("a-dir")).unwrap();
        let missing = dir.join("none.json");
        assert!(read_bounded(&missing).unwrap_err().is_missing());
        assert!(read(&missing).unwrap().is_none());
        let dangling = dir.join("dangling.json");
        let _ = fs::remove_file(&dangling);
        std::os::unix::fs::symlink(&missing, &dangling).unwrap();
        let e = read(&dangling).unwrap_err();
        assert!(matches!(e, DescriptorError::DanglingSymlink) && !e.is_missing());
        assert_eq!(e.to_string(), "is a symlink to a missing file");
        let e = read(&dir.join("a-dir")).unwrap_err();
        assert!(matches!(e, DescriptorError::NotRegular("a directory")));
        assert_eq!(e.to_string(), "is a directory, not a regular file");
        fs::write(dir.join("empty.json"), " \n").unwrap();
        let e = read(&dir.join("empty.json")).unwrap_err();
        assert!(matches!(e, DescriptorError::Empty));
        assert_eq!(e.to_string(), "the file is empty");
        let e = parse(r#"{"board":"b","row":"r","lane":"l","generation":0}"#).unwrap_err();
        assert!(matches!(e, DescriptorError::Invalid(_)));
        assert_eq!(e.to_string(), "generation must be at least 1");
        assert!(matches!(
            parse("{").unwrap_err(),
            DescriptorError::NotADescriptor(_)
        ));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_valid_descriptor_parses_and_ignores_unknown_members() {
        let d =
            parse(r#"{"board":"b1","row":"r.1","lane":"lane-a","generation":10,"x":1}"#).unwrap();
        assert_eq!(d.generation, 10);
        assert_eq!(d.tenant, None);
    }

    #[test]
    fn malformed_descriptors_say_what_is_wrong() {
        for bad in [
            "",
            "  \n",
            "{",
            r#"{"board":"b","row":"r","lane":"l"}"#,
            r#"{"board":"b","row":"r","lane":"l","generation":"10"}"#,
            r#"{"board":"b","row":"r","lane":"l","generation":1.5}"#,
            r#"{"board":"b","row":"r","lane":"l","generation":-1}"#,
            r#"{"board":"b","row":"r","lane":"l","generation":0}"#,
            r#"{"board":"B","row":"r","lane":"l","generation":1}"#,
            r#"{"board":"b","row":"a/b","lane":"l","generation":1}"#,
            r#"{"board":"b","row":"","lane":"l","generation":1}"#,
            r#"{"board":"b","row":"r","lane":"l\n","generation":1}"#,
            r#"{"board":"b","row":"r 1","lane":"l","generation":1}"#,
            r#"{"board":"b","row":"r","lane":"l\u0430","generation":1}"#,
            r#"[1,2]"#,
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn a_git_file_naming_a_missing_git_dir_is_unreadable_not_unbound() {
        let dir = std::env::temp_dir().join(format!("rf-gitfile-{}", std::process::id()));
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join(".git"), "gitdir: /nonexistent/worktrees/x\n").unwrap();
        let sub = dir.join("sub");
        let resolved = resolve(&Lookup {
            explicit: None,
            descriptor_env: None,
            git_dir_env: None,
            cwd: &sub,
        });
        assert!(
            matches!(resolved, Resolution::Unreadable(..)),
            "{resolved:?}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bare_repository_is_found_as_git_finds_it_and_binds_like_a_worktree() {
        let dir = std::env::temp_dir().join(format!("rf-bare-{}", std::process::id()));
        let bare = dir.join("r.git");
        fs::create_dir_all(bare.join("objects")).unwrap();
        fs::create_dir_all(bare.join("refs")).unwrap();
        fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let at = |cwd: &Path| {
            resolve(&Lookup {
                explicit: None,
                descriptor_env: None,
                git_dir_env: None,
                cwd,
            })
        };
        assert_eq!(
            find_git_dir(&bare.join("refs")).unwrap(),
            Some(bare.clone())
        );
        assert!(matches!(at(&bare), Resolution::Unbound(_)));
        fs::write(
            bare.join(DESCRIPTOR_FILE),
            r#"{"board":"b","row":"r","lane":"l","generation":3}"#,
        )
        .unwrap();
        assert!(matches!(at(&bare.join("refs")), Resolution::Found(_, d) if d.generation == 3));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn git_dir_points_at_the_descriptor_wherever_the_process_runs() {
        let dir = std::env::temp_dir().join(format!("rf-gitdirenv-{}", std::process::id()));
        let git = dir.join("repo/.git");
        fs::create_dir_all(&git).unwrap();
        let elsewhere = dir.join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        let at = |git_dir_env: Option<&str>| {
            resolve(&Lookup {
                explicit: None,
                descriptor_env: None,
                git_dir_env,
                cwd: &elsewhere,
            })
        };
        assert!(matches!(at(None), Resolution::Unbound(_)));
        let git_text = git.display().to_string();
        assert!(
            matches!(at(Some(&git_text)), Resolution::Unbound(_)),
            "no descriptor there yet"
        );
        fs::write(
            git.join(DESCRIPTOR_FILE),
            r#"{"board":"b","row":"r","lane":"l","generation":2}"#,
        )
        .unwrap();
        assert!(matches!(at(Some(&git_text)), Resolution::Found(_, d) if d.generation == 2));
        assert!(
            matches!(at(Some("/nonexistent/git")), Resolution::Unreadable(..)),
            "a missing GIT_DIR fails closed"
        );
        fs::remove_file(git.join(DESCRIPTOR_FILE)).unwrap();
        std::os::unix::fs::symlink("/nonexistent/descriptor", git.join(DESCRIPTOR_FILE)).unwrap();
        assert!(
            matches!(at(Some(&git_text)), Resolution::Unreadable(..)),
            "a dangling symlink is visible"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn board_slugs_follow_the_vocabulary() {
        assert!(validate_board("a").is_ok());
        assert!(validate_board("0a._-z").is_ok());
        assert!(validate_board(&"a".repeat(64)).is_ok());
        assert!(validate_board(&"a".repeat(65)).is_err());
        assert!(validate_board("-a").is_err());
        assert!(validate_board("").is_err());
        assert!(validate_board("a b").is_err());
    }
}
