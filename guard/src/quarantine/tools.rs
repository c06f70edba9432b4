//! Tools other than Bash, in quarantine (ARCHITECTURE.md, "Quarantine"): a harness's
//! built-in file tools run only inside the session's worktree minus its git files,
//! symlinks resolved; an MCP tool runs only when read-only by a documented rule (its name
//! starts with `get_`, `list_`, `search_` or `read_`, or its server is one the operator
//! lists as read-only); every other tool — web fetches, subagents, tools the guard does
//! not know — is denied.

use std::path::{Component, Path, PathBuf};

/// What one member of a file tool's input is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Member {
    /// A path the tool reads or writes (a string, or an array of strings).
    Path,
    /// Glob patterns whose matches the tool reads, taken under the tool's path (a string
    /// or an array of strings).
    Pattern,
    /// Anything else the tool takes: contents, regexes, filters within the path, counts.
    Data,
}

use Member::{Data, Path as P, Pattern};

/// A file tool's input members, each with what it is.
type Members = &'static [(&'static str, Member)];

/// The built-in file tools (Claude Code's names; Gemini CLI's are renamed to them, except
/// `read_many_files`), whether each writes, and every member of its input with what it is.
/// A member not listed denies: a path the guard does not know to look at would otherwise
/// be read as "no path given", which is the working directory (ARCHITECTURE.md,
/// "Quarantine": what is not understood is denied).
const FILE_TOOLS: &[(&str, bool, Members)] = &[
    (
        "Read",
        false,
        &[
            ("file_path", P),
            ("absolute_path", P),
            ("offset", Data),
            ("limit", Data),
            ("pages", Data),
        ],
    ),
    (
        "read_many_files",
        false,
        &[
            ("paths", Pattern),
            ("include", Pattern),
            ("exclude", Data),
            ("recursive", Data),
            ("useDefaultExcludes", Data),
            ("respect_git_ignore", Data),
            ("file_filtering_options", Data),
        ],
    ),
    (
        "Glob",
        false,
        &[
            ("pattern", Pattern),
            ("path", P),
            ("dir_path", P),
            ("case_sensitive", Data),
            ("respect_git_ignore", Data),
            ("respect_gemini_ignore", Data),
            ("file_filtering_options", Data),
        ],
    ),
    (
        "Grep",
        false,
        &[
            ("pattern", Data),
            ("path", P),
            ("dir_path", P),
            ("glob", Data),
            ("include", Data),
            ("type", Data),
            ("output_mode", Data),
            ("-i", Data),
            ("-n", Data),
            ("-A", Data),
            ("-B", Data),
            ("-C", Data),
            ("multiline", Data),
            ("head_limit", Data),
            ("offset", Data),
        ],
    ),
    (
        "LS",
        false,
        &[
            ("path", P),
            ("dir_path", P),
            ("ignore", Data),
            ("file_filtering_options", Data),
        ],
    ),
    (
        "NotebookRead",
        false,
        &[("notebook_path", P), ("cell_id", Data)],
    ),
    (
        "Write",
        true,
        &[("file_path", P), ("absolute_path", P), ("content", Data)],
    ),
    (
        "Edit",
        true,
        &[
            ("file_path", P),
            ("absolute_path", P),
            ("old_string", Data),
            ("new_string", Data),
            ("replace_all", Data),
            ("expected_replacements", Data),
            ("instruction", Data),
        ],
    ),
    ("MultiEdit", true, &[("file_path", P), ("edits", Data)]),
    (
        "NotebookEdit",
        true,
        &[
            ("notebook_path", P),
            ("cell_id", Data),
            ("new_source", Data),
            ("cell_type", Data),
            ("edit_mode", Data),
        ],
    ),
];

/// Tools with no effect outside the conversation.
const INERT: &[&str] = &["TodoWrite", "TodoRead", "ExitPlanMode"];

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
    /// The hook's working directory (a relative or missing path is taken from here).
    pub cwd: &'a Path,
}

/// An MCP tool's (server, tool), from `mcp__SERVER__TOOL`.
pub fn mcp(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix("mcp__")?.split_once("__")
}

