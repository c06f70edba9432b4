//! Each agent harness's hook file (ARCHITECTURE.md, "Agent hooks"): where it usually is,
//! its format, the entries that run the guard for every tool the harness lets a hook
//! see, and the edits that add and remove them byte for byte. The JSON files are edited
//! by [`crate::claude_settings`] (one [`Layout`] per event), Codex's `config.toml` by
//! [`crate::codex_toml`].
//!
//! Pinned to each harness's documented hook configuration:
//! - Claude Code 2.x (hooks reference): `~/.claude/settings.json`, `hooks.PreToolUse`,
//!   matcher `*` (every tool), `timeout` in seconds.
//! - Codex CLI 0.124+ (developers.openai.com/codex/hooks, the first release with hooks on
//!   by default and run for `apply_patch` and MCP tools): `~/.codex/hooks.json` (Claude
//!   Code's outline) or inline `[[hooks.PreToolUse]]` in `~/.codex/config.toml`; no
//!   matcher (every tool); `timeout` in seconds.
//! - Gemini CLI 0.26+ (geminicli.com/docs/hooks/reference): `~/.gemini/settings.json`,
//!   `hooks.BeforeTool`, no matcher (every tool), `timeout` in milliseconds, a `name`.
//! - Cursor 1.7+ (cursor.com/docs/agent/hooks): `~/.cursor/hooks.json` with
//!   `"version": 1`, flat `{"command": …}` entries under `hooks.beforeShellExecution` and
//!   `hooks.beforeMCPExecution`, `failClosed` so a hook that crashes or times out blocks.
//!   Cursor has no hook before a file edit.

use crate::claude_settings::{self, Edit, Layout};
use crate::codex_toml;
use row_fence_contract::harness::{Harness, events};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Why a hook file was left alone, or could not be read: each its parser's or editor's
/// own sentence.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HookFileError {
    /// A JSON hook file's edit was refused (not JSON, not the outline the harness reads).
    #[error(transparent)]
    Settings(#[from] claude_settings::SettingsError),
    /// Codex's `config.toml` edit was refused.
    #[error(transparent)]
    CodexToml(#[from] codex_toml::TomlError),
    /// A `config.toml` that does not parse.
    #[error(transparent)]
    NotToml(#[from] toml::de::Error),
    /// A JSON hook file that does not parse.
    #[error(transparent)]
    NotJson(#[from] serde_json::Error),
}

/// Every harness's timeout for one hook, in seconds
/// ([`row_fence_contract::harness::HOOK_TIMEOUT_S`]).
pub use row_fence_contract::harness::HOOK_TIMEOUT_S as TIMEOUT_S;

/// The file formats a hook is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A JSON file with `hooks.<EVENT>` arrays.
    Json,
    /// Codex's `config.toml`.
    CodexToml,
}

/// The harness's usual user-level hook file under `home` (the user's `$HOME`).
pub fn default_file(harness: Harness, home: &Path) -> PathBuf {
    let file = match harness {
        Harness::Claude | Harness::Gemini => "settings.json",
        Harness::Codex | Harness::Cursor => "hooks.json",
    };
    home.join(harness.settings_dir()).join(file)
}

/// How `file` is written: Codex's `*.toml` is its `config.toml`, everything else JSON.
pub fn format(harness: Harness, file: &Path) -> Format {
    if harness == Harness::Codex && file.extension().is_some_and(|e| e == "toml") {
        Format::CodexToml
    } else {
        Format::Json
    }
}

/// What a missing file is taken to be (and what rollback compares with before it
/// removes a file install created): Cursor's file needs its `version`.
pub fn empty(harness: Harness, format: Format) -> &'static str {
    match (harness, format) {
        (_, Format::CodexToml) => "",
        (Harness::Cursor, _) => "{\"version\": 1}\n",
        _ => claude_settings::EMPTY,
    }
}

/// The `--harness` words the hook command passes the guard (none for the guard's default,
/// Claude Code, so `install claude-hook` keeps writing, and finding, the command it
/// always wrote).
pub fn harness_flag(harness: Harness) -> Option<&'static str> {
    (harness != Harness::DEFAULT).then(|| harness.name())
}

/// The JSON entries that run `command`, each with the layout it goes into, in the
/// order install adds them (rollback removes them in reverse).
pub fn entries(harness: Harness, command: &str) -> Result<Vec<(Layout, String)>, HookFileError> {
    let quoted = Value::String(command.to_string()).to_string();
    Ok(match harness {
        Harness::Claude => vec![(claude_settings::CLAUDE, claude_settings::entry(command)?)],
        Harness::Codex => vec![(
            claude_settings::CLAUDE,
            format!(
                "{{\"hooks\": [{{\"type\": \"command\", \"command\": {quoted}, \"timeout\": {TIMEOUT_S}}}]}}"
            ),
        )],
        Harness::Gemini => vec![(
            GEMINI,
            format!(
                "{{\"hooks\": [{{\"name\": \"row-fence-guard\", \"type\": \"command\", \"command\": {quoted}, \"timeout\": {}}}]}}",
                TIMEOUT_S * 1000
            ),
        )],
        Harness::Cursor => CURSOR
            .iter()
            .map(|layout| {
                (
                    *layout,
                    format!("{{\"command\": {quoted}, \"failClosed\": true}}"),
                )
            })
            .collect(),
    })
}

