//! Git's transport gate, what its two modes share (ARCHITECTURE.md, "Git's layer"). Git
//! runs `row-fence-ask --git-ssh` as its `core.sshCommand` and `row-fence-ask
//! --git-credential` as its first credential helper whatever started the push and whatever
//! hooks it skipped (`--no-verify`, `git send-pack`, a script). Both ask through the
//! asker's own flow ([`ask::run_resolved`]), so their verdict lines and ledger records are
//! the asker's.
//!
//! The lookup is bound to the repository whose config runs the gate (`--repo`, its common
//! git dir). Git clears `GIT_DIR` before it starts the ssh command, so the lane is found
//! from git's working directory; `git --git-dir=X push` run from elsewhere leaves that
//! directory outside X's worktrees. Then the repository's one row-bound worktree answers
//! for the push; with several the gate cannot tell which lane pushes, and that is COULD
//! NOT READ, never UNFENCED.

use crate::ask::{self, Options};
use row_fence_contract::client;
use row_fence_contract::descriptor::{self, DESCRIPTOR_ENV, GIT_DIR_ENV, Resolution};
use row_fence_contract::git_layout::{self, INCLUDE_FILE};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The gate's own flags, which come before git's arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gate {
    /// `--home DIR`: the daemon's home, baked in by the installer.
    pub home: Option<PathBuf>,
    /// `--socket PATH`: the daemon's socket, baked in by the installer.
    pub socket: Option<PathBuf>,
    /// `--repo GIT_DIR`: the common git dir of the repository whose config names the gate.
    pub repo: Option<PathBuf>,
    /// `--then COMMAND` (ssh only): the ssh command the repository had before the gate.
    pub then: Option<String>,
}

/// A command line git's transport gate does not take: a usage error (exit 2), which
/// stops git too. Messages follow `row-fence-ask: error: `.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GateUsage {
    /// One of the gate's flags without its value.
    NeedsValue(&'static str),
    /// `--then` with a value that is not UTF-8.
    NotUtf8 {
        /// The flag.
        flag: &'static str,
        /// The value given.
        value: OsString,
    },
    /// `--git-credential` without exactly one operation.
    CredentialOperation,
    /// `--git-proxy` without exactly HOST and PORT.
    ProxyOperands,
    /// `--git-proxy`'s PORT is not a port.
    NotAPort(OsString),
}

impl std::fmt::Display for GateUsage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateUsage::NeedsValue(flag) => write!(f, "{flag} needs a value"),
            GateUsage::NotUtf8 { flag, value } => {
                write!(f, "{flag} {value:?} is not valid UTF-8")
            }
            GateUsage::CredentialOperation => {
                f.write_str("--git-credential takes one operation: get, store or erase")
            }
            GateUsage::ProxyOperands => {
                f.write_str("--git-proxy takes HOST PORT (git passes them)")
            }
            GateUsage::NotAPort(port) => write!(f, "{port:?} is not a port"),
        }
    }
}

impl std::error::Error for GateUsage {}

/// Splits `args` into the gate's leading flags and git's arguments after them. Git's own
/// arguments never start with `--` (ssh options are short, git refuses a host that starts
/// with `-`, a credential operation is a word), so the first argument that is not one of
/// ours starts git's. A flag without its value is an error.
pub fn split(args: &[OsString]) -> Result<(Gate, &[OsString]), GateUsage> {
    let mut gate = Gate::default();
    let mut i = 0;
    while let Some(flag) = args.get(i).and_then(|a| a.to_str()) {
        let (flag, slot) = match flag {
            "--home" => ("--home", Slot::Path(&mut gate.home)),
            "--socket" => ("--socket", Slot::Path(&mut gate.socket)),
            "--repo" => ("--repo", Slot::Path(&mut gate.repo)),
            "--then" => ("--then", Slot::Text(&mut gate.then)),
            _ => break,
        };
        let value = args.get(i + 1).ok_or(GateUsage::NeedsValue(flag))?;
        match slot {
            Slot::Path(path) => *path = Some(PathBuf::from(value)),
            Slot::Text(text) => {
                *text = Some(
                    value
                        .to_str()
                        .ok_or_else(|| GateUsage::NotUtf8 {
                            flag,
                            value: value.clone(),
                        })?
                        .to_string(),
                )
            }
        }
        i += 2;
    }
    Ok((gate, &args[i..]))
}