/// True when an MCP tool only reads by the documented rule.
pub fn mcp_reads(name: &str, home: Option<&Path>) -> bool {
    let Some((server, tool)) = mcp(name) else {
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

/// Judges a non-Bash tool in quarantine: `Ok` when it may run, else why not.
pub fn check(name: &str, input: &serde_json::Value, at: &Where) -> Result<(), String> {
    if INERT.contains(&name) {
        return Ok(());
    }
    if let Some(&(_, write, members)) = FILE_TOOLS.iter().find(|(n, _, _)| *n == name) {
        return file_tool(name, input, members, write, at);
    }
    if name == "apply_patch" {
        // Codex's file edits: every path the patch adds, updates, deletes or moves to.
        let patch = ["command", "patch", "input"]
            .iter()
            .find_map(|m| input.get(*m).and_then(serde_json::Value::as_str))
            .ok_or("the patch is not readable")?;
        let paths = crate::harness::patch_paths(patch);
        if paths.is_empty() {
            return Err("the patch names no file".into());
        }
        for p in paths {
            inside(&at.cwd.join(p), at, true)?;
        }
        return Ok(());
    }
    if mcp(name).is_some() {
        return if mcp_reads(name, at.home) {
            Ok(())
        } else {
            Err(format!(
                "the MCP tool `{name}` is not read-only by the quarantine's rule (a name starting with {}, or a server listed in $ROW_FENCE_HOME/guard/read-only-mcp-servers)",
                READ_ONLY_MCP_PREFIXES.join(", ")
            ))
        };
    }
    Err(format!(
        "the tool `{name}` is not on the quarantine's allowlist"
    ))
}

/// Checks every path and pattern a file tool's input names (none named: the working
/// directory). A member the tool is not known to take denies.
fn file_tool(
    name: &str,
    input: &serde_json::Value,
    members: &[(&str, Member)],
    write: bool,
    at: &Where,
) -> Result<(), String> {
    let empty = serde_json::Map::new();
    let fields = match input {
        serde_json::Value::Object(m) => m,
        serde_json::Value::Null => &empty,
        _ => return Err(format!("the input of `{name}` is not an object")),
    };
    let mut base = at.cwd.to_path_buf();
    let mut patterns = Vec::new();
    let mut named = false;
    for (key, value) in fields {
        let Some(&(_, kind)) = members.iter().find(|(m, _)| m == key) else {
            return Err(format!(
                "`{name}` with the member `{key}` is not on the quarantine's allowlist"
            ));
        };
        if kind == Data || value.is_null() {
            continue;
        }
        let texts = strings(value).ok_or(format!("the tool's {key} is not a string"))?;
        for text in texts {
            if kind == P {
                base = at.cwd.join(text);
                inside(&base, at, write)?;
                named = true;
            } else {
                patterns.push(text);
            }
        }
    }
    if !named {
        inside(&base, at, write)?;
    }
    for pattern in patterns {
        inside(&base.join(glob_prefix(pattern)?), at, write)?;
    }
    Ok(())
}

/// A member's strings: one string, or an array of them.
fn strings(value: &serde_json::Value) -> Option<Vec<&str>> {
    match value {
        serde_json::Value::String(s) => Some(vec![s.as_str()]),
        serde_json::Value::Array(items) => items.iter().map(serde_json::Value::as_str).collect(),
        _ => None,
    }
}

/// The directories a glob pattern names before its first wildcard (every match lies
/// under them); a `..` anywhere in it could climb out after a wildcard, and denies.
fn glob_prefix(pattern: &str) -> Result<PathBuf, String> {
    let path = Path::new(pattern);
    if path.components().any(|c| c == Component::ParentDir) {
        return Err(format!("the pattern `{pattern}` climbs out with `..`"));
    }
    let mut prefix = PathBuf::new();
    for part in path.components() {
        if part
            .as_os_str()
            .to_string_lossy()
            .contains(['*', '?', '[', '{'])
        {
            break;
        }
        prefix.push(part);
    }
    Ok(prefix)
}

/// The path with symlinks resolved as far as it exists (a file about to be written
/// resolves through its parent).
fn physical(path: &Path) -> Option<PathBuf> {
    let mut missing = Vec::new();
    let mut at = crate::state::fold(path);
    loop {
        if let Ok(real) = std::fs::canonicalize(&at) {
            return Some(
                missing
                    .iter()
                    .rev()
                    .fold(real, |p, m: &std::ffi::OsString| p.join(m)),
            );
        }
        missing.push(at.file_name()?.to_os_string());
        at = at.parent()?.to_path_buf();
    }
}

fn inside(path: &Path, at: &Where, write: bool) -> Result<(), String> {
    let denied = |why: &str| Err(format!("{}: {why}", path.display()));
    let Some(real) = physical(path) else {
        return denied("the guard cannot resolve the path");
    };
    let Some(worktree) = at.worktree else {
        return denied(
            "no binding names the session's worktree, so the tool cannot be kept inside it",
        );
    };
    let Some(tree) = physical(worktree) else {
        return denied("the guard cannot resolve the session's worktree");
    };
    if let Some(home) = at.home.and_then(physical)
        && real.starts_with(&home)
    {
        return denied("the fence's home is not readable or writable in quarantine");
    }
    let Ok(rest) = real.strip_prefix(&tree) else {
        return denied(&format!(
            "outside the session's worktree {} (quarantine)",
            tree.display()
        ));
    };
    // A file with a second name (a hard link planted earlier) may be one outside the
    // worktree, or in `.git`: no path says which, so writing it denies.
    if write
        && let Ok(meta) = std::fs::symlink_metadata(&real)
        && std::os::unix::fs::MetadataExt::nlink(&meta) > 1
        && !meta.is_dir()
    {
        return denied(
            "the file has another name (a hard link), which may be outside the worktree",
        );
    }
    for part in rest.components() {
        if let Component::Normal(name) = part {
            let name = name.to_string_lossy();
            // `.git` (the repository and its descriptor), and for a write also
            // `.gitattributes`, `.gitmodules` and every other `.git*` file git reads.
            if name == ".git" || (write && name.starts_with(".git")) {
                return denied("git's own files are not readable or writable in quarantine");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quarantined_tools_stay_in_the_worktree_and_mcp_writes_are_denied() {
        let tmp = std::env::temp_dir().join(format!("rf-q-tools-{}", std::process::id()));
        let tree = tmp.join("wt");
        std::fs::create_dir_all(tree.join(".git")).unwrap();
        std::fs::create_dir_all(tmp.join("home")).unwrap();
        std::os::unix::fs::symlink(tmp.join("home"), tree.join("link")).unwrap();
        let home = tmp.join("home");
        let at = Where {
            worktree: Some(&tree),
            home: Some(&home),
            cwd: &tree,
        };
        let ok = |name: &str, input: serde_json::Value| check(name, &input, &at).is_ok();
        assert!(ok("Read", json!({"file_path": "src/main.rs"})));
        assert!(ok("Write", json!({"file_path": "notes.md"})));
        assert!(ok("Grep", json!({"pattern": "x"})));
        assert!(ok("TodoWrite", json!({})));
        assert!(ok("mcp__github__get_pull_request", json!({})));
        assert!(ok("mcp__github__list_issues", json!({})));
        assert!(!ok("Read", json!({"file_path": ".git/config"})));
        assert!(!ok("Write", json!({"file_path": ".gitattributes"})));
        assert!(!ok("Edit", json!({"file_path": "sub/.gitmodules"})));
        assert!(!ok("Read", json!({"file_path": "link/sock"})));
        assert!(!ok("Read", json!({"file_path": "../other/x"})));
        assert!(!ok("Write", json!({"file_path": "/etc/x"})));
        assert!(!ok("Write", json!({"file_path": 7})));
        assert!(!ok("mcp__github__create_pull_request", json!({})));
        assert!(!ok("mcp__github__merge_pull_request", json!({})));
        assert!(!ok("mcp__github__push_files", json!({})));
        assert!(!ok("WebFetch", json!({"url": "http://127.0.0.1/"})));
        assert!(!ok("Task", json!({})));
        assert!(!ok("SomeNewTool", json!({})));
        // Every path member is looked at, whichever spelling the harness uses; a member
        // the guard does not know denies rather than reading as "no path".
        assert!(!ok(
            "read_many_files",
            json!({"paths": ["src/x", "/etc/passwd"]})
        ));
        assert!(!ok(
            "read_many_files",
            json!({"paths": ["**/*.rs"], "include": ["../other/*"]})
        ));
        assert!(ok("read_many_files", json!({"paths": ["src/**/*.rs"]})));
        assert!(!ok("LS", json!({"dir_path": home})));
        assert!(!ok("Grep", json!({"pattern": "token", "dir_path": "../"})));
        assert!(!ok(
            "Glob",
            json!({"pattern": format!("{}/**", home.display())})
        ));
        assert!(!ok("Glob", json!({"pattern": "**/../../x"})));
        assert!(ok("Glob", json!({"pattern": "src/**/*.rs"})));
        assert!(!ok(
            "Read",
            json!({"file_path": "a.md", "other_path": "/etc/x"})
        ));
        assert!(!ok("Read", json!("a.md")));
        // A hard link in the worktree may name a file outside it: no write through it.
        std::fs::write(tmp.join("outside"), "x").unwrap();
        std::fs::hard_link(tmp.join("outside"), tree.join("linked")).unwrap();
        assert!(ok("Read", json!({"file_path": "linked"})));
        assert!(!ok("Write", json!({"file_path": "linked"})));
        assert!(!ok(
            "Edit",
            json!({"file_path": "linked", "old_string": "x", "new_string": "y"})
        ));
        std::fs::create_dir_all(home.join("guard")).unwrap();
        std::fs::write(read_only_servers_file(&home), "# docs only\ndocs\n").unwrap();
        assert!(ok("mcp__docs__fetch_page", json!({})));
        assert!(!ok("mcp__github__fetch_page", json!({})));
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
