//! `row-fence doctor`'s agent section: for each harness whose hook file holds a row-fence
//! entry, whether the entry is whole (every event the harness needs), whether the guard
//! it runs is there, and whether the harness's own settings let the hook run (Codex's
//! hooks feature flag, its hook trust and project trust, its version — before 0.169.0 it
//! does not tell the hook where a tool runs; Gemini CLI's hooks switch and disabled list;
//! Cursor's file version; for Claude Code, every settings file it reads,
//! [`crate::claude_policy`]). A harness with no row-fence entry is reported as not
//! installed, which is not a problem: the operator may not run it.

use crate::agent_hooks::{self, Format};
use row_fence_contract::harness::Harness;
use serde::Serialize;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What doctor found for one harness file.
#[derive(Debug, Serialize)]
pub struct AgentReport {
    /// The harness.
    pub agent: Harness,
    /// The file read.
    #[serde(serialize_with = "crate::shell::json_path::serialize")]
    pub file: PathBuf,
    /// `on` (every event has the entry and the harness runs it), `partial`, `disabled` (a
    /// switch of the harness's turns it off), `skipped` (the harness ignores the whole
    /// file), `off` (no entry, or no file).
    pub hook: &'static str,
    /// The guard binaries the entries run.
    #[serde(serialize_with = "crate::shell::json_path::list")]
    pub guards: Vec<PathBuf>,
    /// What keeps the hook from fencing (each a sentence).
    pub problems: Vec<String>,
    /// What the operator must check by hand (each a sentence).
    pub notes: Vec<String>,
}

/// Every harness's usual user-level files under `home`, and Codex's and Gemini CLI's
/// project files under `project` (a repository's top), each file that holds a row-fence
/// entry or exists reported.
pub fn examine(home: &Path, project: Option<&Path>) -> Vec<AgentReport> {
    let mut files: Vec<(Harness, PathBuf)> = Harness::ALL
        .iter()
        .map(|a| (*a, agent_hooks::default_file(*a, home)))
        .collect();
    files.push((
        Harness::Codex,
        home.join(Harness::Codex.settings_dir()).join("config.toml"),
    ));
    if let Some(project) = project {
        files.push((
            Harness::Claude,
            project
                .join(Harness::Claude.settings_dir())
                .join("settings.json"),
        ));
        files.push((
            Harness::Claude,
            project
                .join(Harness::Claude.settings_dir())
                .join("settings.local.json"),
        ));
        files.push((
            Harness::Codex,
            project
                .join(Harness::Codex.settings_dir())
                .join("hooks.json"),
        ));
        files.push((
            Harness::Codex,
            project
                .join(Harness::Codex.settings_dir())
                .join("config.toml"),
        ));
        files.push((
            Harness::Gemini,
            project
                .join(Harness::Gemini.settings_dir())
                .join("settings.json"),
        ));
        files.push((
            Harness::Cursor,
            project
                .join(Harness::Cursor.settings_dir())
                .join("hooks.json"),
        ));
    }
    files
        .into_iter()
        .filter(|(_, f)| f.exists())
        .map(|(agent, file)| check(agent, &file, home, project))
        .filter(|r| r.hook != "off" || !r.problems.is_empty())
        .collect()
}

fn check(agent: Harness, file: &Path, home: &Path, project: Option<&Path>) -> AgentReport {
    let format = agent_hooks::format(agent, file);
    let mut report = AgentReport {
        agent,
        file: file.to_path_buf(),
        hook: "off",
        guards: Vec::new(),
        problems: Vec::new(),
        notes: Vec::new(),
    };
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => {
            report
                .problems
                .push(format!("{} cannot be read: {e}", file.display()));
            return report;
        }
    };
    let found = match agent_hooks::find(agent, format, &text) {
        Ok(found) => found,
        Err(e) => {
            report.problems.push(format!(
                "{} does not parse ({e}): {} ignores it, hooks and all",
                file.display(),
                agent.title()
            ));
            return report;
        }
    };
    let narrowed = found
        .narrowed
        .iter()
        .map(|why| format!("{}: {why}", file.display()));
    if found.events.is_empty() {
        // Entries that run the guard only for some tools, or never: the hook is off,
        // which doctor says rather than leaving the file out as "not installed".
        report.guards = found.guards;
        report.problems.extend(narrowed);
        return report;
    }
    report.problems.extend(narrowed);
    if agent == Harness::Claude
        && let Ok(v) = serde_json::from_str::<Value>(&text)
    {
        let rejected = crate::claude_policy::schema_problems(&v);
        if !rejected.is_empty() {
            report.hook = "skipped";
            report.guards = found.guards;
            report.problems.push(format!(
                "Claude Code skips {} whole, hooks and all, because its settings schema rejects it: {}",
                file.display(),
                rejected.join("; ")
            ));
            return report;
        }
    }
    report.hook = if found.missing.is_empty() || format == Format::CodexToml {
        "on"
    } else {
        "partial"
    };
    if report.hook == "partial" {
        report.problems.push(format!(
            "{} runs the guard for {} but not for {}: those tools are not fenced (row-fence install agent-hook --agent {})",
            file.display(),
            found.events.join(", "),
            found.missing.join(", "),
            agent.name()
        ));
    }
    for guard in &found.guards {
        let runs = std::fs::metadata(guard)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if !runs {
            report.problems.push(format!(
                "the hook runs {}, which is not an executable file: every call falls to the shim, which lets an unbound session run UNFENCED",
                guard.display()
            ));
        }
    }
    report.guards = found.guards;
    let (problems, notes) = settings_checks(agent, file, home, project);
    if agent == Harness::Claude && !problems.is_empty() && report.hook == "on" {
        report.hook = "disabled";
    }
    report.problems.extend(problems);
    report.notes.extend(notes);
    report
}

