//! The quarantine, end to end (ARCHITECTURE.md, "Quarantine"): the installed hook fed
//! Claude Code's documented `PreToolUse` input for every tool, per session state —
//! holding its row (ALLOWED), refused, refused and then unreadable (the daemon down),
//! unreadable but never refused, unbound — with the verdict and, where a write was let
//! through or stopped, the remote asserted. In quarantine no shell runs and no file tool
//! writes (the verdicts for a shell read and a plain Write changed on purpose when the
//! quarantine stopped running anything the lane can configure).

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
        // A shell read: runs unless quarantined (git reads configuration the lane writes).
        (
            "Bash",
            json!({"command": "git status --short && git log --oneline -n 1 | cat"}),
            [0, 2, 2, 0, 0],
        ),
        // A harmless shell write: runs unless quarantined.
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
        // Readers inside the worktree run; in quarantine nothing writes, and git's files
        // are not read.
        (
            "Read",
            json!({"file_path": format!("{clone}/README.md")}),
            [0, 0, 0, 0, 0],
        ),
        (
            "Write",
            json!({"file_path": format!("{clone}/notes.md"), "content": "x"}),
            [0, 2, 2, 0, 0],
        ),
        // `.git` (any letter case) and the harnesses' settings: never written by a
        // row-bound session whose row is not ALLOWED.
        (
            "Write",
            json!({"file_path": format!("{clone}/.GIT/info/attributes"), "content": "* diff=x"}),
            [0, 2, 2, 2, 0],
        ),
        (
            "Edit",
            json!({"file_path": format!("{clone}/.claude/settings.json"), "old_string": "a", "new_string": "b"}),
            [0, 2, 2, 2, 0],
        ),
        // The fence's home: never written by a file tool, whoever calls it.
        (
            "Write",
            json!({"file_path": format!("{}/sessions/s-q.json", lane.home.home.display()), "content": "{}"}),
            [2, 2, 2, 2, 2],
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
        // Cursor's Delete is a write: no `.git` for a row whose fence cannot be read,
        // never the home.
        (
            "Delete",
            json!({"path": format!("{clone}/.git/hooks/pre-push")}),
            [0, 2, 2, 2, 0],
        ),
        (
            "StrReplace",
            json!({"path": format!("{}/sessions/s-q.json", lane.home.home.display()), "old_string": "a", "new_string": "b"}),
            [2, 2, 2, 2, 2],
        ),
        // A tool the guard does not know (Gemini CLI's save_memory, which writes under
        // ~/.gemini): opaque, so it runs for a row-bound session only when its ask is
        // ALLOWED.
        ("save_memory", json!({"fact": "x"}), [0, 2, 2, 2, 0]),
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
            let readme = lane.repo.clone.join("README.md");
            let first = call(&lane, "s-q", "Read", json!({"file_path": readme}));
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
    lane.regain();
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
            ran.stderr.contains("no shell runs in quarantine"),
            "{}",
            ran.stderr
        );
        let _ = lane.run_for_real(&format!("git config --unset {key}"), &lane.repo.clone);
    }
    assert!(!proof.exists(), "no planted program ran");
}

/// The calls of the harness table, one per kind.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Call {
    /// A git push in the shell tool.
    BashWrite,
    /// A read in the shell tool.
    BashRead,
    /// A harmless shell command that writes a file in the worktree.
    BashHarmless,
    /// An MCP tool that writes (merges a pull request).
    McpWrite,
    /// An MCP tool that reads.
    McpRead,
    /// The harness's built-in file tool writing `.gitattributes` (a git file).
    BuiltIn,
}

