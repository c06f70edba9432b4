//! Tools other than the shell, in quarantine (ARCHITECTURE.md, "Quarantine"): a
//! harness's built-in file readers run only inside the session's worktree, outside `.git`
//! (in any spelling a disk opens as it) and the fence's home, each path resolved as the
//! kernel resolves it ([`crate::real_path`]) at every place a harness may read its text
//! at ([`file_tools::readings`]: `~` as `$HOME`, white space trimmed) and never through a
//! link as its last part; a reader that runs programs to read ([`RUNS_PROGRAMS`]) is
//! denied; no file tool writes; an MCP tool runs only when read-only by a documented rule (its
//! name splits one way into server and tool, and the tool starts with `get_`, `list_`,
//! `search_` or `read_`, or its server is one the operator lists as read-only); a few
//! tools that touch nothing outside the conversation run; every other tool — web
//! fetches, subagents, tools the guard does not know — is denied.

use crate::file_tools::{self, Access};
use crate::real_path;
use std::path::{Component, Path, PathBuf};

/// Tools with no effect outside the conversation, or only on the session's own
/// background shells (Claude Code's `BashOutput` reads one, `KillShell` stops one:
/// stopping a push backgrounded while the row was held is what a refused agent should be
/// able to do).
pub const INERT: &[&str] = &[
    "TodoWrite",
    "TodoRead",
    "ExitPlanMode",
    "BashOutput",
    "KillShell",
    "KillBash",
    "update_plan",
    "write_todos",
];

/// Tools that read files by running a program the lane can configure or plant, denied
/// in quarantine whatever they are given: Gemini CLI's grep (`grep_search`, formerly
/// `search_file_content`) runs `git grep` in the repository it searches (git reads the
/// lane's configuration), else `grep` found on PATH, or `rg` from Gemini CLI's own
/// directory under the user's home; and it checks for them with a shell (`command -v`).
pub const RUNS_PROGRAMS: &[&str] = &["grep_search", "search_file_content"];

/// Tools other than file tools and MCP tools that the guard knows write nothing it
/// fences, outside quarantine: web reads, subagents (whose own calls are hooked), the
/// conversation's own state and background shells. A row-bound session runs them
/// whatever its standing ask says (in quarantine only [`INERT`] ones run).
pub const KNOWN_OUTSIDE: &[&str] = &[
    "WebFetch",
    "WebSearch",
    "Task",
    "Agent",
    "Skill",
    "SlashCommand",
    "AskUserQuestion",
    "EnterPlanMode",
    "ListMcpResourcesTool",
    "ReadMcpResourceTool",
    "TaskOutput",
    "TaskStop",
    "web_fetch",
    "google_web_search",
    "ask_user",
    "enter_plan_mode",
    "exit_plan_mode",
    "activate_skill",
    "get_internal_docs",
    "update_topic",
    "codebase_investigator",
    "view_image",
    "web_search",
];

/// True when a tool other than the shell is opaque outside quarantine (it runs for a
/// row-bound session only when the standing ask is ALLOWED): an MCP tool that is not
/// read-only by the rule, and any tool the guard does not know (Cursor's `Delete`, Gemini
/// CLI's `save_memory`, a harness's next tool), since nothing says what it writes.
pub fn opaque_outside(name: &str, home: Option<&Path>) -> bool {
    if mcp(name).is_some() {
        return !mcp_reads(name, home);
    }
    let known = INERT.contains(&name)
        || KNOWN_OUTSIDE.contains(&name)
        || RUNS_PROGRAMS.contains(&name)
        || file_tools::find(name).is_some()
        || name == file_tools::APPLY_PATCH;
    !known
}

/// Name prefixes of MCP tools that only read (after `mcp__SERVER__`).
pub const READ_ONLY_MCP_PREFIXES: &[&str] = &["get_", "list_", "search_", "read_"];

/// The file under the home listing MCP servers the operator marks read-only, one name a
/// line (`#` starts a comment).
pub fn read_only_servers_file(home: &Path) -> PathBuf {
    home.join("guard").join("read-only-mcp-servers")
}

/// What the quarantine needs to judge a tool.
pub struct Where<'a> {
    /// The session's worktree (the top of the working tree it is bound from); `None`
    /// when no binding names it, and every file tool denies.
    pub worktree: Option<&'a Path>,
    /// `$ROW_FENCE_HOME`, never read or written by a quarantined tool.
    pub home: Option<&'a Path>,
    /// The directory relative paths are taken from.
    pub cwd: &'a Path,
}

