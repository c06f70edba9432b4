//! The agent hook of every harness, as `row-fence install agent-hook --agent NAME` writes
//! it, run the way each harness runs a hook (`sh -c '<the command>'`, the harness's
//! documented input on stdin), for four calls: a harmless command in a directory no
//! lane is bound to (no ask), the same in the row-bound worktree of a lane that holds its
//! row (the standing ask, ALLOWED), a 100 KB harmless command there, and the harmless
//! command in the worktree of a lane whose row was taken over (the standing ask REFUSED:
//! the session is quarantined and the shell call denied). The inputs are the shapes each
//! harness sends: Claude Code 2.x (`PreToolUse`), Codex CLI 0.169 (`PreToolUse`,
//! `tool_input` `{command}`, `tool_cwd`), Gemini CLI 0.26 (`BeforeTool`,
//! `run_shell_command`) and Cursor 1.7 (`beforeShellExecution`).

use crate::fixture::{Binaries, clean_command};
use crate::hook_inputs::{input, installed_command};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

pub use row_fence_contract::harness::Harness;

/// Which call a sample makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Call {
    /// A harmless command where no lane is bound: no ask.
    Unbound,
    /// A harmless command in the row-bound worktree of a lane that holds its row: the
    /// standing ask, ALLOWED.
    Allowed,
    /// A 100 KB harmless command there.
    Large,
    /// The harmless command in the worktree of a lane whose row another lane took over:
    /// the standing ask REFUSED, the session quarantined, the shell call denied (exit 2).
    Quarantined,
}

/// The size of [`Call::Large`]'s command, in bytes (at least).
pub const LARGE_BYTES: usize = 100 * 1024;

/// One harness's installed hook and its inputs.
#[derive(Clone, Debug)]
pub struct AgentHook {
    /// The harness.
    pub harness: Harness,
    /// The command the harness runs through `sh -c`.
    pub command: String,
    /// Per call: the input file and the directory the harness runs the hook in.
    pub inputs: Vec<(Call, PathBuf, PathBuf)>,
}

impl AgentHook {
    /// The input file and directory of `call`.
    pub fn input(&self, call: Call) -> Option<(&Path, &Path)> {
        self.inputs
            .iter()
            .find(|(c, ..)| *c == call)
            .map(|(_, input, dir)| (input.as_path(), dir.as_path()))
    }
}

/// A harmless command of at least [`LARGE_BYTES`]: generated lines a build script might
/// hold.
pub fn large_command() -> String {
    let mut text = String::with_capacity(LARGE_BYTES + 64);
    let mut n = 0;
    while text.len() < LARGE_BYTES {
        text.push_str(&format!(
            "echo 'step {n}: checking the generated files' >/dev/null\n"
        ));
        n += 1;
    }
    text
}

/// Installs every harness's hook for the daemon at `home` and writes its inputs; `lane` is
/// the row-bound worktree, `store` the lease store (for the refused lane's grant and
/// takeover), `work` the bench's scratch directory.
pub fn install(
    bins: &Binaries,
    home: &Path,
    store: &str,
    lane: &Path,
    work: &Path,
) -> Result<Vec<AgentHook>, String> {
    let unbound = work.join("unbound");
    fs::create_dir_all(&unbound).map_err(|e| format!("{}: {e}", unbound.display()))?;
    let refused = refused_lane(bins, home, store, &work.join("refused"))?;
    let large = large_command();
    let mut hooks = Vec::new();
    for harness in Harness::ALL {
        let name = harness.name();
        let file = work.join(format!("{name}-hooks.json"));
        let out = clean_command(bins.path("row-fence"), home, &[])
            .args(["install", "agent-hook", "--agent", name, "--bin-dir"])
            .arg(&bins.dir)
            .arg("--settings")
            .arg(&file)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run row-fence install agent-hook: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "row-fence install agent-hook --agent {name} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let command = installed_command(harness, &file)?;
        let mut inputs = Vec::new();
        for (call, dir, text) in [
            (Call::Unbound, &unbound, "git status --short"),
            (Call::Allowed, &lane.to_path_buf(), "git status --short"),
            (Call::Large, &lane.to_path_buf(), large.as_str()),
            (Call::Quarantined, &refused, "git status --short"),
        ] {
            let session = format!("bench-{name}-{call:?}");
            let path = work.join(format!("{name}-{call:?}.json"));
            let json = input(harness, &session, dir, text).to_string();
            fs::write(&path, json).map_err(|e| format!("{}: {e}", path.display()))?;
            inputs.push((call, path, dir.clone()));
        }
        hooks.push(AgentHook {
            harness,
            command,
            inputs,
        });
    }
    Ok(hooks)
}

/// A worktree whose lane's row another lane took over: `git init` in `dir`, a grant of
/// its own row written as its descriptor, then a takeover by another lane.
fn refused_lane(bins: &Binaries, home: &Path, store: &str, dir: &Path) -> Result<PathBuf, String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let init = clean_command("git", home, &[])
        .args(["init", "-q"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("git init: {e}"))?;
    if !init.status.success() {
        return Err(format!(
            "git init {}: {}",
            dir.display(),
            String::from_utf8_lossy(&init.stderr).trim()
        ));
    }
    let descriptor = dir.join(".git").join("row-fence.json");
    let board = crate::fixture::BOARD;
    for args in [
        vec!["--lane", "bench-refused", "--write-descriptor"],
        vec!["--lane", "bench-taker", "--takeover"],
    ] {
        let mut cmd = clean_command(bins.path("row-fence"), home, &[]);
        cmd.args([
            "--store",
            store,
            "acquire",
            board,
            "row-refused",
            "--ttl",
            "24h",
        ])
        .args(&args);
        if args.contains(&"--write-descriptor") {
            cmd.arg(&descriptor);
        }
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("row-fence acquire: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "row-fence acquire (the refused lane) failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    Ok(dir.to_path_buf())
}
