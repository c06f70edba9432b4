//! The quarantine, end to end (ARCHITECTURE.md, "Quarantine"): the installed hook fed
//! Claude Code's documented `PreToolUse` input for every tool, per session state —
//! holding its row (ALLOWED), refused, refused and then unreadable (the daemon down),
//! unreadable but never refused, unbound — with the verdict and, where a write was let
//! through or stopped, the remote asserted.

use crate::guard::{Lane, run_with_stdin};
use crate::util::Ran;
use serde_json::json;
use std::path::Path;

/// Claude Code's `PreToolUse` input (hooks reference, Claude Code 2.x) for any tool.
fn input(session: &str, cwd: &Path, tool: &str, tool_input: serde_json::Value) -> String {
    json!({
        "session_id": session,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
    })
    .to_string()
}

fn call(lane: &Lane, session: &str, tool: &str, tool_input: serde_json::Value) -> Ran {
    let cwd = &lane.repo.clone;
    let mut cmd = lane.home.command("sh");
    cmd.arg("-c").arg(&lane.hook).current_dir(cwd);
    run_with_stdin(&mut cmd, &input(session, cwd, tool, tool_input))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Held,
    Refused,
    RefusedThenUnreadable,
    UnreadableNeverRefused,
    Unbound,
}

/// (tool, input, the exit per state: held, refused, refused then unreadable, unreadable
/// never refused, unbound)
fn table(lane: &Lane) -> Vec<(&'static str, serde_json::Value, [i32; 5])> {
    let clone = lane.repo.clone.display().to_string();
    let remote = lane.repo.remote.display().to_string();
    vec![
        // A Bash write: runs for a lane that holds its row, and unfenced where nothing
        // is row-bound.
        (
            "Bash",
            json!({"command": format!("git push -q {remote} HEAD:main")}),
            [0, 2, 2, 2, 0],
        ),
        // Bash, on the allowlist: runs in every state.
        (
            "Bash",
            json!({"command": "git status --short && git log --oneline -n 1 | cat"}),
            [0, 0, 0, 0, 0],
        ),
        // Bash, harmless but not on the allowlist: runs unless quarantined.
        (
            "Bash",
            json!({"command": "echo hi > notes.txt"}),
            [0, 2, 2, 0, 0],
        ),
        // An MCP write: runs only when the standing ask is ALLOWED (or nothing is
        // row-bound: an unbound session's tools are never denied).
        (
            "mcp__github__merge_pull_request",
            json!({"owner": "o", "repo": "r", "pull_number": 1}),
            [0, 2, 2, 2, 0],
        ),
        // An MCP read: runs in every state.
        (
            "mcp__github__get_pull_request",
            json!({"owner": "o", "repo": "r", "pull_number": 1}),
            [0, 0, 0, 0, 0],
        ),
        // Built-in tools inside the worktree run; git's files and other places do not,
        // in quarantine.
        (
            "Read",
            json!({"file_path": format!("{clone}/README.md")}),
            [0, 0, 0, 0, 0],
        ),
        (
            "Write",
            json!({"file_path": format!("{clone}/notes.md"), "content": "x"}),
            [0, 0, 0, 0, 0],
        ),
        (
            "Write",
            json!({"file_path": format!("{clone}/.gitattributes"), "content": "* diff=x"}),
            [0, 2, 2, 0, 0],
        ),
        (
            "Read",
            json!({"file_path": format!("{clone}/.git/config")}),
            [0, 2, 2, 0, 0],
        ),
        (
            "WebFetch",
            json!({"url": "http://127.0.0.1:9/", "prompt": "x"}),
            [0, 2, 2, 0, 0],
        ),
    ]
}