/// An MCP tool's server and tool, from `mcp__SERVER__TOOL`: `Some((server, Some(tool)))`
/// when the name splits exactly one way, `Some((rest, None))` when it is an MCP name that
/// splits more than one way (`mcp__a__b__c` may be server `a`, tool `b__c` or server
/// `a__b`, tool `c`), `None` when it is not an MCP tool's name.
pub fn mcp(name: &str) -> Option<(&str, Option<&str>)> {
    let rest = name.strip_prefix("mcp__")?;
    let splits: Vec<usize> = rest.match_indices("__").map(|(k, _)| k).collect();
    // `a___b` holds `__` at two overlapping places: two splits.
    let overlapping = rest.as_bytes().windows(3).any(|w| w == b"___");
    match splits.as_slice() {
        [k] if !overlapping && *k > 0 && *k + 2 < rest.len() => {
            Some((&rest[..*k], Some(&rest[*k + 2..])))
        }
        _ => Some((rest, None)),
    }
}

/// True when an MCP tool only reads by the documented rule.
pub fn mcp_reads(name: &str, home: Option<&Path>) -> bool {
    let Some((server, Some(tool))) = mcp(name) else {
        return false;
    };
    if READ_ONLY_MCP_PREFIXES.iter().any(|p| tool.starts_with(p)) {
        return true;
    }
    home.and_then(|h| std::fs::read_to_string(read_only_servers_file(h)).ok())
        .is_some_and(|text| {
            text.lines()
                .map(|l| l.split('#').next().unwrap_or_default().trim())
                .any(|l| l == server)
        })
}

/// Judges a tool other than the shell in quarantine: `Ok` when it may run, else why not.
pub fn check(name: &str, input: &serde_json::Value, at: &Where) -> Result<(), String> {
    if INERT.contains(&name) {
        return Ok(());
    }
    if RUNS_PROGRAMS.contains(&name) {
        return Err(format!(
            "`{name}` searches by running programs (git grep, grep or rg) that read files the lane could have written (git's configuration, programs on PATH or under the home); Read, Glob and list_directory still run"
        ));
    }
    if file_tools::writes(name) {
        return Err(format!(
            "`{name}` writes files, and nothing is written in quarantine"
        ));
    }
    if let Some(tool) = file_tools::find(name) {
        debug_assert_eq!(tool.access, Access::Read);
        let named = file_tools::named(tool, input, at.cwd, true)?;
        if named.paths.is_empty() {
            read_inside(at.cwd, at)?;
        }
        for path in named.paths.iter().chain(&named.pattern_roots) {
            read_inside(path, at)?;
        }
        return Ok(());
    }
    if mcp(name).is_some() {
        return if mcp_reads(name, at.home) {
            Ok(())
        } else {
            Err(format!(
                "the MCP tool `{name}` is not read-only by the quarantine's rule (a name that splits one way into mcp__SERVER__TOOL with the tool starting {}, or a server listed in $ROW_FENCE_HOME/guard/read-only-mcp-servers)",
                READ_ONLY_MCP_PREFIXES.join(", ")
            ))
        };
    }
    Err(format!(
        "the tool `{name}` is not one the quarantine lets run"
    ))
}

