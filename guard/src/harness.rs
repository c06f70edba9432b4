//! Agent harnesses other than Claude Code (ARCHITECTURE.md, "Agent hooks"): each one's
//! documented pre-tool hook input is turned into Claude Code's `PreToolUse` shape before
//! it is read, and the guard's exit is answered in the harness's blocking convention.
//!
//! - `claude`: Claude Code's `PreToolUse` (hooks reference, Claude Code 2.x): as is.
//! - `codex`: Codex CLI's `PreToolUse` (Codex 0.124+, `hooks.json` or `[hooks]` in
//!   `config.toml`): Claude Code's shape; its shell tool (`Bash`, `shell`,
//!   `exec_command`, `local_shell`, with `command` a string or an argv) becomes Bash, and
//!   `apply_patch` stays a tool of its own (the quarantine reads the patch's paths).
//!   Exit 2 blocks, stderr the reason.
//! - `gemini`: Gemini CLI's `BeforeTool` (`settings.json`): `session_id`, `cwd`,
//!   `tool_name`, `tool_input`; `run_shell_command` becomes Bash and its file tools the
//!   matching Claude Code tools. Exit 2 blocks, stderr the reason.
//! - `cursor`: Cursor's `beforeShellExecution` (`command`, `cwd`, `conversation_id`) and
//!   `beforeMCPExecution` (`tool_name`, `tool_input` as a JSON string): the conversation
//!   is the session. The answer is `{"permission":"allow"|"deny",…}` on stdout; a denial
//!   also exits 2. Cursor has no hook before a file edit.
//!
//! An input without a session id is judged by its cwd (see `judge`).

use serde_json::{Map, Value, json};

/// The harnesses the guard reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Harness {
    /// Claude Code.
    Claude,
    /// OpenAI's Codex CLI.
    Codex,
    /// Google's Gemini CLI.
    Gemini,
    /// Cursor.
    Cursor,
}

impl Harness {
    /// From `--harness NAME`.
    pub fn from_name(name: &str) -> Option<Harness> {
        match name {
            "claude" => Some(Harness::Claude),
            "codex" => Some(Harness::Codex),
            "gemini" => Some(Harness::Gemini),
            "cursor" => Some(Harness::Cursor),
            _ => None,
        }
    }
}

