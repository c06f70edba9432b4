//! Round six (ARCHITECTURE.md, "Quarantine"): a tool the guard does not know, outside
//! quarantine. The fence's home is closed to every session's writes, but the rule read
//! only the tools it knows, so an unbound session's `EditNotebook` (Cursor), `smart_edit`
//! or `edit` (Gemini CLI releases), `write_file` (a Codex tool) or an MCP file server's
//! `write_file` wrote a session's binding. Every string of such a tool's input, at any
//! depth and every reading, is now judged as a path it may write; ordinary inputs run.

use crate::guard::Lane;
use crate::quarantine_corpus::{hook, installed};
use serde_json::json;
use std::fs;

/// Unknown tools and MCP tools not read-only by rule, in every harness's input shape,
/// never write the fence's home for an unbound session; their everyday calls run.
#[test]
fn a_tool_the_guard_does_not_know_writes_no_binding() {
    let lane = Lane::held();
    let hooks = installed(&lane);
    fs::remove_file(lane.repo.descriptor()).unwrap();
    let clone = lane.repo.clone.clone();
    let home = lane.home.home.display().to_string();
    let binding = format!("{home}/sessions/s.json");
    let call = |shape: &str, tool: &str, input: &serde_json::Value| {
        if shape == "cursor" {
            return json!({"conversation_id": "s-opaque", "generation_id": "g-1",
                          "hook_event_name": "preToolUse", "workspace_roots": [clone],
                          "cwd": clone, "tool_name": tool, "tool_input": input});
        }
        let mut v = json!({"session_id": "s-opaque", "cwd": clone, "hook_event_name": "PreToolUse",
                           "tool_name": tool, "tool_input": input});
        if shape == "gemini" {
            v["hook_event_name"] = json!("BeforeTool");
        }
        if shape == "codex" {
            v["tool_cwd"] = json!(clone);
            v["turn_id"] = json!("t-1");
        }
        v
    };
    let mut cases = Vec::new();
    for (tool, input) in [
        (
            "EditNotebook",
            json!({"target_notebook": binding, "new_string": "x"}),
        ),
        (
            "smart_edit",
            json!({"file_path": binding, "old_string": "a", "new_string": "b"}),
        ),
        ("edit", json!({"file_path": binding})),
        ("write_file", json!({"path": binding, "content": "{}"})),
        (
            "write",
            json!({"edits": [{"target": {"file": format!(" {binding}")}}]}),
        ),
        ("create_file", json!({"path": "~/home/x.json"})),
        (
            "mcp__fs__write_file",
            json!({"path": binding, "content": "{}"}),
        ),
        (
            "mcp__fs__move_file",
            json!({"source": "notes.md", "destination": binding}),
        ),
    ] {
        for shape in ["claude", "codex", "gemini", "cursor"] {
            cases.push((shape, tool, input.clone(), 2));
        }
    }
    for (tool, input) in [
        (
            "EditNotebook",
            json!({"target_notebook": "nb.ipynb", "new_string": "x"}),
        ),
        (
            "mcp__github__create_issue",
            json!({"title": "x", "body": "see README.md/x and ~"}),
        ),
        (
            "mcp__fs__write_file",
            json!({"path": format!("{}/notes.md", clone.display())}),
        ),
        ("save_memory", json!({"fact": "the tests run with nextest"})),
    ] {
        for shape in ["claude", "codex", "gemini", "cursor"] {
            cases.push((shape, tool, input.clone(), 0));
        }
    }
    let mut wrong = Vec::new();
    for (shape, tool, input, want) in &cases {
        let ran = hook(&lane, &hooks, shape, &call(shape, tool, input));
        if ran.code != *want {
            wrong.push(format!(
                "{shape} {tool} {input}: exit {}: {}",
                ran.code,
                ran.stderr.lines().last().unwrap_or("")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        !lane.home.home.join("sessions/s.json").exists(),
        "a binding was written"
    );
    eprintln!("{} opaque tool calls of an unbound session", cases.len());
}
