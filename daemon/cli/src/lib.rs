//! `row-fence`: the operator's and the board controller's command line. Row leases
//! (acquire, renew, release, show), the cold gate (`check`), the daemon's status and
//! liveness (`status`, `health`), the controller lease, raw fenced batches, records, the
//! fence log and migration; the launchd/systemd jobs and the hook installers. Exit codes
//! are the product's contract, mapped in one place ([`Failure`]): 0 done, 3 refused (the
//! store said no), 1 could not (the store or daemon could not be read), 2 usage.
//!
//! # Layout
//!
//! Subcommands, one module each:
//! - `leases`: acquire, renew, release, show (row leases, descriptors).
//! - `controller`: the controller lease. `records`: batch, records, log.
//! - `check`: the gate, cold, in this process. `liveness`: status and health.
//! - `migrate`: document → records, file → Redis. `render`, `install`: jobs and hooks.
//! - `git_install`: `install git-hook`, git's layer. `doctor`: where git is not fenced.
//! - `store`: the store itself: its check, and accepting a store that went back in time.
//!
//! What the installers write:
//! - `deploy`: the launchd and systemd jobs, rendered from `deploy/` with tera.
//! - `claude_settings`: the agent hook's entry in a Claude Code settings file;
//!   `created_files`: which settings files install created (only those may rollback remove).
//! - `git_hook`: the pre-push hook in a hooks directory, chained or alone, baked.
//! - `git_gate`: git's transport gate in a repository's config (ssh command, credential
//!   helper, git:// proxy); `gate_lines`: the lines that include it, byte-for-byte removable.
//! - `git_repo`: a repository's worktrees, hooks directories and submodules, asked of git.
//! - `shell`: words quoted for `sh -c`, as every installer writes them.
//!
//! The store and its domain come from `row-fence-store`; the gate, the configuration and
//! the heartbeat format from `row-fence-resident`; the contract from `row-fence-ask`.

pub mod claude_settings;
pub mod created_files;
pub mod deploy;
pub mod gate_lines;
pub mod git_gate;
pub mod git_hook;
pub mod git_repo;
pub mod shell;

mod check;
mod controller;
mod doctor;
mod git_install;
mod install;
mod leases;
mod liveness;
mod migrate;
mod records;
mod render;
mod store;

use clap::{Parser, Subcommand};
use row_fence_contract::exit;
use row_fence_resident::config::{CommonArgs, Settings};
use row_fence_store::LeaseStore;
use std::sync::Arc;
use std::time::Duration;

/// Prints a line on stderr, ignoring a closed or full stderr: a command whose write
/// committed never dies on its report (`row-fence acquire … 2>&1 | head -1`).
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::err(&format!($($arg)*))
    };
}

/// Every command's deadline unless `--timeout` says otherwise.
pub const DEFAULT_TIMEOUT: &str = "10s";

/// The row fence's command line: row leases, the cold gate, daemon status and health.
#[derive(Parser, Debug)]
#[command(name = "row-fence", version = row_fence_stamp::VERSION, about, long_about = None,
          arg_required_else_help = true, subcommand_required = false)]
pub struct Cli {
    #[command(flatten)]
    common: CommonArgs,
    /// The whole command's deadline, store calls included (e.g. 10s, 500ms)
    #[arg(long, global = true, default_value = DEFAULT_TIMEOUT, value_parser = parse_duration, value_name = "DURATION")]
    timeout: Duration,
    /// Print this build's code stamp (with the registry under the home) and exit
    #[arg(long)]
    print_stamp: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Grant a board row to a lane (a new generation); prints the lane's descriptor
    Acquire(leases::AcquireArgs),
    /// Extend a lane's live lease (keeps the generation)
    Renew(leases::RenewArgs),
    /// Give up a lane's lease
    Release(leases::ReleaseArgs),
    /// List a board's row leases
    Show(leases::ShowArgs),
    /// Run the gate in this process against the store (the cold path; same lines and exit codes as row-fence-ask)
    Check(check::CheckArgs),
    /// Ask the daemon for its status
    Status(liveness::StatusArgs),
    /// Exit 0 when the daemon's heartbeat is fresh, 1 otherwise
    Health(liveness::HealthArgs),
    /// The board controller's lease: acquire, renew, release, show
    Controller(controller::ControllerArgs),
    /// Apply a raw fenced batch from a JSON file; prints the committed revision
    Batch(records::BatchArgs),
    /// Print a board's records with their revisions
    Records(records::RecordsArgs),
    /// Print the newest fence log entries (revision, owner, record count)
    Log(records::LogArgs),
    /// Move a board onto Redis per-record keys, once (safely repeatable)
    Migrate(migrate::MigrateArgs),
    /// Print (or write) the launchd or systemd job that runs the daemon
    Render(render::RenderArgs),
    /// Write the launchd/systemd job (printing the load and rollback commands), or switch the agent or git hook
    Install(install::InstallArgs),
    /// Show what fences git in a repository (hooks in every worktree, the transport gate, remotes) and where it does not
    Doctor(doctor::DoctorArgs),
    /// The store itself: check its role and settings, accept a store that went back in time
    Store(store::StoreArgs),
}

