//! The row fence's resident daemon (`row-fence-resident`) and operator command line
//! (`row-fence`).
//!
//! The daemon keeps one warm connection to the lease store, answers asks from
//! `row-fence-ask` concurrently over a Unix socket, checks the code stamp, writes a
//! heartbeat and records refusals. It caches the connection, never a verdict, and it
//! fails closed: "I could not find out" is never "yes" (DESIGN.md).
//!
//! # Layout
//!
//! - [`store`]: the lease store port and its adapters (Redis records, embedded file).
//! - [`fencing`]: the change → fenced batch engine every write goes through.
//! - [`lease`]: row leases (acquire, renew, release, list) as fenced writes.
//! - [`controller`]: the board controller's lease and epoch.
//! - [`gate`]: the one function that turns an ask into a verdict (daemon and cold path).
//! - [`location`]: the location fence (inert unless `ROW_FENCE_LOCATION` is set).
//! - [`registry`]: the board → tenant registry (`registry/boards.toml`).
//! - [`resident`]: the daemon's shared state and its answers (ask, ping, status).
//! - [`server`]: the accept loop and per-connection framing.
//! - [`socket`]: socket directory and file hygiene.
//! - [`own_code`]: what the daemon loaded, to tell whose code is stale.
//! - [`heartbeat`]: the liveness file, written only after a store call succeeded.
//! - [`refusals`]: the ledger writer, recent refusals, rate-limited log lines.
//! - [`startup`]: the daemon from start to exit.
//! - [`config`]: flags and environment shared by both programs.
//! - [`atomic_file`]: replacing a file atomically (temp file, fsync, rename).
//! - [`cli`]: the `row-fence` subcommands.
//! - [`supervisor`]: READY=1 and WATCHDOG=1 to systemd (nothing without `NOTIFY_SOCKET`).
//! - [`deploy`]: the launchd and systemd jobs, rendered from `deploy/` with tera.
//! - [`claude_settings`]: the agent hook's entry in a Claude Code settings file.
//! - [`git_hook`]: the pre-push hook in a repository, chained or alone.
//! - [`tls`]: the crypto provider `rediss://` stores need, installed once.

pub mod atomic_file;
pub mod claude_settings;
pub mod cli;
pub mod config;
pub mod controller;
pub mod deploy;
pub mod fencing;
pub mod gate;
pub mod git_hook;
pub mod heartbeat;
pub mod lease;
pub mod location;
pub mod own_code;
pub mod refusals;
pub mod registry;
pub mod resident;
pub mod server;
pub mod socket;
pub mod startup;
pub mod store;
pub mod supervisor;
pub mod tls;
