//! Each agent harness's hook (ARCHITECTURE.md, "Agent hooks"): its pre-tool input as a
//! typed shape ([`read`]: the call in Claude Code's tool names, with where the tool runs,
//! [`RunsIn`]) and the guard's answer in its convention ([`answer`]). A shape tolerates
//! members it does not name (harnesses add fields); a member it needs that is missing or
//! of the wrong type is refused with the member's name, never guessed at.
//!
//! - `claude`: Claude Code's `PreToolUse` (hooks reference, Claude Code 2.x): `tool_name`
//!   and, for `Bash`, `tool_input.command`; `session_id` and `cwd` when given.
//! - `codex`: Codex CLI's `PreToolUse` (`hooks.json` or `[hooks]` in `config.toml`):
//!   Claude Code's shape, its shell tools named `Bash` with `tool_input` `{command}` only
//!   (the hooks crate's schema fixes it). From 0.169.0 on (`PreToolUseRequest::tool_cwd`
//!   in its hooks crate, tag `rust-v0.169.0`) Codex adds `tool_cwd`, the directory the
//!   tool runs in, which may differ from the turn's `cwd` (`exec_command`'s `workdir`);
//!   without it the directory is unknown (`install agent-hook` and `doctor` check the
//!   installed Codex's version). `apply_patch` stays a tool of its own (its paths are
//!   read from the patch), applied in the turn's `cwd` (a patch carried by a shell call
//!   is the shell's, run in that call's directory). Exit 2 blocks, stderr the reason.
//! - `gemini`: Gemini CLI's `BeforeTool` (`settings.json`): `session_id`, `cwd`,
//!   `tool_name`, `tool_input`, and `mcp_context` (`server_name`, `tool_name`) for an MCP
//!   tool; `run_shell_command` becomes Bash (run in its `dir_path`), its file tools the
//!   matching Claude Code tools, except its grep (`grep_search`, `search_file_content`),
//!   which keeps its name: it runs programs (`git grep`, `grep` or `rg`) where Claude
//!   Code's Grep only reads. Exit 2 blocks, stderr the reason.
//! - `cursor`: Cursor's `beforeShellExecution` (`command`, `cwd`), `beforeMCPExecution`
//!   (`tool_name`, `tool_input` as a JSON string) and `preToolUse` (`tool_name` such as
//!   `Shell`, `Read`, `Write` or `MCP:…`, `tool_input` an object, a shell's
//!   `working_directory` in it); `conversation_id` is the session. The answer is
//!   `{"permission":"allow"|"deny",…}` on stdout; a denial also exits 2.
//!
//! An input without a session id is judged by its cwd (see `judge`).

use crate::input::{Call, Hook, InputError, RunsIn};
use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub use row_fence_contract::harness::Harness;

/// Why a Codex shell call's directory is unknown when its input has no `tool_cwd`.
pub const CODEX_NO_TOOL_CWD: &str = "a Codex shell call whose hook input carries no tool_cwd (Codex before 0.169.0, or a remote command): Codex runs it in a workdir the hook is not told";

/// Reads `input`, as `harness` sends it, into the call the guard judges.
///
/// # Errors
///
/// [`InputError::NotObject`] for a value that is not an object;
/// [`InputError::Shape`] for a member of the wrong type (the message names it);
/// [`InputError::Missing`] for a member the harness always sends that is not there;
/// and what [`Call::hook`] refuses (a `Bash` call without a string command, a relative
/// `cwd`).
pub fn read(harness: Harness, input: Value) -> Result<Hook, InputError> {
    if !input.is_object() {
        return Err(InputError::NotObject);
    }
    let call = match harness {
        Harness::Claude => claude(shape(input)?)?,
        Harness::Codex => codex(shape(input)?)?,
        Harness::Gemini => gemini(shape(input)?)?,
        Harness::Cursor => cursor(shape(input)?)?,
    };
    call.hook()
}

/// `input` as the shape `T`: unknown members tolerated, a mistyped one refused.
fn shape<T: serde::de::DeserializeOwned>(input: Value) -> Result<T, InputError> {
    serde_json::from_value(input).map_err(InputError::Shape)
}

/// A member the harness always sends, or [`InputError::Missing`].
fn required(value: Option<String>, member: &'static str) -> Result<String, InputError> {
    value.ok_or(InputError::Missing { member })
}

/// A member that is a string when present (`null` counts as absent); any other type is
/// refused with the member's name.
fn text<'de, D: Deserializer<'de>>(d: D, member: &str) -> Result<Option<String>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(D::Error::custom(format!(
            "the hook input's {member} is not a string"
        ))),
    }
}

/// One `deserialize_with` function per string member, so its error names the member.
macro_rules! text_member {
    ($($f:ident => $member:literal),* $(,)?) => {$(
        fn $f<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
            text(d, $member)
        }
    )*};
}

text_member! {
    session_id => "session_id",
    cwd => "cwd",
    tool_name => "tool_name",
    tool_cwd => "tool_cwd",
    conversation_id => "conversation_id",
    command => "command",
}

