//! Round five (ARCHITECTURE.md, "Quarantine"): path texts a harness reads another way
//! than literally, each a generator run through every harness's installed hook in its
//! own input shape, with the damage checked as in [`crate::quarantine_corpus`].
//!
//! - `~` and `~/…`: Codex's `apply_patch` expands them from `$HOME` (its absolute-path
//!   helper), as do file tools that take a path the way a shell does; the guard read them
//!   as a directory named `~` in the worktree, so a patch reached the fence's home (a
//!   session's binding), the user's home and another repository's refs;
//! - white space around a path, which a harness may trim;
//! - links the kernel resolves per process (`/proc/self/…`, `/dev/fd/…`), which lead the
//!   harness elsewhere than the guard;
//! - a Codex `apply_patch` with a relative path and no `tool_cwd` (the directory it runs
//!   in is unknown): a relative path names no place the guard can judge;
//! - Gemini CLI's grep, which reads by running `git grep` (git reads the lane's
//!   configuration), `grep` from PATH or `rg` from under the user's home: not a reader in
//!   quarantine.
//!
//! A call let through is carried out as its harness would read the path (`~` expanded,
//! trimmed), so a failure says what it damaged.

use crate::guard::Lane;
use crate::quarantine_corpus::{
    Call, Damage, SHAPES, hook, input, installed, nothing_moved, planted, quarantined, run_call,
    shell,
};
use crate::quarantine_shapes::Counter;
use serde_json::json;
use std::fs;
use std::path::PathBuf;

/// Path texts with where each lands to a harness that reads them as Codex's
/// `apply_patch` does: `home` (the fence's), `user` (the user's home, open to a write
/// outside quarantine), `git`, `git-outside`, `settings-outside`, `settings-in` (a
/// harness's settings inside the worktree), `inside`, or `proc`
/// (through a link the kernel resolves per process: closed to every session, as the guard
/// cannot follow it where the harness would).
fn texts(lane: &Lane, session: &str) -> Vec<(String, &'static str)> {
    let home = lane.home.home.display().to_string();
    let clone = lane.repo.clone.display().to_string();
    vec![
        (format!("~/home/sessions/{session}.json"), "home"),
        ("~/home/sessions/s.json".into(), "home"),
        ("~/home/quarantine/s.json".into(), "home"),
        ("~//home/x.json".into(), "home"),
        (format!(" {home}/sessions/s.json"), "home"),
        (format!("\t{home}/x.json\n"), "home"),
        (format!("/proc/self/root{home}/sessions/s.json"), "proc"),
        (format!("/proc/thread-self/root{clone}/.git/config"), "proc"),
        ("/proc/self/cwd/.git/info/attributes".into(), "proc"),
        (format!("/dev/fd/../../..{home}/x.json"), "proc"),
        ("~/lane-a-remote.git/refs/heads/main".into(), "git-outside"),
        ("~/user/.codex/config.toml".into(), "settings-outside"),
        ("~/.profile".into(), "user"),
        ("~/outside/x.txt".into(), "user"),
        // A case-insensitive disk folds Unicode case: `ſ` is `s`, `ı` upper-cases to `I`.
        (".cur\u{17f}or/hooks.json".into(), "settings-in"),
        (".g\u{131}t/config".into(), "git"),
        ("notes.md".into(), "inside"),
    ]
}

/// Where a harness that expands `~` and trims white space writes `text`.
fn as_harness_reads(lane: &Lane, text: &str) -> PathBuf {
    let text = text.trim();
    match text.strip_prefix("~") {
        Some(rest) => lane.tmp().join(rest.trim_start_matches('/')),
        None => lane.repo.clone.join(text),
    }
}

/// Carries out a write the hook let through, at the place the harness reads.
fn write_as_harness(lane: &Lane, call: &Call) {
    let (Call::Write(p) | Call::Edit(p) | Call::Patch(p)) = call else {
        return;
    };
    let at = as_harness_reads(lane, p);
    if let Some(parent) = at.parent() {
        let _ = fs::create_dir_all(parent);
    }
    let _ = fs::write(at, "{\"planted\": true}\n");
}