/// The harness's own switches for its hooks: (problems, notes). Also printed by
/// `install agent-hook` right after it writes the entry.
fn settings_checks(
    agent: Harness,
    file: &Path,
    home: &Path,
    project: Option<&Path>,
) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    match agent {
        Harness::Claude => {
            use crate::claude_policy::{self, Source};
            let managed = claude_policy::managed_dir();
            let source = if file.starts_with(&managed)
                || file
                    == home
                        .join(Harness::Claude.settings_dir())
                        .join("remote-settings.json")
            {
                Source::Managed
            } else if project
                .is_some_and(|p| file.starts_with(p.join(Harness::Claude.settings_dir())))
            {
                Source::Project
            } else {
                Source::User
            };
            let files = claude_policy::files(home, project, &managed);
            let (off, maybe) = claude_policy::switched_off(file, source, &files);
            problems.extend(off);
            notes.extend(maybe);
        }
        Harness::Codex => {
            let config = home.join(Harness::Codex.settings_dir()).join("config.toml");
            if let Some(table) = toml_file(&config) {
                let features = table.get("features");
                for key in ["hooks", "codex_hooks"] {
                    if features
                        .and_then(|f| f.get(key))
                        .and_then(toml::Value::as_bool)
                        == Some(false)
                    {
                        problems.push(format!(
                            "{} sets [features] {key} = false: Codex runs no hook",
                            config.display()
                        ));
                    }
                }
                if let Some(project) = project
                    && file.starts_with(project.join(Harness::Codex.settings_dir()))
                {
                    let trusted = table
                        .get("projects")
                        .and_then(|p| p.get(project.to_string_lossy().as_ref()))
                        .and_then(|p| p.get("trust_level"))
                        .and_then(toml::Value::as_str)
                        == Some("trusted");
                    if !trusted {
                        problems.push(format!(
                            "{} is a project hook file and {} is not a trusted project in {}: Codex loads no project hook (trust the project, or install into ~/.codex/hooks.json)",
                            file.display(),
                            project.display(),
                            config.display()
                        ));
                    }
                }
            }
            notes.push(format!(
                "Codex runs a hook it does not manage only after you review and trust it (/hooks in Codex); trust follows the hook's definition, so trust it again after each install into {}",
                file.display()
            ));
            match crate::codex_version::check(std::env::var_os("PATH").as_deref()) {
                crate::codex_version::Finding::Sends => {}
                crate::codex_version::Finding::TooOld(why) => problems.push(why),
                crate::codex_version::Finding::Unknown(why) => notes.push(why),
            }
        }
        Harness::Gemini => {
            if let Some(v) = json_file(file) {
                for (at, value) in [
                    ("hooks.enabled", &v["hooks"]["enabled"]),
                    ("hooksConfig.enabled", &v["hooksConfig"]["enabled"]),
                    ("tools.enableHooks", &v["tools"]["enableHooks"]),
                ] {
                    if *value == false {
                        problems.push(format!(
                            "{} sets {at} false: Gemini CLI runs no hook",
                            file.display()
                        ));
                    }
                }
                for at in ["hooks", "hooksConfig"] {
                    let disabled = v[at]["disabled"].as_array().is_some_and(|d| {
                        d.iter().any(|n| {
                            n.as_str().is_some_and(|n| {
                                n == "row-fence-guard" || n.contains("row-fence-guard")
                            })
                        })
                    });
                    if disabled {
                        problems.push(format!(
                            "{} lists the row-fence hook in {at}.disabled: Gemini CLI skips it",
                            file.display()
                        ));
                    }
                }
                if v["hooks"]["enabled"] != true && v["hooksConfig"]["enabled"] != true {
                    notes.push(format!(
                        "Gemini CLI releases whose hooks are off by default run none until hooks are switched on (hooksConfig.enabled, or hooks.enabled in older releases, in {})",
                        file.display()
                    ));
                }
            }
        }
        Harness::Cursor => {
            if let Some(v) = json_file(file)
                && v["version"] != 1
            {
                problems.push(format!(
                    "{} has no \"version\": 1: Cursor does not load it",
                    file.display()
                ));
            }
            notes.push(
                "Cursor has no hook before a file edit: its edits in a row-bound worktree are fenced only at push (git's layer)"
                    .to_string(),
            );
        }
    }
    (problems, notes)
}

/// What `install agent-hook` warns right after writing `file`: the harness's switches
/// that keep the hook from running, and what must be done by hand.
pub fn install_notes(agent: Harness, file: &Path) -> Vec<String> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_default();
    let project = file
        .parent()
        .and_then(Path::parent)
        .filter(|p| *p != home.as_path());
    let (mut problems, notes) = settings_checks(agent, file, &home, project);
    problems.extend(notes);
    problems
}

fn json_file(file: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(file).ok()?).ok()
}

fn toml_file(file: &Path) -> Option<toml::Table> {
    std::fs::read_to_string(file).ok()?.parse().ok()
}