/// Claude Code's `PreToolUse` input (Codex's adds `tool_cwd`).
#[derive(Deserialize)]
struct PreToolUse {
    /// The session; absent, null or empty: judged by `cwd`.
    #[serde(default, deserialize_with = "session_id")]
    session_id: Option<String>,
    /// The session's directory.
    #[serde(default, deserialize_with = "cwd")]
    cwd: Option<String>,
    /// The tool called (always sent).
    #[serde(default, deserialize_with = "tool_name")]
    tool_name: Option<String>,
    /// The tool's input, as the tool takes it.
    #[serde(default)]
    tool_input: Value,
    /// Codex 0.169+: the directory the tool runs in.
    #[serde(default, deserialize_with = "tool_cwd")]
    tool_cwd: Option<String>,
}

fn claude(input: PreToolUse) -> Result<Call, InputError> {
    Ok(Call {
        session: input.session_id,
        cwd: input.cwd,
        tool_name: required(input.tool_name, "tool_name")?,
        tool_input: input.tool_input,
        runs_in: RunsIn::Cwd,
    })
}

/// Codex's shell tools are reported as `Bash` (older releases named them `shell`,
/// `exec_command`, `local_shell`), with `command` a string (or, in older releases, an
/// argv). The tool runs in `tool_cwd` when the input has one.
fn codex(input: PreToolUse) -> Result<Call, InputError> {
    let tool = required(input.tool_name, "tool_name")?;
    let shell = CODEX_SHELLS.contains(&tool.as_str());
    let (tool_name, tool_input) = match input.tool_input.get("command") {
        Some(command) if shell => (
            "Bash".to_string(),
            json!({ "command": shell_text(command) }),
        ),
        // A shell tool without a command is read as the shell's, which needs one.
        _ if shell => ("Bash".to_string(), input.tool_input),
        _ => (tool, input.tool_input),
    };
    let runs_in = match input.tool_cwd {
        Some(dir) if dir.starts_with('/') => RunsIn::At(PathBuf::from(dir)),
        // The `apply_patch` tool applies its patch in the turn's `cwd` (its handler takes
        // the turn's directory; only a patch carried by a shell call runs in that call's
        // `workdir`, and that call is the shell's).
        None if shell => RunsIn::Unknown(CODEX_NO_TOOL_CWD.into()),
        None => RunsIn::Cwd,
        Some(dir) => RunsIn::Unknown(format!(
            "Codex's tool_cwd {} is not an absolute path",
            Value::String(dir)
        )),
    };
    Ok(Call {
        session: input.session_id,
        cwd: input.cwd,
        tool_name,
        tool_input,
        runs_in,
    })
}

/// Gemini CLI's `BeforeTool` input.
#[derive(Deserialize)]
struct BeforeTool {
    /// The session.
    #[serde(default, deserialize_with = "session_id")]
    session_id: Option<String>,
    /// The session's directory.
    #[serde(default, deserialize_with = "cwd")]
    cwd: Option<String>,
    /// The tool called, in Gemini CLI's names (always sent).
    #[serde(default, deserialize_with = "tool_name")]
    tool_name: Option<String>,
    /// The tool's input.
    #[serde(default)]
    tool_input: Value,
    /// An MCP tool's server and name, as Gemini CLI knows them.
    #[serde(default)]
    mcp_context: Option<McpContext>,
}

/// Gemini CLI's `mcp_context`: both names, or the context is refused.
#[derive(Deserialize)]
struct McpContext {
    /// The MCP server's name.
    server_name: String,
    /// The tool's name on that server.
    tool_name: String,
}

/// Gemini CLI's tools that are Claude Code's under another name: (Gemini CLI's, Claude
/// Code's). The guard's rules name tools by the name an adapter produces, never by one
/// it renames away ([`renamed_away`]).
pub const GEMINI_RENAMED: &[(&str, &str)] = &[
    ("run_shell_command", "Bash"),
    ("write_file", "Write"),
    ("replace", "Edit"),
    ("read_file", "Read"),
    ("list_directory", "LS"),
    ("glob", "Glob"),
    ("web_fetch", "WebFetch"),
    ("google_web_search", "WebSearch"),
];

/// Codex's names for its shell tool, all read as `Bash`.
const CODEX_SHELLS: &[&str] = &[
    "Bash",
    "shell",
    "exec_command",
    "local_shell",
    "shell_command",
];

/// True when an adapter renames a harness's tool called `name` to another name, so a
/// rule naming it would never match (`web_fetch` arrives as `WebFetch`).
pub fn renamed_away(name: &str) -> bool {
    GEMINI_RENAMED.iter().any(|(gemini, _)| *gemini == name)
        || (name != "Bash" && CODEX_SHELLS.contains(&name))
}

