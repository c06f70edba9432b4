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
/// fences, outside quarantine, by the names the adapters produce
/// ([`crate::harness::renamed_away`]: Gemini CLI's `web_fetch` is `WebFetch` here): web reads, subagents (whose own calls are hooked), the
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

/// Why a tool call does not run in quarantine (the denial's sentence is its Display).
#[derive(Debug, thiserror::Error)]
pub enum Denied {
    /// A shell call ([`super::NO_SHELL`]).
    #[error("{}", super::NO_SHELL)]
    Shell,
    /// A reader that runs programs to read ([`RUNS_PROGRAMS`]); the tool's name.
    #[error(
        "`{0}` searches by running programs (git grep, grep or rg) that read files the lane could have written (git's configuration, programs on PATH or under the home); Read, Glob and list_directory still run"
    )]
    RunsPrograms(String),
    /// A file tool that writes; the tool's name.
    #[error("`{0}` writes files, and nothing is written in quarantine")]
    Writes(String),
    /// An MCP tool not read-only by the rule; the tool's name.
    #[error("the MCP tool `{0}` is not read-only by the quarantine's rule (a name that splits one way into mcp__SERVER__TOOL with the tool starting {prefixes}, or a server listed in $ROW_FENCE_HOME/guard/read-only-mcp-servers)", prefixes = READ_ONLY_MCP_PREFIXES.join(", "))]
    McpNotReadOnly(String),
    /// Any other tool (web fetches, subagents, tools the guard does not know); its name.
    #[error("the tool `{0}` is not one the quarantine lets run")]
    NotLetRun(String),
    /// The reader's input could not be read as the paths it reads
    /// ([`file_tools::Unread`]).
    #[error("{0}")]
    Unread(file_tools::Unread),
    /// A part of a glob pattern no matcher reads.
    #[error("{}: the guard cannot read `{part}` as a glob", .pattern.display())]
    UnreadGlob {
        /// The whole pattern (absolute).
        pattern: PathBuf,
        /// The part not read.
        part: String,
    },
    /// A glob pattern reaching more than [`MAX_WALKED`] entries.
    #[error("{}: the pattern reaches more than {MAX_WALKED} files, too many for the guard to judge in quarantine; name a narrower one", .0.display())]
    TooManyFiles(PathBuf),
    /// A path the reader would read lies outside what quarantine lets it read.
    #[error("{}: {why}", .path.display())]
    Unreadable {
        /// The path as the tool names it (or as a pattern matched it).
        path: PathBuf,
        /// Why it is not readable.
        why: Unreadable,
    },
}

/// Why a path is not readable in quarantine (see [`read_inside`]).
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    /// No binding names the worktree.
    #[error("no binding names the session's worktree, so the tool cannot be kept inside it")]
    NoWorktree,
    /// The path could not be resolved as the kernel would (fail closed).
    #[error("the guard cannot resolve it ({0})")]
    Unresolved(#[source] real_path::Unresolved),
    /// Its last part is a link.
    #[error(
        "its last part is a symbolic link, which may lead anywhere; name the file it points to"
    )]
    LastIsLink,
    /// The worktree could not be resolved (fail closed).
    #[error("the guard cannot resolve the worktree ({0})")]
    WorktreeUnresolved(#[source] real_path::Unresolved),
    /// It lands in the fence's home.
    #[error("the fence's home is not readable in quarantine")]
    Home,
    /// It lands outside the worktree (its real path).
    #[error("it lands outside the session's worktree {} (quarantine)", .0.display())]
    OutsideWorktree(PathBuf),
    /// It lands in a `.git` directory.
    #[error("git's own directory is not readable in quarantine")]
    GitDir,
}

/// Judges a tool other than the shell in quarantine: `Ok` when it may run, else why not.
pub fn check(name: &str, input: &serde_json::Value, at: &Where) -> Result<(), Denied> {
    if INERT.contains(&name) {
        return Ok(());
    }
    if RUNS_PROGRAMS.contains(&name) {
        return Err(Denied::RunsPrograms(name.to_string()));
    }
    if file_tools::writes(name) {
        return Err(Denied::Writes(name.to_string()));
    }
    if let Some(tool) = file_tools::find(name) {
        debug_assert_eq!(tool.access, Access::Read);
        let named = file_tools::named(tool, input, at.cwd, true).map_err(Denied::Unread)?;
        if named.paths.is_empty() {
            read_inside(at.cwd, at)?;
        }
        for path in named.paths.iter().chain(&named.pattern_roots) {
            read_inside(path, at)?;
        }
        let mut budget = MAX_WALKED;
        for (under, pattern) in &named.patterns {
            pattern_reads(&under.join(pattern), at, &mut budget)?;
        }
        return Ok(());
    }
    if mcp(name).is_some() {
        return if mcp_reads(name, at.home) {
            Ok(())
        } else {
            Err(Denied::McpNotReadOnly(name.to_string()))
        };
    }
    Err(Denied::NotLetRun(name.to_string()))
}