/// The input in Claude Code's shape. A member of the wrong type is left for the reader
/// to reject.
pub fn normalize(harness: Harness, input: Value) -> Value {
    let Value::Object(mut m) = input else {
        return input;
    };
    match harness {
        Harness::Claude => Value::Object(m),
        Harness::Codex => {
            let tool = m.get("tool_name").and_then(Value::as_str).unwrap_or("Bash");
            let input = m.get("tool_input").cloned().unwrap_or(Value::Null);
            // `exec_command` names its command `cmd`; every shell tool may name the
            // directory it runs in (`workdir`, `working_directory`), which is where the
            // command is judged, not the session's cwd.
            if matches!(tool, "Bash" | "shell" | "exec_command" | "local_shell")
                && let Some(command) = input.get("command").or_else(|| input.get("cmd"))
            {
                let command = shell_text(command);
                m.insert("tool_name".into(), json!("Bash"));
                m.insert("tool_input".into(), json!({ "command": command }));
                runs_in(&mut m, &input, &["workdir", "working_directory"]);
            }
            Value::Object(m)
        }
        Harness::Gemini => {
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
                "search_file_content" => Some("Grep"),
                "web_fetch" => Some("WebFetch"),
                "google_web_search" => Some("WebSearch"),
                _ => None,
            };
            // Gemini CLI names an MCP tool `mcp_<server>_<tool>` (hooks reference); the
            // guard's rules read `mcp__SERVER__TOOL`. With one `_` after the prefix the split
            // is certain; with more, `mcp_github_get_merge_pull_request` could be server
            // `github`, tool `get_merge_pull_request` (read-only by its prefix) or server
            // `github_get`, tool `merge_pull_request`. The guard cannot tell, so it does not
            // guess: the name keeps every part as the server and no tool, which no
            // read-only rule matches, and a quarantined session's call is denied.
            if renamed.is_none()
                && !tool.starts_with("mcp__")
                && let Some(rest) = tool.strip_prefix("mcp_")
                && let Some((server, name)) = rest.split_once('_')
            {
                let renamed = if name.contains('_') {
                    format!("mcp__{rest}__")
                } else {
                    format!("mcp__{server}__{name}")
                };
                m.insert("tool_name".into(), json!(renamed));
            }
            if tool == "run_shell_command" {
                // Gemini CLI runs the command in the directory it names, if any.
                let input = m.get("tool_input").cloned().unwrap_or(Value::Null);
                runs_in(&mut m, &input, &["dir_path", "directory"]);
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
            Value::Object(m)
        }
        Harness::Cursor => {
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
            if let Some(command) = m.remove("command")
                && !m.contains_key("tool_name")
            {
                out.insert("tool_name".into(), json!("Bash"));
                out.insert("tool_input".into(), json!({ "command": command }));
            } else if let Some(name) = m.remove("tool_name") {
                // Cursor names MCP tools by the tool alone; the guard's rules read
                // `mcp__SERVER__TOOL`.
                let name = name.as_str().map(|n| {
                    if n.starts_with("mcp__") {
                        n.to_string()
                    } else if let Some((server, tool)) =
                        n.strip_prefix("MCP:").and_then(|r| r.split_once(':'))
                    {
                        // Newer Cursor releases name it `MCP:server:tool`.
                        format!("mcp__{server}__{tool}")
                    } else {
                        format!("mcp__cursor__{n}")
                    }
                });
                out.insert("tool_name".into(), json!(name));
                let input = match m.remove("tool_input") {
                    Some(Value::String(text)) => {
                        serde_json::from_str(&text).unwrap_or(Value::String(text))
                    }
                    Some(other) => other,
                    None => Value::Null,
                };
                out.insert("tool_input".into(), input);
            }
            Value::Object(out)
        }
    }
}