fn lane_in(state: State) -> Lane {
    let mut lane = match state {
        State::Held | State::UnreadableNeverRefused => Lane::held(),
        State::Refused | State::RefusedThenUnreadable => Lane::refused(),
        State::Unbound => Lane::held(),
    };
    match state {
        State::RefusedThenUnreadable => {
            // Refused once (and remembered), then the fence cannot be read.
            let first = call(&lane, "s-q", "Bash", json!({"command": "ls"}));
            assert_eq!(first.code, 0, "{}", first.stderr);
            assert!(first.stderr.contains("quarantined"), "{}", first.stderr);
            lane.daemon.take().unwrap().stop();
        }
        State::UnreadableNeverRefused => {
            let first = call(&lane, "s-q", "Bash", json!({"command": "ls"}));
            assert_eq!(first.code, 0, "{}", first.stderr);
            lane.daemon.take().unwrap().stop();
        }
        _ => {}
    }
    lane
}

#[test]
fn every_tool_in_every_session_state_gets_its_verdict() {
    let states = [
        State::Held,
        State::Refused,
        State::RefusedThenUnreadable,
        State::UnreadableNeverRefused,
        State::Unbound,
    ];
    for (k, state) in states.into_iter().enumerate() {
        let lane = lane_in(state);
        if state == State::Unbound {
            // No descriptor: nothing about the clone is row-bound.
            std::fs::remove_file(lane.repo.descriptor()).unwrap();
        }
        let before = lane.remote_head();
        for (tool, tool_input, exits) in table(&lane) {
            let ran = call(&lane, "s-q", tool, tool_input.clone());
            assert_eq!(
                ran.code, exits[k],
                "{state:?}: {tool} {tool_input}: {}",
                ran.stderr
            );
            if ran.code == 2 {
                assert!(ran.stderr.contains("row-fence"), "a denial says why");
            }
            if matches!(state, State::Refused | State::RefusedThenUnreadable) && ran.code == 2 {
                assert!(
                    ran.stderr.contains("QUARANTINED") && ran.stderr.contains("Stop"),
                    "{state:?}: {tool}: the agent is told to stop: {}",
                    ran.stderr
                );
            }
        }
        assert_eq!(lane.remote_head(), before, "{state:?}: nothing was pushed");
    }
}

/// Leaving quarantine: an ask ALLOWED again (the row granted back) lifts it.
#[test]
fn a_quarantine_lasts_until_an_ask_is_allowed_again() {
    let lane = Lane::refused();
    let echo = json!({"command": "echo hi > notes.txt"});
    assert_eq!(call(&lane, "s-back", "Bash", echo.clone()).code, 2);
    let record = lane.home.home.join("quarantine").join("s-back.json");
    assert!(record.exists(), "the quarantine is remembered");
    // Lane A takes the row back.
    let descriptor = lane.repo.descriptor().display().to_string();
    let took = lane.home.cli(&[
        "acquire",
        "board-1",
        "row-1",
        "--lane",
        "lane-a",
        "--takeover",
        "--write-descriptor",
        &descriptor,
    ]);
    assert_eq!(took.code, 0, "{}", took.stderr);
    let back = call(&lane, "s-back", "Bash", echo);
    assert_eq!(back.code, 0, "{}", back.stderr);
    assert!(!record.exists(), "ALLOWED again lifts the quarantine");
}

/// Two-call shapes: configuration planted while the lane held its row (a diff driver, an
/// fsmonitor hook, a clean filter) does not run in quarantine, where git reads it; the
/// hook the driver would have run never runs.
#[test]
fn configuration_planted_before_the_refusal_does_not_run_in_quarantine() {
    let lane = Lane::held();
    let proof = lane.tmp().join("ran");
    let plant = |key: &str, value: String| {
        let ran = lane.run_for_real(&format!("git config {key} '{value}'"), &lane.repo.clone);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    };
    let touch = format!("touch {}", proof.display());
    lane.lose();
    for (key, value, read) in [
        ("diff.external", format!("{touch}; :"), "git diff HEAD~1"),
        ("core.fsmonitor", format!("{touch}; :"), "git status"),
        (
            "filter.x.clean",
            format!("{touch}; cat"),
            "git status --short",
        ),
        (
            "diff.x.textconv",
            format!("{touch}; cat"),
            "git log -p -n 1",
        ),
        ("core.pager", format!("{touch}; cat"), "git log -n 1"),
    ] {
        plant(key, value);
        let ran = call(&lane, "s-two", "Bash", json!({"command": read}));
        assert_eq!(ran.code, 2, "{key}: {read}: {}", ran.stderr);
        assert!(
            ran.stderr.contains(key.split('.').next().unwrap()),
            "{}",
            ran.stderr
        );
        let _ = lane.run_for_real(&format!("git config --unset {key}"), &lane.repo.clone);
    }
    assert!(!proof.exists(), "no planted program ran");
}