/// The layouts whose entries run the guard (what `doctor` looks for).
pub fn layouts(harness: Harness) -> Vec<Layout> {
    match harness {
        Harness::Claude | Harness::Codex => vec![claude_settings::CLAUDE],
        Harness::Gemini => vec![GEMINI],
        Harness::Cursor => CURSOR.to_vec(),
    }
}

/// Gemini CLI's `BeforeTool`.
pub const GEMINI: Layout = Layout {
    event: events::BEFORE_TOOL,
    nested: true,
};

/// Cursor's two pre-tool events: its shell tool and its MCP tools.
pub const CURSOR: [Layout; 2] = [
    Layout {
        event: events::BEFORE_SHELL_EXECUTION,
        nested: false,
    },
    Layout {
        event: events::BEFORE_MCP_EXECUTION,
        nested: false,
    },
];

/// Adds the entries running `command` to `text` (`None`: no file yet). Unchanged when
/// every entry is there already. `rollback` is the command that removes them, which a
/// format that carries comments (Codex's `config.toml`) names beside the entry.
pub fn install(
    agent: Harness,
    file: &Path,
    text: Option<&str>,
    command: &str,
    rollback: &str,
) -> Result<Edit, HookFileError> {
    let format = format(agent, file);
    let start = text.unwrap_or(empty(agent, format));
    if format == Format::CodexToml {
        return Ok(codex_toml::install(
            Some(start),
            command,
            TIMEOUT_S,
            rollback,
        )?);
    }
    let mut now = start.to_string();
    let mut changed = false;
    for (layout, entry) in entries(agent, command)? {
        if let Edit::Changed(next) = claude_settings::install_in(layout, &now, &entry, command)? {
            now = next;
            changed = true;
        }
    }
    Ok(if changed || text.is_none() {
        Edit::Changed(now)
    } else {
        Edit::Unchanged
    })
}

/// Removes the entries running `command` from `text`, last added first.
pub fn rollback(
    agent: Harness,
    file: &Path,
    text: Option<&str>,
    command: &str,
) -> Result<Edit, HookFileError> {
    if format(agent, file) == Format::CodexToml {
        return Ok(codex_toml::rollback(text, command, TIMEOUT_S)?);
    }
    let Some(text) = text else {
        return Ok(Edit::Unchanged);
    };
    let mut now = text.to_string();
    let mut changed = false;
    for layout in layouts(agent).into_iter().rev() {
        if let Edit::Changed(next) = claude_settings::rollback_in(layout, Some(&now), command)? {
            now = next;
            changed = true;
        }
    }
    Ok(if changed {
        Edit::Changed(now)
    } else {
        Edit::Unchanged
    })
}

/// What `doctor` reads of one harness's file: the entry running the guard, and the
/// guard binary that command names.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Found {
    /// The events (or `config.toml`'s `PreToolUse`) holding a row-fence entry the harness
    /// runs for every tool.
    pub events: Vec<String>,
    /// The events the harness needs and the file lacks (or holds only narrowed).
    pub missing: Vec<String>,
    /// Every `row-fence-guard` path the entries' commands name.
    #[serde(serialize_with = "crate::shell::json_path::list")]
    pub guards: Vec<PathBuf>,
    /// Each row-fence entry the harness would not run for every tool, and why (a
    /// `matcher` naming only some tools, a handler `type` other than `command`): it does
    /// not count as the event's entry.
    pub narrowed: Vec<String>,
}

/// One hook command in a file, with why its harness would not run it before every tool
/// (`None`: it would).
struct Hook {
    command: String,
    narrowed: Option<String>,
}

/// Why an entry with `matcher` and a handler of `kind` does not run before every tool:
/// a matcher other than none, `""`, `*` or `.*` (every tool, in each harness's reference)
/// names only the tools it matches, and a handler whose type is not `command` runs no
/// command. `None` when it runs before every tool.
fn narrowed(matcher: Option<&str>, kind: Option<&str>) -> Option<String> {
    if let Some(m) = matcher.filter(|m| !["", "*", ".*"].contains(m)) {
        return Some(format!(
            "its matcher {m:?} runs it only for the tools that name matches, not every tool (install writes \"*\" or none)"
        ));
    }
    if let Some(k) = kind.filter(|k| *k != "command") {
        return Some(format!(
            "its type is {k:?}, not \"command\", so its command never runs"
        ));
    }
    None
}

