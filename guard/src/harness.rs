//! Agent harnesses other than Claude Code (ARCHITECTURE.md, "Agent hooks"): each one's
//! pre-tool hook input, as the harness sends it, is turned into Claude Code's
//! `PreToolUse` shape before it is read, with where the tool runs ([`RunsIn`]) beside
//! it; the guard's exit is answered in the harness's blocking convention.
//!
//! - `claude`: Claude Code's `PreToolUse` (hooks reference, Claude Code 2.x): as is.
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

use crate::input::RunsIn;
use serde_json::{Map, Value, json};

/// Why a Codex shell call's directory is unknown when its input has no `tool_cwd`.
pub const CODEX_NO_TOOL_CWD: &str = "a Codex shell call whose hook input carries no tool_cwd (Codex before 0.169.0, or a remote command): Codex runs it in a workdir the hook is not told";

pub use row_fence_contract::harness::Harness;

/// The input in Claude Code's shape, and where the tool runs. A member of the wrong type
/// is left for the reader to reject.
pub fn normalize(harness: Harness, input: Value) -> (Value, RunsIn) {
    let Value::Object(m) = input else {
        return (input, RunsIn::Cwd);
    };
    match harness {
        Harness::Claude => (Value::Object(m), RunsIn::Cwd),
        Harness::Codex => codex(m),
        Harness::Gemini => gemini(m),
        Harness::Cursor => cursor(m),
    }
}

/// Codex's shell tools are reported as `Bash` (older releases named them `shell`,
/// `exec_command`, `local_shell`), with `command` a string (or, in older releases, an
/// argv). The tool runs in `tool_cwd` when the input has one.
fn codex(mut m: Map<String, Value>) -> (Value, RunsIn) {
    let tool = m
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or("Bash")
        .to_string();
    let input = m.get("tool_input").cloned().unwrap_or(Value::Null);
    let shell = matches!(
        tool.as_str(),
        "Bash" | "shell" | "exec_command" | "local_shell" | "shell_command"
    );
    if shell && let Some(command) = input.get("command") {
        m.insert("tool_name".into(), json!("Bash"));
        m.insert(
            "tool_input".into(),
            json!({ "command": shell_text(command) }),
        );
    }
    let runs_in = match m.get("tool_cwd") {
        Some(Value::String(dir)) if dir.starts_with('/') => {
            RunsIn::At(std::path::PathBuf::from(dir))
        }
        // The `apply_patch` tool applies its patch in the turn's `cwd` (its handler takes
        // the turn's directory; only a patch carried by a shell call runs in that call's
        // `workdir`, and that call is the shell's).
        Some(Value::Null) | None if shell => RunsIn::Unknown(CODEX_NO_TOOL_CWD.into()),
        Some(Value::Null) | None => RunsIn::Cwd,
        Some(other) => RunsIn::Unknown(format!("Codex's tool_cwd {other} is not an absolute path")),
    };
    (Value::Object(m), runs_in)
}

/// Gemini CLI's tool names, renamed to Claude Code's; MCP tools named from their
/// `mcp_context` when the input has one.
fn gemini(mut m: Map<String, Value>) -> (Value, RunsIn) {
    let tool = m
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let renamed = match tool.as_str() {
        "run_shell_command" => Some("Bash"),
        "write_file" => Some("Write"),
        "replace" => Some("Edit"),
        "read_file" => Some("Read"),
        "list_directory" => Some("LS"),
        "glob" => Some("Glob"),
        "web_fetch" => Some("WebFetch"),
        "google_web_search" => Some("WebSearch"),
        _ => None,
    };
    let context = m.get("mcp_context").and_then(|c| {
        Some((
            c.get("server_name")?.as_str()?.to_string(),
            c.get("tool_name")?.as_str()?.to_string(),
        ))
    });
    if let Some((server, name)) = context {
        // The server and the tool, as Gemini CLI knows them: no guess.
        m.insert("tool_name".into(), json!(format!("mcp__{server}__{name}")));
    } else if renamed.is_none()
        && !tool.starts_with("mcp__")
        && let Some(rest) = tool.strip_prefix("mcp_")
        && let Some((server, name)) = rest.split_once('_')
    {
        // Without `mcp_context`, `mcp_github_get_merge_pull_request` could be server
        // `github`, tool `get_merge_pull_request` (read-only by its prefix) or server
        // `github_get`, tool `merge_pull_request`. The guard does not guess: the name
        // keeps every part as the server and no tool, which no read-only rule matches.
        let renamed = if name.contains('_') {
            format!("mcp__{rest}__")
        } else {
            format!("mcp__{server}__{name}")
        };
        m.insert("tool_name".into(), json!(renamed));
    }
    let mut runs_in = RunsIn::Cwd;
    if tool == "run_shell_command" {
        // Gemini CLI runs the command in the directory it names, if any.
        let input = m.get("tool_input").cloned().unwrap_or(Value::Null);
        runs_in = dir_member(&m, &input, &["dir_path", "directory"]);
    }
    if let Some(name) = renamed {
        m.insert("tool_name".into(), json!(name));
        // Gemini names a read file `absolute_path` in some versions.
        if let Some(Value::Object(ti)) = m.get_mut("tool_input")
            && !ti.contains_key("file_path")
            && let Some(p) = ti.get("absolute_path").cloned()
        {
            ti.insert("file_path".into(), p);
        }
    }
    (Value::Object(m), runs_in)
}

