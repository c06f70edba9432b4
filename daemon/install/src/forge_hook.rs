//! `row-fence install forge-hook --repo <bare repository>`: the forge's `pre-receive` hook
//! (ARCHITECTURE.md, "Forge hook"), written, chained over a hook already there and rolled
//! back byte for byte by the same code as the pre-push hook ([`crate::git_hook`]). The
//! hook runs `row-fence forge-check` with the values baked in here: this program's
//! directory, the daemon's home, the key broker's socket and where the lane's name comes
//! from.

use crate::git_hook::{self, Done, HookFiles};
use crate::render::bin_dir;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::say;
use row_fence_resident::config::Settings;
use std::path::{Path, PathBuf};

/// The fence's pre-receive hook, as shipped in `hooks/pre-receive`.
pub const PRE_RECEIVE: &str = include_str!("../../../hooks/pre-receive");

/// The chain that runs the repository's own pre-receive hook, then the fence.
pub const PRE_RECEIVE_CHAIN: &str = include_str!("../../../hooks/pre-receive-chain");

/// The values `hooks/pre-receive` leaves empty, in order.
const BAKED: [&str; 5] = [
    "row_fence_bin_dir",
    "row_fence_home",
    "row_fence_socket",
    "row_fence_lane_from",
    "row_fence_local_pushes",
];

/// The pre-receive hook's files.
pub const FILES: HookFiles = HookFiles {
    hook: "pre-receive",
    fence: "pre-receive.row-fence",
    chained: "pre-receive.chained",
    shipped: PRE_RECEIVE,
    chain: PRE_RECEIVE_CHAIN,
    baked: &BAKED,
};

#[derive(clap::Args, Debug)]
pub struct ForgeHookArgs {
    /// The forge's repository (a bare repository; a worktree's `.git` is used when given a worktree)
    #[arg(long, value_name = "PATH")]
    repo: PathBuf,
    /// Where the hook reads the pushing lane's name: `env:NAME` (the lane key's forced command sets it, e.g. env:ROW_FENCE_LANE) or `remote-user` (git-http-backend's authenticated user)
    #[arg(long, value_name = "SOURCE", default_value = "env:ROW_FENCE_LANE", value_parser = parse_lane_from)]
    lane_from: String,
    /// The key broker's socket the hook asks on (open to the forge's uid) [default: ROW_FENCE_BROKER_SOCKET]
    #[arg(long, value_name = "PATH", env = "ROW_FENCE_BROKER_SOCKET")]
    agent: Option<PathBuf>,
    /// The directory holding the row-fence the hook runs [default: this program's directory]
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Let through a push that reaches the repository by its path on the forge host, over no ssh and no web server (an operator seeding it): whoever runs one can write the repository's files anyway; lanes push over ssh or HTTPS and are judged
    #[arg(long, conflicts_with = "rollback")]
    allow_local_pushes: bool,
    /// Keep a pre-receive hook already there and run it before the fence
    #[arg(long)]
    chain: bool,
    /// Remove the fence's hook, putting back what was there before, byte for byte
    #[arg(long)]
    rollback: bool,
}

/// `--lane-from`: `env:NAME` with a variable's name, or `remote-user`.
///
/// # Errors
///
/// [`LaneFromError`] for any other text.
pub fn parse_lane_from(text: &str) -> Result<String, LaneFromError> {
    if text == "remote-user" {
        return Ok(text.into());
    }
    match text.strip_prefix("env:") {
        Some(name)
            if !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !name.as_bytes()[0].is_ascii_digit() =>
        {
            Ok(text.into())
        }
        _ => Err(LaneFromError {
            text: text.to_string(),
        }),
    }
}

/// A `--lane-from` that is neither `env:NAME` nor `remote-user`.
#[derive(Debug, thiserror::Error)]
#[error("{text:?} is neither env:NAME (a variable's name) nor remote-user")]
pub struct LaneFromError {
    /// The text given.
    pub text: String,
}

/// The hooks directory of the repository at `repo`: `repo/hooks` for a bare one,
/// `repo/.git/hooks` for a worktree. A repository whose git reads its hooks elsewhere
/// (`core.hooksPath`) is refused: a hook written where git does not look would let every
/// push through.
fn hooks_dir(repo: &Path) -> Result<PathBuf, Failure> {
    let repo = std::path::absolute(repo)
        .map_err(|e| Failure::usage(format!("--repo {}: {e}", repo.display())))?;
    let git_dir = if repo.join("objects").is_dir() && repo.join("HEAD").is_file() {
        repo.clone()
    } else if repo.join(".git").join("objects").is_dir() {
        repo.join(".git")
    } else {
        return Err(Failure::usage(format!(
            "--repo {}: not a git repository (no objects/ and HEAD, nor .git/)",
            repo.display()
        )));
    };
    if let Some(elsewhere) = hooks_path(&git_dir)? {
        return Err(Failure::could_not(format!(
            "--repo {}: git reads its hooks from {elsewhere} (core.hooksPath), not from {}: unset it, or the hook would never run",
            repo.display(),
            git_dir.join("hooks").display()
        )));
    }
    Ok(git_dir.join("hooks"))
}

