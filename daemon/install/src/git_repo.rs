//! A repository as `row-fence install git-hook` and `row-fence doctor` see it, asked of git
//! itself: its common git dir (where its config lives), every worktree, linked ones
//! included, with the hooks directory git runs for it (`core.hooksPath` resolved per
//! worktree: a relative one names a directory in each worktree's top level), and on
//! request every initialized submodule, nested ones included.
//!
//! Paths git prints are taken as the bytes they are (`OsStr`), never converted through
//! text: a repository under a directory whose name is not UTF-8 is found where it is.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Environment variables that would point git elsewhere than the directory it is run in
/// (a hook's environment exports some of them) or add `-c` settings of the caller's.
const REPO_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
];

/// Why git could not be asked about a repository, or what it answered instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// `git` could not be started.
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    /// Git ran and failed: the arguments it ran with and what it said on stderr.
    #[error("git {args} failed: {stderr}")]
    Failed {
        /// The arguments after `git`, space-separated.
        args: String,
        /// Git's stderr, trimmed.
        stderr: String,
    },
    /// Git refuses to read a repository another user owns (its `safe.directory` check,
    /// "detected dubious ownership"): the repository is there, and running as its owner,
    /// or trusting it, is the way on.
    #[error(
        "git refuses to read the repository at {}: it is owned by {owner}, not by you ({me}), and git reads another user's repository only when told to trust it (safe.directory). Run this as its owner (sudo -u {owner} …), or, if you trust it: git config --global --add safe.directory {}",
        path.display(),
        crate::shell::sh_quote(&path.display().to_string())
    )]
    DubiousOwnership {
        /// The repository's top level, as git names it (else where the lookup started).
        path: PathBuf,
        /// Its owner (a user name, else `uid N`).
        owner: String,
        /// Who ran the command (a user name, else `uid N`).
        me: String,
    },
    /// The directory is not in a git repository (git's own failure in `source`).
    #[error("{} is not in a git repository ({source})", start.display())]
    NotARepository {
        /// Where the lookup started.
        start: PathBuf,
        /// What git said.
        source: Box<GitError>,
    },
    /// The common git dir git named cannot be resolved.
    #[error("{}: {source}", path.display())]
    Canonicalize {
        /// The directory git named.
        path: PathBuf,
        /// Why it cannot be resolved.
        source: std::io::Error,
    },
    /// A linked worktree is gone, and its relative `core.hooksPath` with it.
    #[error(
        "the worktree {} is gone and its core.hooksPath is relative, so its hooks directory is gone with it ({})",
        worktree.display(),
        if *locked { "it is locked: bring it back, or git worktree unlock and prune it" } else { "git worktree prune forgets it" }
    )]
    HooksGone {
        /// The worktree git lists.
        worktree: PathBuf,
        /// True when git keeps it locked.
        locked: bool,
    },
    /// `git config` in a worktree's git dir failed.
    #[error("git config in {}: {stderr}", git_dir.display())]
    Config {
        /// The worktree's git dir.
        git_dir: PathBuf,
        /// Git's stderr, trimmed.
        stderr: String,
    },
}

/// `git -C dir`, with none of [`REPO_ENV`] inherited.
pub fn git(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command.arg("-C").arg(dir);
    for name in REPO_ENV {
        command.env_remove(name);
    }
    command
}