/// In quarantine, no reading of any text reads outside the worktree or writes anything;
/// Gemini CLI's grep is denied even inside.
#[test]
fn quarantined_tools_are_judged_at_every_reading_of_their_paths() {
    let session = "s-readings";
    let (lane, hooks, damage) = quarantined(session);
    let mut through = Vec::new();
    let mut calls = 0;
    for (text, lands) in texts(&lane, session) {
        for call in [
            Call::Read(text.clone()),
            Call::List(text.clone()),
            Call::Grep(text.clone()),
            Call::Write(text.clone()),
            Call::Edit(text.clone()),
            Call::Patch(text.clone()),
        ] {
            // Claude Code's and Cursor's readers inside the worktree run; Gemini CLI's
            // grep never does.
            let reads = matches!(call, Call::Read(_) | Call::List(_) | Call::Grep(_));
            for shape in SHAPES {
                let gemini_grep = *shape == "gemini" && matches!(call, Call::Grep(_));
                // Reading a harness's settings inside the worktree changes nothing.
                let want = if reads && matches!(lands, "inside" | "settings-in") && !gemini_grep {
                    0
                } else {
                    2
                };
                let Some(ran) = run_call(&lane, &hooks, shape, &call, session) else {
                    continue;
                };
                calls += 1;
                if ran.code != want {
                    if want == 2 {
                        write_as_harness(&lane, &call);
                    }
                    through.push(format!(
                        "{shape} {call:?} ({lands}): exit {}: {}",
                        ran.code,
                        ran.stderr.lines().last().unwrap_or("")
                    ));
                }
            }
        }
    }
    nothing_moved(&damage, &lane, &through);
    assert!(calls >= 180, "{calls} calls");
    eprintln!("{calls} calls in quarantine at every reading, nothing moved");
}

/// Outside quarantine, no reading of a write's path reaches the fence's home, and a
/// session whose row is not ALLOWED writes no `.git` or harness settings at any reading;
/// the everyday write inside the worktree runs.
#[test]
fn outside_quarantine_every_reading_of_a_write_is_judged() {
    let mut lane = Lane::held();
    let server = Counter::start();
    planted(&lane, &server);
    let hooks = installed(&lane);
    let damage = Damage::watch(&lane, server, "s-readings-out");
    let states: [(&str, &[&str]); 3] = [
        ("allowed", &["home", "proc"]),
        (
            "unread",
            &[
                "home",
                "proc",
                "git",
                "settings-outside",
                "settings-in",
                "git-outside",
            ],
        ),
        ("unbound", &["home", "proc"]),
    ];
    let mut calls = 0;
    let mut through = Vec::new();
    for (state, closed) in states {
        match state {
            "unread" => {
                lane.daemon.take().unwrap().stop();
            }
            "unbound" => fs::remove_file(lane.repo.descriptor()).unwrap(),
            _ => {}
        }
        let session = format!("s-readings-{state}");
        let prime = Call::Read("file.txt".into());
        let primed = run_call(&lane, &hooks, "claude", &prime, &session).unwrap();
        assert_eq!(primed.code, 0, "{state}: {}", primed.stderr);
        for (text, lands) in texts(&lane, &session) {
            for call in [
                Call::Write(text.clone()),
                Call::Edit(text.clone()),
                Call::Patch(text.clone()),
            ] {
                let want = if closed.contains(&lands) { 2 } else { 0 };
                for shape in SHAPES {
                    let Some(ran) = run_call(&lane, &hooks, shape, &call, &session) else {
                        continue;
                    };
                    calls += 1;
                    if ran.code != want {
                        through.push(format!(
                            "{state} {shape} {call:?} ({lands}): exit {}: {}",
                            ran.code,
                            ran.stderr.lines().last().unwrap_or("")
                        ));
                        if lands == "home" {
                            write_as_harness(&lane, &call);
                        }
                    }
                }
            }
        }
    }
    let home_moved: Vec<String> = damage
        .done(&lane)
        .into_iter()
        .filter(|m| m.contains(&lane.home.home.display().to_string()))
        .collect();
    assert!(
        through.is_empty() && home_moved.is_empty(),
        "wrong verdicts:\n{}\nhome changed:\n{}",
        through.join("\n"),
        home_moved.join("\n")
    );
    assert!(calls >= 200, "{calls} calls");
    eprintln!("{calls} writes outside quarantine at every reading, the home unmoved");
}