/// `core.hooksPath` as git run here reads it for `git_dir` (the repository's config, the
/// system's and the installing user's own), if set. The forge's user's own global config
/// is not read: docs/forge.md says to keep `core.hooksPath` out of it.
fn hooks_path(git_dir: &Path) -> Result<Option<String>, Failure> {
    let ran = std::process::Command::new("git")
        .args(["-c", "safe.directory=*", "--git-dir"])
        .arg(git_dir)
        .args(["config", "--get", "core.hooksPath"])
        .output()
        .map_err(|e| Failure::could_not(format!("cannot run git: {e}")))?;
    match ran.status.code() {
        Some(0) => Ok(Some(
            String::from_utf8_lossy(&ran.stdout).trim().to_string(),
        )),
        Some(1) => Ok(None),
        _ => Err(Failure::could_not(format!(
            "git config --get core.hooksPath in {}: {}",
            git_dir.display(),
            String::from_utf8_lossy(&ran.stderr).trim()
        ))),
    }
}

/// Installs or rolls back the hook; prints what was done.
pub fn run(args: ForgeHookArgs, settings: &Settings, json: bool) -> Outcome {
    let dir = hooks_dir(&args.repo)?;
    let refused = |r: git_hook::Refusal| Failure::could_not(r.to_string());
    let done = if args.rollback {
        git_hook::rollback_refusal_of(&FILES, &dir).map_err(refused)?;
        git_hook::rollback_of(&FILES, &dir).map_err(refused)?
    } else {
        let socket = args.agent.clone().ok_or_else(|| {
            Failure::usage(
                "--agent (or ROW_FENCE_BROKER_SOCKET): the key broker's socket the hook asks on",
            )
        })?;
        let bin = bin_dir(args.bin_dir.as_ref())?;
        let text = |p: &Path| {
            crate::shell::text(p)
                .map(str::to_string)
                .map_err(|e| Failure::usage(e.to_string()))
        };
        let values = [
            text(&bin)?,
            text(&settings.home)?,
            text(&socket)?,
            args.lane_from.clone(),
            if args.allow_local_pushes { "allow" } else { "" }.to_string(),
        ];
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let hook = git_hook::render_of(&FILES, &refs)
            .map_err(|e| Failure::usage(format!("cannot bake the hook: {e}")))?;
        git_hook::install_refusal_of(&FILES, &dir, args.chain).map_err(refused)?;
        git_hook::install_of(&FILES, &dir, args.chain, &hook).map_err(refused)?
    };
    let said = match done {
        Done::Installed => "installed",
        Done::Chained => "installed, after the repository's own pre-receive hook",
        Done::AlreadyInstalled => "already installed (refreshed)",
        Done::RolledBack => "rolled back (what was there before is back)",
        Done::NotInstalled => "not installed; nothing to roll back",
    };
    let hook = dir.join(FILES.hook);
    if json {
        out(&serde_json::json!({
            "hook": hook.display().to_string(),
            "done": format!("{done:?}").to_lowercase(),
            "lane_from": (!args.rollback).then_some(args.lane_from),
            "allow_local_pushes": (!args.rollback).then_some(args.allow_local_pushes),
        })
        .to_string());
    }
    say!("row-fence: forge hook {}: {said}", hook.display());
    Ok(exit::ALLOWED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn lane_sources_are_an_allowlist() {
        for ok in ["env:ROW_FENCE_LANE", "remote-user", "env:X_1"] {
            assert!(parse_lane_from(ok).is_ok(), "{ok}");
        }
        for bad in ["env:", "env:1X", "env:A-B", "REMOTE_USER", "env:$(x)", ""] {
            assert!(parse_lane_from(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_repository_whose_git_reads_hooks_elsewhere_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("r.git");
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", dir.path())
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q", "--bare", repo.to_str().unwrap()]);
        assert_eq!(hooks_dir(&repo).unwrap(), repo.join("hooks"));
        git(&[
            "--git-dir",
            repo.to_str().unwrap(),
            "config",
            "core.hooksPath",
            "/elsewhere",
        ]);
        let refused = hooks_dir(&repo).unwrap_err().message;
        assert!(refused.contains("core.hooksPath"), "{refused}");
    }

    #[test]
    fn the_baked_hook_reads_back_and_rolls_back_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let hooks = dir.path();
        let text =
            git_hook::render_of(&FILES, &["/opt/rf bin", "/h", "/run/b.sock", "remote-user"])
                .unwrap();
        assert!(git_hook::is_fence_of(&FILES, &text));
        assert!(!git_hook::is_fence_of(
            &FILES,
            &text.replace("exec", "echo")
        ));
        let original = b"#!/bin/sh\n# the forge's own\nexit 0\n\xff";
        fs::write(hooks.join("pre-receive"), original).unwrap();
        assert!(git_hook::install_of(&FILES, hooks, false, &text).is_err());
        assert_eq!(
            git_hook::install_of(&FILES, hooks, true, &text).unwrap(),
            Done::Chained
        );
        assert_eq!(
            fs::read_to_string(hooks.join("pre-receive")).unwrap(),
            PRE_RECEIVE_CHAIN
        );
        assert_eq!(
            git_hook::rollback_of(&FILES, hooks).unwrap(),
            Done::RolledBack
        );
        assert_eq!(fs::read(hooks.join("pre-receive")).unwrap(), original);
        assert!(!hooks.join("pre-receive.row-fence").exists());
        assert!(!hooks.join("pre-receive.chained").exists());
    }
}
