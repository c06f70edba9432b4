//! `row-fence install git-hook`: git's own layer of the fence, in every place git looks.
//!
//! - The pre-push hook in the hooks directory of **every worktree** (`core.hooksPath`
//!   resolved per worktree), baked with the daemon's asker, home and socket.
//! - Git's **transport gate** in the repository's config ([`crate::git_gate`]): an ssh
//!   command that asks before `git-receive-pack`, and a first credential helper that stops
//!   git unless the lane is ALLOWED. It holds for what skips the hook (`--no-verify`,
//!   `git send-pack`, a script) and for worktrees added later.
//! - With `--recurse-submodules`, the same in every initialized submodule.
//!
//! Everything that would be refused is found before anything is written: an install
//! either writes every place or names the ones it cannot and writes none. A gate that git
//! does not run in some worktree after it is written (a later `core.sshCommand`, say) is
//! taken out again and named.

use crate::daemon_answers::Daemon;
use crate::git_gate::{self, Plan};
use crate::git_hook::{self, Baked, Done};
use crate::git_repo::{self, Repository};
use crate::render::bin_dir;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_resident::config::Settings;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct GitHookArgs {
    /// The repository (any directory in it)
    #[arg(long, value_name = "PATH", default_value = ".")]
    repo: PathBuf,
    /// Keep a different pre-push hook already there and run it before the fence (the fence asks last)
    #[arg(long, conflicts_with = "rollback")]
    chain: bool,
    /// Also every initialized submodule, recursively
    #[arg(long)]
    recurse_submodules: bool,
    /// The directory holding the row-fence-ask the hook and the gate run [default: this program's directory]
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Remove the fence's hooks and the transport gate (the config comes back byte for byte)
    #[arg(long)]
    rollback: bool,
}

/// `install git-hook`: installs (or with `--rollback` removes) the hooks and the gate; on
/// an install, warns when no daemon answers for the home; with `json`, prints
/// `{"rollback","repositories":[config…],"hooks_dirs":[dir…],"daemon"}` once done.
pub fn run(args: GitHookArgs, settings: &Settings, json: bool) -> Outcome {
    let repos =
        git_repo::discover(&args.repo, args.recurse_submodules).map_err(Failure::could_not)?;
    let (dirs, gone) = hooks_dirs(&repos);
    let code = if args.rollback {
        rollback(&repos, &dirs)?
    } else {
        let baked = Baked {
            bin_dir: bin_dir(args.bin_dir.as_ref())?,
            home: settings.home.clone(),
            socket: settings.socket.clone(),
        };
        install(&repos, &dirs, gone, &baked, args.chain)?
    };
    let daemon = (!args.rollback).then(|| Daemon::ask(settings));
    if let Some(daemon) = &daemon {
        daemon.warn(settings, "fenced pushes");
    }
    if json {
        out(&serde_json::json!({
            "rollback": args.rollback,
            "repositories": repos.iter().map(|r| r.config().display().to_string()).collect::<Vec<_>>(),
            "hooks_dirs": dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>(),
            "daemon": daemon.as_ref().map(Daemon::word),
        })
        .to_string());
    }
    Ok(code)
}

/// Every distinct hooks directory (worktrees without `core.hooksPath` share one), and
/// the worktrees whose hooks directory cannot be named.
fn hooks_dirs(repos: &[Repository]) -> (Vec<PathBuf>, Vec<String>) {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut gone = Vec::new();
    for worktree in repos.iter().flat_map(|r| &r.worktrees) {
        match &worktree.hooks {
            Ok(dir) if !dirs.contains(dir) => dirs.push(dir.clone()),
            Ok(_) => {}
            Err(e) => gone.push(e.to_string()),
        }
    }
    (dirs, gone)
}