/// A read of `path` is allowed: it lands, as the kernel resolves it now, inside the
/// worktree, outside `.git` and the home, and its last part is not a link.
fn read_inside(path: &Path, at: &Where) -> Result<(), String> {
    let denied = |why: &str| Err(format!("{}: {why}", path.display()));
    let Some(worktree) = at.worktree else {
        return denied(
            "no binding names the session's worktree, so the tool cannot be kept inside it",
        );
    };
    let landing = match real_path::resolve(&at.cwd.join(path)) {
        Ok(landing) => landing,
        Err(e) => return denied(&format!("the guard cannot resolve it ({e})")),
    };
    if landing.last_is_link {
        return denied(
            "its last part is a symbolic link, which may lead anywhere; name the file it points to",
        );
    }
    let tree = match real_path::resolve(worktree) {
        Ok(t) => t.real,
        Err(e) => return denied(&format!("the guard cannot resolve the worktree ({e})")),
    };
    if let Some(home) = at.home.and_then(|h| real_path::resolve(h).ok())
        && landing.real.starts_with(&home.real)
    {
        return denied("the fence's home is not readable in quarantine");
    }
    let Ok(rest) = landing.real.strip_prefix(&tree) else {
        return denied(&format!(
            "it lands outside the session's worktree {} (quarantine)",
            tree.display()
        ));
    };
    let in_git = rest
        .components()
        .any(|c| matches!(c, Component::Normal(n) if real_path::is_dot_git(n)));
    if in_git {
        return denied("git's own directory is not readable in quarantine");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mcp_names_that_split_more_than_one_way_are_never_read_only() {
        assert_eq!(
            mcp("mcp__github__get_pull_request"),
            Some(("github", Some("get_pull_request")))
        );
        assert_eq!(
            mcp("mcp__gh__get__merge_pull_request"),
            Some(("gh__get__merge_pull_request", None))
        );
        assert_eq!(mcp("mcp__a___get_x"), Some(("a___get_x", None)));
        assert_eq!(mcp("mcp____get_x"), Some(("__get_x", None)));
        assert_eq!(mcp("Read"), None);
        assert!(mcp_reads("mcp__github__list_issues", None));
        // Outside quarantine: a tool the guard does not know is opaque, known ones not.
        for opaque in ["save_memory", "mcp__github__merge_pull_request", "x"] {
            assert!(opaque_outside(opaque, None), "{opaque}");
        }
        for known in [
            "Delete",
            "StrReplace",
            "TabWrite",
            "Read",
            "Write",
            "apply_patch",
            "WebFetch",
            "TodoWrite",
            "grep_search",
        ] {
            assert!(!opaque_outside(known, None), "{known}");
        }
        for name in [
            "mcp__gh__get__merge_pull_request",
            "mcp__gh__list__x__y",
            "mcp__a___get_x",
            "mcp__github__merge_pull_request",
            "mcp__github_get_pull_request__",
        ] {
            assert!(!mcp_reads(name, None), "{name}");
        }
    }

    #[test]
    fn quarantined_tools_read_inside_the_worktree_and_write_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let tree = root.join("wt");
        let home = root.join("home");
        std::fs::create_dir_all(tree.join(".git")).unwrap();
        std::fs::create_dir_all(tree.join("src")).unwrap();
        std::fs::create_dir_all(home.join("sessions")).unwrap();
        std::os::unix::fs::symlink(&home, tree.join("link")).unwrap();
        std::os::unix::fs::symlink(home.join("sessions"), tree.join("qlink")).unwrap();
        let at = Where {
            worktree: Some(&tree),
            home: Some(&home),
            cwd: &tree,
        };
        let ok = |name: &str, input: serde_json::Value| check(name, &input, &at).is_ok();
        assert!(ok("Read", json!({"file_path": "src/main.rs"})));
        assert!(ok("Grep", json!({"pattern": "x"})));
        assert!(ok("Grep", json!({"pattern": "x", "glob": "*.{rs,md}"})));
        assert!(!ok("Grep", json!({"pattern": "x", "glob": "**/.git/*"})));
        assert!(!ok(
            "Grep",
            json!({"pattern": "x", "glob": "{src,.GIT}/config"})
        ));
        assert!(ok("Glob", json!({"pattern": "src/**/*.rs"})));
        assert!(ok("read_many_files", json!({"include": ["src/**/*.rs"]})));
        for inert in INERT {
            assert!(ok(inert, json!({})), "{inert}");
        }
        assert!(ok("mcp__github__get_pull_request", json!({})));
        for (name, input) in [
            ("Write", json!({"file_path": "notes.md", "content": "x"})),
            ("Edit", json!({"file_path": "src/a.rs"})),
            ("MultiEdit", json!({"file_path": "src/a.rs", "edits": []})),
            ("NotebookEdit", json!({"notebook_path": "n.ipynb"})),
            (
                "apply_patch",
                json!({"command": "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch"}),
            ),
            ("Read", json!({"file_path": ".git/config"})),
            ("Read", json!({"file_path": ".GIT/config"})),
            ("Read", json!({"file_path": "link/sock"})),
            ("Read", json!({"file_path": "qlink/../sessions/s.json"})),
            ("Read", json!({"file_path": "link"})),
            ("Read", json!({"file_path": "../other/x"})),
            ("Read", json!({"file_path": 7})),
            ("Read", json!({"file_path": "a.md", "other_path": "/etc/x"})),
            ("Read", json!("a.md")),
            (
                "read_many_files",
                json!({"paths": ["src/x", "/etc/passwd"]}),
            ),
            ("Glob", json!({"pattern": "**/../../x"})),
            ("LS", json!({"dir_path": home})),
            ("mcp__github__create_pull_request", json!({})),
            ("WebFetch", json!({"url": "http://127.0.0.1/"})),
            ("Task", json!({})),
            ("SomeNewTool", json!({})),
            ("grep_search", json!({"pattern": "x"})),
            (
                "search_file_content",
                json!({"pattern": "x", "dir_path": "src"}),
            ),
            ("Read", json!({"file_path": "/proc/self/root/etc/passwd"})),
            ("Read", json!({"file_path": "/dev/stdin"})),
            ("Read", json!({"file_path": "~/.profile"})),
            ("Glob", json!({"pattern": "~/**/*"})),
        ] {
            assert!(!ok(name, input.clone()), "{name} {input}");
        }
        std::fs::create_dir_all(home.join("guard")).unwrap();
        std::fs::write(read_only_servers_file(&home), "# docs only\ndocs\n").unwrap();
        assert!(ok("mcp__docs__fetch_page", json!({})));
        assert!(!ok("mcp__github__fetch_page", json!({})));
        // No binding: no worktree to keep a reader inside.
        let unbound = Where {
            worktree: None,
            home: Some(&home),
            cwd: &tree,
        };
        assert!(check("Read", &json!({"file_path": "src/a"}), &unbound).is_err());
    }
}
