//! The commands `install launchd|systemd` prints and leaves to the operator, in the
//! fail-closed order (ARCHITECTURE.md, "Installers"): `load` starts the job, then switches
//! the agent hook on; `rollback` switches the hook off, then stops the job and removes its
//! file. Which hook is switched is the operator's (`--agent`, repeatable; `none` for
//! git's layer alone), never Claude Code's by default for a user of another harness.
//!
//! Where no user service manager answers (a container, WSL without systemd, a login over
//! `su` with no user manager), the unit cannot be loaded from this shell: the `by hand`
//! line starts the daemon without one (`row-fence-resident --detach`, which returns once
//! it answers, and which runs its new binary in place on an upgrade), and the rollback
//! completes without `systemctl`: the unit file is removed and a daemon started by hand
//! is stopped (`row-fence stop`).

use crate::deploy::{self, Job, JobSpec};
use crate::shell::{sh_quote, sh_quote_path};
use row_fence_contract::exit::Failure;
use row_fence_contract::harness::Harness;
use row_fence_contract::paths;
use row_fence_resident::config::Settings;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A hook `install launchd|systemd`'s load line switches on (`--agent`): a harness's
/// (by [`Harness`]'s name), or `none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookAgent {
    /// That harness's agent hook (`install claude-hook` for Claude Code).
    Harness(Harness),
    /// No agent hook: the job alone (git's layer is installed per repository).
    None,
}

impl HookAgent {
    /// `none`'s spelling on the command line.
    pub const NONE: &str = "none";

    fn agent(self) -> Option<Harness> {
        match self {
            HookAgent::Harness(h) => Some(h),
            HookAgent::None => None,
        }
    }
}

impl std::str::FromStr for HookAgent {
    type Err = row_fence_contract::harness::UnknownHarness;

    fn from_str(name: &str) -> Result<HookAgent, Self::Err> {
        if name == HookAgent::NONE {
            return Ok(HookAgent::None);
        }
        name.parse().map(HookAgent::Harness)
    }
}

impl std::fmt::Display for HookAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookAgent::Harness(h) => h.fmt(f),
            HookAgent::None => f.write_str(HookAgent::NONE),
        }
    }
}

/// The commands that switch the chosen agent hooks on and off, carrying the same home,
/// socket and binaries as the job; `None` when no hook is switched.
pub struct HookSwitch {
    on: Option<String>,
    off: Option<String>,
}

impl HookSwitch {
    /// The switch for `agents` (`none` alone, or nothing else). `file` (`--settings`)
    /// names the hook file and takes exactly one agent.
    pub fn new(
        spec: &JobSpec,
        settings: &Settings,
        agents: &[HookAgent],
        file: Option<&Path>,
    ) -> Result<HookSwitch, Failure> {
        if agents.contains(&HookAgent::None) && agents.len() > 1 {
            return Err(Failure::usage(
                "--agent none switches no hook; it takes no other --agent",
            ));
        }
        let agents: Vec<Harness> = agents.iter().filter_map(|a| a.agent()).collect();
        if file.is_some() && agents.len() != 1 {
            return Err(Failure::usage(
                "--settings names one harness's hook file: give exactly one --agent with it",
            ));
        }
        let program = std::env::current_exe()
            .map_err(|e| Failure::could_not(format!("cannot find this program: {e}")))?;
        let quote = |p: &Path| sh_quote_path(p).map_err(|e| Failure::usage(e.to_string()));
        let mut base = vec![quote(&program)?];
        base.extend(["--home".to_string(), quote(&spec.home)?]);
        if settings.socket != settings.home.join("sock") {
            base.extend(["--socket".to_string(), quote(&settings.socket)?]);
        }
        let file = file
            .map(|f| {
                std::path::absolute(f)
                    .map_err(|e| Failure::could_not(format!("{}: {e}", f.display())))
            })
            .transpose()?;
        let mut on = Vec::new();
        let mut off = Vec::new();
        for agent in agents {
            let mut words = base.clone();
            // Claude Code keeps the spelling it always had: rollback finds that entry.
            match agent {
                Harness::Claude => words.extend(["install".into(), "claude-hook".into()]),
                other => words.extend([
                    "install".into(),
                    "agent-hook".into(),
                    "--agent".into(),
                    other.name().into(),
                ]),
            }
            if let Some(file) = &file {
                words.extend(["--settings".to_string(), quote(file)?]);
            }
            // Rollback finds the entry by its exact command, so it names the same binaries.
            words.extend(["--bin-dir".to_string(), quote(&spec.bin_dir)?]);
            on.push(words.join(" "));
            words.push("--rollback".to_string());
            off.push(words.join(" "));
        }
        off.reverse();
        Ok(HookSwitch {
            on: (!on.is_empty()).then(|| on.join(" && ")),
            off: (!off.is_empty()).then(|| off.join(" && ")),
        })
    }