/// The spellings above really land where they say when a harness reads them: a patch
/// written the way Codex reads `~` moves the fence's home.
#[test]
fn the_readings_really_land_in_the_home_without_the_guard() {
    let lane = Lane::held();
    for (text, lands) in texts(&lane, "s-none") {
        if lands != "home" || text.starts_with("/proc") {
            continue;
        }
        let at = as_harness_reads(&lane, &text);
        assert!(
            at.starts_with(&lane.home.home),
            "{text:?} lands at {}: the case tests nothing",
            at.display()
        );
    }
}

/// Codex without `tool_cwd` (before 0.169.0): its `apply_patch` tool applies the patch in
/// the turn's `cwd` (the hook's), so a relative path is judged there and the everyday
/// patch runs; a patch carried by a shell call runs in that call's `workdir`, which the
/// hook is not told, so its relative paths are denied for every session (absolute ones
/// are judged where they land); with `tool_cwd` the shell-carried relative patch runs.
#[test]
fn a_relative_patch_whose_directory_is_unknown_is_denied() {
    let lane = Lane::held();
    let hooks = installed(&lane);
    let clone = lane.repo.clone.display().to_string();
    let home = lane.home.home.display().to_string();
    let carried = |path: &str| {
        format!(
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {path}\n+x\n*** End Patch\nEOF\n"
        )
    };
    for state in ["allowed", "unbound"] {
        if state == "unbound" {
            fs::remove_file(lane.repo.descriptor()).unwrap();
        }
        let session = format!("s-unknown-{state}");
        for (call, with_cwd, want) in [
            (Call::Patch("notes.md".into()), false, 0),
            (Call::Patch(format!("{home}/sessions/s.json")), false, 2),
            (shell(&carried("notes.md")), false, 2),
            (shell(&carried("sessions/s.json")), false, 2),
            // A row-bound session's opaque command where the directory is unknown is
            // denied as such (README, Codex without tool_cwd).
            (
                shell(&carried(&format!("{clone}/notes.md"))),
                false,
                if state == "allowed" { 2 } else { 0 },
            ),
            (shell(&carried("notes.md")), true, 0),
        ] {
            let mut v = input("codex", &call, &session, &lane.repo.clone).unwrap();
            if !with_cwd {
                v.as_object_mut().unwrap().remove("tool_cwd");
            }
            let ran = hook(&lane, &hooks, "codex", &v);
            // An unbound session's `apply_patch` program (no program on PATH here) is not
            // asked about; a row-bound session's is opaque, and ALLOWED runs it.
            assert_eq!(
                ran.code, want,
                "{state} {call:?} tool_cwd {with_cwd}: {}",
                ran.stderr
            );
        }
    }
}

/// Gemini CLI's grep inside the worktree is denied in quarantine with a reason that names
/// what it runs; its `read_file` and `glob` still run; an unbound session's grep runs.
#[test]
fn gemini_s_grep_runs_programs_and_is_no_reader_in_quarantine() {
    let session = "s-gemini-grep";
    let (lane, hooks, damage) = quarantined(session);
    let clone = lane.repo.clone.display().to_string();
    let gemini = |tool: &str, i: serde_json::Value| {
        json!({"session_id": session, "cwd": lane.repo.clone, "hook_event_name": "BeforeTool",
               "timestamp": "2026-12-02T00:00:00Z", "tool_name": tool, "tool_input": i})
    };
    for (tool, i, want) in [
        ("grep_search", json!({"pattern": "x"}), 2),
        ("grep_search", json!({"pattern": "x", "dir_path": clone}), 2),
        (
            "search_file_content",
            json!({"pattern": "x", "include": "*.txt"}),
            2,
        ),
        (
            "read_file",
            json!({"file_path": format!("{clone}/file.txt")}),
            0,
        ),
        ("glob", json!({"pattern": "**/*.txt"}), 0),
    ] {
        let ran = hook(&lane, &hooks, "gemini", &gemini(tool, i.clone()));
        assert_eq!(ran.code, want, "{tool} {i}: {}", ran.stderr);
        if want == 2 {
            assert!(ran.stderr.contains("running programs"), "{}", ran.stderr);
        }
    }
    nothing_moved(&damage, &lane, &[]);
}