/// Gemini CLI's tool names, renamed to Claude Code's; MCP tools named from their
/// `mcp_context` when the input has one.
fn gemini(input: BeforeTool) -> Result<Call, InputError> {
    let tool = required(input.tool_name, "tool_name")?;
    let renamed = GEMINI_RENAMED
        .iter()
        .find(|(gemini, _)| *gemini == tool)
        .map(|(_, canonical)| *canonical);
    let mut tool_input = input.tool_input;
    let mut runs_in = RunsIn::Cwd;
    if tool == "run_shell_command" {
        // Gemini CLI runs the command in the directory it names, if any.
        runs_in = dir_member(
            input.cwd.as_deref(),
            &tool_input,
            &["dir_path", "directory"],
        );
    }
    let tool_name = if let Some(name) = renamed {
        // Gemini names a read file `absolute_path` in some versions.
        if let Value::Object(ti) = &mut tool_input
            && !ti.contains_key("file_path")
            && let Some(p) = ti.get("absolute_path").cloned()
        {
            ti.insert("file_path".into(), p);
        }
        name.to_string()
    } else if let Some(context) = input.mcp_context {
        // The server and the tool, as Gemini CLI knows them: no guess.
        format!("mcp__{}__{}", context.server_name, context.tool_name)
    } else if !tool.starts_with("mcp__")
        && let Some(rest) = tool.strip_prefix("mcp_")
        && let Some((server, name)) = rest.split_once('_')
    {
        // Without `mcp_context`, `mcp_github_get_merge_pull_request` could be server
        // `github`, tool `get_merge_pull_request` (read-only by its prefix) or server
        // `github_get`, tool `merge_pull_request`. The guard does not guess: the name
        // keeps every part as the server and no tool, which no read-only rule matches.
        if name.contains('_') {
            format!("mcp__{rest}__")
        } else {
            format!("mcp__{server}__{name}")
        }
    } else {
        tool
    };
    Ok(Call {
        session: input.session_id,
        cwd: input.cwd,
        tool_name,
        tool_input,
        runs_in,
    })
}

/// Cursor's hook input, one shape for its three pre-tool events.
#[derive(Deserialize)]
struct CursorInput {
    /// Which event the hook runs for (always sent).
    hook_event_name: Option<CursorEvent>,
    /// The session.
    #[serde(default, deserialize_with = "conversation_id")]
    conversation_id: Option<String>,
    /// The directory the agent works in; else the first workspace root.
    #[serde(default, deserialize_with = "cwd")]
    cwd: Option<String>,
    /// The workspace's roots.
    #[serde(default)]
    workspace_roots: Option<Vec<String>>,
    /// `beforeShellExecution`: the command.
    #[serde(default, deserialize_with = "command")]
    command: Option<String>,
    /// `beforeMCPExecution` and `preToolUse`: the tool.
    #[serde(default, deserialize_with = "tool_name")]
    tool_name: Option<String>,
    /// The tool's input: an object, or (`beforeMCPExecution`) one as a JSON string.
    #[serde(default)]
    tool_input: CursorToolInput,
}

/// Cursor's pre-tool events the guard reads.
#[derive(Deserialize)]
enum CursorEvent {
    /// Its shell tool.
    #[serde(rename = "beforeShellExecution")]
    Shell,
    /// An MCP tool.
    #[serde(rename = "beforeMCPExecution")]
    Mcp,
    /// Any tool (Cursor 2).
    #[serde(rename = "preToolUse")]
    PreToolUse,
}

/// A Cursor tool's input: JSON text, or the value itself.
#[derive(Deserialize, Default)]
#[serde(untagged)]
enum CursorToolInput {
    /// None sent.
    #[default]
    Absent,
    /// The input as JSON text (`beforeMCPExecution`).
    Text(String),
    /// The input itself.
    Value(Value),
}

impl CursorToolInput {
    /// The input as a value; text that is not JSON is refused, not taken as a string.
    fn value(self) -> Result<Value, InputError> {
        match self {
            CursorToolInput::Absent => Ok(Value::Null),
            CursorToolInput::Text(text) => serde_json::from_str(&text).map_err(InputError::Shape),
            CursorToolInput::Value(v) => Ok(v),
        }
    }
}

/// Cursor's events, each read as what it is: a shell command, an MCP call, or (the
/// general `preToolUse`) any tool with its input as an object.
fn cursor(input: CursorInput) -> Result<Call, InputError> {
    let event = input.hook_event_name.ok_or(InputError::Missing {
        member: "hook_event_name",
    })?;
    let cwd = input
        .cwd
        .or_else(|| input.workspace_roots.and_then(|r| r.into_iter().next()));
    let (tool_name, tool_input, runs_in) = match event {
        CursorEvent::Shell => {
            let command = required(input.command, "command")?;
            (
                "Bash".to_string(),
                json!({ "command": command }),
                RunsIn::Cwd,
            )
        }
        CursorEvent::Mcp => {
            let name = required(input.tool_name, "tool_name")?;
            let name = if name.starts_with("mcp__") || name.starts_with("MCP:") {
                cursor_tool(&name)
            } else {
                // `beforeMCPExecution` names an MCP tool by the tool alone.
                format!("mcp__cursor__{name}")
            };
            (name, input.tool_input.value()?, RunsIn::Cwd)
        }
        CursorEvent::PreToolUse => {
            let name = required(input.tool_name, "tool_name")?;
            let tool_input = input.tool_input.value()?;
            if name == "Shell" {
                let runs_in = dir_member(cwd.as_deref(), &tool_input, &["working_directory"]);
                ("Bash".to_string(), tool_input, runs_in)
            } else {
                (cursor_tool(&name), tool_input, RunsIn::Cwd)
            }
        }
    };
    Ok(Call {
        session: input.conversation_id,
        cwd,
        tool_name,
        tool_input,
        runs_in,
    })
}

