//! The row fence's benchmark: the warm ask (`row-fence-ask` → daemon → Redis)
//! side by side with the physical floor and the cold paths it replaces, on this machine,
//! in one run, under CPU oversubscription, over TLS and over distance.
//!
//! Everything it measures is real: a private `redis-server` on a private Unix socket and
//! private loopback ports, the release binaries, one new process per sample as a hook
//! spawns them. It starts all of it itself and stops all of it, also on Ctrl-C or
//! failure, and writes `target/bench/report.md`. Each comparison is a ratio of two
//! figures taken in the same phase with the cases interleaved sample by sample, so a
//! neighbour's build slows both sides alike.
//!
//! # Layout
//!
//! - [`options`]: flags and the sample plan of each profile (full, `--quick`, `--smoke`).
//! - [`cases`]: the case list: every case measured, and those planned for later.
//! - [`run`]: the phases, in order: set up, measure, stop.
//! - [`clients`]: the command one latency sample spawns, per client and route.
//! - [`sample`]: one timed spawn: wall time, exit code, max RSS.
//! - [`stats`]: percentiles of a set of samples.
//! - [`children`]: processes the bench owns, stopped when dropped.
//! - [`interrupt`]: Ctrl-C and SIGTERM become a flag every loop checks.
//! - [`redis_server`]: the private `redis-server` (Unix socket, TCP, TLS).
//! - [`capture`]: the daemon's own `EVALSHA`, captured with `MONITOR`, for the generic
//!   clients to replay.
//! - [`certs`]: the bench's CA and server certificate, and the trust bundle.
//! - [`delay_proxy`]: a loopback TCP proxy adding a fixed delay each way.
//! - [`echo_server`]: the floor's echo server (Unix socket; TCP behind the delay proxy).
//! - [`etcd`]: the private etcd of the `etcdctl get` comparison.
//! - [`fixture`]: the daemon under test, its home, the row lease and the descriptor.
//! - [`hook_inputs`]: each harness's hook input, and the hook command install wrote.
//! - [`python_client`]: the venv with the Python `redis` client, and its script.
//! - [`load`]: the busy processes of the oversubscription case.
//! - [`throughput`]: asks per second with concurrent clients; many open connections.
//! - [`records`]: the fencing-records cases: bytes per single-record change at three
//!   board sizes, records vs document layout; fenced batches per second with 1 and 16
//!   writers.
//! - [`file_boards`]: the file store's ask on boards of 10, 1,000 and 10,000 rows.
//! - [`broker`]: the key broker's case (`--only broker`): a push signed by the daemon's
//!   agent ÷ by a plain ssh-agent.
//! - [`forge_api`]: the forge API endpoint's case (`--only forge-api`): `gh api` through
//!   the daemon ÷ through a plain relay, and what a judged write adds.
//! - [`push`]: the daemon's push case (`--only push`): a `git push` through the daemon ÷
//!   straight to the same server with the same credential, over ssh and over HTTPS,
//!   small and 50 MB, and the daemon's RSS; [`https_forge`]: its HTTPS forge (lighttpd in
//!   front of `git http-backend`).
//! - [`local`]: what the cases that build a private world share (ports, waits, keys).
//! - [`barrier`]: the ask with and without the read barrier of a replicated Redis.
//! - [`stores`]: the store's ask on a 3-member etcd beside a durable Redis, and with a
//!   member down; [`floors`]: what the home's floors cost an ask; [`grant`]: the row
//!   lease both cases' asks check.
//! - [`profile`]: the daemon's CPU profile (`perf`), summarised by kind of work.
//! - [`rss`]: resident memory of a process, from `/proc`.
//! - [`machine`]: the machine and the versions under test.
//! - [`targets`]: the targets, judged against the measured figures.
//! - [`bounds`]: for each missed target, what bounds it, in the run's own figures.
//! - [`plots`]: the report's SVG pictures (latency per phase, cost vs board size).
//! - [`report`]: the Markdown report.
//!
//! The `row-fence-bench` program is the `row-fence-bench-bin` package (`bench-bin/`), the
//! only one of the two that links the build digest: this library takes its version as a
//! value ([`run::Runner::new`]), so an edit elsewhere does not rebuild it.

pub mod agent_hooks;
pub mod barrier;
pub mod bounds;
pub mod broker;
pub mod capture;
pub mod cases;
pub mod certs;
pub mod children;
pub mod clients;
pub mod delay_proxy;
pub mod echo_server;
pub mod etcd;
pub mod file_boards;
pub mod fixture;
pub mod floors;
pub mod forge_api;
pub mod grant;
pub mod hook_inputs;
pub mod https_forge;
pub mod interrupt;
pub mod load;
pub mod local;
pub mod machine;
pub mod options;
pub mod plots;
pub mod profile;
pub mod push;
pub mod python_client;
pub mod records;
pub mod redis_server;
pub mod report;
pub mod rss;
pub mod run;
pub mod sample;
pub mod stats;
pub mod stores;
pub mod targets;
pub mod throughput;
pub mod top;