/// Each harness's hook input for `call` as the harness sends it: Claude Code 2.x
/// `PreToolUse`; Codex CLI 0.169 `PreToolUse` (`tool_input` `{command}` only, the tool's
/// directory in `tool_cwd`, `apply_patch` its file edits); Gemini CLI 0.26 `BeforeTool`
/// (MCP tools named `mcp_<server>_<tool>`); Cursor 1.7 `beforeShellExecution`/
/// `beforeMCPExecution` (`tool_input` a JSON string). `None`: the harness has no hook
/// for it (Cursor's edits under the events `install agent-hook` writes).
fn harness_input(
    harness: &str,
    call: Call,
    session: &str,
    cwd: &str,
    remote: &str,
) -> Option<serde_json::Value> {
    let shell = match call {
        Call::BashWrite => Some(format!("git push -q {remote} HEAD:main")),
        Call::BashRead => Some("git status --short".to_string()),
        Call::BashHarmless => Some("echo hi > notes.txt".to_string()),
        _ => None,
    };
    let mcp = match call {
        Call::McpWrite => Some("merge_pull_request"),
        Call::McpRead => Some("get_pull_request"),
        _ => None,
    };
    let patch = "*** Begin Patch\n*** Add File: .gitattributes\n+* diff=x\n*** End Patch\n";
    let claude_like = |event: &str, tool: String, input: serde_json::Value| {
        json!({"session_id": session, "transcript_path": "/nonexistent/t.jsonl", "cwd": cwd,
               "hook_event_name": event, "tool_name": tool, "tool_input": input})
    };
    Some(match harness {
        "claude" => match (shell, mcp) {
            (Some(c), _) => claude_like("PreToolUse", "Bash".into(), json!({"command": c})),
            (_, Some(t)) => claude_like(
                "PreToolUse",
                format!("mcp__github__{t}"),
                json!({"pull_number": 1}),
            ),
            _ => claude_like(
                "PreToolUse",
                "Write".into(),
                json!({"file_path": format!("{cwd}/.gitattributes"), "content": "* diff=x"}),
            ),
        },
        "codex" => {
            let mut v = match (shell, mcp) {
                (Some(c), _) => claude_like("PreToolUse", "Bash".into(), json!({"command": c})),
                (_, Some(t)) => claude_like(
                    "PreToolUse",
                    format!("mcp__github__{t}"),
                    json!({"pull_number": 1}),
                ),
                _ => claude_like(
                    "PreToolUse",
                    "apply_patch".into(),
                    json!({"command": patch}),
                ),
            };
            v["model"] = json!("gpt-5-codex");
            v["turn_id"] = json!("t-1");
            v["tool_use_id"] = json!("call-1");
            v["permission_mode"] = json!("default");
            v["tool_cwd"] = json!(cwd);
            v
        }
        "gemini" => {
            let mut v = match (shell, mcp) {
                (Some(c), _) => claude_like(
                    "BeforeTool",
                    "run_shell_command".into(),
                    json!({"command": c, "description": "x"}),
                ),
                (_, Some(t)) => claude_like(
                    "BeforeTool",
                    format!("mcp_github_{t}"),
                    json!({"pull_number": 1}),
                ),
                _ => claude_like(
                    "BeforeTool",
                    "write_file".into(),
                    json!({"file_path": format!("{cwd}/.gitattributes"), "content": "* diff=x"}),
                ),
            };
            v["timestamp"] = json!("2026-12-02T00:00:00Z");
            v
        }
        _ => {
            let base = json!({"conversation_id": session, "generation_id": "g-1",
                              "workspace_roots": [cwd], "cursor_version": "1.7.0"});
            let mut v = base;
            match (shell, mcp) {
                (Some(c), _) => {
                    v["hook_event_name"] = json!("beforeShellExecution");
                    v["command"] = json!(c);
                    v["cwd"] = json!(cwd);
                }
                (_, Some(t)) => {
                    v["hook_event_name"] = json!("beforeMCPExecution");
                    v["tool_name"] = json!(t);
                    v["tool_input"] = json!("{\"pull_number\": 1}");
                    v["command"] = json!("github-mcp-server");
                }
                _ => return None,
            }
            v
        }
    })
}

