//! `row-fence install launchd|systemd|claude-hook|git-hook`.
//!
//! `launchd` and `systemd` write the job file and **print** the one command that loads the
//! job and then switches the agent hook on, and the one that switches the hook off and
//! then unloads the job ([`crate::job_commands`]); loading is the operator's act, never
//! this program's (the source document's "one human step"). The order is the fail-closed
//! order: a hook switched on before the daemon answers refuses every row-bound write
//! COULD NOT READ, and so does a daemon unloaded before the hook is switched off.
//!
//! `agent-hook --agent claude|codex|gemini|cursor` writes the `guard-bash.sh` shim under
//! the home and adds (or removes) the entries running `row-fence-guard` (the shim only
//! when the guard cannot answer) in that harness's own hook file and format
//! (`crate::agent_hooks`); `claude-hook` is `agent-hook --agent claude`. `git-hook` fences
//! git itself (`crate::git_install`).

use crate::agent_hooks;
use crate::claude_settings::{self, Edit};
use crate::created_files::Created;
use crate::daemon_answers::Daemon;
use crate::deploy::{self, Job};
use crate::job_commands::{self, HookAgent, HookSwitch, UnitState};
use crate::render::{JobArgs, bin_dir};
use crate::shell::{NotUtf8, sh_quote_path};
use clap::Subcommand;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::harness::Harness;
use row_fence_contract::report::out;
use row_fence_contract::{exit, say};
use row_fence_resident::config::Settings;
use row_fence_store::atomic_file::write_private;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct InstallArgs {
    #[command(subcommand)]
    what: What,
    /// Print what was done as one JSON object on stdout (the sentences stay on stderr)
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum What {
    /// Write the launchd user agent; print the load and rollback commands (runs neither)
    Launchd(JobInstallArgs),
    /// Write the systemd user unit; print the load and rollback commands (runs neither)
    Systemd(JobInstallArgs),
    /// Add the agent hook (row-fence-guard and its guard-bash.sh shim) to a Claude Code settings file, or remove it
    ClaudeHook(ClaudeHookArgs),
    /// Add the agent hook to an agent harness's own hook file (Claude Code, Codex, Gemini CLI, Cursor), every tool it lets a hook see, or remove it
    AgentHook(AgentHookArgs),
    /// Fence git itself in a repository: the pre-push hook in every worktree and git's transport gate (ssh command, credential helper), or remove them
    GitHook(crate::git_install::GitHookArgs),
    /// Make git in a repository sign through the daemon's key broker: the transport gate's ssh command runs OpenSSH with the broker's agent socket and push key only, no multiplexing; or take it out
    Broker(crate::broker::BrokerArgs),
    /// Make a lane's gh send every API request to the daemon's forge API socket (config.yml's http_unix_socket, a placeholder token in hosts.yml), or take it out byte for byte
    Gh(crate::gh_install::GhArgs),
    /// Write a forge's pre-receive hook: at ref-update time it asks the fence whether the pushing lane holds a row whose scope covers every ref, now (docs/forge.md); or remove it, byte for byte
    ForgeHook(crate::forge_hook::ForgeHookArgs),
}

#[derive(clap::Args, Debug)]
struct JobInstallArgs {
    #[command(flatten)]
    spec: JobArgs,
    /// Write the job here [default: ~/Library/LaunchAgents/<label>.plist, ~/.config/systemd/user/<label>.service]
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
    /// The agent hook the printed commands switch on after the job and off before it, per harness you run (repeatable; none: the job alone)
    #[arg(long, value_name = "AGENT", value_parser = hook_agent_values(), default_value = Harness::DEFAULT.name())]
    agent: Vec<HookAgent>,
    /// The hook file the printed commands switch the hook in, with one --agent [default: the harness's usual user file, ~/.claude/settings.json for Claude Code]
    #[arg(long, value_name = "PATH")]
    settings: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct ClaudeHookArgs {
    /// The Claude Code settings file [default: ~/.claude/settings.json]
    #[arg(long, value_name = "PATH")]
    settings: Option<PathBuf>,
    /// The directory holding the row-fence-guard the hook runs [default: this program's directory]
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Remove the entry instead (the hook script stays: another settings file may run it)
    #[arg(long)]
    rollback: bool,
}

#[derive(clap::Args, Debug)]
struct AgentHookArgs {
    /// The harness
    #[arg(long, value_parser = harness_values())]
    agent: Harness,
    /// The harness's hook file [default: ~/.claude/settings.json, ~/.codex/hooks.json (a *.toml is Codex's config.toml), ~/.gemini/settings.json, ~/.cursor/hooks.json]
    #[arg(long, value_name = "PATH")]
    settings: Option<PathBuf>,
    /// The directory holding the row-fence-guard the hook runs [default: this program's directory]
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Remove the entries instead (the hook script stays: another file may run it)
    #[arg(long)]
    rollback: bool,
}

/// `--agent`'s values: every harness by its one name (the contract's parser; clap only
/// lists them for help and errors).
fn harness_values() -> impl TypedValueParser<Value = Harness> {
    PossibleValuesParser::new(harness_names()).try_map(|name| name.parse::<Harness>())
}

/// `install launchd|systemd --agent`'s values: a harness, or `none`.
fn hook_agent_values() -> impl TypedValueParser<Value = HookAgent> {
    let none = PossibleValue::new(HookAgent::NONE).help("No agent hook: the job alone");
    PossibleValuesParser::new(harness_names().chain([none]))
        .try_map(|name| name.parse::<HookAgent>())
}

fn harness_names() -> impl Iterator<Item = PossibleValue> {
    Harness::ALL
        .into_iter()
        .map(|h| PossibleValue::new(h.name()).help(h.title()))
}

pub fn run(args: InstallArgs, settings: &Settings) -> Outcome {
    match args.what {
        What::Launchd(a) => job(Job::Launchd, a, settings, args.json),
        What::Systemd(a) => job(Job::Systemd, a, settings, args.json),
        What::ClaudeHook(a) => agent_hook(
            AgentHookArgs {
                agent: Harness::Claude,
                settings: a.settings,
                bin_dir: a.bin_dir,
                rollback: a.rollback,
            },
            settings,
            args.json,
        ),
        What::AgentHook(a) => agent_hook(a, settings, args.json),
        What::GitHook(a) => crate::git_install::run(a, settings, args.json),
        What::Broker(a) => crate::broker::run(a, settings, args.json),
        What::Gh(a) => crate::gh_install::run(a, settings, args.json),
        What::ForgeHook(a) => crate::forge_hook::run(a, settings, args.json),
    }
}

fn job(job: Job, args: JobInstallArgs, settings: &Settings, json: bool) -> Outcome {
    let spec = args.spec.spec(settings)?;
    for name in ["row-fence-resident", "row-fence-ask", GUARD] {
        let path = spec.bin_dir.join(name);
        if !is_executable(&path) {
            return Err(Failure::could_not(format!(
                "{} is not an executable file; install the binaries first (or give --bin-dir)",
                path.display()
            )));
        }
    }
    // Everything that can refuse runs before the file is written.
    let hook = HookSwitch::new(&spec, settings, &args.agent, args.settings.as_deref())?;
    warn_if_foreign(job);
    let text = deploy::render(job, &spec).map_err(Failure::could_not)?;
    let path = match args.out {
        Some(path) => std::path::absolute(&path)
            .map_err(|e| Failure::could_not(format!("{}: {e}", path.display())))?,
        None => deploy::default_job_dir(job)
            .map_err(Failure::could_not)?
            .join(deploy::file_name(job, &spec.label)),
    };
    // The printed commands name the job's file as text.
    crate::shell::text(&path).map_err(|e| Failure::usage(e.to_string()))?;
    let unit_name = deploy::file_name(job, &spec.label);
    if job == Job::Systemd && path.file_name() != Some(std::ffi::OsStr::new(&unit_name)) {
        // systemctl knows a unit by its file name; another name would not be this label.
        return Err(Failure::usage(format!(
            "a systemd unit's name is its file name: --out must end in /{unit_name} (or give --label)"
        )));
    }
    let lines = job_commands::lines(job, &spec, settings, &path, &hook)?;
    // launchd opens the log files but does not make their directory; the daemon wants
    // its home private, so both are made 0700 now. A systemd unit logs to the journal:
    // no log directory that would stay empty.
    if job == Job::Launchd {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(spec.log_dir())
            .map_err(|e| {
                Failure::could_not(format!("cannot create {}: {e}", spec.log_dir().display()))
            })?;
    }
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| Failure::could_not(format!("cannot create {}: {e}", parent.display())))?;
    }
    // 0600: the store URL may carry a password.
    write_private(&path, text.as_bytes())
        .map_err(|e| Failure::could_not(format!("cannot write {}: {e}", path.display())))?;
    say!(
        "row-fence: wrote {}; nothing is loaded yet. Run the load command yourself: it loads the job first, then switches the agent hook on. The rollback switches the hook off first, then unloads the job (README, \"Uninstall\": git's layer, other hooks and the binaries).",
        path.display()
    );
    match (&lines.state, job) {
        (UnitState::Unknown(why), Job::Systemd) => say!(
            "row-fence: warning: no user service manager answered ({why}), so the load line cannot run in this shell. Where there is none (a container, WSL without systemd), run the by-hand line instead: it starts the daemon without one (row-fence-resident --detach: it returns once the daemon answers, and on an upgrade the daemon runs its new binary in place) and then switches the hook on; the rollback line stops it and removes the unit file without systemctl. Where the user has a manager but this shell cannot reach it (a login over su or ssh), run the load line in the user's own session (machinectl shell USER@), or after loginctl enable-linger USER with XDG_RUNTIME_DIR=/run/user/$(id -u USER)"
        ),
        (UnitState::Unknown(why), Job::Launchd) => say!(
            "row-fence: warning: the job's state is unknown: launchd could not be asked ({why}). If the label is loaded already, run `launchctl bootout` for it before the load line"
        ),
        _ => {}
    }
    if json {
        out(&serde_json::json!({
            "job": clap::ValueEnum::to_possible_value(&job).map(|v| v.get_name().to_string()),
            "path": path.display().to_string(),
            "load": lines.load,
            "by_hand": lines.by_hand,
            "rollback": lines.rollback,
            "job_state": lines.state.word(),
        })
        .to_string());
    } else {
        out(&format!("load:     {}", lines.load));
        if let Some(by_hand) = &lines.by_hand {
            out(&format!("by hand:  {by_hand}"));
        }
        out(&format!("rollback: {}", lines.rollback));
    }
    Ok(exit::ALLOWED)
}