/// Cursor's events, each read as what it is: a shell command, an MCP call, or (the
/// general `preToolUse`) any tool with its input as an object.
fn cursor(mut m: Map<String, Value>) -> (Value, RunsIn) {
    let mut out = Map::new();
    if let Some(id) = m.remove("conversation_id") {
        out.insert("session_id".into(), id);
    }
    if let Some(cwd) = m.remove("cwd") {
        out.insert("cwd".into(), cwd);
    } else if let Some(Value::Array(roots)) = m.get("workspace_roots")
        && let Some(first) = roots.first()
    {
        out.insert("cwd".into(), first.clone());
    }
    let event = m
        .get("hook_event_name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if event == "preToolUse" {
        let name = m.remove("tool_name");
        let input = match m.remove("tool_input") {
            Some(Value::String(text)) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
            Some(other) => other,
            None => Value::Null,
        };
        let mut runs_in = RunsIn::Cwd;
        let name = match name.as_ref().and_then(Value::as_str) {
            Some("Shell") => {
                runs_in = dir_member(&out, &input, &["working_directory"]);
                Some("Bash".to_string())
            }
            Some(n) => Some(cursor_tool(n)),
            None => None,
        };
        out.insert("tool_name".into(), json!(name));
        out.insert("tool_input".into(), input);
        return (Value::Object(out), runs_in);
    }
    if let Some(command) = m.remove("command")
        && !m.contains_key("tool_name")
    {
        out.insert("tool_name".into(), json!("Bash"));
        out.insert("tool_input".into(), json!({ "command": command }));
    } else if let Some(name) = m.remove("tool_name") {
        let name = name.as_str().map(|n| {
            if n.starts_with("mcp__") || n.starts_with("MCP:") {
                cursor_tool(n)
            } else {
                // `beforeMCPExecution` names an MCP tool by the tool alone.
                format!("mcp__cursor__{n}")
            }
        });
        out.insert("tool_name".into(), json!(name));
        let input = match m.remove("tool_input") {
            Some(Value::String(text)) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
            Some(other) => other,
            None => Value::Null,
        };
        out.insert("tool_input".into(), input);
    }
    (Value::Object(out), RunsIn::Cwd)
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
/// input's `cwd`, as the harness does): the session's `cwd` when none is there; unknown
/// when the member is not a string.
fn dir_member(m: &Map<String, Value>, input: &Value, members: &[&str]) -> RunsIn {
    match members.iter().find_map(|k| input.get(*k)) {
        None | Some(Value::Null) => RunsIn::Cwd,
        Some(Value::String(dir)) => {
            let base = m.get("cwd").and_then(Value::as_str).unwrap_or_default();
            RunsIn::At(std::path::Path::new(base).join(dir))
        }
        Some(other) => RunsIn::Unknown(format!("the tool's directory {other} is not a path")),
    }
}

/// A shell tool's `command`: a string as is; an argv `["bash", "-lc", TEXT]` as its
/// TEXT; any other argv quoted word by word.
fn shell_text(command: &Value) -> Value {
    let Value::Array(argv) = command else {
        return command.clone();
    };
    let words: Option<Vec<&str>> = argv.iter().map(Value::as_str).collect();
    let Some(words) = words else {
        return command.clone();
    };
    if let [shell, flag, text] = words.as_slice()
        && matches!(
            shell.rsplit('/').next(),
            Some("bash" | "sh" | "zsh" | "dash")
        )
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

/// What the guard prints on stdout for its answer (`None`: nothing; stderr carries the
/// reasons), and the exit code.
pub fn answer(harness: Harness, code: i32) -> (Option<String>, i32) {
    match harness {
        Harness::Cursor => {
            let line = if code == crate::exit::ALLOW {
                json!({"permission": "allow"})
            } else {
                json!({
                    "permission": "deny",
                    "user_message": "row-fence guard denied this call (see the hook's output).",
                    "agent_message": "row-fence guard denied this call: your lane may not write now. Stop and report; do not try another way.",
                })
            };
            (Some(line.to_string()), code)
        }
        _ => (None, code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{self, Tool};
    use std::path::{Path, PathBuf};

    fn read(harness: Harness, raw: Value) -> input::Hook {
        let (normal, runs_in) = normalize(harness, raw);
        let hook = input::parse(serde_json::to_vec(&normal).unwrap().as_slice()).unwrap();
        input::Hook { runs_in, ..hook }
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
        let (out, code) = answer(Harness::Cursor, 2);
        let v: Value = serde_json::from_str(&out.unwrap()).unwrap();
        assert_eq!(v["permission"], "deny");
        assert_eq!(code, 2);
        let (out, code) = answer(Harness::Cursor, 0);
        let v: Value = serde_json::from_str(&out.unwrap()).unwrap();
        assert_eq!(v["permission"], "allow");
        assert_eq!(code, 0);
        assert_eq!(answer(Harness::Gemini, 2), (None, 2));
        assert_eq!(
            crate::file_tools::patch_paths("*** Update File: a.rs\n*** Move to: .git/hooks/x\n"),
            vec!["a.rs", ".git/hooks/x"]
        );
    }
}
