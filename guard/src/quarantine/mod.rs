//! Quarantine (ARCHITECTURE.md, "Quarantine"): once a row-bound session's ask is REFUSED,
//! nothing runs whose behaviour the lane can configure or plant. The lane writes its
//! worktree, its `.git`, its HOME and whatever its uid can write; git reads configuration
//! from all of them and runs what it names, and every harness's shell reads lane-written
//! startup files before each call. So in quarantine no shell runs and nothing is written:
//! only the harness's own file readers inside the worktree ([`tools`]) and MCP tools
//! read-only by rule. The refusal is remembered beside the binding ([`record`]), so the
//! session stays quarantined while later asks cannot be read; it leaves quarantine only
//! when an ask for it is ALLOWED again.

pub mod record;
pub mod tools;

use std::path::Path;

/// Why a shell call never runs in quarantine (the denial's sentence).
pub const NO_SHELL: &str = "no shell runs in quarantine: the shell and every program it starts read files the lane could have written (git's configuration, shell startup files, programs on PATH)";

/// Whether one tool call may run in quarantine: `Ok`, or why not (a sentence).
/// `worktree` is the session's working tree, from its binding (`None`: no binding stands,
/// and a file tool, which must stay inside it, denies).
pub fn permits(
    tool: &crate::input::Tool,
    cwd: &Path,
    worktree: Option<&Path>,
    home: Option<&Path>,
) -> Result<(), tools::Denied> {
    match tool {
        crate::input::Tool::Bash { .. } => Err(tools::Denied::Shell),
        crate::input::Tool::Other { name, input } => tools::check(
            name,
            input,
            &tools::Where {
                worktree,
                home,
                cwd,
            },
        ),
    }
}

/// The top of the working tree holding `dir` (the nearest directory with a `.git`), or
/// `dir` itself.
pub fn worktree_of(dir: &Path) -> std::path::PathBuf {
    let folded = row_fence_shell::state::fold(dir);
    let mut at = Some(folded.as_path());
    while let Some(d) = at {
        if d.join(".git").exists() {
            return d.to_path_buf();
        }
        at = d.parent();
    }
    folded
}