/// Says so when the job is for another OS's service manager (the file is still written:
/// it may be meant for another machine).
fn warn_if_foreign(job: Job) {
    let (ours, theirs) = match job {
        Job::Launchd if !cfg!(target_os = "macos") => ("launchd", "systemd"),
        Job::Systemd if cfg!(target_os = "macos") => ("systemd", "launchd"),
        _ => return,
    };
    say!(
        "row-fence: warning: {ours} is not this machine's service manager ({}); the printed commands will not run here (row-fence install {theirs} is the job for this machine)",
        std::env::consts::OS
    );
}

fn agent_hook(args: AgentHookArgs, settings: &Settings, json: bool) -> Outcome {
    let agent = args.agent;
    let file = match args.settings {
        Some(path) => path,
        None => agent_hooks::default_file(agent, &user_home()?),
    };
    // Edit the file a symlink points at, not the symlink (settings kept in a dotfiles repo);
    // a file not there yet by its absolute path, as the record of created files keeps it.
    let file = match fs::canonicalize(&file) {
        Ok(real) => real,
        Err(_) => std::path::absolute(&file)
            .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?,
    };
    let format = agent_hooks::format(agent, &file);
    let hook_path = settings.home.join("hooks").join("guard-bash.sh");
    let bins = bin_dir(args.bin_dir.as_ref())?;
    let command = hook_command(
        &bins,
        settings,
        &hook_path,
        agent_hooks::harness_flag(agent),
    )
    .map_err(|e| Failure::usage(e.to_string()))?;
    let before = match fs::read_to_string(&file) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(Failure::could_not(format!(
                "cannot read {}: {e}",
                file.display()
            )));
        }
    };
    let created = Created::under(&settings.home);
    let recorded = |e: std::io::Error| {
        Failure::could_not(format!("the record of settings files install created: {e}"))
    };
    let edit = if args.rollback {
        match agent_hooks::rollback(agent, &file, before.as_deref(), &command) {
            Ok(Edit::Unchanged) if agent == Harness::Claude => claude_settings::rollback(
                before.as_deref(),
                &legacy_hook_command(&bins, settings, &hook_path)
                    .map_err(|e| Failure::usage(e.to_string()))?,
            )
            .map_err(agent_hooks::HookFileError::from),
            other => other,
        }
    } else {
        if !is_executable(&bins.join(GUARD)) {
            return Err(Failure::could_not(format!(
                "{} is not an executable file; install the binaries first (or give --bin-dir)",
                bins.join(GUARD).display()
            )));
        }
        write_hook_script(&hook_path)?;
        let rollback = rollback_line(agent, &file, &bins, settings)?;
        agent_hooks::install(agent, &file, before.as_deref(), &command, &rollback)
    }
    .map_err(|e| Failure::could_not(format!("{}: {e}", file.display())))?;
    let edit_changed = matches!(edit, Edit::Changed(_));
    let done = match (&edit, args.rollback) {
        (Edit::Unchanged, false) => "the agent hook was already on",
        (Edit::Unchanged, true) => "the agent hook was not on",
        (Edit::Changed(_), false) => "the agent hook is on",
        (Edit::Changed(_), true) => "the agent hook is off",
    };
    match edit {
        // Rollback removes the file only when install created it and nothing else was
        // added since: recorded at install, never inferred from the content.
        Edit::Changed(text)
            if args.rollback
                && text == agent_hooks::empty(agent, format)
                && created.contains(&file).map_err(recorded)? =>
        {
            fs::remove_file(&file).map_err(|e| {
                Failure::could_not(format!("cannot remove {}: {e}", file.display()))
            })?;
            created.forget(&file).map_err(recorded)?;
        }
        Edit::Changed(text) => {
            if !args.rollback && before.is_none() {
                created.add(&file).map_err(recorded)?;
            }
            write_settings(&file, &text)?;
            if args.rollback {
                created.forget(&file).map_err(recorded)?;
            }
        }
        Edit::Unchanged => {}
    }
    say!("row-fence: {done} in {} ({command})", file.display());
    if !args.rollback {
        for note in crate::agent_doctor::install_notes(agent, &file) {
            say!("row-fence: warning: {note}");
        }
    }
    let daemon = (!args.rollback).then(|| Daemon::ask(settings));
    if let Some(daemon) = &daemon {
        daemon.warn(settings, "the agent's fenced commands");
    }
    if json {
        out(&serde_json::json!({
            "agent": agent,
            "settings": file.display().to_string(),
            "hook": if args.rollback { "off" } else { "on" },
            "changed": edit_changed,
            "command": command,
            "daemon": daemon.as_ref().map(Daemon::word),
        })
        .to_string());
    }
    Ok(exit::ALLOWED)
}

