//! The row fence's installers: everything that writes the fence into the machine around
//! it, and checks that it is there. `row-fence install`, `row-fence render` and
//! `row-fence doctor` are these; the CLI only dispatches to them.
//!
//! Every installer writes through one rule: it changes what it owns, byte for byte
//! removable (`--rollback` restores the file as it was), and it refuses before writing
//! anything when it cannot finish (ARCHITECTURE.md, "Installers").
//!
//! # Layout
//!
//! The commands:
//! - [`install`]: `install launchd|systemd|claude-hook|agent-hook|git-hook|broker|gh`;
//!   [`job_commands`]: the load, by-hand and rollback lines the job installs print.
//! - [`render`]: `render launchd|systemd`, and the job settings `install` shares.
//! - [`git_install`]: `install git-hook`, git's layer in every worktree of a repository.
//! - [`doctor`]: where git is fenced in a repository and where it is not;
//!   [`agent_doctor`]: whether each agent harness's hook is there and can run;
//!   [`claude_policy`]: whether Claude Code runs a hook its settings files hold;
//!   [`codex_version`]: whether the installed Codex tells the hook where a tool runs.
//! - [`broker`]: `install broker`, git's ssh through the daemon's key broker;
//!   [`broker_wiring`]: its wiring file, which the transport gate reads to write the
//!   broker's part of the included file it owns;
//!   [`lane_socket`]: whether the lane can reach the broker's socket.
//! - [`gh_install`]: `install gh`, a lane's gh through the daemon's forge API.
//!
//! What they write:
//! - [`deploy`]: the launchd and systemd jobs, rendered from `deploy/` with tera.
//! - [`agent_hooks`]: each agent harness's hook file, format and entries;
//!   [`claude_settings`]: the agent hook's entries in a JSON hook file (Claude Code's
//!   settings and its likes); [`codex_toml`]: the entry in Codex's `config.toml`;
//!   [`created_files`]: which settings files install created (only those may rollback remove).
//! - [`git_hook`]: the pre-push hook in a hooks directory, chained or alone, baked.
//! - [`git_gate`]: git's transport gate in a repository's config (ssh command, credential
//!   helper, git:// proxy); [`gate_lines`]: the lines that include it, byte-for-byte removable.
//! - [`git_repo`]: a repository's worktrees, hooks directories and submodules, asked of git.
//! - [`daemon_answers`]: whether a daemon answers for the home a hook is installed for.
//! - [`lane_reach`]: what a lane's uid can push with past the key broker (doctor's warnings).
//! - [`lane_procs`]: what a lane's processes hold (another agent, an ssh master, a connection).
//! - [`lane_git`]: the hooks a lane's git runs and the config files it reads, as its git says.
//! - [`ssh_config`]: multiplexing in an ssh config and every file it includes.
//! - [`shell`]: words quoted for `sh -c`, as every installer writes them.

pub mod agent_doctor;
pub mod agent_hooks;
pub mod broker;
pub mod broker_wiring;
pub mod claude_policy;
pub mod claude_settings;
pub mod codex_toml;
pub mod codex_version;
pub mod created_files;
pub mod daemon_answers;
pub mod deploy;
pub mod doctor;
pub mod forge_hook;
pub mod gate_lines;
pub mod gh_install;
pub mod git_gate;
pub mod git_hook;
pub mod git_install;
pub mod git_repo;
pub mod install;
pub mod job_commands;
pub mod lane_git;
pub mod lane_procs;
pub mod lane_reach;
pub mod lane_socket;
pub mod render;
pub mod shell;
pub mod ssh_config;