/// Runs `command` and returns its stdout; the error names what ran and what git said.
pub fn output(command: &mut Command) -> Result<Vec<u8>, GitError> {
    let out = command.output().map_err(GitError::Spawn)?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// One repository: its common git dir and its worktrees.
#[derive(Debug)]
pub struct Repository {
    /// The common git dir, canonical: a main worktree's `.git`, a bare repository, or a
    /// submodule's `<super git dir>/modules/<name>`. Its `config` is the repository's.
    pub common_dir: PathBuf,
    /// True for a submodule (found by `--recurse-submodules`).
    pub submodule: bool,
    /// Every worktree git lists, the main one first.
    pub worktrees: Vec<Worktree>,
}

/// One worktree of a repository.
#[derive(Debug)]
pub struct Worktree {
    /// Its top level (the git dir itself for a bare repository).
    pub path: PathBuf,
    /// The hooks directory git runs for it, or why it cannot be named (a linked worktree
    /// whose directory is gone, with a relative `core.hooksPath`).
    pub hooks: Result<PathBuf, GitError>,
    /// False for a linked worktree whose directory is not there (git keeps a locked one,
    /// on a removable drive say): git cannot be asked anything in it.
    pub present: bool,
}

impl Repository {
    /// The repository's config file.
    pub fn config(&self) -> PathBuf {
        self.common_dir.join("config")
    }
}

/// The repository around `start` and, with `submodules`, every initialized submodule of
/// each of its worktrees, recursively. The error names a `start` that is not in a
/// repository.
pub fn discover(start: &Path, submodules: bool) -> Result<Vec<Repository>, GitError> {
    let top = repository(start, false)?;
    let mut found = vec![top];
    if submodules {
        let mut i = 0;
        while i < found.len() {
            let paths: Vec<PathBuf> = found[i]
                .worktrees
                .iter()
                .filter(|w| w.present && w.path.join(".git").exists())
                .map(|w| w.path.clone())
                .collect();
            for path in paths {
                for sub in submodule_paths(&path)? {
                    let repo = repository(&sub, true)?;
                    if !found.iter().any(|r| r.common_dir == repo.common_dir) {
                        found.push(repo);
                    }
                }
            }
            i += 1;
        }
    }
    Ok(found)
}

/// What git's failure to find the repository around `start` means: another user's
/// repository (git's ownership check: its reason comes first), or none at all.
fn not_found(start: &Path, e: GitError) -> GitError {
    match owned_elsewhere(start, e) {
        e @ GitError::DubiousOwnership { .. } => e,
        e => GitError::NotARepository {
            start: start.to_path_buf(),
            source: Box::new(e),
        },
    }
}

/// `e`, or, when git refused the repository for its owner, that reason.
fn owned_elsewhere(start: &Path, e: GitError) -> GitError {
    let GitError::Failed { stderr, .. } = &e else {
        return e;
    };
    if !stderr.contains("dubious ownership") {
        return e;
    }
    // git names the directory it refused: `… in repository at '<path>'`.
    let path = stderr
        .split_once("repository at '")
        .and_then(|(_, rest)| rest.split_once('\''))
        .map_or_else(|| start.to_path_buf(), |(p, _)| PathBuf::from(p));
    let user = |uid: u32| {
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .ok()
            .flatten()
            .map_or_else(|| format!("uid {uid}"), |u| u.name)
    };
    let owner = std::fs::metadata(&path)
        .or_else(|_| std::fs::metadata(start))
        .map_or_else(|_| "another user".to_string(), |m| user(m.uid()));
    GitError::DubiousOwnership {
        path,
        owner,
        me: user(nix::unistd::geteuid().as_raw()),
    }
}

/// The repository `start` is in, with its worktrees.
fn repository(start: &Path, submodule: bool) -> Result<Repository, GitError> {
    let common =
        output(git(start).args(["rev-parse", "--path-format=absolute", "--git-common-dir"]))
            .map_err(|e| not_found(start, e))?;
    let common = path_line(&common);
    let common_dir = std::fs::canonicalize(&common).map_err(|source| GitError::Canonicalize {
        path: common.clone(),
        source,
    })?;
    let listing = output(git(&common_dir).args(["worktree", "list", "--porcelain", "-z"]))
        .map_err(|e| owned_elsewhere(&common_dir, e))?;
    let mut worktrees = Vec::new();
    for record in listing
        .split(|b| *b == 0)
        .collect::<Vec<_>>()
        .split(|f| f.is_empty())
    {
        let field = |name: &str| {
            record.iter().find_map(|f| {
                let rest = f.strip_prefix(name.as_bytes())?;
                Some(OsStr::from_bytes(rest.strip_prefix(b" ").unwrap_or(rest)).to_owned())
            })
        };
        let Some(path) = field("worktree") else {
            continue;
        };
        let mut path = PathBuf::from(path);
        if worktrees.is_empty() && field("bare").is_none() {
            path = main_worktree(&common_dir).unwrap_or(path);
        }
        let present = field("bare").is_some() || (field("prunable").is_none() && path.is_dir());
        let hooks = if field("bare").is_some() {
            hooks_dir(&common_dir)
        } else if !present {
            gone_hooks_dir(&common_dir, &path, field("locked").is_some())
        } else {
            hooks_dir(&path)
        };
        worktrees.push(Worktree {
            path,
            hooks,
            present,
        });
    }
    Ok(Repository {
        common_dir,
        submodule,
        worktrees,
    })
}

/// The main worktree of a repository whose git dir names it in `core.worktree` (a
/// submodule's git dir does; `git worktree list` names the git dir instead).
fn main_worktree(common_dir: &Path) -> Option<PathBuf> {
    let out = output(git(common_dir).args(["config", "--get", "core.worktree"])).ok()?;
    std::fs::canonicalize(common_dir.join(path_line(&out))).ok()
}

/// The hooks directory git runs for the worktree (or bare repository) at `dir`.
fn hooks_dir(dir: &Path) -> Result<PathBuf, GitError> {
    let out =
        output(git(dir).args(["rev-parse", "--path-format=absolute", "--git-path", "hooks"]))?;
    Ok(path_line(&out))
}

/// The hooks directory of the linked worktree git lists at `path`, which is not there:
/// the one git runs for it when its `core.hooksPath` is unset (the repository's
/// `hooks`, which every such worktree shares) or absolute. A relative one names a
/// directory inside the missing worktree: that is an error naming it.
fn gone_hooks_dir(common_dir: &Path, path: &Path, locked: bool) -> Result<PathBuf, GitError> {
    let gone = || GitError::HooksGone {
        worktree: path.to_path_buf(),
        locked,
    };
    let git_dir = linked_git_dir(common_dir, path).ok_or_else(gone)?;
    let hooks_path = git(common_dir)
        .arg("--git-dir")
        .arg(&git_dir)
        .args(["config", "--type=path", "--get", "core.hooksPath"])
        .output()
        .map_err(GitError::Spawn)?;
    match hooks_path.status.code() {
        Some(1) => Ok(common_dir.join("hooks")),
        Some(0) => {
            let named = path_line(&hooks_path.stdout);
            if named.is_absolute() {
                Ok(named)
            } else {
                Err(gone())
            }
        }
        _ => Err(GitError::Config {
            git_dir,
            stderr: String::from_utf8_lossy(&hooks_path.stderr)
                .trim()
                .to_string(),
        }),
    }
}

/// The git dir (`<common>/worktrees/<id>`) of the linked worktree at `path`: the one
/// whose `gitdir` file names `<path>/.git`.
pub fn linked_git_dir(common_dir: &Path, path: &Path) -> Option<PathBuf> {
    let wanted = path.join(".git");
    std::fs::read_dir(common_dir.join("worktrees"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|dir| {
            std::fs::read(dir.join("gitdir")).is_ok_and(|named| path_line(&named) == wanted)
        })
}

/// Every initialized submodule under the worktree at `dir`, nested ones included.
fn submodule_paths(dir: &Path) -> Result<Vec<PathBuf>, GitError> {
    let out = output(git(dir).args([
        "submodule",
        "foreach",
        "--quiet",
        "--recursive",
        r#"printf '%s\0' "$PWD""#,
    ]))?;
    Ok(out
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(OsStr::from_bytes(p)))
        .collect())
}

/// The path git printed on one line, byte for byte.
fn path_line(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(
        bytes.strip_suffix(b"\n").unwrap_or(bytes),
    ))
}