/// A command's failure: its exit code and message.
#[derive(Debug)]
pub struct Failure {
    /// 1 (could not) or 3 (refused).
    pub code: i32,
    /// What to print after `row-fence: `.
    pub message: String,
}

impl Failure {
    /// The store said no: exit 3.
    pub fn refused(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: exit::REFUSED,
            message: message.to_string(),
        }
    }
    /// Bad input that clap could not see (a malformed board, batch file or flag
    /// combination): exit 2, and nothing was done.
    pub fn usage(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: exit::USAGE,
            message: message.to_string(),
        }
    }
    /// Could not find out or could not do it: exit 1.
    pub fn could_not(message: impl std::fmt::Display) -> Failure {
        Failure {
            code: exit::COULD_NOT_READ,
            message: message.to_string(),
        }
    }
}

/// The result of a command: its exit code on success (0, or a verdict's code).
pub type Outcome = Result<i32, Failure>;

/// Parses the command line, runs the command and returns the exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let settings = match Settings::resolve(&cli.common) {
        Ok(settings) => settings,
        Err(e) => {
            say!("row-fence: {e}");
            return exit::USAGE;
        }
    };
    if cli.print_stamp {
        if cli.command.is_some() {
            say!("row-fence: --print-stamp takes no command");
            return exit::USAGE;
        }
        return match row_fence_contract::stamp::code_stamp(
            &settings.home,
            row_fence_stamp::BUILD_DIGEST,
        ) {
            Ok(stamp) => {
                out(&stamp);
                exit::ALLOWED
            }
            Err(e) => {
                say!("row-fence: {e}");
                exit::COULD_NOT_READ
            }
        };
    }
    let Some(command) = cli.command else {
        say!("row-fence: a command is needed\nTry 'row-fence --help' for more.");
        return exit::USAGE;
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            say!("row-fence: cannot start the runtime: {e}");
            return exit::COULD_NOT_READ;
        }
    };
    let timeout = cli.timeout;
    let outcome = runtime.block_on(async {
        tokio::time::timeout(timeout, run(command, &settings))
            .await
            .unwrap_or_else(|_| {
                Err(Failure::could_not(format!(
                    "the command did not finish within {} (--timeout); a write in flight may or may not have committed (row-fence show / records / log tells)",
                    humantime::format_duration(timeout)
                )))
            })
    });
    match outcome {
        Ok(code) => code,
        Err(failure) => {
            say!("row-fence: {}", failure.message);
            failure.code
        }
    }
}

async fn run(command: Command, settings: &Settings) -> Outcome {
    match command {
        Command::Acquire(args) => leases::acquire(args, settings).await,
        Command::Renew(args) => leases::renew(args, settings).await,
        Command::Release(args) => leases::release(args, settings).await,
        Command::Show(args) => leases::show(args, settings).await,
        Command::Check(args) => check::run(args, settings).await,
        Command::Status(args) => liveness::status(args, settings),
        Command::Health(args) => liveness::health(args, settings),
        Command::Controller(args) => controller::run(args, settings).await,
        Command::Batch(args) => records::batch(args, settings).await,
        Command::Records(args) => records::records(args, settings).await,
        Command::Log(args) => records::log(args, settings).await,
        Command::Migrate(args) => migrate::run(args, settings).await,
        Command::Render(args) => render::run(args, settings),
        Command::Install(args) => install::run(args, settings),
        Command::Doctor(args) => doctor::run(args),
        Command::Store(args) => store::run(args, settings).await,
    }
}

/// A flag's value that is not what the flag takes (clap prints it as a usage error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlagError {
    /// Not a duration humantime reads.
    #[error("{text:?}: {why} (try 90s, 15m, 2h)")]
    Duration {
        /// The value given.
        text: String,
        /// humantime's reason.
        why: String,
    },
    /// A zero duration.
    #[error("{0:?} is zero")]
    Zero(String),
    /// A lease time over [`MAX_TTL`].
    #[error("{0:?} is longer than the longest lease, 366 days")]
    TooLong(String),
    /// An `--env` value without `=`.
    #[error("{0:?} is not NAME=VALUE")]
    NotAssignment(String),
}

/// Parses a duration such as `90s`, `15m`, `2h` (humantime).
pub fn parse_duration(text: &str) -> Result<Duration, FlagError> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| FlagError::Duration {
        text: text.to_string(),
        why: e.to_string(),
    })?;
    if d.is_zero() {
        return Err(FlagError::Zero(text.to_string()));
    }
    Ok(d)
}

/// The longest lease time `--ttl` takes: 366 days. A lease is renewed, not granted for
/// ever; a longer one is a typo.
pub const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