/// Codex applies a patch a shell command carries (`apply_patch <<'EOF' … EOF`, also after
/// `cd DIR &&`) itself and reports the call as its shell: it is judged as the
/// `apply_patch` it is, at every reading of its paths, for every session state; a patch
/// after a `cd` takes its relative paths from a directory the guard does not follow, and
/// is denied; the everyday patch inside the worktree runs.
#[test]
fn a_patch_carried_by_a_shell_call_is_judged_as_apply_patch() {
    let mut lane = Lane::held();
    let server = Counter::start();
    planted(&lane, &server);
    let hooks = installed(&lane);
    let damage = Damage::watch(&lane, server, "s-shell-patch");
    let home = lane.home.home.display().to_string();
    let carried = |path: &str, lead: &str| {
        format!(
            "{lead}apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: {path}\n+{{\"planted\": true}}\n*** End Patch\nEOF\n"
        )
    };
    let states: [(&str, &[&str]); 3] = [
        ("allowed", &["home", "cd"]),
        // `apply_patch` is no program on PATH here: opaque, which a row whose fence cannot
        // be read does not run wherever it writes.
        ("unread", &["home", "cd", "git", "settings", "inside"]),
        ("unbound", &["home", "cd"]),
    ];
    let mut calls = 0;
    let mut through = Vec::new();
    for (state, closed) in states {
        match state {
            "unread" => {
                lane.daemon.take().unwrap().stop();
            }
            "unbound" => fs::remove_file(lane.repo.descriptor()).unwrap(),
            _ => {}
        }
        let session = format!("s-shell-patch-{state}");
        let prime = Call::Read("file.txt".into());
        let primed = run_call(&lane, &hooks, "claude", &prime, &session).unwrap();
        assert_eq!(primed.code, 0, "{state}: {}", primed.stderr);
        for (command, lands) in [
            (carried(&format!("{home}/sessions/s.json"), ""), "home"),
            (carried("~/home/x.json", ""), "home"),
            (carried("qlink/../sessions/s.json", ""), "home"),
            (carried("sessions/s.json", &format!("cd {home} && ")), "cd"),
            (carried(".git/hooks/pre-push", ""), "git"),
            (carried(".Git/info/attributes", ""), "git"),
            (carried(".claude/settings.json", ""), "settings"),
            (carried("notes.md", ""), "inside"),
        ] {
            let want = if closed.contains(&lands) { 2 } else { 0 };
            let ran = run_call(&lane, &hooks, "codex", &shell(&command), &session).unwrap();
            calls += 1;
            if ran.code != want {
                through.push(format!(
                    "{state} {command:?} ({lands}): exit {}: {}",
                    ran.code,
                    ran.stderr.lines().last().unwrap_or("")
                ));
            }
        }
    }
    let home_moved: Vec<String> = damage
        .done(&lane)
        .into_iter()
        .filter(|m| m.contains(&home))
        .collect();
    assert!(
        through.is_empty() && home_moved.is_empty(),
        "wrong verdicts:\n{}\nhome changed:\n{}",
        through.join("\n"),
        home_moved.join("\n")
    );
    eprintln!("{calls} patches carried by shell calls judged");
}