/// A Cursor tool name in the guard's spelling: `MCP:server:tool` (or `MCP:tool`, the
/// server unnamed) is `mcp__SERVER__TOOL`; a built-in tool keeps its name (Cursor's
/// `Read`, `Write`, `Grep`… are Claude Code's names). A name that splits more than one way
/// (`MCP:gh:get_x:merge`: server `gh`, tool `get_x:merge`, or server `gh:get_x`, tool
/// `merge`) keeps every part as the server and no tool, which no read-only rule matches.
fn cursor_tool(name: &str) -> String {
    match name.strip_prefix("MCP:") {
        Some(rest) => match rest.split_once(':') {
            Some((server, tool)) if !tool.contains(':') && !tool.is_empty() => {
                format!("mcp__{server}__{tool}")
            }
            Some(_) => format!("mcp__{rest}__"),
            None => format!("mcp__cursor__{rest}"),
        },
        None => name.to_string(),
    }
}

/// Where a shell tool runs from the first of `members` its input has (taken from the
/// session's `cwd`, as the harness does): the session's `cwd` when none is there;
/// unknown when the member is not a string.
fn dir_member(cwd: Option<&str>, input: &Value, members: &[&str]) -> RunsIn {
    match members.iter().find_map(|k| input.get(*k)) {
        None | Some(Value::Null) => RunsIn::Cwd,
        Some(Value::String(dir)) => RunsIn::At(Path::new(cwd.unwrap_or_default()).join(dir)),
        Some(other) => RunsIn::Unknown(format!("the tool's directory {other} is not a path")),
    }
}

/// A shell tool's `command`: a string as is; an argv `["bash", "-lc", TEXT]` in a shell
/// whose record says so ([`crate::specs::shell_names`]) as its TEXT; any other argv
/// quoted word by word.
fn shell_text(command: &Value) -> Value {
    let Value::Array(argv) = command else {
        return command.clone();
    };
    let words: Option<Vec<&str>> = argv.iter().map(Value::as_str).collect();
    let Some(words) = words else {
        return command.clone();
    };
    if let [shell, flag, text] = words.as_slice()
        && crate::specs::shell_names().any(|name| shell.rsplit('/').next() == Some(name))
        && matches!(*flag, "-c" | "-lc" | "-ic")
    {
        return json!(text);
    }
    let quoted: Vec<String> = words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', "'\\''")))
        .collect();
    json!(quoted.join(" "))
}

/// The guard's answer to one hook: what it prints on stdout (nothing for a harness that
/// reads the exit code and stderr alone) and the exit code, [`crate::exit::ALLOW`] or
/// [`crate::exit::DENY`] (every harness reads exit 2 as a block).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The line for stdout, if the harness reads one.
    pub stdout: Option<String>,
    /// The exit code.
    pub code: i32,
}

/// Cursor's answer on stdout (its hooks reference: `permission`, and for a denial the
/// message shown to the user and the one given to the agent).
#[derive(Serialize)]
struct CursorAnswer {
    /// `allow` or `deny`.
    permission: &'static str,
    /// A denial's message for the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    user_message: Option<&'static str>,
    /// A denial's message for the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_message: Option<&'static str>,
}