fn install(
    repos: &[Repository],
    dirs: &[PathBuf],
    mut problems: Vec<String>,
    baked: &Baked,
    chain: bool,
) -> Outcome {
    let hook_text = baked
        .render()
        .map_err(|e| Failure::usage(format!("cannot bake the hook: {e}")))?;
    for dir in dirs {
        if let Err(refusal) = git_hook::install_refusal(dir, chain) {
            problems.push(refusal.to_string());
        }
    }
    let mut plans: Vec<(&Repository, Plan)> = Vec::new();
    for repo in repos {
        match git_gate::plan(&repo.common_dir, baked) {
            Ok(plan) => plans.push((repo, plan)),
            Err(e) => problems.push(format!("{}: {e}", repo.config().display())),
        }
    }
    if !problems.is_empty() {
        return Err(nothing_written(&problems, "installed"));
    }
    let mut written = Vec::new();
    let mut failed = Vec::new();
    for (repo, plan) in &plans {
        match install_gate(repo, plan) {
            Ok(undo) => written.push((repo, undo)),
            Err(e) => failed.push(e.to_string()),
        }
    }
    if !failed.is_empty() {
        // Not every repository runs its gate: take back what was written, hooks untouched.
        let mut stuck = Vec::new();
        for (repo, undo) in written {
            if let Err(e) = undo.apply(&repo.common_dir) {
                stuck.push(e.to_string());
            }
        }
        if stuck.is_empty() {
            return Err(nothing_written(&failed, "installed"));
        }
        failed.extend(stuck);
        return finish(failed);
    }
    for (_, undo) in &written {
        say(&undo.said);
    }
    for dir in dirs {
        match git_hook::install(dir, chain, &hook_text) {
            Ok(done) => say_hook(dir, done),
            Err(e) => failed.push(e.to_string()),
        }
    }
    finish(failed)
}

/// Why one repository's gate was not left written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GateNotWritten {
    /// Writing the gate failed (nothing of it is in effect).
    #[error("{}: {source}", config.display())]
    Install {
        /// The repository's config.
        config: PathBuf,
        /// What failed.
        source: git_gate::GateError,
    },
    /// Git would not run the gate in some worktree; it was taken back.
    #[error(
        "git would not run the transport gate of {}: {}",
        config.display(),
        problems.join("; ")
    )]
    NotRun {
        /// The repository's config.
        config: PathBuf,
        /// What keeps git from running it, one sentence per worktree.
        problems: Vec<String>,
    },
    /// Taking the gate back failed: it may stay.
    #[error(transparent)]
    Undo(#[from] git_gate::GateError),
}

/// How to take back one repository's gate, and what to say when it stays.
struct Undo {
    /// `None`: this install wrote the gate; else what the included file held before it
    /// was refreshed (`Some(None)`: there was none).
    before: Option<Option<Vec<u8>>>,
    /// The config's bytes before a refresh that rewrote it (an earlier install's lines
    /// replaced), to write back.
    config: Option<Vec<u8>>,
    said: String,
}

impl Undo {
    fn apply(&self, common_dir: &std::path::Path) -> Result<(), git_gate::GateError> {
        let path = common_dir.join(git_gate::INCLUDE_FILE);
        if let (Some(_), Some(bytes)) = (&self.before, &self.config)
            && std::fs::read(common_dir.join("config")).ok().as_ref() != Some(bytes)
        {
            git_gate::restore_config(common_dir, bytes)?;
        }
        match &self.before {
            None => git_gate::rollback(common_dir).map(drop),
            Some(Some(bytes)) => row_fence_store::atomic_file::write(&path, bytes, 0o644, false)
                .map_err(|source| git_gate::GateError::Restore { path, source }),
            Some(None) => std::fs::remove_file(&path)
                .map_err(|source| git_gate::GateError::Remove { path, source }),
        }
    }
}

