//! Quarantine (ARCHITECTURE.md, "Quarantine"): once a row-bound session's ask is REFUSED,
//! the guard stops deciding what writes and allows only what is positively known to be
//! read-only: [`allowlist`] for Bash (with [`gitconfig`] for git), [`tools`] for every
//! other tool. The refusal is remembered beside the binding ([`record`]), so the session
//! stays quarantined while later asks cannot be read; it leaves quarantine only when an
//! ask for it is ALLOWED again.

pub mod allowlist;
pub mod gitconfig;
pub mod record;
pub mod tools;

use std::path::Path;

/// Whether one tool call may run in quarantine: `Ok`, or why not (a sentence).
/// `parsed` is the Bash command's tree when the walk parsed it (`None`: the command did
/// not parse, which denies). `worktree` is the session's working tree, from its binding
/// (`None`: no binding stands, and a file tool, which must stay inside it, denies).
pub fn permits(
    tool: &crate::input::Tool,
    parsed: Option<&brush_parser::ast::Program>,
    cwd: &Path,
    worktree: Option<&Path>,
    home: Option<&Path>,
) -> Result<(), String> {
    match tool {
        crate::input::Tool::Bash { .. } => {
            path_is_safe(&worktree.map_or_else(|| worktree_of(cwd), Path::to_path_buf))?;
            let env_home = std::env::var("HOME").ok().filter(|h| !h.is_empty());
            let Some(program) = parsed else {
                return Err("the guard cannot read the command".into());
            };
            let needs = allowlist::check_parsed(program, cwd, env_home.as_deref())?;
            for dir in &needs.git_dirs {
                gitconfig::check(dir)?;
            }
            Ok(())
        }
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

/// An allowlisted name runs the program `PATH` finds: a relative `PATH` entry or one
/// inside the worktree (which a quarantined session may still write) could put anything
/// under that name.
fn path_is_safe(worktree: &Path) -> Result<(), String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let tree = std::fs::canonicalize(worktree).unwrap_or_else(|_| worktree.to_path_buf());
    for dir in std::env::split_paths(&path) {
        let real = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
        if dir.as_os_str().is_empty() || dir.is_relative() || real.starts_with(&tree) {
            return Err(format!(
                "PATH holds {}, where a program could be put under an allowlisted name",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// The top of the working tree holding `dir` (the nearest directory with a `.git`), or
/// `dir` itself.
pub fn worktree_of(dir: &Path) -> std::path::PathBuf {
    let folded = crate::state::fold(dir);
    let mut at = Some(folded.as_path());
    while let Some(d) = at {
        if d.join(".git").exists() {
            return d.to_path_buf();
        }
        at = d.parent();
    }
    folded
}
