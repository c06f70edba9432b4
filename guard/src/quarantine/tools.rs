//! Tools other than Bash, in quarantine (ARCHITECTURE.md, "Quarantine"): a harness's
//! built-in file tools run only inside the session's worktree minus its git files,
//! symlinks resolved; an MCP tool runs only when read-only by a documented rule (its name
//! starts with `get_`, `list_`, `search_` or `read_`, or its server is one the operator
//! lists as read-only); every other tool — web fetches, subagents, tools the guard does
//! not know — is denied.

use std::path::{Component, Path, PathBuf};

/// Claude Code's built-in tools that read files, and the input member naming the path.
const READS: &[(&str, &str)] = &[
    ("Read", "file_path"),
    ("Glob", "path"),
    ("Grep", "path"),
    ("LS", "path"),
    ("NotebookRead", "notebook_path"),
];

/// Claude Code's built-in tools that write files, and the input member naming the path.
const WRITES: &[(&str, &str)] = &[
    ("Write", "file_path"),
    ("Edit", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
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
    /// The session's worktree (the top of the working tree it is bound from).
    pub worktree: &'a Path,
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
    if let Some(&(_, member)) = READS.iter().find(|(n, _)| *n == name) {
        let path = path_of(input, member, at.cwd)?;
        return inside(&path, at, false);
    }
    if let Some(&(_, member)) = WRITES.iter().find(|(n, _)| *n == name) {
        let path = path_of(input, member, at.cwd)?;
        return inside(&path, at, true);
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

fn path_of(input: &serde_json::Value, member: &str, cwd: &Path) -> Result<PathBuf, String> {
    match input.get(member) {
        None | Some(serde_json::Value::Null) => Ok(cwd.to_path_buf()),
        Some(serde_json::Value::String(p)) => Ok(cwd.join(p)),
        Some(_) => Err(format!("the tool's {member} is not a string")),
    }
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
    let Some(tree) = physical(at.worktree) else {
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
            worktree: &tree,
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
        std::fs::create_dir_all(home.join("guard")).unwrap();
        std::fs::write(read_only_servers_file(&home), "# docs only\ndocs\n").unwrap();
        assert!(ok("mcp__docs__fetch_page", json!({})));
        assert!(!ok("mcp__github__fetch_page", json!({})));
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