/// The most directory entries the guard reads while walking one call's glob patterns
/// before it stops (and denies): a pattern it cannot walk is one it cannot judge.
pub const MAX_WALKED: usize = 200_000;

/// Every file a glob pattern (absolute, braces expanded) may read is judged as a path
/// naming it would be: what a wildcard matches is only known on the disk, where a
/// wildcard walks through a link the lane planted (`*/s.json` through `link -> $HOME`)
/// as readily as through a directory. The guard walks the pattern as the most permissive
/// glob library would (letter case ignored, `*` matching a leading dot, `**` any depth
/// of directories, a link under `**` judged where it lands) and judges every match of its
/// last part with [`read_inside`].
fn pattern_reads(pattern: &Path, at: &Where, budget: &mut usize) -> Result<(), Denied> {
    let meta = ['*', '?', '[', '{', '(', '!', '+', '@', '\\'];
    let mut start = PathBuf::new();
    let mut parts: Vec<String> = Vec::new();
    for c in pattern.components() {
        let text = c.as_os_str().to_string_lossy();
        if parts.is_empty() && !text.contains(meta) {
            start.push(c);
        } else {
            parts.push(text.into_owned());
        }
    }
    if parts.is_empty() {
        // No wildcard: the pattern is its root, judged already.
        return Ok(());
    }
    if parts.last().is_some_and(|p| p == "**") {
        parts.push("*".into());
    }
    let mut set = vec![start];
    for (k, part) in parts.iter().enumerate() {
        let last = k + 1 == parts.len();
        let mut next = Vec::new();
        if part == "**" {
            for dir in &set {
                under_any_depth(dir, budget, &mut next)?;
            }
        } else {
            // A part no glob library reads the same way (an extglob group) may match
            // anything.
            let matcher = if part.contains('(') {
                None
            } else {
                Some(
                    file_tools::part_matcher(part).ok_or_else(|| Denied::UnreadGlob {
                        pattern: pattern.to_path_buf(),
                        part: part.clone(),
                    })?,
                )
            };
            for dir in &set {
                for (path, _) in entries(dir, pattern, budget)? {
                    let name = path.file_name().unwrap_or_default();
                    if !matcher.as_ref().is_none_or(|m| m.is_match(name)) {
                        continue;
                    }
                    if last {
                        read_inside(&path, at)?;
                    } else {
                        next.push(path);
                    }
                }
            }
        }
        set = next;
        if set.is_empty() {
            break;
        }
    }
    Ok(())
}

/// The entries of `dir` with whether each is a link (none when it cannot be read: a
/// harness reads nothing there either), counted against `budget`.
fn entries(dir: &Path, pattern: &Path, budget: &mut usize) -> Result<Vec<(PathBuf, bool)>, Denied> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in read.flatten() {
        *budget = budget
            .checked_sub(1)
            .ok_or_else(|| Denied::TooManyFiles(pattern.to_path_buf()))?;
        let link = entry.file_type().is_ok_and(|t| t.is_symlink());
        out.push((entry.path(), link));
    }
    Ok(out)
}

/// `dir` and every directory under it (what `**` matches), into `out`. A link under it
/// is taken as one more directory (a glob library may match through it: what the next
/// part matches there is judged where it lands) and not walked further (the glob
/// libraries the harnesses use do not crawl linked directories under `**`).
fn under_any_depth(dir: &Path, budget: &mut usize, out: &mut Vec<PathBuf>) -> Result<(), Denied> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for (path, link) in entries(&d, dir, budget)? {
            if link {
                out.push(path);
            } else if path.is_dir() {
                stack.push(path);
            }
        }
        out.push(d);
    }
    Ok(())
}