enum Slot<'a> {
    Path(&'a mut Option<PathBuf>),
    Text(&'a mut Option<String>),
}

impl Gate {
    /// Asks the fence about `action` for the lane pushing through this repository, printing
    /// the asker's lines on stderr; returns the asker's exit code (0: go ahead). A bad
    /// `ROW_FENCE_TIMEOUT_MS` is a usage error (exit 2), which stops git too.
    pub fn ask(&self, action: String) -> i32 {
        let started = Instant::now();
        let timeout = match client::timeout(None) {
            Ok(timeout) => timeout,
            Err(e) => {
                row_fence_contract::report::say(&format!("row-fence-ask: error: {e}"));
                return row_fence_contract::exit::USAGE;
            }
        };
        let options = Options {
            descriptor: None,
            action,
            socket: self.socket.clone(),
            home: self.home.clone(),
            timeout,
            json: false,
            updates: Ok(Vec::new()),
        };
        ask::run_resolved(&options, self.resolve(), started)
    }

    /// The descriptor of the lane pushing through `repo`, as the asker resolves it, bound to
    /// the repository (see the module docs). A repository moved since install is found
    /// where git runs, by the gate's file it carried along; one that is neither where the
    /// gate says nor around git's working directory fails closed.
    fn resolve(&self) -> Resolution {
        let resolution = descriptor::resolve_here(None);
        let Some(named) = &self.repo else {
            return resolution;
        };
        if std::env::var_os(DESCRIPTOR_ENV).is_some_and(|v| !v.is_empty()) {
            return resolution;
        }
        let Ok(cwd) = std::env::current_dir() else {
            return resolution;
        };
        let landed = landing(&cwd).and_then(|git_dir| git_layout::common_dir(&git_dir));
        let repo = match std::fs::canonicalize(named) {
            Ok(repo) => repo,
            Err(_) => match landed.as_deref().filter(|common| moved_from(common, named)) {
                Some(common) => common.to_path_buf(),
                None => {
                    return Resolution::Unreadable(
                        named.clone(),
                        "the transport gate in this repository's config names this git dir, which is not there (was the repository moved?); run row-fence install git-hook in it again".into(),
                    );
                }
            },
        };
        let lands_here = landed.is_some_and(|common| common == repo);
        if lands_here {
            resolution
        } else {
            bound_elsewhere(&repo, &cwd, resolution)
        }
    }
}

/// The git dir git's working directory leads to: `GIT_DIR` (the credential helper gets
/// it), else the git dir git finds from `cwd` (a `.git` above it, or a bare repository
/// around it, where git runs).
fn landing(cwd: &Path) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(GIT_DIR_ENV).filter(|v| !v.is_empty()) {
        return Some(cwd.join(dir));
    }
    descriptor::find_git_dir(cwd).ok().flatten()
}

/// True when the repository whose common dir is `common` carries a gate written for
/// `named` (its `row-fence.gitconfig` names it): the repository moved since install, and
/// git runs the gate from its config in the new place.
fn moved_from(common: &Path, named: &Path) -> bool {
    let Some(named) = named.to_str() else {
        return false;
    };
    std::fs::read_to_string(common.join(INCLUDE_FILE)).is_ok_and(|text| {
        text.lines()
            .any(|line| line.contains("--git-ssh") && line.contains(named))
    })
}

/// The push runs outside `repo`'s worktrees (or from a copy of its config): the one
/// row-bound worktree of the repository (or around git's working directory) answers for
/// it; more than one, or one that cannot be read, fails closed.
fn bound_elsewhere(repo: &Path, cwd: &Path, around_cwd: Resolution) -> Resolution {
    let mut bound: Vec<Resolution> = git_layout::worktree_git_dirs(repo)
        .iter()
        .filter_map(|git_dir| descriptor::in_git_dir(git_dir))
        .collect();
    if matches!(
        around_cwd,
        Resolution::Found(..) | Resolution::Unreadable(..)
    ) && !bound.iter().any(|b| same_file(b, &around_cwd))
    {
        bound.push(around_cwd);
    }
    match bound.len() {
        0 => Resolution::Unbound(format!(
            "no worktree of {} holds a descriptor",
            repo.display()
        )),
        1 => bound.remove(0),
        _ => {
            let paths: Vec<String> = bound
                .iter()
                .filter_map(path_of)
                .map(|p| p.display().to_string())
                .collect();
            Resolution::Unreadable(
                repo.to_path_buf(),
                format!(
                    "git runs this push from {}, outside the worktrees of this repository, so the fence cannot tell which of its row-bound lanes pushes ({}); push from inside the lane's worktree",
                    cwd.display(),
                    paths.join(", ")
                ),
            )
        }
    }
}

fn path_of(r: &Resolution) -> Option<&Path> {
    match r {
        Resolution::Found(path, _) | Resolution::Unreadable(path, _) => Some(path),
        _ => None,
    }
}

fn same_file(a: &Resolution, b: &Resolution) -> bool {
    let canonical = |r| path_of(r).and_then(|p| std::fs::canonicalize(p).ok());
    canonical(a).is_some() && canonical(a) == canonical(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_gate_takes_its_flags_and_leaves_git_its_arguments() {
        let args = os(&[
            "--home",
            "/h",
            "--repo",
            "/r/.git",
            "--then",
            "ssh -i key",
            "-p",
            "22",
            "host",
            "git-receive-pack '/x'",
        ]);
        let (gate, rest) = split(&args).unwrap();
        assert_eq!(gate.home, Some(PathBuf::from("/h")));
        assert_eq!(gate.repo, Some(PathBuf::from("/r/.git")));
        assert_eq!(gate.then.as_deref(), Some("ssh -i key"));
        assert_eq!(
            rest,
            &os(&["-p", "22", "host", "git-receive-pack '/x'"])[..]
        );
        let missing = split(&os(&["--home"])).unwrap_err();
        assert_eq!(missing, GateUsage::NeedsValue("--home"));
        assert_eq!(missing.to_string(), "--home needs a value");
        let get = os(&["get"]);
        let (gate, rest) = split(&get).unwrap();
        assert_eq!((gate, rest), (Gate::default(), &get[..]));
    }

    #[test]
    fn a_then_that_is_not_utf8_is_a_usage_error_naming_the_flag() {
        use std::os::unix::ffi::OsStringExt;
        let bad = OsString::from_vec(vec![b's', 0xff]);
        let args = vec![OsString::from("--then"), bad.clone()];
        let refused = split(&args).unwrap_err();
        assert_eq!(
            refused,
            GateUsage::NotUtf8 {
                flag: "--then",
                value: bad
            }
        );
        assert_eq!(refused.to_string(), "--then \"s\\xFF\" is not valid UTF-8");
    }
}