/// In quarantine, a glob pattern's brace alternatives are each a root (`{/etc,src}/*` is
/// `/etc/*` to a glob library), an extglob group holding `..` climbs, and a Cursor MCP
/// name that splits more than one way is not read-only; patterns that stay inside run.
#[test]
fn brace_alternatives_and_ambiguous_cursor_mcp_names_in_quarantine() {
    let session = "s-braces";
    let (lane, hooks, damage) = quarantined(session);
    let home = lane.home.home.display().to_string();
    let tmp = lane.tmp().display().to_string();
    let clone = lane.repo.clone.clone();
    let claude = |tool: &str, i: serde_json::Value| {
        json!({"session_id": session, "cwd": clone, "hook_event_name": "PreToolUse",
               "tool_name": tool, "tool_input": i})
    };
    let gemini = |tool: &str, i: serde_json::Value| {
        let mut v = claude(tool, i);
        v["hook_event_name"] = json!("BeforeTool");
        v
    };
    let cursor_pre = |tool: &str, i: serde_json::Value| {
        json!({"conversation_id": session, "generation_id": "g-1", "hook_event_name": "preToolUse",
               "workspace_roots": [clone], "cwd": clone, "tool_name": tool, "tool_input": i})
    };
    let cursor_mcp = |tool: &str| {
        json!({"conversation_id": session, "generation_id": "g-1", "hook_event_name": "beforeMCPExecution",
               "workspace_roots": [clone], "cwd": clone, "tool_name": tool, "tool_input": "{}"})
    };
    let mut cases = Vec::new();
    for pattern in [
        format!("{{{home},src}}/**/*.json"),
        format!("{{src,{{{home}/sessions,sub}}}}/*"),
        format!("{{{tmp}/lane-a-remote.git,x}}/**"),
        "{..,src}/*".to_string(),
        "sub/{a,../..}/*".to_string(),
        "@(..)/*".to_string(),
        "{~,src}/.profile".to_string(),
        "**/.git/config".to_string(),
        "{src,.Git}/**".to_string(),
    ] {
        cases.push(("claude", claude("Glob", json!({"pattern": pattern})), 2));
        cases.push(("gemini", gemini("glob", json!({"pattern": pattern})), 2));
        cases.push((
            "gemini",
            gemini("read_many_files", json!({"paths": [pattern]})),
            2,
        ));
    }
    for name in [
        "MCP:gh:get_x:merge_pull_request",
        "MCP:gh:list_a:delete_repo",
        "MCP:gh:",
    ] {
        cases.push(("cursor", cursor_pre(name, json!({})), 2));
    }
    cases.push(("cursor", cursor_mcp("merge_pull_request"), 2));
    // A Grep filter that names `.git` picks git's own files.
    for glob in ["**/.git/*", ".git/config", "{x,.GIT}/**"] {
        cases.push((
            "claude",
            claude("Grep", json!({"pattern": "url", "glob": glob})),
            2,
        ));
    }
    // Inside: they run.
    cases.push((
        "claude",
        claude("Grep", json!({"pattern": "x", "glob": "*.{rs,txt}"})),
        0,
    ));
    cases.push((
        "claude",
        claude("Glob", json!({"pattern": "{sub,src}/*"})),
        0,
    ));
    cases.push((
        "gemini",
        gemini("read_many_files", json!({"paths": ["{sub,file}*"]})),
        0,
    ));
    cases.push(("cursor", cursor_pre("MCP:github:get_issue", json!({})), 0));
    let mut wrong = Vec::new();
    for (harness, input, want) in &cases {
        let ran = hook(&lane, &hooks, harness, input);
        if ran.code != *want {
            wrong.push(format!(
                "{harness} {input}: exit {}: {}",
                ran.code,
                ran.stderr.lines().last().unwrap_or("")
            ));
        }
    }
    nothing_moved(&damage, &lane, &wrong);
    eprintln!("{} brace and MCP-name calls in quarantine", cases.len());
}

/// Outside quarantine a write tool's member the guard does not know (a harness release
/// naming its path `target_file`) is read as a path too: into the fence's home it is
/// denied for an unbound session, elsewhere it runs.
#[test]
fn an_unknown_member_of_a_write_tool_is_judged_as_a_path() {
    let lane = Lane::held();
    let hooks = installed(&lane);
    fs::remove_file(lane.repo.descriptor()).unwrap();
    let clone = lane.repo.clone.clone();
    let home = lane.home.home.display().to_string();
    for (tool, input, want) in [
        (
            "Write",
            json!({"file_path": "notes.md", "target_file": format!("{home}/sessions/s.json"), "content": "x"}),
            2,
        ),
        (
            "Edit",
            json!({"file_path": "notes.md", "path2": "~/home/x.json", "old_string": "a", "new_string": "b"}),
            2,
        ),
        (
            "Write",
            json!({"file_path": "notes.md", "target_file": "src/other.rs", "content": "x"}),
            0,
        ),
        (
            "Write",
            json!({"file_path": "notes.md", "encoding": "utf-8", "content": "x"}),
            0,
        ),
    ] {
        let v = json!({"session_id": "s-unknown-member", "cwd": clone, "hook_event_name": "PreToolUse",
                       "tool_name": tool, "tool_input": input});
        let ran = hook(&lane, &hooks, "claude", &v);
        assert_eq!(ran.code, want, "{tool} {input}: {}", ran.stderr);
    }
}