/// A read of `path` is allowed: it lands, as the kernel resolves it now, inside the
/// worktree, outside `.git` and the home, and its last part is not a link.
fn read_inside(path: &Path, at: &Where) -> Result<(), Denied> {
    let denied = |why: Unreadable| {
        Err(Denied::Unreadable {
            path: path.to_path_buf(),
            why,
        })
    };
    let Some(worktree) = at.worktree else {
        return denied(Unreadable::NoWorktree);
    };
    let landing = match real_path::resolve(&at.cwd.join(path)) {
        Ok(landing) => landing,
        Err(e) => return denied(Unreadable::Unresolved(e)),
    };
    if landing.last_is_link {
        return denied(Unreadable::LastIsLink);
    }
    let tree = match real_path::resolve(worktree) {
        Ok(t) => t.real,
        Err(e) => return denied(Unreadable::WorktreeUnresolved(e)),
    };
    if let Some(home) = at.home.and_then(|h| real_path::resolve(h).ok())
        && landing.real.starts_with(&home.real)
    {
        return denied(Unreadable::Home);
    }
    let Ok(rest) = landing.real.strip_prefix(&tree) else {
        return denied(Unreadable::OutsideWorktree(tree));
    };
    let in_git = rest
        .components()
        .any(|c| matches!(c, Component::Normal(n) if real_path::is_dot_git(n)));
    if in_git {
        return denied(Unreadable::GitDir);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The lists name tools as the adapters produce them: a harness's own name that its
    /// adapter renames (Gemini CLI's `web_fetch`, Codex's `shell`) would never match, and
    /// every name an adapter renames to is one the guard knows.
    #[test]
    fn every_tool_list_names_tools_as_the_adapters_produce_them() {
        let file_tools = crate::file_tools::FILE_TOOLS.iter().map(|t| t.name);
        for name in INERT
            .iter()
            .chain(KNOWN_OUTSIDE)
            .chain(RUNS_PROGRAMS)
            .copied()
            .chain(file_tools)
        {
            assert!(!crate::harness::renamed_away(name), "{name}");
        }
        assert!(crate::harness::renamed_away("web_fetch"));
        assert!(crate::harness::renamed_away("shell"));
        for (_, canonical) in crate::harness::GEMINI_RENAMED {
            assert!(
                *canonical == "Bash" || !opaque_outside(canonical, None),
                "{canonical}"
            );
        }
    }

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
        // A wildcard reads what it matches on the disk: spellings of `.git` a glob library
        // matches, and links planted under the worktree that a wildcard walks through.
        std::os::unix::fs::symlink(tree.join(".git"), tree.join("src/g")).unwrap();
        std::fs::write(home.join("sessions/s.json"), "{}").unwrap();
        std::fs::write(tree.join("src/main.rs"), "").unwrap();
        std::fs::write(tree.join(".git/config"), "").unwrap();
        for (name, input) in [
            ("Grep", json!({"pattern": "x", "glob": "[.]git/*"})),
            ("Grep", json!({"pattern": "x", "glob": ".gi[t]/config"})),
            ("Grep", json!({"pattern": "x", "glob": "\\.git/config"})),
            ("Grep", json!({"pattern": "x", "glob": ".gi?/config"})),
            ("Grep", json!({"pattern": "x", "glob": ".G*/config"})),
            ("Grep", json!({"pattern": "x", "glob": "@(.git)/config"})),
            ("Glob", json!({"pattern": "[.]git/*"})),
            ("Glob", json!({"pattern": ".gi\\t/config"})),
            ("Glob", json!({"pattern": "\\.\\./x/*"})),
            ("read_many_files", json!({"paths": ["[.]git/config"]})),
            ("read_many_files", json!({"paths": ["*/s.json"]})),
            ("read_many_files", json!({"paths": ["Q*/s.json"]})),
            ("read_many_files", json!({"paths": ["src/?/config"]})),
            ("read_many_files", json!({"include": ["**/s.json"]})),
            ("read_many_files", json!({"include": ["src/**"]})),
            ("Glob", json!({"pattern": "q*/*"})),
            // `**` matches through the links planted at the top.
            ("Glob", json!({"pattern": "**/*.json"})),
        ] {
            assert!(!ok(name, input.clone()), "{name} {input}");
        }
        std::fs::create_dir_all(tree.join("src/q")).unwrap();
        std::fs::write(tree.join("src/q/mod.rs"), "").unwrap();
        for (name, input) in [
            ("Glob", json!({"pattern": "src/*/mod.rs"})),
            ("Glob", json!({"pattern": "src/q/**/*.rs"})),
            ("Glob", json!({"pattern": "**/*.rs"})),
            ("read_many_files", json!({"include": ["src/*.rs", "*.md"]})),
            ("Grep", json!({"pattern": "x", "glob": "*.rs"})),
        ] {
            assert!(ok(name, input.clone()), "{name} {input}");
        }
        // No binding: no worktree to keep a reader inside.
        let unbound = Where {
            worktree: None,
            home: Some(&home),
            cwd: &tree,
        };
        assert!(check("Read", &json!({"file_path": "src/a"}), &unbound).is_err());
    }
}
