//! Whether Claude Code runs a hook written in one of its settings files: doctor says "on"
//! only when it does. Claude Code reads several files and merges them; two things there
//! turn a hook off without touching its entry:
//!
//! - **A file its schema rejects is skipped whole**, hooks and all: one other entry whose
//!   `matcher` is an object, or whose `hooks` is not a list, and not one hook of that file
//!   runs. [`schema_problems`] checks the `hooks` section's shape as an allowlist (what
//!   each field must be), never a list of known-bad values.
//! - **The hook switches** (Claude Code 2.1, its settings documentation and the rule it
//!   applies when it gathers hooks): `disableAllHooks` in any file it reads switches off
//!   every hook that is not in managed settings (in managed settings, every hook);
//!   `allowManagedHooksOnly`, and `strictPluginOnlyCustomization` naming hooks, count in
//!   managed settings only and leave only managed hooks running. Managed settings are
//!   the system's `managed-settings.json`, its `managed-settings.d/*.json` drop-ins, and
//!   `remote-settings.json`, where Claude Code keeps the settings a server delivered.
//!
//! The files, by [`Source`]: the user's `settings.json`, the project's
//! `.claude/settings.json` and `.claude/settings.local.json`, `remote-settings.json`
//! beside the user's, and the managed directory (`/etc/claude-code` on Linux,
//! `/Library/Application Support/ClaudeCode` on macOS).

use row_fence_contract::harness::Harness;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where a Claude Code settings file sits, which decides what its switches do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `~/.claude/settings.json`.
    User,
    /// A project's `.claude/settings.json` or `.claude/settings.local.json`.
    Project,
    /// Managed settings: the system's files, or `remote-settings.json`.
    Managed,
}

/// The system directory of file-delivered managed settings on this OS.
pub fn managed_dir() -> PathBuf {
    if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/ClaudeCode")
    } else {
        PathBuf::from("/etc/claude-code")
    }
}

/// Every settings file Claude Code reads for a session in `project` (its top level, when
/// known) of the user whose `$HOME` is `home`, each with its source, whether it exists
/// or not. `managed` is [`managed_dir`] outside tests.
pub fn files(home: &Path, project: Option<&Path>, managed: &Path) -> Vec<(Source, PathBuf)> {
    let mut files = vec![
        (
            Source::User,
            home.join(Harness::Claude.settings_dir())
                .join("settings.json"),
        ),
        (
            Source::Managed,
            home.join(Harness::Claude.settings_dir())
                .join("remote-settings.json"),
        ),
    ];
    if let Some(project) = project {
        let dir = project.join(Harness::Claude.settings_dir());
        files.push((Source::Project, dir.join("settings.json")));
        files.push((Source::Project, dir.join("settings.local.json")));
    }
    files.push((Source::Managed, managed.join("managed-settings.json")));
    // Drop-ins are read in name order after the base file; hidden files are not read.
    let mut drop_ins: Vec<PathBuf> = std::fs::read_dir(managed.join("managed-settings.d"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .is_some_and(|n| !n.as_encoded_bytes().starts_with(b"."))
        })
        .collect();
    drop_ins.sort();
    files.extend(drop_ins.into_iter().map(|p| (Source::Managed, p)));
    files
}

