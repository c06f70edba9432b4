//! Round six (ARCHITECTURE.md, "Quarantine"): what a quarantined glob pattern matches on
//! the disk. The guard judged a pattern by its literal prefix and by a literal `.git` in
//! it, so a wildcard matched past both: `*/peek.json` through a link the lane planted
//! into the fence's home, `?link/…`, `**/peek.json`, and glob spellings of `.git` that a
//! glob library matches (`[.]git`, `\.git`, `.gi?`, `.G*` read with letter case ignored).
//! Each shape runs through the installed hook of every harness with a pattern tool, in
//! its own input shape (Claude Code's `Glob` and `Grep`, Gemini CLI's `glob` and
//! `read_many_files`, Cursor's `preToolUse`).

use crate::quarantine_corpus::{hook, nothing_moved, quarantined};
use serde_json::json;
use std::fs;

/// Every pattern whose wildcard reaches the fence's home or git's own directory is
/// denied in quarantine; everyday patterns inside the worktree run.
#[test]
fn a_quarantined_pattern_is_judged_by_what_it_matches_on_the_disk() {
    let session = "s-globs";
    let (lane, hooks, damage) = quarantined(session);
    let clone = lane.repo.clone.clone();
    // What the wildcards can reach: a file in the fence's home (through the planted
    // `qlink` and `hlink`) and git's configuration.
    fs::write(lane.home.home.join("sessions/peek.json"), "{}").unwrap();
    assert!(clone.join(".git/config").is_file());
    let claude = |tool: &str, i: serde_json::Value| {
        json!({"session_id": session, "transcript_path": "/nonexistent/t.jsonl", "cwd": clone,
               "permission_mode": "default", "hook_event_name": "PreToolUse",
               "tool_name": tool, "tool_input": i})
    };
    let gemini = |tool: &str, i: serde_json::Value| {
        let mut v = claude(tool, i);
        v["hook_event_name"] = json!("BeforeTool");
        v["timestamp"] = json!("2026-12-02T00:00:00Z");
        v
    };
    let cursor = |tool: &str, i: serde_json::Value| {
        json!({"conversation_id": session, "generation_id": "g-1", "hook_event_name": "preToolUse",
               "workspace_roots": [clone], "cwd": clone, "tool_name": tool, "tool_input": i,
               "tool_use_id": "u-1", "model": "m", "cursor_version": "2.0.0"})
    };
    let mut cases = Vec::new();
    let patterns = [
        "*/peek.json",
        "q*/*.json",
        "?link/peek.json",
        "?link/*/peek.json",
        "**/peek.json",
        "**/*.json",
        "[qh]link/**/*.json",
        "[.]git/config",
        ".gi[t]/config",
        "\\.git/config",
        ".gi\\t/config",
        ".gi?/config",
        ".G*/config",
        "{src,[.]git}/config",
        "*/config",
        "\\.\\./*",
    ];
    for pattern in patterns {
        cases.push(("claude", claude("Glob", json!({"pattern": pattern})), 2));
        cases.push(("gemini", gemini("glob", json!({"pattern": pattern})), 2));
        for member in ["paths", "include"] {
            cases.push((
                "gemini",
                gemini("read_many_files", json!({ member: [pattern] })),
                2,
            ));
        }
        cases.push(("cursor", cursor("Glob", json!({"pattern": pattern})), 2));
    }
    // A Grep filter picks among files the tool walks unseen: one whose wildcard may
    // match `.git` picks git's own files.
    for glob in [
        "[.]git/*",
        ".gi?/config",
        "\\.git/config",
        ".G*/*",
        "*/config",
    ] {
        let i = json!({"pattern": "url", "glob": glob});
        cases.push(("claude", claude("Grep", i.clone()), 2));
        cases.push(("cursor", cursor("Grep", i), 2));
    }
    // Everyday patterns inside the worktree run.
    for pattern in ["*.txt", "**/*.txt", "{sub,src}/*.txt", "fi?e.*"] {
        cases.push(("claude", claude("Glob", json!({"pattern": pattern})), 0));
        cases.push(("gemini", gemini("glob", json!({"pattern": pattern})), 0));
        cases.push((
            "gemini",
            gemini("read_many_files", json!({"paths": [pattern]})),
            0,
        ));
    }
    for glob in ["*.txt", "*.{rs,txt}", "**/*.md"] {
        let i = json!({"pattern": "x", "glob": glob});
        cases.push(("claude", claude("Grep", i.clone()), 0));
        cases.push(("cursor", cursor("Grep", i), 0));
    }
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
    assert!(cases.len() >= 100, "{} cases", cases.len());
    eprintln!(
        "{} pattern calls in quarantine judged by their matches",
        cases.len()
    );
}