/// Cursor's `preToolUse` names its writes `Write`, `StrReplace`, `TabWrite` and `Delete`:
/// each is a write, so none reaches the fence's home for any session, none reaches `.git`
/// while the row cannot be read, none runs in quarantine, and inside the worktree they
/// run for an ALLOWED or unbound session.
#[test]
fn cursor_s_own_write_tools_are_writes() {
    let mut lane = Lane::held();
    let hooks = installed(&lane);
    let clone = lane.repo.clone.clone();
    let home = lane.home.home.display().to_string();
    let pre = |session: &str, tool: &str, path: &str| {
        let input = match tool {
            "StrReplace" => json!({"path": path, "old_string": "a", "new_string": "b"}),
            "Delete" => json!({"path": path}),
            _ => json!({"path": path, "contents": "x"}),
        };
        json!({"conversation_id": session, "generation_id": "g-1", "hook_event_name": "preToolUse",
               "workspace_roots": [clone], "cwd": clone, "tool_name": tool, "tool_input": input,
               "tool_use_id": "u-1", "model": "m", "cursor_version": "2.0.0"})
    };
    let states: [(&str, &[&str]); 4] = [
        ("allowed", &["home"]),
        ("quarantined", &["home", "git", "inside"]),
        ("unread", &["home", "git"]),
        ("unbound", &["home"]),
    ];
    let mut wrong = Vec::new();
    let mut calls = 0;
    for (state, closed) in states {
        match state {
            "quarantined" => lane.lose(),
            "unread" => {
                // The row granted back: the quarantined session's next ask is ALLOWED and
                // lifts its record (else a fresh session of the lane would be quarantined
                // while the fence cannot be read).
                lane.regain();
                let lift = pre("s-cursor-writes-quarantined", "Write", "notes.md");
                let lifted = hook(&lane, &hooks, "cursor", &lift);
                assert_eq!(lifted.code, 0, "{}", lifted.stderr);
                lane.daemon.take().unwrap().stop();
            }
            "unbound" => fs::remove_file(lane.repo.descriptor()).unwrap(),
            _ => {}
        }
        let session = format!("s-cursor-writes-{state}");
        for (path, lands) in [
            (format!("{home}/sessions/{session}.json"), "home"),
            ("~/home/quarantine/s.json".to_string(), "home"),
            (format!("{}/.git/hooks/pre-push", clone.display()), "git"),
            (format!("{}/.git/config", clone.display()), "git"),
            (format!("{}/notes.md", clone.display()), "inside"),
        ] {
            for tool in ["Write", "StrReplace", "TabWrite", "Delete"] {
                let want = if closed.contains(&lands) { 2 } else { 0 };
                let ran = hook(&lane, &hooks, "cursor", &pre(&session, tool, &path));
                calls += 1;
                if ran.code != want {
                    wrong.push(format!(
                        "{state} {tool} {path} ({lands}): exit {}: {}",
                        ran.code,
                        ran.stderr.lines().last().unwrap_or("")
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "wrong verdicts:\n{}", wrong.join("\n"));
    eprintln!("{calls} Cursor write-tool calls judged");
}

/// An input without a session id (judged by its cwd's descriptor) of a lane one of whose
/// sessions was refused, while the fence cannot be read: the lane's record counts, as it
/// does for a fresh session, so no shell runs (`git status` would run what the lane
/// planted in its configuration).
#[test]
fn a_session_less_call_of_a_refused_lane_is_quarantined_while_the_fence_is_unread() {
    let session = "s-sessionless";
    let (mut lane, hooks, damage) = quarantined(session);
    lane.daemon.take().unwrap().stop();
    // The worktree spelled through a link, as a harness started there would send it.
    let linked = lane.tmp().join("wt-link");
    std::os::unix::fs::symlink(&lane.repo.clone, &linked).unwrap();
    let missing = "git show 0123456789abcdef0123456789abcdef01234567";
    let clone = lane.repo.clone.clone();
    let mut through = Vec::new();
    for (command, cwd, fresh) in [
        ("git status", &clone, None),
        (missing, &clone, None),
        ("ls", &clone, None),
        (missing, &linked, None),
        (missing, &linked, Some("s-sessionless-fresh")),
    ] {
        let call = shell(command);
        for shape in ["claude", "codex", "gemini", "cursor"] {
            let mut v = input(shape, &call, fresh.unwrap_or(session), cwd).unwrap();
            if fresh.is_none() {
                let m = v.as_object_mut().unwrap();
                m.remove("session_id");
                m.remove("conversation_id");
            }
            let ran = hook(&lane, &hooks, shape, &v);
            if ran.code != 2 {
                let _ = lane.run_for_real(command, &clone);
                through.push(format!(
                    "{shape} {command} in {} (session {fresh:?}): exit {}: {}",
                    cwd.display(),
                    ran.code,
                    ran.stderr.lines().last().unwrap_or("")
                ));
            }
        }
    }
    nothing_moved(&damage, &lane, &through);
}

/// git reads the configuration of the repository it runs in: a session that is not
/// quarantined itself (unbound, its harness started in a parent directory; or bound to
/// another lane) that runs git in a refused lane's clone would run what that lane
/// planted. Each place git runs at is asked about: a refused one denies the call, whoever
/// calls it; once the row is granted back, the same call runs.
#[test]
fn git_in_a_refused_lane_s_repository_is_denied_whoever_calls_it() {
    let lane = Lane::refused();
    let server = Counter::start();
    planted(&lane, &server);
    let hooks = installed(&lane);
    let damage = Damage::watch(&lane, server, "s-parent");
    let parent = lane.tmp();
    let clone = lane.repo.clone.display().to_string();
    let missing = "0123456789abcdef0123456789abcdef01234567";
    let commands = [
        format!("git -C {clone} show {missing}"),
        format!("cd {clone} && git show {missing}"),
        format!("git --git-dir={clone}/.git log -1"),
        format!("(cd {clone}; git status)"),
        format!(
            "cd {clone} && python3 -c 'import subprocess; subprocess.run([\"git\", \"show\", \"{missing}\"])'"
        ),
    ];
    let mut through = Vec::new();
    let mut calls = 0;
    for shape in ["claude", "codex", "gemini", "cursor", "cursor-pre"] {
        for command in &commands {
            let session = format!("s-parent-{shape}");
            let v = input(shape, &shell(command), &session, &parent).unwrap();
            let ran = hook(&lane, &hooks, shape, &v);
            calls += 1;
            if ran.code != 2 {
                let _ = lane.run_for_real(command, &parent);
                through.push(format!(
                    "{shape} {command}: exit {}: {}",
                    ran.code,
                    ran.stderr.lines().last().unwrap_or("")
                ));
            }
        }
    }
    // Gemini CLI's grep runs `git grep` where it searches.
    let grep = |session: &str| {
        json!({"session_id": session, "cwd": parent, "hook_event_name": "BeforeTool",
               "tool_name": "grep_search", "tool_input": {"pattern": "x", "dir_path": clone}})
    };
    let ran = hook(&lane, &hooks, "gemini", &grep("s-parent-grep"));
    calls += 1;
    if ran.code != 2 {
        through.push(format!("gemini grep_search in {clone}: exit {}", ran.code));
    }
    nothing_moved(&damage, &lane, &through);
    // The row granted back: the same reads run (nothing planted is triggered by status).
    lane.regain();
    let ran = hook(&lane, &hooks, "gemini", &grep("s-parent-grep-after"));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let status = format!("git -C {clone} status --short");
    let v = input("claude", &shell(&status), "s-parent-after", &parent).unwrap();
    let ran = hook(&lane, &hooks, "claude", &v);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    eprintln!("{calls} git calls in a refused lane's repository from outside it denied");
}