/// The table: per harness × session state × call, the installed command (from
/// `row-fence install agent-hook --agent NAME`, read back from the file it wrote) fed the
/// harness's documented input, answered in the harness's blocking convention (exit 2 and
/// stderr; Cursor's `{"permission": …}` read with a JSON parser), and the remote unmoved.
#[test]
fn every_harness_in_every_session_state_answers_every_call_in_its_own_convention() {
    let states = [
        State::Held,
        State::Refused,
        State::RefusedThenUnreadable,
        State::UnreadableNeverRefused,
        State::Unbound,
    ];
    // (call, the exit per state, in `states`' order)
    let table: [(Call, [i32; 5]); 6] = [
        (Call::BashWrite, [0, 2, 2, 2, 0]),
        (Call::BashRead, [0, 2, 2, 0, 0]),
        (Call::BashHarmless, [0, 2, 2, 0, 0]),
        (Call::McpWrite, [0, 2, 2, 2, 0]),
        (Call::McpRead, [0, 0, 0, 0, 0]),
        (Call::BuiltIn, [0, 2, 2, 0, 0]),
    ];
    let harnesses = ["claude", "codex", "gemini", "cursor"];
    let mut checked = 0;
    for (k, state) in states.into_iter().enumerate() {
        let mut lane = match state {
            State::Refused | State::RefusedThenUnreadable => Lane::refused(),
            _ => Lane::held(),
        };
        let cwd = lane.repo.clone.display().to_string();
        let remote = lane.repo.remote.display().to_string();
        let hooks: Vec<(&str, String)> = harnesses
            .iter()
            .map(|h| {
                let file = lane.home.path(&format!("{h}-hooks.json"));
                let ran = crate::util::run(
                    lane.home
                        .command(crate::util::bin("row-fence"))
                        .args(["install", "agent-hook", "--agent", h, "--bin-dir"])
                        .arg(crate::util::bin_dir())
                        .arg("--settings")
                        .arg(&file),
                );
                assert_eq!(ran.code, 0, "{}", ran.stderr);
                let commands = crate::agent_hooks::installed_commands(h, &file);
                (*h, commands[0].1.clone())
            })
            .collect();
        let hook_run = |hook: &str, input: &serde_json::Value| {
            let mut cmd = lane.home.command("sh");
            cmd.arg("-c").arg(hook).current_dir(&lane.repo.clone);
            run_with_stdin(&mut cmd, &input.to_string())
        };
        let session = |h: &str| format!("{h}-{state:?}");
        if matches!(
            state,
            State::RefusedThenUnreadable | State::UnreadableNeverRefused
        ) {
            // Each session asks once while the fence answers; then the daemon is gone.
            let first = if state == State::RefusedThenUnreadable {
                2
            } else {
                0
            };
            for (h, hook) in &hooks {
                let input = harness_input(h, Call::BashRead, &session(h), &cwd, &remote).unwrap();
                assert_eq!(hook_run(hook, &input).code, first, "{h}");
            }
            lane.daemon.take().unwrap().stop();
        }
        if state == State::Unbound {
            std::fs::remove_file(lane.repo.descriptor()).unwrap();
        }
        let before = lane.remote_head();
        for (h, hook) in &hooks {
            for (call, exits) in table {
                let Some(input) = harness_input(h, call, &session(h), &cwd, &remote) else {
                    continue;
                };
                let ran = hook_run(hook, &input);
                // Gemini's `mcp_github_get_pull_request` cannot be split into server and
                // tool for certain: wherever only a read-only MCP tool may run (quarantine,
                // a fence that cannot be read), it is denied, not guessed read-only.
                let ambiguous = *h == "gemini"
                    && matches!(call, Call::McpRead)
                    && !matches!(state, State::Held | State::Unbound);
                let want = if ambiguous { 2 } else { exits[k] };
                assert_eq!(ran.code, want, "{state:?} {h} {call:?}: {}", ran.stderr);
                if *h == "cursor" {
                    let answer: serde_json::Value = serde_json::from_str(ran.stdout.trim())
                        .unwrap_or_else(|e| panic!("{h}: {e}: {:?}", ran.stdout));
                    let permission = if want == 0 { "allow" } else { "deny" };
                    assert_eq!(answer["permission"], permission, "{state:?} {h} {call:?}");
                } else {
                    assert!(ran.stdout.trim().is_empty(), "{h}: {}", ran.stdout);
                }
                if want == 2 {
                    assert!(ran.stderr.contains("row-fence"), "a denial says why");
                }
                checked += 1;
            }
        }
        assert_eq!(lane.remote_head(), before, "{state:?}: nothing was pushed");
    }
    // 4 harnesses × 5 states × 6 calls, less Cursor's missing file-edit hook.
    assert_eq!(checked, 5 * (6 * 4 - 1));
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
    // A read in quarantine runs and is not a denial.
    let readme = lane.repo.clone.join("README.md");
    assert_eq!(
        call(&lane, "s-count-1", "Read", json!({"file_path": readme})).code,
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

/// A harness whose input has no session id is judged by its cwd, and the guard says so.
#[test]
fn an_input_without_a_session_id_is_judged_by_its_cwd_and_says_so() {
    let lane = Lane::held();
    let cwd = &lane.repo.clone;
    let input = json!({
        "cwd": cwd,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
    });
    let mut cmd = lane.home.command("sh");
    cmd.arg("-c").arg(&lane.hook).current_dir(cwd);
    let ran = run_with_stdin(&mut cmd, &input.to_string());
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("no session id") && ran.stderr.contains("row-fence: ALLOWED"),
        "{}",
        ran.stderr
    );
    lane.lose();
    let ran = run_with_stdin(&mut cmd, &input.to_string());
    assert_eq!(ran.code, 2, "no shell in quarantine: {}", ran.stderr);
    assert!(
        ran.stderr.contains("no shell runs in quarantine"),
        "{}",
        ran.stderr
    );
    let push = json!({
        "cwd": cwd,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "echo hi > notes.txt"},
    });
    let ran = run_with_stdin(&mut cmd, &push.to_string());
    assert_eq!(
        ran.code, 2,
        "quarantined by its cwd's refusal: {}",
        ran.stderr
    );
}