/// The hook's command line as Claude Code runs it (through `sh -c`): the binaries'
/// directory and the daemon's home (and socket) are exported first, so the guard asks the
/// same daemon from the same binaries whatever environment Claude Code was started with.
/// The normal path runs `row-fence-guard` alone (its exit 0 or 2 is the answer); only
/// another exit (missing, not executable, killed) runs `guard-bash.sh`, which keeps NEVER
/// RAN and CUT OFF MID-ASK, and a shim that cannot run either denies. `harness` is the
/// guard's `--harness` for a harness other than Claude Code. A path that is not UTF-8
/// cannot go into the harness's JSON or TOML file: refused, naming it.
pub fn hook_command(
    bin_dir: &Path,
    settings: &Settings,
    hook: &Path,
    harness: Option<&str>,
) -> Result<String, NotUtf8> {
    let exports = exports(bin_dir, settings)?;
    let harness = harness.map_or(String::new(), |h| format!(" --harness {h}"));
    Ok(format!(
        "export {}; {}{harness}; s=$?; case $s in 0|2) exit $s;; esac; sh {} --guard-exit $s --guard-parent $$ || exit 2",
        exports.join(" "),
        sh_quote_path(&bin_dir.join(GUARD))?,
        sh_quote_path(hook)?
    ))
}