/// What the hook switches of every file Claude Code reads do to an entry in `entry`
/// (of source `source`): each a sentence naming the file and the switch. Empty when the
/// entry runs. Files that do not parse or that the schema rejects are skipped, as Claude
/// Code skips them, so their switches do not count.
pub fn switched_off(
    entry: &Path,
    source: Source,
    files: &[(Source, PathBuf)],
) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    for (from, file) in files {
        let Some(v) = read(file) else { continue };
        if !schema_problems(&v).is_empty() {
            continue;
        }
        // A switch set to anything but false (a string "true", a number) is counted as
        // set: whether Claude Code coerces it or rejects the file, the doctor must not say
        // "on" for a hook that may not run.
        let on = |key: &str| !matches!(v.get(key), None | Some(Value::Null | Value::Bool(false)));
        if on("disableAllHooks") && (*from == Source::Managed || source != Source::Managed) {
            problems.push(format!(
                "{} sets disableAllHooks: Claude Code runs no hook from {}",
                file.display(),
                if *from == Source::Managed {
                    "any settings file".to_string()
                } else {
                    format!("{} (only managed settings' hooks run)", entry.display())
                }
            ));
        }
        if source == Source::Managed {
            continue;
        }
        let strict = match &v["strictPluginOnlyCustomization"] {
            Value::Bool(b) => *b,
            Value::Array(parts) => parts.iter().any(|p| p == "hooks"),
            _ => false,
        };
        match from {
            Source::Managed if on("allowManagedHooksOnly") => problems.push(format!(
                "{} (managed settings) sets allowManagedHooksOnly: Claude Code runs only managed hooks, not the one in {}",
                file.display(),
                entry.display()
            )),
            Source::Managed if strict => problems.push(format!(
                "{} (managed settings) sets strictPluginOnlyCustomization for hooks: Claude Code runs no hook from {}",
                file.display(),
                entry.display()
            )),
            Source::User | Source::Project if on("allowManagedHooksOnly") => notes.push(format!(
                "{} sets allowManagedHooksOnly, which Claude Code 2.1 honours only in managed settings (here it does nothing; a release that read it here would run no hook of yours)",
                file.display()
            )),
            _ => {}
        }
    }
    (problems, notes)
}

/// The parsed file, or `None` when it is missing or not JSON.
fn read(file: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(file).ok()?).ok()
}

/// Why Claude Code's settings schema rejects `settings` (and so skips the whole file),
/// from the shape its hooks section must have: `hooks` an object of lists, each entry an
/// object with an optional string `matcher` and a list `hooks` of objects whose `type` is
/// a string (a `command` one with a string `command`) and whose `timeout`, if any, is a
/// number. Empty when the shape is right. Other keys are not checked here: Claude Code's
/// own `/doctor` names a file it rejects for any key.
pub fn schema_problems(settings: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let Some(root) = settings.as_object() else {
        return vec!["the file is not a JSON object".to_string()];
    };
    let Some(hooks) = root.get("hooks") else {
        return found;
    };
    let Some(events) = hooks.as_object() else {
        return vec![format!("hooks is {}, not an object", kind(hooks))];
    };
    for (event, entries) in events {
        let Some(entries) = entries.as_array() else {
            found.push(format!("hooks.{event} is {}, not a list", kind(entries)));
            continue;
        };
        for (i, entry) in entries.iter().enumerate() {
            let at = format!("hooks.{event}[{i}]");
            let Some(entry) = entry.as_object() else {
                found.push(format!("{at} is {}, not an object", kind(entry)));
                continue;
            };
            if let Some(matcher) = entry.get("matcher").filter(|m| !m.is_string()) {
                found.push(format!("{at}.matcher is {}, not a string", kind(matcher)));
            }
            let Some(handlers) = entry.get("hooks").and_then(Value::as_array) else {
                found.push(format!(
                    "{at}.hooks is {}, not a list",
                    entry.get("hooks").map_or("missing", kind)
                ));
                continue;
            };
            for (j, handler) in handlers.iter().enumerate() {
                let at = format!("{at}.hooks[{j}]");
                let Some(handler) = handler.as_object() else {
                    found.push(format!("{at} is {}, not an object", kind(handler)));
                    continue;
                };
                match handler.get("type") {
                    Some(Value::String(t)) if t == "command" => {
                        if !handler.get("command").is_some_and(Value::is_string) {
                            found.push(format!("{at}.command is not a string"));
                        }
                    }
                    Some(Value::String(_)) => {}
                    other => found.push(format!(
                        "{at}.type is {}, not a string",
                        other.map_or("missing", kind)
                    )),
                }
                if let Some(timeout) = handler.get("timeout").filter(|t| !t.is_number()) {
                    found.push(format!("{at}.timeout is {}, not a number", kind(timeout)));
                }
            }
        }
    }
    found
}