/// Finds the row-fence entries in a parsed hook file: any entry whose command runs a
/// program named `row-fence-guard` (whatever home and binaries it names); one the harness
/// would run only for some tools, or not at all, is [`Found::narrowed`], not counted.
pub fn find(agent: Harness, format: Format, text: &str) -> Result<Found, HookFileError> {
    let mut found = Found {
        events: Vec::new(),
        missing: Vec::new(),
        guards: Vec::new(),
        narrowed: Vec::new(),
    };
    let commands_of = |event: &str, hooks: Vec<Hook>, found: &mut Found| {
        let (mut counted, mut why_not) = (false, Vec::new());
        for hook in hooks.into_iter().filter(|h| h.command.contains(GUARD)) {
            found.guards.extend(guard_paths(&hook.command));
            match hook.narrowed {
                None => counted = true,
                Some(why) => why_not.push(format!(
                    "the {event} entry running the guard does not fence every tool: {why}"
                )),
            }
        }
        // A narrowed entry beside one that runs for every tool takes nothing away.
        if counted {
            found.events.push(event.to_string());
        } else {
            found.missing.push(event.to_string());
            found.narrowed.extend(why_not);
        }
    };
    match format {
        Format::CodexToml => {
            let config: toml::Table = text.parse()?;
            let entries = config
                .get("hooks")
                .and_then(|h| h.get(events::PRE_TOOL_USE))
                .and_then(toml::Value::as_array)
                .map(|entries| {
                    entries
                        .iter()
                        .flat_map(|e| {
                            let matcher = e.get("matcher").and_then(toml::Value::as_str);
                            e.get("hooks")
                                .and_then(toml::Value::as_array)
                                .map(|hs| {
                                    hs.iter()
                                        .filter_map(|h| {
                                            Some(Hook {
                                                command: h.get("command")?.as_str()?.to_string(),
                                                narrowed: narrowed(
                                                    matcher,
                                                    h.get("type").and_then(toml::Value::as_str),
                                                ),
                                            })
                                        })
                                        .collect::<Vec<_>>()
                                })
                                .unwrap_or_default()
                        })
                        .collect()
                })
                .unwrap_or_default();
            commands_of(events::PRE_TOOL_USE, entries, &mut found);
        }
        Format::Json => {
            let v: Value = serde_json::from_str(text)?;
            for layout in layouts(agent) {
                let entries = v["hooks"][layout.event]
                    .as_array()
                    .map(|entries| {
                        entries
                            .iter()
                            .flat_map(|e| {
                                if layout.nested {
                                    let matcher = e["matcher"].as_str();
                                    e["hooks"]
                                        .as_array()
                                        .map(|hs| {
                                            hs.iter()
                                                .filter_map(|h| {
                                                    Some(Hook {
                                                        command: h["command"].as_str()?.to_string(),
                                                        narrowed: narrowed(
                                                            matcher,
                                                            h["type"].as_str(),
                                                        ),
                                                    })
                                                })
                                                .collect::<Vec<_>>()
                                        })
                                        .unwrap_or_default()
                                } else {
                                    e["command"]
                                        .as_str()
                                        .map(|c| Hook {
                                            command: c.to_string(),
                                            narrowed: None,
                                        })
                                        .into_iter()
                                        .collect()
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                commands_of(layout.event, entries, &mut found);
            }
        }
    }
    Ok(found)
}

/// The guard binary's name.
const GUARD: &str = "row-fence-guard";

/// The `…/row-fence-guard` paths a hook command runs: each shell word ending in the
/// guard's name (the installer writes it quoted, as one word).
fn guard_paths(command: &str) -> Vec<PathBuf> {
    command
        .split([';', '&', '|'])
        .filter_map(|part| shlex::split(part.trim()))
        .flatten()
        .filter(|w| w.ends_with(&format!("/{GUARD}")) && !w.contains('='))
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "export ROW_FENCE_HOME='/h'; '/b/row-fence-guard' --harness x; s=$?";

    #[test]
    fn each_harness_s_layouts_are_its_hook_events() {
        for harness in Harness::ALL {
            let events: Vec<&str> = layouts(harness).iter().map(|l| l.event).collect();
            assert_eq!(events, harness.hook_events(), "{harness}");
        }
    }

    /// Claude Code's settings with one PreToolUse entry running the guard under
    /// `matcher` (none when `None`) with a handler of `kind`.
    fn claude_with(matcher: Option<&str>, kind: &str) -> String {
        let mut entry = serde_json::json!({"hooks": [{"type": kind, "command": COMMAND, "timeout": TIMEOUT_S}]});
        if let Some(m) = matcher {
            entry["matcher"] = m.into();
        }
        serde_json::json!({"hooks": {"PreToolUse": [entry]}}).to_string()
    }

    #[test]
    fn an_entry_the_harness_runs_for_some_tools_or_never_is_not_the_hook() {
        for matcher in [None, Some(""), Some("*"), Some(".*")] {
            let found = find(
                Harness::Claude,
                Format::Json,
                &claude_with(matcher, "command"),
            )
            .unwrap();
            assert_eq!(found.events, ["PreToolUse"], "{matcher:?}");
            assert!(found.narrowed.is_empty(), "{matcher:?}");
        }
        for (matcher, kind, why) in [
            (Some("Edit"), "command", "matcher \"Edit\""),
            (Some("Bash"), "command", "matcher \"Bash\""),
            (
                Some("Bash|Edit|Write"),
                "command",
                "matcher \"Bash|Edit|Write\"",
            ),
            (Some("*"), "prompt", "type is \"prompt\""),
        ] {
            let found = find(Harness::Claude, Format::Json, &claude_with(matcher, kind)).unwrap();
            assert!(found.events.is_empty(), "{matcher:?} {kind}");
            assert_eq!(found.missing, ["PreToolUse"], "{matcher:?} {kind}");
            assert_eq!(found.narrowed.len(), 1, "{matcher:?} {kind}");
            assert!(found.narrowed[0].contains(why), "{}", found.narrowed[0]);
        }
        // Beside an entry that runs for every tool, a narrowed one takes nothing away.
        let both = serde_json::json!({"hooks": {"PreToolUse": [
            {"matcher": "Edit", "hooks": [{"type": "command", "command": COMMAND}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": COMMAND}]},
        ]}})
        .to_string();
        let found = find(Harness::Claude, Format::Json, &both).unwrap();
        assert_eq!(found.events, ["PreToolUse"]);
        assert!(found.narrowed.is_empty());
        // Codex's config.toml: the same rule.
        let toml = format!(
            "[[hooks.PreToolUse]]\nmatcher = \"Bash\"\n[[hooks.PreToolUse.hooks]]\ntype = \"command\"\ncommand = {COMMAND:?}\n"
        );
        let found = find(Harness::Codex, Format::CodexToml, &toml).unwrap();
        assert!(found.events.is_empty(), "{toml}");
        assert_eq!(found.narrowed.len(), 1, "{toml}");
    }

    #[test]
    fn each_harness_round_trips_byte_for_byte_and_reads_back_with_a_real_parser() {
        for agent in Harness::ALL {
            for before in [
                None,
                Some("{}\n"),
                Some("{\n  \"version\": 1,\n  \"hooks\": {\n    \"stop\": []\n  }\n}\n"),
                Some("{\"hooks\": {\"PreToolUse\": [], \"BeforeTool\": []}}"),
            ] {
                let file = default_file(agent, Path::new("/u"));
                let Edit::Changed(after) = install(agent, &file, before, COMMAND, "r").unwrap()
                else {
                    panic!("{agent:?}: nothing installed into {before:?}");
                };
                let v: Value = serde_json::from_str(&after).unwrap();
                let found = find(agent, Format::Json, &after).unwrap();
                assert!(found.missing.is_empty(), "{agent:?} {after}");
                assert_eq!(found.guards[0], Path::new("/b/row-fence-guard"));
                if agent == Harness::Cursor && before.is_none() {
                    assert_eq!(v["version"], 1);
                }
                assert_eq!(
                    install(agent, &file, Some(&after), COMMAND, "r").unwrap(),
                    Edit::Unchanged
                );
                let back = rollback(agent, &file, Some(&after), COMMAND).unwrap();
                assert_eq!(
                    back,
                    Edit::Changed(before.unwrap_or(empty(agent, Format::Json)).to_string()),
                    "{agent:?} from:\n{after}"
                );
            }
        }
    }

    #[test]
    fn codex_toml_is_found_and_the_guard_paths_read() {
        let file = Path::new("/u/.codex/config.toml");
        assert_eq!(format(Harness::Codex, file), Format::CodexToml);
        let Edit::Changed(after) = install(Harness::Codex, file, None, COMMAND, "r").unwrap()
        else {
            panic!()
        };
        let found = find(Harness::Codex, Format::CodexToml, &after).unwrap();
        assert_eq!(found.events, vec!["PreToolUse"]);
        assert_eq!(
            rollback(Harness::Codex, file, Some(&after), COMMAND).unwrap(),
            Edit::Changed(String::new())
        );
        assert_eq!(
            guard_paths("export A='x y'; '/a b/row-fence-guard' --harness codex; s=$?"),
            vec![PathBuf::from("/a b/row-fence-guard")]
        );
    }
}