/// `ROW_FENCE_BIN_DIR=…`, `ROW_FENCE_HOME=…` and, when it is not the home's own,
/// `ROW_FENCE_SOCKET=…`, each quoted.
fn exports(bin_dir: &Path, settings: &Settings) -> Result<Vec<String>, NotUtf8> {
    let mut exports = vec![
        format!("ROW_FENCE_BIN_DIR={}", sh_quote_path(bin_dir)?),
        format!("ROW_FENCE_HOME={}", sh_quote_path(&settings.home)?),
    ];
    if settings.socket != settings.home.join("sock") {
        exports.push(format!(
            "ROW_FENCE_SOCKET={}",
            sh_quote_path(&settings.socket)?
        ));
    }
    Ok(exports)
}

/// The command an earlier release installed (the shell hook alone), so rollback still
/// finds an entry that release wrote.
fn legacy_hook_command(
    bin_dir: &Path,
    settings: &Settings,
    hook: &Path,
) -> Result<String, NotUtf8> {
    let mut words = exports(bin_dir, settings)?;
    words.push(sh_quote_path(hook)?);
    Ok(words.join(" "))
}

/// The command that takes this hook out again, as the operator runs it: this program,
/// the same home (and socket), harness, file and binaries the entry was written with.
fn rollback_line(
    agent: Harness,
    file: &Path,
    bins: &Path,
    settings: &Settings,
) -> Result<String, Failure> {
    let quote = |p: &Path| sh_quote_path(p).map_err(|e| Failure::usage(e.to_string()));
    let program = std::env::current_exe()
        .map_err(|e| Failure::could_not(format!("cannot find this program: {e}")))?;
    let mut words = vec![quote(&program)?, "--home".into(), quote(&settings.home)?];
    if settings.socket != settings.home.join("sock") {
        words.extend(["--socket".into(), quote(&settings.socket)?]);
    }
    words.extend([
        "install".into(),
        "agent-hook".into(),
        "--agent".into(),
        agent.name().into(),
        "--settings".into(),
        quote(file)?,
        "--bin-dir".into(),
        quote(bins)?,
        "--rollback".into(),
    ]);
    Ok(words.join(" "))
}

/// The agent guard's binary name.
const GUARD: &str = "row-fence-guard";

/// The user's `$HOME`, under which each harness keeps its usual hook file.
fn user_home() -> Result<PathBuf, Failure> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| Failure::could_not("HOME is not set; give --settings"))
}

/// Writes the shipped `guard-bash.sh` (0755) under the home, made private (0700) if new.
fn write_hook_script(path: &Path) -> Result<(), Failure> {
    let fail =
        |e: std::io::Error| Failure::could_not(format!("cannot write {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(fail)?;
    }
    replace_file(path, claude_settings::GUARD_BASH.as_bytes(), 0o755).map_err(fail)
}

/// Writes the settings atomically, keeping the file's mode (0600 for a new file).
fn write_settings(path: &Path, text: &str) -> Result<(), Failure> {
    let mode = fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o7777);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)
            .map_err(|e| Failure::could_not(format!("cannot create {}: {e}", dir.display())))?;
    }
    replace_file(path, text.as_bytes(), mode)
        .map_err(|e| Failure::could_not(format!("cannot write {}: {e}", path.display())))
}

/// Temp file in the same directory, fsync, exact mode, rename over `path`.
fn replace_file(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    row_fence_store::atomic_file::write(path, bytes, mode, false)
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