/// Parses a lease time (a duration of at most [`MAX_TTL`]).
pub fn parse_ttl(text: &str) -> Result<Duration, FlagError> {
    let d = parse_duration(text)?;
    if d > MAX_TTL {
        return Err(FlagError::TooLong(text.to_string()));
    }
    Ok(d)
}

/// Opens the store for a write, refusing when the daemon on this home fences with
/// another store or, on Redis, under another key prefix: a takeover written where the
/// daemon does not read would leave the old lane ALLOWED. No daemon answering within
/// 500 ms: nothing to compare, go ahead.
pub fn store_for_write(settings: &Settings) -> Result<Arc<dyn LeaseStore>, Failure> {
    let store = settings.open_store().map_err(Failure::could_not)?;
    if let Some(mismatch) = daemon_mismatch(settings, store.as_ref()) {
        return Err(Failure::could_not(format!(
            "{mismatch}, but this command would write {}; set {} to the daemon's",
            mismatch.ours(),
            mismatch.fix()
        )));
    }
    Ok(store)
}

/// Opens the store for a read, warning when the daemon on this home reads another one.
pub fn store_for_read(settings: &Settings) -> Result<Arc<dyn LeaseStore>, Failure> {
    let store = settings.open_store().map_err(Failure::could_not)?;
    if let Some(mismatch) = daemon_mismatch(settings, store.as_ref()) {
        say!(
            "row-fence: warning: reading {}, but {mismatch}",
            mismatch.ours()
        );
    }
    Ok(store)
}

/// Where this command and the daemon on this home would not see the same leases.
enum Mismatch {
    /// Another store.
    Store {
        socket: String,
        theirs: String,
        ours: String,
    },
    /// The same Redis, another key prefix.
    KeyPrefix {
        socket: String,
        theirs: String,
        ours: String,
    },
}

impl Mismatch {
    /// What this command would use.
    fn ours(&self) -> String {
        match self {
            Mismatch::Store { ours, .. } => ours.clone(),
            Mismatch::KeyPrefix { ours, .. } => format!("under the key prefix {ours:?}"),
        }
    }

    /// The flag (and variable) that fixes it.
    fn fix(&self) -> &'static str {
        match self {
            Mismatch::Store { .. } => "--store (or ROW_FENCE_STORE)",
            Mismatch::KeyPrefix { .. } => "--key-prefix (or ROW_FENCE_KEY_PREFIX)",
        }
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Store {
                socket,
                theirs,
                ours,
            } => write!(
                f,
                "the daemon on {socket} fences with the store {theirs}, but this command would use {ours}"
            ),
            Mismatch::KeyPrefix {
                socket,
                theirs,
                ours,
            } => write!(
                f,
                "the daemon on {socket} reads Redis keys under the prefix {theirs:?}, but this command would use {ours:?}"
            ),
        }
    }
}

/// Compares this command's store with the daemon's, if a daemon answers quickly.
fn daemon_mismatch(settings: &Settings, store: &dyn LeaseStore) -> Option<Mismatch> {
    let theirs = daemon_status(settings)?;
    let socket = settings.socket.display().to_string();
    if theirs.store != store.describe() {
        return Some(Mismatch::Store {
            socket,
            theirs: theirs.store,
            ours: store.describe(),
        });
    }
    let redis = matches!(settings.store, row_fence_store::StoreSpec::Redis(_));
    (redis && !theirs.key_prefix.is_empty() && theirs.key_prefix != settings.key_prefix).then(
        || Mismatch::KeyPrefix {
            socket,
            theirs: theirs.key_prefix,
            ours: settings.key_prefix.clone(),
        },
    )
}

/// The status of the daemon on `settings.socket`, if one answers within 500 ms.
fn daemon_status(settings: &Settings) -> Option<row_fence_contract::status::Status> {
    let request = row_fence_contract::protocol::Request {
        v: row_fence_contract::protocol::PROTOCOL_VERSION,
        op: row_fence_contract::protocol::Op::Status,
    };
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    let answer = row_fence_contract::client::exchange(&settings.socket, &request, deadline).ok()?;
    answer.status.map(|s| *s)
}

/// The board's revision: 0 when nothing was ever written to it (no such board).
pub async fn board_revision(store: &dyn LeaseStore, board: &str) -> Result<u64, Failure> {
    store
        .sections(board, &[])
        .await
        .map(|snapshot| snapshot.revision)
        .map_err(Failure::could_not)
}

/// The sentence for a board nothing was ever written to (a typo, most often).
pub fn no_board(board: &str) -> String {
    format!("no board named {board} (nothing was ever written to it)")
}

/// Prints a line on stdout, ignoring a closed or full stdout.
pub fn out(line: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// Prints a line on stderr, ignoring a closed or full stderr (use [`say!`]).
pub fn err(line: &str) {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{line}");
    let _ = stderr.flush();
}