/// A JSON value's kind, as a sentence names it.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_schema_is_an_allowlist_of_shapes() {
        let ours =
            json!({"matcher": "*", "hooks": [{"type": "command", "command": "x", "timeout": 10}]});
        assert!(schema_problems(&json!({"hooks": {"PreToolUse": [ours]}})).is_empty());
        assert!(schema_problems(&json!({"model": "opus"})).is_empty());
        assert!(
            schema_problems(
                &json!({"hooks": {"X": [{"hooks": [{"type": "prompt", "prompt": "p"}]}]}})
            )
            .is_empty()
        );
        for bad in [
            json!([]),
            json!({"hooks": []}),
            json!({"hooks": {"Stop": {}}}),
            json!({"hooks": {"Stop": [1]}}),
            json!({"hooks": {"Stop": [{"matcher": {"type": "always"}, "hooks": []}]}}),
            json!({"hooks": {"Stop": [{"matcher": ["Bash"], "hooks": []}]}}),
            json!({"hooks": {"Stop": [{"matcher": "*"}]}}),
            json!({"hooks": {"Stop": [{"hooks": {"type": "command"}}]}}),
            json!({"hooks": {"Stop": [{"hooks": ["true"]}]}}),
            json!({"hooks": {"Stop": [{"hooks": [{"command": "true"}]}]}}),
            json!({"hooks": {"Stop": [{"hooks": [{"type": 1, "command": "true"}]}]}}),
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": ["true"]}]}]}}),
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "t", "timeout": "10"}]}]}}),
        ] {
            assert!(!schema_problems(&bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn each_switch_counts_where_claude_code_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        let managed = dir.path().join("managed");
        for d in [
            home.join(".claude"),
            project.join(".claude"),
            managed.join("managed-settings.d"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let entry = home.join(".claude/settings.json");
        let files = || files(&home, Some(&project), &managed);
        let check = |at: &Path, text: &str| {
            std::fs::write(at, text).unwrap();
            let got = switched_off(&entry, Source::User, &files());
            std::fs::remove_file(at).unwrap();
            got
        };
        let off = |at: &Path, text: &str| !check(at, text).0.is_empty();
        for at in [
            project.join(".claude/settings.json"),
            project.join(".claude/settings.local.json"),
            home.join(".claude/remote-settings.json"),
            managed.join("managed-settings.json"),
            managed.join("managed-settings.d/50-hooks.json"),
        ] {
            assert!(off(&at, r#"{"disableAllHooks": true}"#), "{}", at.display());
            assert!(
                off(&at, r#"{"disableAllHooks": "true"}"#),
                "{}",
                at.display()
            );
            assert!(off(&at, r#"{"disableAllHooks": 1}"#), "{}", at.display());
            assert!(
                !off(&at, r#"{"disableAllHooks": false}"#),
                "{}",
                at.display()
            );
            // A file Claude Code skips whole switches nothing either.
            assert!(
                !off(
                    &at,
                    r#"{"disableAllHooks": true, "hooks": {"Stop": [{"matcher": {}}]}}"#
                ),
                "{}",
                at.display()
            );
        }
        for at in [
            home.join(".claude/remote-settings.json"),
            managed.join("managed-settings.json"),
        ] {
            assert!(off(&at, r#"{"allowManagedHooksOnly": true}"#));
            assert!(off(&at, r#"{"strictPluginOnlyCustomization": ["hooks"]}"#));
            assert!(!off(
                &at,
                r#"{"strictPluginOnlyCustomization": ["skills"]}"#
            ));
        }
        let (problems, notes) = check(
            &project.join(".claude/settings.json"),
            r#"{"allowManagedHooksOnly": true}"#,
        );
        assert!(problems.is_empty() && notes.len() == 1, "{notes:?}");
        assert!(!off(
            &managed.join("managed-settings.d/.hidden.json"),
            r#"{"disableAllHooks": true}"#
        ));
        // An entry in managed settings outlives the switches meant for the others.
        std::fs::write(
            managed.join("managed-settings.json"),
            r#"{"allowManagedHooksOnly": true}"#,
        )
        .unwrap();
        let managed_entry = managed.join("managed-settings.json");
        assert!(
            switched_off(&managed_entry, Source::Managed, &files())
                .0
                .is_empty()
        );
    }
}