    /// `first && <on>`, or `first` alone.
    fn after(&self, first: String) -> String {
        match &self.on {
            Some(on) => format!("{first} && {on}"),
            None => first,
        }
    }

    /// `<off> && rest`, or `rest` alone.
    fn before(&self, rest: String) -> String {
        match &self.off {
            Some(off) => format!("{off} && {rest}"),
            None => rest,
        }
    }
}

/// What `install launchd|systemd` prints.
pub struct Lines {
    /// Starts the job, then switches the hook on.
    pub load: String,
    /// Switches the hook off, then stops the job and removes its file.
    pub rollback: String,
    /// With no user service manager: starts the daemon without one, then the hook.
    pub by_hand: Option<String>,
    /// What the manager said of the job before the install.
    pub state: UnitState,
}

/// The lines for `job` written at `path`.
pub fn lines(
    job: Job,
    spec: &JobSpec,
    settings: &Settings,
    path: &Path,
    hook: &HookSwitch,
) -> Result<Lines, Failure> {
    Ok(match job {
        Job::Launchd => launchd_commands(&spec.label, path, hook),
        Job::Systemd => systemd_commands(spec, settings, path, hook)?,
    })
}

/// Load: `bootstrap` (after a `bootout` when the label is loaded already: bootstrap
/// refuses a loaded label), then the hook. Rollback: the hook, then `bootout`, then the
/// plist's removal.
fn launchd_commands(label: &str, plist: &Path, hook: &HookSwitch) -> Lines {
    let domain = format!("gui/{}", paths::euid());
    let target = format!("{domain}/{label}");
    let plist = sh_quote(&plist.display().to_string());
    let state = launchd_state(&target);
    let mut load = String::new();
    if state == UnitState::Running {
        load.push_str(&format!("launchctl bootout {target} && "));
    }
    load.push_str(&format!("launchctl bootstrap {domain} {plist}"));
    Lines {
        load: hook.after(load),
        rollback: hook.before(format!("launchctl bootout {target} && rm {plist}")),
        by_hand: None,
        state,
    }
}

/// Asks launchd whether `target` is loaded: `launchctl print` exits 0 for a loaded label
/// and non-zero (113) for one it does not know. No launchctl to run (Linux, where the job
/// is written for another machine) is unknown, never "not running".
fn launchd_state(target: &str) -> UnitState {
    match Command::new("launchctl")
        .args(["print", target])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(status) if status.success() => UnitState::Running,
        Ok(_) => UnitState::NotRunning,
        Err(e) => UnitState::Unknown(format!("launchctl: {e}")),
    }
}

/// Load: `daemon-reload`, `enable --now` (and a `restart` when the unit is running
/// already, so it picks up the new file), then the hook; a unit written outside the user
/// unit directory is first `link`ed into it, or systemd would not find it. Rollback: the
/// hook, then `disable --now` (which also undoes a `link`), the unit's removal and a
/// `daemon-reload`. When no user manager answers, the state is unknown: the restart
/// stays in the load line (restarting a unit `enable --now` just started costs one
/// restart; leaving it out would leave a running unit on the old file), the `by hand`
/// line is printed, and the rollback goes on past a `systemctl` that cannot run.
fn systemd_commands(
    spec: &JobSpec,
    settings: &Settings,
    unit_path: &Path,
    hook: &HookSwitch,
) -> Result<Lines, Failure> {
    let label = &spec.label;
    let unit = sh_quote(&format!("{label}.service"));
    let file = sh_quote(&unit_path.display().to_string());
    let in_unit_path = deploy::default_job_dir(Job::Systemd)
        .is_ok_and(|dir| unit_path.parent() == Some(dir.as_path()));
    let mut load = String::new();
    if !in_unit_path {
        load.push_str(&format!("systemctl --user link {file} && "));
    }
    load.push_str(&format!(
        "systemctl --user daemon-reload && systemctl --user enable --now {unit}"
    ));
    let state = systemd_state(&format!("{label}.service"));
    if state != UnitState::NotRunning {
        load.push_str(&format!(" && systemctl --user restart {unit}"));
    }
    let (rollback, by_hand) = match &state {
        UnitState::Unknown(_) => {
            let stop = stop_command(spec, settings)?;
            (
                format!(
                    "{{ systemctl --user disable --now {unit} || echo 'row-fence: no user service manager answered: nothing of the unit is loaded from here' >&2; }} && rm -f {file} && {{ systemctl --user daemon-reload 2>/dev/null || true; }} && {stop}"
                ),
                Some(hook.after(detach_command(spec, settings)?)),
            )
        }
        _ => (
            format!(
                "systemctl --user disable --now {unit} && rm {file} && systemctl --user daemon-reload"
            ),
            None,
        ),
    };
    Ok(Lines {
        load: hook.after(load),
        rollback: hook.before(rollback),
        by_hand,
        state,
    })
}

