//! `row-fence install broker`: git in a repository signs through the key broker, the
//! daemon's ssh agent (ARCHITECTURE.md, "Key broker").
//!
//! The repository keeps ONE `core.sshCommand`, the transport gate's wrapper in the one
//! included file ([`crate::git_gate`]), which already owns that key. Wiring the broker in
//! makes the wrapper run OpenSSH with the broker's options first:
//! `-o IdentityAgent=<socket> -o IdentitiesOnly=yes -o IdentityFile=<the push key's .pub>
//! -o ControlMaster=no -o ControlPath=none`. Without the `IdentityFile`, `IdentitiesOnly`
//! makes ssh offer only default key files and never the agent's; without the two
//! `Control*` options a connection opened while ALLOWED could be kept and reused later
//! with no new signature.
//!
//! What is wired in is kept in a file of the broker's own beside the config
//! ([`WIRING_FILE`], not read by git), so the gate and the broker compose: the included
//! file is written from both, installing one keeps the other, and taking one back writes
//! the file again with the other's part alone. Taking the last one back removes the lines
//! from the config, which comes back byte for byte.

use crate::broker_wiring::{PushWiring, WIRING_FILE, Wiring};
use crate::git_gate::{self, Done, GateError};
use crate::git_hook::Baked;
use crate::git_repo::{self, Repository};
use crate::render::bin_dir;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_resident::config::Settings;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// `row-fence install broker`'s flags.
#[derive(clap::Args, Debug)]
pub struct BrokerArgs {
    /// The repository (any directory in it)
    #[arg(long, value_name = "PATH", default_value = ".")]
    repo: PathBuf,
    /// The daemon's agent socket [default: $ROW_FENCE_BROKER_SOCKET, as the daemon reads it]
    #[arg(long, value_name = "PATH", conflicts_with = "rollback")]
    broker_socket: Option<PathBuf>,
    /// The push key's public half, which ssh offers from the agent [default: the first of $ROW_FENCE_BROKER_KEYS with .pub appended]
    #[arg(long, value_name = "FILE", conflicts_with = "rollback")]
    key_pub: Option<PathBuf>,
    /// The directory holding the row-fence-ask the wrapper runs [default: the transport gate's, else this program's directory]
    #[arg(long, value_name = "DIR", conflicts_with = "rollback")]
    bin_dir: Option<PathBuf>,
    /// The daemon's push socket: with --push-forge, pushes to those forges go through git-remote-row-fence to it [default: $ROW_FENCE_PUSH_SOCKET, as the daemon reads it]
    #[arg(long, value_name = "PATH", conflicts_with = "rollback")]
    push_socket: Option<PathBuf>,
    /// A forge the daemon pushes to, as its --push-forge (ssh://USER@HOST[:PORT]/[PATH/] or https://[USER@]HOST[:PORT]/[PATH/]): git's pushes there go to row-fence::<url>; repeatable [default: $ROW_FENCE_PUSH_FORGES]
    #[arg(long = "push-forge", value_name = "URL", conflicts_with = "rollback")]
    push_forges: Vec<String>,
    /// Take the broker's options out (the transport gate, if installed, stays; else the config comes back byte for byte)
    #[arg(long)]
    rollback: bool,
}

/// `install broker`: wires the broker into the repository's ssh command (or with
/// `--rollback` takes it out); with `json`, prints
/// `{"rollback","repository","agent","identity_file","gate","done"}` once done.
pub fn run(args: BrokerArgs, settings: &Settings, json: bool) -> Outcome {
    let repos = git_repo::discover(&args.repo, false).map_err(Failure::could_not)?;
    let repo = repos
        .first()
        .ok_or_else(|| Failure::could_not("no repository found"))?;
    let (wiring, done) = if args.rollback {
        (
            Wiring::read(&repo.common_dir).map_err(|e| Failure::could_not(e.to_string()))?,
            rollback(repo)?,
        )
    } else {
        let wiring = wiring(&args)?;
        crate::lane_socket::reachable(&repo.common_dir, &wiring.agent)?;
        let done = install(repo, &args, settings, &wiring)?;
        (Some(wiring), done)
    };
    let config = repo.config();
    say(&match done {
        Done::Installed | Done::Refreshed => format!(
            "git in {} signs through the key broker at {} (key {})",
            config.display(),
            wiring
                .as_ref()
                .map_or(String::new(), |w| w.agent.display().to_string()),
            wiring
                .as_ref()
                .map_or(String::new(), |w| w.identity_file.display().to_string()),
        ),
        Done::RolledBack => format!("took the key broker out of {}", config.display()),
        Done::NotInstalled => format!("no key broker in {}", config.display()),
    });
    if json {
        out(&serde_json::json!({
            "rollback": args.rollback,
            "repository": config.display().to_string(),
            "agent": wiring.as_ref().map(|w| w.agent.display().to_string()),
            "identity_file": wiring.as_ref().map(|w| w.identity_file.display().to_string()),
            "gate": git_gate::gate_in(&repo.common_dir),
            "done": match done {
                Done::Installed => "installed",
                Done::Refreshed => "refreshed",
                Done::RolledBack => "rolled back",
                Done::NotInstalled => "not installed",
            },
        })
        .to_string());
    }
    Ok(exit::ALLOWED)
}

