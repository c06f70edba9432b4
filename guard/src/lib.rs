//! The row fence's agent guard: the hook an agent's harness (Claude Code, Codex, Gemini
//! CLI, Cursor) runs before every tool call, shell calls and other tools alike.
//!
//! `row-fence-guard` reads the hook's JSON on stdin. A shell command is read by the shell
//! reader (`row-fence-shell`: a real bash parser and bash's scoping) with this crate's
//! programs saying what each simple command does, each as its record says ([`specs`]):
//! every *fenced write* (git push and its plumbing, `gh` outside a read-only allowlist,
//! row-fence lease writes) and every *opaque* command (a command word or git subcommand
//! the text does not decide, inline interpreter code, git aliases and config overrides,
//! wrappers around those) is found with every directory it could run in. It binds the
//! session to the first descriptor its working directory resolves to, asks the resident
//! daemon about every distinct descriptor involved (in process, concurrently, under one
//! deadline for the whole hook), prints the asker's lines, and blocks the call unless
//! every ask is ALLOWED or nothing involved is row-bound. It fails closed: a command it
//! cannot read, a directory it cannot name, a daemon it cannot reach, a deadline it
//! cannot meet all block (ARCHITECTURE.md, "The agent guard's policy").
//!
//! `hooks/guard-bash.sh` keeps the two states only a parent can see: NEVER RAN (the
//! binary is missing or was killed) and CUT OFF MID-ASK (killed while a
//! [`judge::Marker`] says it was asking).
//!
//! # Layout
//!
//! - [`input`]: the hook JSON, bounded, and the call it names; [`harness`]: each harness's
//!   hook input and answer, typed.
//! - [`quarantine`]: a refused session's rule: no shell, no writes, readers inside the
//!   worktree.
//! - [`file_tools`]: the harnesses' file tools and the paths a call names;
//!   [`file_writes`]: where a file tool may not write outside quarantine;
//!   [`real_path`]: where a path lands, resolved as the kernel resolves it.
//! - [`parse`]: the shell reader's bounds (`row-fence-shell` reads the command).
//! - [`walk`]: the shell reader's walk with the guard's programs, and the plan it produces.
//! - [`command`]: one simple command's effect, dispatched on the program it runs;
//!   [`known_as`]: the names that program is read as (the file it leads to, the name typed).
//! - [`effect`]: what a command does ([`effect::Effect`]) and what classifying it needs
//!   ([`effect::Ctx`]); the handlers below speak these, never the dispatcher.
//! - [`specs`]: one record per program: how it runs other code. A new program is a record.
//! - [`builtins`]: the shell's own commands (bash's and zsh's); [`builtin_readers`]: the
//!   readers their records name (`eval`, `command`, `printf`…).
//! - [`programs`]: programs read as their records say (wrappers, shells, interpreters…).
//! - [`row_fence`]: row-fence's lease writes.
//! - [`git`], [`gh`]: those two programs' policies; [`http`]: curl and friends.
//! - [`readers`]: xargs, find, watch, make, remote copies, socat.
//! - [`handed`]: programs handed a command in an option (`tar --to-command`, `npx -c`…).
//! - [`awk`], [`sed`]: their programs and scripts, which can run commands.
//! - [`env_vars`]: variables whose setting is opaque or holds code.
//! - [`finding`]: fenced writes and opaque commands, with their places.
//! - [`binding`]: session → descriptor files.
//! - [`fenced`]: git, gh and row-fence under any name (symlinks, hard links, copies).
//! - [`judge`]: descriptors, asks, verdict lines, ledger, exit code ([`exit`]).
//!
//! The program itself (flags, the hook input read and walked on a large-stack thread, the
//! hard deadline) is the `row-fence-guard-bin` package (`guard-bin/`), the only one of the
//! two that links the build digest: this library takes it as a value
//! ([`judge::Settings`]), so an edit elsewhere does not rebuild it.

pub mod awk;
pub mod binding;
pub mod builtin_readers;
pub mod builtins;
pub mod command;
pub mod effect;
pub mod env_vars;
pub mod exit;
pub mod fenced;
pub mod file_tools;
pub mod file_writes;
pub mod finding;
pub mod gh;
pub mod git;
pub mod handed;
pub mod harness;
pub mod http;
pub mod input;
pub mod judge;
pub mod known_as;
pub mod programs;
pub mod quarantine;
pub mod readers;
pub mod real_path;
pub mod row_fence;
pub mod sed;
pub mod specs;
pub mod walk;

/// The shell reader's bounds, for the program (its parse thread's stack) and the hook
/// input (the longest command read).
pub use row_fence_shell::parse;

/// Environment variable for the whole hook's deadline, in ms.
pub const TIMEOUT_ENV: &str = "ROW_FENCE_GUARD_TIMEOUT_MS";

/// The whole hook's default deadline, inside the harness's hook timeout, past which the
/// tool call would run ([`row_fence_contract::harness::GUARD_DEADLINE_MS`]).
pub const DEFAULT_TIMEOUT_MS: u64 = row_fence_contract::harness::GUARD_DEADLINE_MS;
