//! What a lane's git reads and runs, as its own git says, for `row-fence doctor`
//! (ARCHITECTURE.md, "Key broker"). Another lane that can write a hook this lane runs, or
//! a config file its git reads (one can set `core.hooksPath`, `core.sshCommand`, an alias),
//! runs its code as this lane while it is ALLOWED. The git dir's `hooks` and `config` are
//! not the whole of it: `core.hooksPath` (set at any level) moves the hooks, and
//! `~/.gitconfig`, `~/.config/git/config` and every `include.path` are read too. So git is
//! asked, as the lane's uid with its HOME, the way its own git would resolve them.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What the lane's git reads and runs.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GitReads {
    /// The hooks directory git runs hooks from (`core.hooksPath` or `<git dir>/hooks`).
    pub hooks: Option<PathBuf>,
    /// Every config file git reads there, includes followed.
    pub configs: Vec<PathBuf>,
}

/// Why git could not be asked as a lane.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaneGitError {
    /// git could not be started as the lane's uid.
    #[error("cannot run git as uid {uid}: {source}")]
    Run {
        /// The lane's uid.
        uid: u32,
        /// Why it could not be started.
        #[source]
        source: std::io::Error,
    },
    /// git ran and failed (its stderr, trimmed).
    #[error("git {args} as uid {uid} in {}: {stderr}", worktree.display())]
    Failed {
        /// The arguments, joined by spaces.
        args: String,
        /// The lane's uid.
        uid: u32,
        /// Where it ran.
        worktree: PathBuf,
        /// What it said.
        stderr: String,
    },
}

/// Asks git in `worktree` as `uid`:`gid` with `home` as its HOME. An error says why git
/// could not be asked (doctor then says it cannot tell).
pub fn reads(uid: u32, gid: u32, home: &Path, worktree: &Path) -> Result<GitReads, LaneGitError> {
    let git = |args: &[&str]| -> Result<Vec<u8>, LaneGitError> {
        let out = Command::new("git")
            .arg("-c")
            .arg("safe.directory=*")
            .args(args)
            .current_dir(worktree)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .stdin(Stdio::null())
            .uid(uid)
            .gid(gid)
            .output()
            .map_err(|source| LaneGitError::Run { uid, source })?;
        if !out.status.success() {
            return Err(LaneGitError::Failed {
                args: args.join(" "),
                uid,
                worktree: worktree.to_path_buf(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(out.stdout)
    };
    // Not --path-format=absolute: that resolves the path, and fails on a directory the
    // lane cannot enter; a relative answer is from the worktree, where git runs hooks.
    let hooks = git(&["rev-parse", "--git-path", "hooks"])?;
    let hooks = String::from_utf8_lossy(&hooks)
        .trim_end_matches('\n')
        .to_string();
    let listed = git(&["config", "--list", "--show-origin", "--includes", "--null"])?;
    Ok(GitReads {
        hooks: (!hooks.is_empty()).then(|| worktree.join(hooks)),
        configs: config_files(&listed, worktree),
    })
}

/// The files in `git config --list --show-origin --null` output (`file:PATH` NUL
/// `key\nvalue` NUL, …), each once, relative ones taken from `cwd` as git printed them.
fn config_files(listed: &[u8], cwd: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for origin in listed.split(|b| *b == 0).step_by(2) {
        let Some(path) = origin.strip_prefix(b"file:") else {
            continue;
        };
        let path = cwd.join(String::from_utf8_lossy(path).as_ref());
        if !files.contains(&path) {
            files.push(path);
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_origins_are_listed_once_each_relative_ones_from_the_worktree() {
        let listed = b"file:/home/a/.gitconfig\0user.name\nA\0file:.git/config\0core.bare\nfalse\0file:.git/config\0core.hookspath\n/x\0command line:\0safe.directory\n*\0";
        assert_eq!(
            config_files(listed, Path::new("/w")),
            [
                PathBuf::from("/home/a/.gitconfig"),
                PathBuf::from("/w/.git/config")
            ]
        );
        assert!(config_files(b"", Path::new("/w")).is_empty());
    }
}