/// Moves the input's `cwd` to the directory a shell tool names in one of `members` (taken
/// from the `cwd`, as the harness does): that is where the command runs, and is judged.
/// A member that is not a string leaves no readable `cwd`, which the input reader refuses
/// (fail closed).
fn runs_in(m: &mut Map<String, Value>, input: &Value, members: &[&str]) {
    match members.iter().find_map(|k| input.get(*k)) {
        None | Some(Value::Null) => {}
        Some(Value::String(dir)) => {
            let base = m.get("cwd").and_then(Value::as_str).unwrap_or_default();
            let at = std::path::Path::new(base).join(dir);
            m.insert("cwd".into(), json!(at));
        }
        Some(_) => {
            m.insert("cwd".into(), json!("(unreadable working directory)"));
        }
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
            let line = if code == crate::judge::ALLOW {
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

/// The paths an `apply_patch` patch touches (`*** Add File:`, `*** Update File:`,
/// `*** Delete File:`, `*** Move to:`).
pub fn patch_paths(patch: &str) -> Vec<String> {
    patch
        .lines()
        .filter_map(|line| {
            // Codex's patch reader trims each line before matching a header: so must
            // the guard, or an indented header names a file it never checks.
            let line = line.trim();
            [
                "*** Add File: ",
                "*** Update File: ",
                "*** Delete File: ",
                "*** Move to: ",
            ]
            .iter()
            .find_map(|p| line.strip_prefix(p))
            .map(str::to_string)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{self, Tool};

    fn read(harness: Harness, raw: Value) -> input::Hook {
        let normal = normalize(harness, raw);
        input::parse(serde_json::to_vec(&normal).unwrap().as_slice()).unwrap()
    }

    #[test]
    fn each_harness_documented_input_reads_as_the_same_call() {
        let codex = read(
            Harness::Codex,
            json!({"session_id": "c1", "cwd": "/w", "hook_event_name": "PreToolUse",
                   "tool_name": "shell", "tool_input": {"command": ["bash", "-lc", "git push"]}}),
        );
        assert_eq!(codex.command, "git push");
        assert_eq!(codex.session.as_deref(), Some("c1"));
        let patch = read(
            Harness::Codex,
            json!({"session_id": "c1", "cwd": "/w", "tool_name": "apply_patch",
                   "tool_input": {"command": "*** Begin Patch\n*** Add File: .gitattributes\n+x\n*** End Patch"}}),
        );
        assert_eq!(patch.tool.name(), "apply_patch");
        // The directory a Codex shell call names is where it runs, and is judged.
        let there = read(
            Harness::Codex,
            json!({"session_id": "c1", "cwd": "/w", "tool_name": "shell",
                   "tool_input": {"command": ["bash", "-lc", "git status"], "workdir": "/other/repo"}}),
        );
        assert_eq!(
            there.cwd.as_deref(),
            Some(std::path::Path::new("/other/repo"))
        );
        let under = read(
            Harness::Codex,
            json!({"session_id": "c1", "cwd": "/w", "tool_name": "exec_command",
                   "tool_input": {"cmd": "git status", "workdir": "sub"}}),
        );
        assert_eq!(under.command, "git status");
        assert_eq!(under.cwd.as_deref(), Some(std::path::Path::new("/w/sub")));
        let gemini_there = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "tool_name": "run_shell_command",
                   "tool_input": {"command": "git status", "dir_path": "packages/a"}}),
        );
        assert_eq!(
            gemini_there.cwd.as_deref(),
            Some(std::path::Path::new("/w/packages/a"))
        );
        // Codex reads a header with padding around it; so does the guard.
        assert_eq!(
            patch_paths(
                "*** Begin Patch\n*** Update File: a.txt\n  *** Add File: /etc/x \n+x\n*** End Patch"
            ),
            vec!["a.txt".to_string(), "/etc/x".to_string()]
        );
        let gemini = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "hook_event_name": "BeforeTool",
                   "timestamp": "2026-01-01T00:00:00Z", "tool_name": "run_shell_command",
                   "tool_input": {"command": "ls", "description": "list"}}),
        );
        assert_eq!(gemini.command, "ls");
        let write = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "tool_name": "write_file",
                   "tool_input": {"file_path": "/w/x", "content": "y"}}),
        );
        assert_eq!(write.tool.name(), "Write");
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
        assert_eq!(mcp.cwd.as_deref(), Some(std::path::Path::new("/w")));
        let gemini_mcp = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "hook_event_name": "BeforeTool",
                   "tool_name": "mcp_github_get_pull_request", "tool_input": {}}),
        );
        // Ambiguous: server `github`, tool `get_pull_request`, or server `github_get`…
        assert_eq!(gemini_mcp.tool.name(), "mcp__github_get_pull_request__");
        let plain = read(
            Harness::Gemini,
            json!({"session_id": "g1", "cwd": "/w", "hook_event_name": "BeforeTool",
                   "tool_name": "mcp_github_search", "tool_input": {}}),
        );
        assert_eq!(plain.tool.name(), "mcp__github__search");
        let cursor_mcp = read(
            Harness::Cursor,
            json!({"conversation_id": "k1", "hook_event_name": "beforeMCPExecution",
                   "tool_name": "MCP:github:merge_pull_request", "tool_input": {}}),
        );
        assert_eq!(cursor_mcp.tool.name(), "mcp__github__merge_pull_request");
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
            patch_paths("*** Update File: a.rs\n*** Move to: .git/hooks/x\n"),
            vec!["a.rs", ".git/hooks/x"]
        );
    }
}