/// Writes one repository's gate, then asks git in each of its worktrees which ssh
/// command and credential helpers it runs. A gate git does not run somewhere is taken
/// back at once and named.
fn install_gate(repo: &Repository, plan: &Plan) -> Result<Undo, GateNotWritten> {
    let config = repo.config();
    let before = std::fs::read(repo.common_dir.join(git_gate::INCLUDE_FILE)).ok();
    let config_before = std::fs::read(&config).ok();
    let done = git_gate::install(plan).map_err(|source| GateNotWritten::Install {
        config: config.clone(),
        source,
    })?;
    let undo = Undo {
        before: (done != git_gate::Done::Installed).then_some(before),
        config: config_before,
        said: String::new(),
    };
    let problems: Vec<String> = repo
        .worktrees
        .iter()
        .filter(|w| w.present)
        .flat_map(|w| git_gate::problems_in(&w.path))
        .collect();
    if !problems.is_empty() {
        undo.apply(&repo.common_dir)?;
        return Err(GateNotWritten::NotRun { config, problems });
    }
    let broker = crate::broker_wiring::Wiring::read(&repo.common_dir)
        .ok()
        .flatten()
        .map(|w| w.ssh_line());
    let ssh = broker
        .as_deref()
        .or(plan.previous.ssh_command.as_deref())
        .unwrap_or("ssh");
    Ok(Undo {
        said: format!(
            "{} git's transport gate in {} (then ssh: {ssh}; {} credential helper(s) after the fence's; git://: {})",
            match done {
                git_gate::Done::Installed => "installed",
                _ => "refreshed",
            },
            config.display(),
            plan.previous
                .helpers
                .iter()
                .filter(|(_, helper)| !helper.is_empty())
                .count(),
            match &plan.previous.git_proxy {
                None => "gated".to_string(),
                Some(proxy) =>
                    format!("not gated, the repository's own core.gitProxy {proxy:?} stays"),
            }
        ),
        ..undo
    })
}

fn rollback(repos: &[Repository], dirs: &[PathBuf]) -> Outcome {
    let mut problems = Vec::new();
    for dir in dirs {
        if let Err(refusal) = git_hook::rollback_refusal(dir) {
            problems.push(refusal.to_string());
        }
    }
    for repo in repos {
        if let Err(e) = git_gate::rollback_refusal(&repo.common_dir) {
            problems.push(e.to_string());
        }
    }
    if !problems.is_empty() {
        return Err(nothing_written(&problems, "removed"));
    }
    let mut failed = Vec::new();
    for dir in dirs {
        match git_hook::rollback(dir) {
            Ok(done) => say_hook(dir, done),
            Err(e) => failed.push(e.to_string()),
        }
    }
    for repo in repos {
        match git_gate::rollback(&repo.common_dir) {
            Ok(git_gate::Done::NotInstalled) => {
                say(&format!("no transport gate in {}", repo.config().display()))
            }
            Ok(_) => say(&format!(
                "removed git's transport gate from {}",
                repo.config().display()
            )),
            Err(e) => failed.push(e.to_string()),
        }
    }
    finish(failed)
}

fn nothing_written(problems: &[String], what: &str) -> Failure {
    for problem in problems {
        say(problem);
    }
    Failure::could_not(format!(
        "nothing was {what}: {} the places above cannot be {what} (each says why)",
        match problems.len() {
            1 => "one of".to_string(),
            n => format!("{n} of"),
        }
    ))
}

fn finish(failed: Vec<String>) -> Outcome {
    if failed.is_empty() {
        return Ok(exit::ALLOWED);
    }
    for failure in &failed {
        say(failure);
    }
    Err(Failure::could_not(format!(
        "{} the places above failed; the others are done as printed",
        match failed.len() {
            1 => "one of".to_string(),
            n => format!("{n} of"),
        }
    )))
}

fn say_hook(dir: &std::path::Path, done: Done) {
    let hook = dir.join(git_hook::HOOK);
    say(&match done {
        Done::Installed => format!("installed the pre-push hook at {}", hook.display()),
        Done::Chained => format!(
            "installed the pre-push hook at {}; the hook that was there runs before the fence, which asks last (as {})",
            hook.display(),
            dir.join(git_hook::CHAINED).display()
        ),
        Done::AlreadyInstalled => format!(
            "the pre-push hook at {} was already the fence's (refreshed)",
            hook.display()
        ),
        Done::RolledBack => format!("removed the fence's pre-push hook from {}", dir.display()),
        Done::NotInstalled => format!("no pre-push hook of the fence's in {}", dir.display()),
    });
}

fn say(line: &str) {
    row_fence_contract::report::say(&format!("row-fence: {line}"));
}
