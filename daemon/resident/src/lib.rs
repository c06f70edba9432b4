//! `row-fence-resident`: the row fence's resident daemon (ARCHITECTURE.md, "The daemon").
//!
//! It keeps one warm connection to the lease store, answers asks from `row-fence-ask`
//! concurrently over a Unix socket, checks the code stamp, writes a heartbeat and records
//! refusals. It caches the connection, never a verdict, and it fails closed: "I could not
//! find out" is never "yes".
//!
//! # Layout
//!
//! Judging an ask (shared with `row-fence check`, the cold path):
//! - [`gate`]: the one function that turns an ask into a verdict.
//! - [`location`]: the location fence (inert unless `ROW_FENCE_LOCATION` is set).
//! - [`registry`]: the board → tenant registry (`registry/boards.toml`).
//! - [`config`]: flags and environment shared by the daemon and the CLI.
//!
//! The running daemon:
//! - [`startup`]: from start to exit; [`detach`]: started without a service manager;
//!   [`reexec`]: onto new binaries in place when no manager restarts it. [`server`]: the accept loop and per-connection
//!   framing; [`connection`]: one connection's I/O, off the reactor unless it must wait;
//!   [`line_buf`]: its request line's buffer, capped and wiped.
//!   [`resident`]: shared state and its answers (ask, ping, status); [`judge`]: the
//!   gate, counters and ledger an ask and a broker's sign request are judged through.
//! - [`socket`]: socket directory and file hygiene. [`own_code`]: what the daemon loaded,
//!   to tell whose code is stale. [`supervisor`]: READY=1 and WATCHDOG=1 to systemd.
//! - [`heartbeat`]: the liveness file. [`refusals`]: the ledger writer, recent refusals,
//!   rate-limited log lines ([`log_limit`]: one line per key a minute, bounded);
//!   [`sync`]: locks that survive a panicked holder.
//! - [`broker`]: the key broker (the lanes' ssh agent); [`audit`]: its audit log;
//!   [`socket_reach`]: whether a lane's uid can connect to its socket.
//! - [`forge_api`]: the lanes' forge API endpoint (GitHub REST and GraphQL, each write
//!   judged).
//! - [`push`]: the push socket: the daemon pushes for the lanes, judging at the write.
//!
//! The store and its domain come from `row-fence-store`; the protocol, verdicts and
//! reasons from the contract crate `row-fence-contract`.

pub mod audit;
pub mod broker;
pub mod budget;
pub mod config;
pub mod connection;
pub mod detach;
pub mod forge_api;
pub mod gate;
pub mod heartbeat;
pub mod judge;
pub mod line_buf;
pub mod location;
pub mod log_limit;
pub mod own_code;
pub mod push;
pub mod reexec;
pub mod refusals;
pub mod registry;
pub mod resident;
pub mod server;
pub mod socket;
pub mod socket_reach;
pub mod startup;
pub mod supervisor;
pub mod sync;
