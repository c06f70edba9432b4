//! What a harness sends its hook and what `install agent-hook` writes for it, as the
//! bench's cases need them: the harness's documented input for its shell tool, and the
//! hook command read back from the installed file (each harness's event names are the
//! contract's, [`row_fence_contract::harness::events`]).

use row_fence_contract::harness::{Harness, events};
use std::fs;
use std::path::Path;

/// The harness's documented input for the shell tool running `command` in `cwd`.
pub fn input(harness: Harness, session: &str, cwd: &Path, command: &str) -> serde_json::Value {
    use serde_json::json;
    match harness {
        Harness::Claude => json!({
            "session_id": session, "transcript_path": "/nonexistent/t.jsonl", "cwd": cwd,
            "permission_mode": "default", "hook_event_name": events::PRE_TOOL_USE,
            "tool_name": "Bash", "tool_input": {"command": command, "description": "bench"},
        }),
        Harness::Codex => json!({
            "session_id": session, "transcript_path": null, "cwd": cwd, "tool_cwd": cwd,
            "hook_event_name": events::PRE_TOOL_USE, "model": "gpt-5-codex", "turn_id": "t-1",
            "permission_mode": "default", "tool_name": "Bash", "tool_use_id": "call-1",
            "tool_input": {"command": command},
        }),
        Harness::Gemini => json!({
            "session_id": session, "transcript_path": "/nonexistent/t.json", "cwd": cwd,
            "hook_event_name": events::BEFORE_TOOL, "timestamp": "2026-12-02T00:00:00.000Z",
            "tool_name": "run_shell_command", "tool_input": {"command": command},
        }),
        Harness::Cursor => json!({
            "conversation_id": session, "generation_id": "g-1",
            "hook_event_name": events::BEFORE_SHELL_EXECUTION, "command": command, "cwd": cwd,
            "workspace_roots": [cwd], "cursor_version": "1.7.0",
        }),
    }
}

/// The hook's command as `install agent-hook` wrote it into `file`.
pub fn installed_command(harness: Harness, file: &Path) -> Result<String, String> {
    let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let command = match harness {
        Harness::Claude | Harness::Codex => {
            &v["hooks"][events::PRE_TOOL_USE][0]["hooks"][0]["command"]
        }
        Harness::Gemini => &v["hooks"][events::BEFORE_TOOL][0]["hooks"][0]["command"],
        Harness::Cursor => &v["hooks"][events::BEFORE_SHELL_EXECUTION][0]["command"],
    };
    command
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{} holds no hook command", file.display()))
}