/// The answer to `harness` for the exit `code`: anything but ALLOW is a denial.
pub fn answer(harness: Harness, code: i32) -> Answer {
    let allowed = code == crate::exit::ALLOW;
    let stdout = match harness {
        Harness::Cursor => {
            let answer = if allowed {
                CursorAnswer {
                    permission: "allow",
                    user_message: None,
                    agent_message: None,
                }
            } else {
                CursorAnswer {
                    permission: "deny",
                    user_message: Some("row-fence guard denied this call (see the hook's output)."),
                    agent_message: Some(
                        "row-fence guard denied this call: your lane may not write now. Stop and report; do not try another way.",
                    ),
                }
            };
            serde_json::to_string(&answer).ok()
        }
        Harness::Claude | Harness::Codex | Harness::Gemini => None,
    };
    let code = if allowed {
        crate::exit::ALLOW
    } else {
        crate::exit::DENY
    };
    Answer { stdout, code }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{self, Tool};
    use std::path::{Path, PathBuf};

    #[test]
    fn cursor_s_event_names_are_the_contract_s() {
        use row_fence_contract::harness::events;
        let event = |name: &str| serde_json::from_value::<CursorEvent>(json!(name)).ok();
        assert!(matches!(
            event(events::BEFORE_SHELL_EXECUTION),
            Some(CursorEvent::Shell)
        ));
        assert!(matches!(
            event(events::BEFORE_MCP_EXECUTION),
            Some(CursorEvent::Mcp)
        ));
        assert!(matches!(
            event(events::CURSOR_PRE_TOOL_USE),
            Some(CursorEvent::PreToolUse)
        ));
        for event in Harness::Cursor.hook_events() {
            assert!(
                serde_json::from_value::<CursorEvent>(json!(event)).is_ok(),
                "{event}"
            );
        }
    }

    fn read(harness: Harness, raw: Value) -> input::Hook {
        super::read(harness, raw).unwrap()
    }

    /// Claude Code's input from its bytes on stdin.
    fn parse(bytes: &[u8]) -> Result<input::Hook, InputError> {
        input::read_value(bytes).and_then(|v| super::read(Harness::Claude, v))
    }

    #[test]
    fn each_harness_input_as_sent_reads_as_the_same_call() {
        // Codex's PreToolUse: tool_input is `{command}` and nothing else.
        let codex = read(
            Harness::Codex,
            json!({"session_id": "c1", "turn_id": "t1", "cwd": "/w", "hook_event_name": "PreToolUse",
                   "model": "gpt-5-codex", "permission_mode": "default", "transcript_path": null,
                   "tool_name": "Bash", "tool_use_id": "u1", "tool_input": {"command": "git push"}}),
        );
        assert_eq!(codex.command, "git push");
        assert_eq!(codex.session.as_deref(), Some("c1"));
        // Without tool_cwd (before 0.169.0) the shell's directory is unknown …
        assert_eq!(codex.runs_in, RunsIn::Unknown(CODEX_NO_TOOL_CWD.into()));
        // … with it, the call runs there; the session stays bound from its cwd.
        let there = read(
            Harness::Codex,
            json!({"session_id": "c1", "cwd": "/w", "tool_cwd": "/other/repo",
                   "tool_name": "Bash", "tool_input": {"command": "git status"}}),
        );
        assert_eq!(there.runs_in, RunsIn::At(PathBuf::from("/other/repo")));
        assert_eq!(there.cwd.as_deref(), Some(Path::new("/w")));
        let odd = read(
            Harness::Codex,
            json!({"session_id": "c1", "cwd": "/w", "tool_cwd": "sub",
                   "tool_name": "Bash", "tool_input": {"command": "ls"}}),
        );
        assert!(matches!(odd.runs_in, RunsIn::Unknown(_)));
        let patch = read(
            Harness::Codex,
            json!({"session_id": "c1", "cwd": "/w", "tool_name": "apply_patch",
                   "tool_input": {"command": "*** Begin Patch\n*** Add File: .gitattributes\n+x\n*** End Patch"}}),
        );
        assert_eq!(patch.tool.name(), "apply_patch");
        // The apply_patch tool runs in the turn's cwd, with or without tool_cwd.
        assert_eq!(patch.runs_in, RunsIn::Cwd);
        let mcp = read(
            Harness::Codex,
            json!({"session_id": "c1", "cwd": "/w", "tool_name": "mcp__github__get_issue",
                   "tool_input": {"issue": 1}}),
        );
        assert_eq!(mcp.runs_in, RunsIn::Cwd);
        // Codex reads a header with padding around it; so does the guard.
        assert_eq!(
            crate::file_tools::patch_paths(
                "*** Begin Patch\n*** Update File: a.txt\n  *** Add File: /etc/x \n+x\n*** End Patch"
            ),
            vec!["a.txt".to_string(), "/etc/x".to_string()]
        );
        let gemini = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "hook_event_name": "BeforeTool",
                   "timestamp": "2026-01-01T00:00:00Z", "tool_name": "run_shell_command",
                   "tool_input": {"command": "ls", "description": "list", "dir_path": "packages/a",
                                  "is_background": true}}),
        );
        assert_eq!(gemini.command, "ls");
        assert_eq!(gemini.runs_in, RunsIn::At(PathBuf::from("/w/packages/a")));
        assert!(matches!(
            gemini.tool,
            Tool::Bash {
                background: true,
                ..
            }
        ));
        let write = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "tool_name": "write_file",
                   "tool_input": {"file_path": "/w/x", "content": "y"}}),
        );
        assert_eq!(write.tool.name(), "Write");
        let grep = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "tool_name": "grep_search",
                   "tool_input": {"pattern": "x", "dir_path": "src"}}),
        );
        // Gemini CLI's grep runs `git grep` (or `grep`, `rg`): not Claude Code's Grep.
        assert_eq!(grep.tool.name(), "grep_search");
        let cursor = read(
            Harness::Cursor,
            json!({"conversation_id": "k1", "generation_id": "g", "hook_event_name": "beforeShellExecution",
                   "command": "git status", "cwd": "/w", "workspace_roots": ["/w"]}),
        );
        assert_eq!(cursor.command, "git status");
        assert_eq!(cursor.session.as_deref(), Some("k1"));
        let mcp = read(
            Harness::Cursor,
            json!({"conversation_id": "k1", "hook_event_name": "beforeMCPExecution",
                   "tool_name": "merge_pull_request", "tool_input": "{\"pull_number\": 1}",
                   "workspace_roots": ["/w"]}),
        );
        assert!(
            matches!(&mcp.tool, Tool::Other { name, input } if name == "mcp__cursor__merge_pull_request" && input["pull_number"] == 1)
        );
        assert_eq!(mcp.cwd.as_deref(), Some(Path::new("/w")));
        let cursor_mcp = read(
            Harness::Cursor,
            json!({"conversation_id": "k1", "hook_event_name": "beforeMCPExecution",
                   "tool_name": "MCP:github:merge_pull_request", "tool_input": {}}),
        );
        assert_eq!(cursor_mcp.tool.name(), "mcp__github__merge_pull_request");
    }

    #[test]
    fn an_argv_in_every_shell_the_records_name_and_no_other_is_read_as_its_text() {
        let text = |argv: &[&str]| shell_text(&json!(argv));
        for shell in crate::specs::shell_names() {
            for flag in ["-c", "-lc", "-ic"] {
                assert_eq!(text(&[shell, flag, "git push"]), json!("git push"));
                let path = format!("/bin/{shell}");
                assert_eq!(text(&[&path, flag, "git push"]), json!("git push"));
            }
        }
        for other in ["fish", "ksh", "python3", "node", "env"] {
            assert_eq!(
                text(&[other, "-c", "git push"]),
                json!(format!("'{other}' '-c' 'git push'"))
            );
        }
        assert_eq!(
            text(&["bash", "-x", "git push"]),
            json!("'bash' '-x' 'git push'")
        );
    }

    #[test]
    fn cursors_pre_tool_use_is_read_as_the_tool_it_names() {
        let base = |tool: &str, input: Value| {
            json!({"conversation_id": "k1", "generation_id": "g", "hook_event_name": "preToolUse",
                   "cursor_version": "2.0.0", "workspace_roots": ["/w"], "cwd": "/w",
                   "tool_name": tool, "tool_input": input, "tool_use_id": "u1",
                   "model": "m", "agent_message": "x"})
        };
        let shell = read(
            Harness::Cursor,
            base(
                "Shell",
                json!({"command": "git push", "working_directory": "/elsewhere"}),
            ),
        );
        assert_eq!(shell.command, "git push");
        assert_eq!(shell.runs_in, RunsIn::At(PathBuf::from("/elsewhere")));
        let read_tool = read(Harness::Cursor, base("Read", json!({"path": "/w/a.rs"})));
        assert!(matches!(&read_tool.tool, Tool::Other { name, .. } if name == "Read"));
        let write = read(
            Harness::Cursor,
            base("Write", json!({"path": "/w/a.rs", "contents": "x"})),
        );
        assert_eq!(write.tool.name(), "Write");
        let mcp = read(Harness::Cursor, base("MCP:github:get_issue", json!({})));
        assert_eq!(mcp.tool.name(), "mcp__github__get_issue");
        assert_eq!(mcp.session.as_deref(), Some("k1"));
    }

    #[test]
    fn gemini_mcp_tools_are_named_from_their_context_or_not_guessed() {
        let with_context = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "hook_event_name": "BeforeTool",
                   "tool_name": "mcp_github_get_pull_request", "tool_input": {},
                   "mcp_context": {"server_name": "github", "tool_name": "get_pull_request",
                                   "command": "github-mcp-server"}}),
        );
        assert_eq!(with_context.tool.name(), "mcp__github__get_pull_request");
        let split = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "hook_event_name": "BeforeTool",
                   "tool_name": "mcp_github_get_merge", "tool_input": {},
                   "mcp_context": {"server_name": "github_get", "tool_name": "merge", "url": "http://x"}}),
        );
        assert_eq!(split.tool.name(), "mcp__github_get__merge");
        // Without a context: ambiguous, every part kept as the server.
        let gemini_mcp = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "hook_event_name": "BeforeTool",
                   "tool_name": "mcp_github_get_pull_request", "tool_input": {}}),
        );
        assert_eq!(gemini_mcp.tool.name(), "mcp__github_get_pull_request__");
        let plain = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "hook_event_name": "BeforeTool",
                   "tool_name": "mcp_github_search", "tool_input": {}}),
        );
        assert_eq!(plain.tool.name(), "mcp__github__search");
    }

    #[test]
    fn cursor_mcp_names_that_split_more_than_one_way_are_not_read_only() {
        assert_eq!(
            cursor_tool("MCP:github:get_issue"),
            "mcp__github__get_issue"
        );
        assert_eq!(cursor_tool("MCP:get_issue"), "mcp__cursor__get_issue");
        for ambiguous in ["MCP:gh:get_x:merge_pull_request", "MCP:gh:", "MCP:a:b:c:d"] {
            let name = cursor_tool(ambiguous);
            assert!(
                !crate::quarantine::tools::mcp_reads(&name, None),
                "{ambiguous} read as {name}"
            );
        }
    }

    #[test]
    fn cursor_is_answered_in_json_and_the_others_by_exit_code() {
        let deny = answer(Harness::Cursor, 2);
        let v: Value = serde_json::from_str(&deny.stdout.unwrap()).unwrap();
        assert_eq!(v["permission"], "deny");
        assert!(
            v["agent_message"]
                .as_str()
                .unwrap()
                .contains("Stop and report")
        );
        assert_eq!(deny.code, 2);
        let allow = answer(Harness::Cursor, 0);
        let v: Value = serde_json::from_str(&allow.stdout.unwrap()).unwrap();
        assert_eq!(v, json!({"permission": "allow"}));
        assert_eq!(allow.code, 0);
        for h in [Harness::Claude, Harness::Codex, Harness::Gemini] {
            assert_eq!(
                answer(h, 2),
                Answer {
                    stdout: None,
                    code: 2
                }
            );
        }
        // Any code but ALLOW is a denial, answered as one.
        assert_eq!(answer(Harness::Claude, 1).code, 2);
        assert_eq!(
            serde_json::from_str::<Value>(&answer(Harness::Cursor, 101).stdout.unwrap()).unwrap()["permission"],
            "deny"
        );
        assert_eq!(
            crate::file_tools::patch_paths("*** Update File: a.rs\n*** Move to: .git/hooks/x\n"),
            vec!["a.rs", ".git/hooks/x"]
        );
    }

    #[test]
    fn claude_codes_input_is_read_and_anything_else_is_an_error() {
        let hook = parse(
            br#"{"session_id":"s1","cwd":"/w","tool_name":"Bash","tool_input":{"command":"ls"}}"#,
        )
        .unwrap();
        assert_eq!(hook.session.as_deref(), Some("s1"));
        assert_eq!(hook.command, "ls");
        for bad in [
            &b""[..],
            b"not json",
            b"[]",
            br#"{"tool_input":{"command":"ls"}}"#,
            br#"{"tool_name":"Bash","tool_input":{}}"#,
            br#"{"tool_name":"Bash","tool_input":{"command":7}}"#,
            br#"{"cwd":"relative","tool_name":"Bash","tool_input":{"command":"ls"}}"#,
            br#"{"session_id":[1],"tool_name":"Bash","tool_input":{"command":"ls"}}"#,
        ] {
            assert!(parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn each_unreadable_input_says_what_is_wrong_as_the_denial_reads() {
        let said = |bytes: &[u8]| parse(bytes).unwrap_err().to_string();
        assert_eq!(
            said(br#"{"tool_name":"Bash","tool_input":{}}"#),
            "the hook input has no tool_input.command"
        );
        assert_eq!(
            said(br#"{"tool_name":"Bash","tool_input":{"command":7}}"#),
            "the hook input's tool_input.command is not a string"
        );
        assert_eq!(
            said(br#"{"cwd":"relative","tool_name":"Bash","tool_input":{"command":"ls"}}"#),
            "the hook input's cwd relative is not absolute"
        );
        assert_eq!(
            said(br#"{"session_id":[1],"tool_name":"Bash","tool_input":{"command":"ls"}}"#),
            "the hook input's session_id is not a string"
        );
        assert_eq!(
            said(br#"{"tool_input":{"command":"ls"}}"#),
            "the hook input has no tool_name"
        );
        assert_eq!(said(b"[1]"), "the hook input is not a JSON object");
        assert!(matches!(
            parse(b"not json").unwrap_err(),
            InputError::NotHookJson(_)
        ));
        let over = vec![b' '; input::MAX_INPUT_BYTES as usize + 1];
        assert!(matches!(parse(&over).unwrap_err(), InputError::TooLarge));
    }

    #[test]
    fn every_tool_is_read_and_a_complete_object_is_read_without_eof() {
        let hook = parse(br#"{"session_id":"s","tool_name":"mcp__github__merge_pull_request","tool_input":{"pull_number":3}}"#).unwrap();
        assert_eq!(hook.tool.name(), "mcp__github__merge_pull_request");
        assert!(hook.command.is_empty());
        let hook = parse(br#"{"tool_name":"Read","tool_input":{"file_path":"/x"}}"#).unwrap();
        assert!(matches!(hook.tool, Tool::Other { .. }));
        assert!(parse(br#"{"tool_name":7,"tool_input":{}}"#).is_err());
        // A key given twice is read as the last one, as every harness's own JSON reader
        // (JavaScript's, Rust's serde, Go's) reads it: the tool the harness runs is the
        // tool judged.
        let twice = parse(
            br#"{"tool_name":"Read","tool_name":"Write","tool_input":{"file_path":"a","file_path":"/h/x"}}"#,
        )
        .unwrap();
        assert_eq!(twice.tool.name(), "Write");
        let Tool::Other { input, .. } = &twice.tool else {
            panic!("not a file tool");
        };
        assert_eq!(input["file_path"], "/h/x");
        // A reader that would block after the object (a host that never closes stdin)
        // is not read past it.
        struct Then<'a>(&'a [u8]);
        impl std::io::Read for Then<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() {
                    panic!("read past the object");
                }
                let n = buf.len().min(self.0.len()).min(1);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let value = input::read_value(Then(
            br#"{"tool_name":"Bash","tool_input":{"command":"ls"}}"#,
        ))
        .unwrap();
        assert_eq!(read(Harness::Claude, value).command, "ls");
    }

    #[test]
    fn members_a_harness_adds_are_tolerated_in_every_shape() {
        let extra = json!({"a_member_from_a_later_release": {"nested": [1, 2]}, "version": 9});
        let with = |mut v: Value| {
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            v
        };
        let claude = read(
            Harness::Claude,
            with(json!({"session_id": "s", "cwd": "/w", "tool_name": "Bash",
                        "tool_input": {"command": "ls", "new_flag": true}})),
        );
        assert_eq!(claude.command, "ls");
        let codex = read(
            Harness::Codex,
            with(
                json!({"session_id": "s", "cwd": "/w", "tool_cwd": "/w", "tool_name": "Bash",
                        "tool_input": {"command": "ls"}}),
            ),
        );
        assert_eq!(codex.command, "ls");
        let gemini = read(
            Harness::Gemini,
            with(
                json!({"session_id": "s", "cwd": "/w", "tool_name": "run_shell_command",
                        "tool_input": {"command": "ls"},
                        "mcp_context": null}),
            ),
        );
        assert_eq!(gemini.command, "ls");
        let cursor = read(
            Harness::Cursor,
            with(
                json!({"conversation_id": "k", "hook_event_name": "beforeShellExecution",
                        "command": "ls", "cwd": "/w", "sandbox": false}),
            ),
        );
        assert_eq!(cursor.command, "ls");
    }

    #[test]
    fn a_missing_or_mistyped_member_is_refused_by_name_never_guessed() {
        let said = |h: Harness, v: Value| super::read(h, v).unwrap_err().to_string();
        // The tool is always sent: none is not taken to be the shell.
        for h in [Harness::Claude, Harness::Codex, Harness::Gemini] {
            assert_eq!(
                said(h, json!({"cwd": "/w", "tool_input": {"command": "ls"}})),
                "the hook input has no tool_name",
                "{h}"
            );
            assert_eq!(
                said(
                    h,
                    json!({"cwd": "/w", "tool_name": ["Bash"], "tool_input": {"command": "ls"}})
                ),
                "the hook input's tool_name is not a string",
                "{h}"
            );
        }
        // A Codex shell tool without a command is the shell's, which needs one.
        assert_eq!(
            said(
                Harness::Codex,
                json!({"cwd": "/w", "tool_name": "exec_command", "tool_input": {}})
            ),
            "the hook input has no tool_input.command"
        );
        assert_eq!(
            said(
                Harness::Codex,
                json!({"cwd": "/w", "tool_cwd": 5, "tool_name": "Bash",
                                        "tool_input": {"command": "ls"}})
            ),
            "the hook input's tool_cwd is not a string"
        );
        // Gemini CLI's MCP context names both, or it is not read as naming either.
        assert!(
            super::read(
                Harness::Gemini,
                json!({"cwd": "/w", "tool_name": "mcp_github_get_x", "tool_input": {},
                       "mcp_context": {"server_name": "github"}})
            )
            .is_err()
        );
        // Cursor: the event is always sent, and each event's member is there.
        assert_eq!(
            said(Harness::Cursor, json!({"cwd": "/w", "command": "git push"})),
            "the hook input has no hook_event_name"
        );
        assert!(
            super::read(
                Harness::Cursor,
                json!({"cwd": "/w", "hook_event_name": "beforeReadFile", "command": "x"})
            )
            .is_err()
        );
        assert_eq!(
            said(
                Harness::Cursor,
                json!({"cwd": "/w", "hook_event_name": "beforeShellExecution"})
            ),
            "the hook input has no command"
        );
        assert_eq!(
            said(
                Harness::Cursor,
                json!({"cwd": "/w", "hook_event_name": "beforeMCPExecution",
                                         "command": "github-mcp-server"})
            ),
            "the hook input has no tool_name"
        );
        assert_eq!(
            said(
                Harness::Cursor,
                json!({"cwd": "/w", "hook_event_name": "beforeShellExecution",
                                         "command": 7})
            ),
            "the hook input's command is not a string"
        );
        // A tool input sent as JSON text that is not JSON is refused, not read as a string.
        assert!(
            super::read(
                Harness::Cursor,
                json!({"cwd": "/w", "hook_event_name": "beforeMCPExecution",
                       "tool_name": "get_issue", "tool_input": "{not json"})
            )
            .is_err()
        );
    }
}