/// A session bound only by `ROW_FENCE_DESCRIPTOR` has no binding to say where its
/// worktree is, and the hook's `cwd` is wherever the agent last `cd`'d (`cd /` is on the
/// allowlist): a file tool in quarantine is denied rather than kept inside `/`. Before,
/// a Write of the bare remote's ref file ran.
#[test]
fn without_a_binding_a_quarantined_file_tool_is_denied_wherever_the_agent_cd_d() {
    let lane = Lane::refused();
    let descriptor = lane.repo.descriptor();
    let root = Path::new("/");
    let ref_file = lane.repo.remote.join("refs/heads/main");
    for (tool, tool_input) in [
        (
            "Write",
            json!({"file_path": ref_file, "content": "0000000000000000000000000000000000000000\n"}),
        ),
        ("Read", json!({"file_path": descriptor})),
        ("Bash", json!({"command": "ls"})),
    ] {
        let mut cmd = lane.home.command("sh");
        cmd.arg("-c")
            .arg(&lane.hook)
            .current_dir(root)
            .env("ROW_FENCE_DESCRIPTOR", &descriptor);
        let ran = run_with_stdin(&mut cmd, &input("s-env-only", root, tool, tool_input));
        assert!(
            ran.stderr.to_lowercase().contains("quarantined"),
            "{tool}: {}",
            ran.stderr
        );
        // Bash too: from `/`, every `PATH` directory is inside what the guard must take
        // for the worktree.
        assert_eq!(ran.code, 2, "{tool}: {}", ran.stderr);
        let why = match tool {
            "Bash" => "no shell runs in quarantine",
            "Write" => "nothing is written in quarantine",
            _ => "no binding names the session's worktree",
        };
        assert!(ran.stderr.contains(why), "{tool}: {}", ran.stderr);
    }
}