/// Each harness's documented hook input (pinned: Codex CLI 0.124 `PreToolUse`, Gemini CLI
/// `BeforeTool` hooks reference, Cursor 1.7 `beforeShellExecution`/`beforeMCPExecution`),
/// fed to the guard as that harness runs it (`--harness NAME`), for a lane that holds its
/// row, a refused one and an unbound one; the answer checked in the harness's blocking
/// convention (Cursor's read with a JSON parser).
#[test]
fn every_harness_is_answered_in_its_own_convention() {
    // (harness, a write, an allowlisted read, an MCP write, an MCP read): each input a
    // function of (session, cwd).
    type Shape = fn(&str, &str, &str) -> serde_json::Value;
    let shapes: [(&str, [Shape; 4]); 4] = [
        (
            "claude",
            [
                |s, cwd, remote| json!({"session_id": s, "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": format!("git push -q {remote} HEAD:main")}}),
                |s, cwd, _| json!({"session_id": s, "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "git log --oneline -n 1"}}),
                |s, cwd, _| json!({"session_id": s, "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": "mcp__github__create_pull_request", "tool_input": {"title": "x"}}),
                |s, cwd, _| json!({"session_id": s, "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": "mcp__github__list_pull_requests", "tool_input": {}}),
            ],
        ),
        (
            "codex",
            [
                |s, cwd, remote| json!({"session_id": s, "cwd": cwd, "hook_event_name": "PreToolUse", "model": "gpt-5-codex", "tool_name": "Bash", "tool_input": {"command": ["bash", "-lc", format!("git push -q {remote} HEAD:main")]}}),
                |s, cwd, _| json!({"session_id": s, "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "git status --short"}}),
                |s, cwd, _| json!({"session_id": s, "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": "mcp__github__push_files", "tool_input": {}}),
                |s, cwd, _| json!({"session_id": s, "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": "mcp__github__get_file_contents", "tool_input": {}}),
            ],
        ),
        (
            "gemini",
            [
                |s, cwd, remote| json!({"session_id": s, "transcript_path": "/nonexistent", "cwd": cwd, "hook_event_name": "BeforeTool", "timestamp": "2026-12-02T00:00:00Z", "tool_name": "run_shell_command", "tool_input": {"command": format!("git push -q {remote} HEAD:main"), "description": "push"}}),
                |s, cwd, _| json!({"session_id": s, "transcript_path": "/nonexistent", "cwd": cwd, "hook_event_name": "BeforeTool", "timestamp": "2026-12-02T00:00:00Z", "tool_name": "run_shell_command", "tool_input": {"command": "ls -la"}}),
                |s, cwd, _| json!({"session_id": s, "cwd": cwd, "hook_event_name": "BeforeTool", "tool_name": "mcp__github__merge_pull_request", "tool_input": {}}),
                |s, cwd, _| json!({"session_id": s, "cwd": cwd, "hook_event_name": "BeforeTool", "tool_name": "mcp__github__search_code", "tool_input": {}}),
            ],
        ),
        (
            "cursor",
            [
                |s, cwd, remote| json!({"conversation_id": s, "generation_id": "g-1", "hook_event_name": "beforeShellExecution", "command": format!("git push -q {remote} HEAD:main"), "cwd": cwd, "workspace_roots": [cwd]}),
                |s, cwd, _| json!({"conversation_id": s, "generation_id": "g-1", "hook_event_name": "beforeShellExecution", "command": "git diff --stat", "cwd": cwd, "workspace_roots": [cwd]}),
                |s, cwd, _| json!({"conversation_id": s, "generation_id": "g-1", "hook_event_name": "beforeMCPExecution", "tool_name": "merge_pull_request", "tool_input": "{\"pull_number\": 1}", "command": "github-mcp-server", "workspace_roots": [cwd]}),
                |s, cwd, _| json!({"conversation_id": s, "generation_id": "g-1", "hook_event_name": "beforeMCPExecution", "tool_name": "get_pull_request", "tool_input": "{}", "command": "github-mcp-server", "workspace_roots": [cwd]}),
            ],
        ),
    ];
    // Exits per state: held, refused, unbound.
    let expected: [[i32; 4]; 3] = [[0, 0, 0, 0], [2, 0, 2, 0], [0, 0, 0, 0]];
    for (state, exits) in ["held", "refused", "unbound"].into_iter().zip(expected) {
        let lane = if state == "refused" {
            Lane::refused()
        } else {
            Lane::held()
        };
        if state == "unbound" {
            std::fs::remove_file(lane.repo.descriptor()).unwrap();
        }
        let cwd = lane.repo.clone.display().to_string();
        let remote = lane.repo.remote.display().to_string();
        let before = lane.remote_head();
        for (harness, calls) in &shapes {
            let hook = lane.hook.replacen(
                "row-fence-guard;",
                &format!("row-fence-guard --harness {harness};"),
                1,
            );
            assert_ne!(hook, lane.hook, "the installed command names the guard");
            for (k, shape) in calls.iter().enumerate() {
                let session = format!("{harness}-{state}");
                let input = shape(&session, &cwd, &remote).to_string();
                let mut cmd = lane.home.command("sh");
                cmd.arg("-c").arg(&hook).current_dir(&lane.repo.clone);
                let ran = run_with_stdin(&mut cmd, &input);
                assert_eq!(
                    ran.code, exits[k],
                    "{state} {harness} call {k}: {}",
                    ran.stderr
                );
                if *harness == "cursor" {
                    let answer: serde_json::Value = serde_json::from_str(ran.stdout.trim())
                        .unwrap_or_else(|e| panic!("{harness}: {e}: {:?}", ran.stdout));
                    let want = if exits[k] == 0 { "allow" } else { "deny" };
                    assert_eq!(answer["permission"], want, "{state} {harness} call {k}");
                } else {
                    assert!(ran.stdout.trim().is_empty(), "{harness}: {}", ran.stdout);
                }
            }
        }
        assert_eq!(lane.remote_head(), before, "{state}: nothing was pushed");
    }
}

/// Quarantines and their denials are counted where the operator looks: `status` (text and
/// `--json`) and `health --prometheus`, from the home the daemon serves.
#[test]
fn quarantines_and_their_denials_are_counted_in_status_and_health() {
    let lane = Lane::refused();
    let counts = || {
        let ran = lane.home.cli(&["status", "--json"]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        let v: serde_json::Value = serde_json::from_str(ran.stdout.trim()).unwrap();
        (
            v["quarantine"]["sessions"].as_u64().unwrap(),
            v["quarantine"]["denials"].as_u64().unwrap(),
        )
    };
    assert_eq!(counts(), (0, 0));
    let write = json!({"command": "echo hi > notes.txt"});
    for session in ["s-count-1", "s-count-1", "s-count-2"] {
        assert_eq!(call(&lane, session, "Bash", write.clone()).code, 2);
    }
    // A read-only call in quarantine runs and is not a denial.
    assert_eq!(
        call(&lane, "s-count-1", "Bash", json!({"command": "ls"})).code,
        0
    );
    assert_eq!(
        call(
            &lane,
            "s-count-2",
            "mcp__github__merge_pull_request",
            json!({})
        )
        .code,
        2
    );
    assert_eq!(counts(), (2, 4));
    let text = lane.home.cli(&["status"]);
    assert!(
        text.stdout
            .contains("2 sessions quarantined now; 4 calls denied in quarantine"),
        "{}",
        text.stdout
    );
    let prom = lane.home.cli(&["health", "--prometheus"]).stdout;
    assert!(
        prom.contains("\nrow_fence_quarantined_sessions 2\n"),
        "{prom}"
    );
    assert!(
        prom.contains("\nrow_fence_quarantine_denials_total 4\n"),
        "{prom}"
    );
}