/// The socket and key from the flags, else the daemon's environment, made absolute.
fn wiring(args: &BrokerArgs) -> Result<Wiring, Failure> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let socket = args
        .broker_socket
        .clone()
        .or_else(|| env("ROW_FENCE_BROKER_SOCKET").map(PathBuf::from))
        .ok_or_else(|| {
            Failure::usage(
                "give --broker-socket (or set ROW_FENCE_BROKER_SOCKET as the daemon has it)",
            )
        })?;
    let key = args
        .key_pub
        .clone()
        .or_else(|| {
            let keys = env("ROW_FENCE_BROKER_KEYS")?.into_string().ok()?;
            let first = keys.split(',').find(|k| !k.is_empty())?;
            Some(PathBuf::from(format!("{first}.pub")))
        })
        .ok_or_else(|| {
            Failure::usage("give --key-pub (or set ROW_FENCE_BROKER_KEYS as the daemon has it)")
        })?;
    let absolute = |p: &Path| {
        std::path::absolute(p).map_err(|e| Failure::could_not(format!("{}: {e}", p.display())))
    };
    let mut wiring = Wiring::new(absolute(&socket)?, absolute(&key)?)
        .map_err(|e| Failure::usage(e.to_string()))?;
    let forges: Vec<String> = if args.push_forges.is_empty() {
        env("ROW_FENCE_PUSH_FORGES")
            .and_then(|v| v.into_string().ok())
            .map(|v| {
                v.split(',')
                    .filter(|f| !f.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    } else {
        args.push_forges.clone()
    };
    if !forges.is_empty() {
        let push_socket = args
            .push_socket
            .clone()
            .or_else(|| env("ROW_FENCE_PUSH_SOCKET").map(PathBuf::from))
            .ok_or_else(|| {
                Failure::usage(
                    "--push-forge needs --push-socket (or ROW_FENCE_PUSH_SOCKET as the daemon has it)",
                )
            })?;
        wiring.push = Some(
            PushWiring::new(absolute(&push_socket)?, forges)
                .map_err(|e| Failure::usage(e.to_string()))?,
        );
    }
    Ok(wiring)
}

/// What the repository held before, to write back when the install cannot finish.
struct Snapshot {
    config: Option<Vec<u8>>,
    include: Option<Vec<u8>>,
    wiring: Option<Vec<u8>>,
}

impl Snapshot {
    fn take(common_dir: &Path) -> Snapshot {
        Snapshot {
            config: fs::read(common_dir.join("config")).ok(),
            include: fs::read(common_dir.join(git_gate::INCLUDE_FILE)).ok(),
            wiring: fs::read(common_dir.join(WIRING_FILE)).ok(),
        }
    }

    /// Writes everything back as it was; the first failure is returned.
    fn restore(&self, common_dir: &Path) -> Result<(), RestoreError> {
        if let Some(bytes) = &self.config
            && fs::read(common_dir.join("config")).ok().as_ref() != Some(bytes)
        {
            git_gate::restore_config(common_dir, bytes)?;
        }
        for (name, bytes) in [
            (git_gate::INCLUDE_FILE, &self.include),
            (WIRING_FILE, &self.wiring),
        ] {
            let path = common_dir.join(name);
            let done = match bytes {
                Some(bytes) => row_fence_store::atomic_file::write(&path, bytes, 0o644, false),
                None => match fs::remove_file(&path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                },
            };
            done.map_err(|source| RestoreError::File { path, source })?;
        }
        Ok(())
    }
}

/// Why what was there before an install could not all be put back.
#[derive(Debug, thiserror::Error)]
enum RestoreError {
    /// The repository's git config.
    #[error(transparent)]
    Config(#[from] git_gate::GateError),
    /// One of the files the install writes beside it.
    #[error("cannot restore {}: {source}", path.display())]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

fn install(
    repo: &Repository,
    args: &BrokerArgs,
    settings: &Settings,
    wiring: &Wiring,
) -> Result<Done, Failure> {
    let common = &repo.common_dir;
    let gate = git_gate::gate_in(common);
    // The gate's wrapper keeps the asker, home and socket it was installed with.
    let baked = match (&args.bin_dir, git_gate::baked_in(common)) {
        (None, Some(baked)) if gate => baked,
        _ => Baked {
            bin_dir: bin_dir(args.bin_dir.as_ref())?,
            home: settings.home.clone(),
            socket: settings.socket.clone(),
        },
    };
    let before = Snapshot::take(common);
    let undo = |failure: String| -> Failure {
        match before.restore(common) {
            Ok(()) => Failure::could_not(format!("nothing was installed: {failure}")),
            Err(stuck) => Failure::could_not(format!(
                "{failure}; and taking the install back failed: {stuck}"
            )),
        }
    };
    let wiring_path = common.join(WIRING_FILE);
    row_fence_store::atomic_file::write(&wiring_path, wiring.text().as_bytes(), 0o644, false)
        .map_err(|e| undo(format!("cannot write {}: {e}", wiring_path.display())))?;
    let plan = git_gate::plan_parts(common, &baked, gate)
        .map_err(|e| undo(format!("{}: {e}", repo.config().display())))?;
    git_gate::install(&plan).map_err(|e| undo(format!("{}: {e}", repo.config().display())))?;
    let problems: Vec<String> = repo
        .worktrees
        .iter()
        .filter(|w| w.present)
        .filter_map(|w| not_run(&w.path))
        .collect();
    if !problems.is_empty() {
        return Err(undo(format!(
            "git would not run the broker's ssh command: {}",
            problems.join("; ")
        )));
    }
    Ok(if before.wiring.is_some() {
        Done::Refreshed
    } else {
        Done::Installed
    })
}

/// Why git in the worktree `dir` would not run the included file's `core.sshCommand` (a
/// later one wins: a worktree's own config, an include after the fence's).
fn not_run(dir: &Path) -> Option<String> {
    let entries = match git_gate::entries(dir) {
        Ok(entries) => entries,
        Err(e) => return Some(e.to_string()),
    };
    match entries.iter().rfind(|e| e.key == "core.sshcommand") {
        Some(e) if e.is_the_gates() => None,
        Some(e) => Some(format!(
            "in {}: core.sshCommand comes from {} ({:?})",
            dir.display(),
            e.origin,
            e.value.as_deref().unwrap_or("")
        )),
        None => Some(format!("in {}: no core.sshCommand", dir.display())),
    }
}

fn rollback(repo: &Repository) -> Result<Done, Failure> {
    let common = &repo.common_dir;
    let failed = |e: String| Failure::could_not(format!("{}: {e}", repo.config().display()));
    if Wiring::read(common)
        .map_err(|e| failed(e.to_string()))?
        .is_none()
    {
        return Ok(Done::NotInstalled);
    }
    let wiring_path = common.join(WIRING_FILE);
    if git_gate::gate_in(common) {
        // The gate stays: its included file is written again without the broker's part.
        let baked = git_gate::baked_in(common).ok_or_else(|| {
            failed(
                GateError::NotBaked {
                    include: common.join(git_gate::INCLUDE_FILE),
                }
                .to_string(),
            )
        })?;
        let before = Snapshot::take(common);
        fs::remove_file(&wiring_path).map_err(|e| failed(e.to_string()))?;
        let written = git_gate::plan(common, &baked).and_then(|plan| git_gate::install(&plan));
        if let Err(e) = written {
            let _ = before.restore(common);
            return Err(failed(e.to_string()));
        }
        return Ok(Done::RolledBack);
    }
    // The broker's alone: without its wiring the gate's rollback takes the lines and the
    // included file out; the wiring comes back if that fails.
    git_gate::rollback_refusal(common).map_err(|e| failed(e.to_string()))?;
    let before = Snapshot::take(common);
    fs::remove_file(&wiring_path).map_err(|e| failed(e.to_string()))?;
    if let Err(e) = git_gate::rollback(common) {
        let _ = before.restore(common);
        return Err(failed(e.to_string()));
    }
    Ok(Done::RolledBack)
}

fn say(line: &str) {
    row_fence_contract::report::say(&format!("row-fence: {line}"));
}