/// `row-fence-resident --detach` as the unit would run the daemon: its environment
/// (store, socket, key prefix, `--env` settings) and home.
fn detach_command(spec: &JobSpec, settings: &Settings) -> Result<String, Failure> {
    let quote = |p: &Path| sh_quote_path(p).map_err(|e| Failure::usage(e.to_string()));
    let mut words = Vec::new();
    let mut env: Vec<(String, String)> = Vec::new();
    if spec.store != "file" {
        env.push(("ROW_FENCE_STORE".into(), spec.store.clone()));
    }
    env.extend(spec.env.iter().cloned());
    if !env.is_empty() {
        words.push("env".to_string());
        words.extend(env.iter().map(|(k, v)| sh_quote(&format!("{k}={v}"))));
    }
    words.push(quote(&spec.resident())?);
    words.extend(["--home".to_string(), quote(&spec.home)?]);
    if settings.socket != settings.home.join("sock") {
        words.extend(["--socket".to_string(), quote(&settings.socket)?]);
    }
    words.push("--detach".to_string());
    Ok(words.join(" "))
}

/// `row-fence stop` for the job's home: stops a daemon started by hand.
fn stop_command(spec: &JobSpec, settings: &Settings) -> Result<String, Failure> {
    let quote = |p: &Path| sh_quote_path(p).map_err(|e| Failure::usage(e.to_string()));
    let program: PathBuf = spec.bin_dir.join("row-fence");
    let mut words = vec![quote(&program)?, "--home".to_string(), quote(&spec.home)?];
    if settings.socket != settings.home.join("sock") {
        words.extend(["--socket".to_string(), quote(&settings.socket)?]);
    }
    words.push("stop".to_string());
    Ok(words.join(" "))
}

/// What the service manager said of the job before the install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitState {
    /// Loaded (launchd) or active (systemd).
    Running,
    /// Not loaded, or inactive, failed, unknown to the manager.
    NotRunning,
    /// The manager could not be asked (why).
    Unknown(String),
}

impl UnitState {
    /// The word `--json` reports as `job_state`.
    pub fn word(&self) -> &'static str {
        match self {
            UnitState::Running => "running",
            UnitState::NotRunning => "not_running",
            UnitState::Unknown(_) => "unknown",
        }
    }
}

/// Asks the user manager whether `unit` is active. `systemctl is-active` prints the state
/// on stdout (`active`, `inactive`, `failed`, …) and exits 0 when active, 3 when not (the
/// LSB status codes) whenever the manager answered; anything else (exit 1 with "Failed to
/// connect to bus", no systemctl) is unknown, never "not running".
fn systemd_state(unit: &str) -> UnitState {
    let output = Command::new("systemctl")
        .args(["--user", "is-active", unit])
        .stdin(Stdio::null())
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) => return UnitState::Unknown(format!("systemctl: {e}")),
    };
    let said = String::from_utf8_lossy(&output.stdout).trim().to_string();
    match said.as_str() {
        "active" | "reloading" | "activating" | "deactivating" | "refreshing" => UnitState::Running,
        "inactive" | "failed" | "unknown" | "maintenance" => UnitState::NotRunning,
        _ if output.status.code() == Some(0) => UnitState::Running,
        _ if output.status.code() == Some(3) => UnitState::NotRunning,
        _ => {
            let err = String::from_utf8_lossy(&output.stderr).trim().to_string();
            UnitState::Unknown(if err.is_empty() {
                format!("systemctl --user is-active said {said:?}")
            } else {
                err
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_agent_is_a_harness_by_its_one_name_or_none() {
        for h in Harness::ALL {
            assert_eq!(h.name().parse(), Ok(HookAgent::Harness(h)));
            assert_eq!(HookAgent::Harness(h).to_string(), h.name());
        }
        assert_eq!("none".parse(), Ok(HookAgent::None));
        assert!("Claude".parse::<HookAgent>().is_err());
    }
}
