//! `row-fence`: the operator's and the board controller's command line. Row leases
//! (acquire, renew, release, show), the cold gate (`check`), the daemon's status and
//! liveness (`status`, `health`), the controller lease, raw fenced batches, records, the
//! fence log and migration; and, from `row-fence-install`, the launchd/systemd jobs, the
//! hook installers and the doctor. Exit codes are the product's contract, mapped in one
//! place (`row_fence_contract::exit::Failure`): 0 done, 3 refused (the store said no), 1
//! could not (the store or daemon could not be read), 2 usage.
//!
//! This file parses the command line and dispatches; no module imports it back.
//!
//! # Layout
//!
//! Subcommands, one module each:
//! - `leases`: acquire, renew, release, show (row leases, descriptors).
//! - `controller`: the controller lease. `records`: batch, records, log.
//! - `check`: the gate, cold, in this process. `liveness`: status and health.
//! - `top`: the operator's live console (ratatui), read-only unless `--allow-writes`.
//! - `migrate`: document → records, file → Redis.
//! - `store`: the store itself: its check, and accepting a store that went back in time.
//! - `keys`, `lanes`: the key broker's keys and lane bindings; `via_daemon`: a lane's
//!   renew and release asked of the daemon (`--via-daemon`).
//! - `render`, `install`, `doctor`: the `row-fence-install` crate's.
//! - `help`: every subcommand's example, `completion` and `man`, from the clap definitions.
//!
//! What they share:
//! - `open`: the store a command opens, checked against the daemon's on this home.
//! - `flags`: durations and lease times as flags take them.
//!
//! The store and its domain come from `row-fence-store`; the gate, the configuration and
//! the heartbeat format from `row-fence-resident`; the contract from `row-fence-contract`.

mod check;
mod controller;
mod flags;
mod forge_check;
mod help;
mod keys;
mod lanes;
mod leases;
mod liveness;
mod migrate;
mod open;
mod records;
mod store;
mod token;
mod top;
mod via_daemon;

use clap::{FromArgMatches, Parser, Subcommand};
use flags::parse_duration;
use row_fence_contract::exit::{self, Failure, Outcome};
use row_fence_contract::report::out;
use row_fence_contract::say;
use row_fence_install::{doctor, install, render};
use row_fence_resident::config::{CommonArgs, Settings};
use std::time::Duration;

/// `--help`'s and the man page's first line (the package description names crates).
const ABOUT: &str = "The row fence's command line: row and controller leases, fenced batches, the cold gate, the daemon's status, health and stop, migration, and the installers and doctor";

/// The help heading of the options every command takes.
const GLOBAL: &str = "Global options (every command)";

/// Every command's deadline unless `--timeout` says otherwise.
const DEFAULT_TIMEOUT: &str = "10s";

/// The row fence's command line: row leases, the cold gate, daemon status and health.
#[derive(Parser, Debug)]
#[command(name = "row-fence", version = row_fence_stamp::VERSION, about = ABOUT, long_about = None,
          arg_required_else_help = true, subcommand_required = false)]
struct Cli {
    /// Print this build's code stamp (with the registry under the home) and exit
    #[arg(long)]
    print_stamp: bool,
    /// Every command takes these: listed apart, after the command's own options.
    #[command(flatten, next_help_heading = GLOBAL)]
    common: CommonArgs,
    /// The whole command's deadline, store calls included (e.g. 10s, 500ms)
    #[arg(long, global = true, default_value = DEFAULT_TIMEOUT, value_parser = parse_duration,
          value_name = "DURATION", help_heading = GLOBAL)]
    timeout: Duration,
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
    /// Stop this home's daemon when no service manager runs it (started by hand or with row-fence-resident --detach)
    Stop(liveness::StopArgs),
    /// A live console of boards, holders, time left, refusals, quarantines and the daemon (q quits, ? shows the keys)
    ///
    /// Keys as in top: q quit, ? help, 1-4 views (rows, refusals, quarantine, daemon), Tab
    /// next pane, j/k or arrows move, / filter, s sort, R reverse, x release the selected
    /// row (only with --allow-writes; asks y). NO_COLOR is honoured. For scripts, --once
    /// --json prints the same snapshot the console draws, and exits 1 when the daemon is gone.
    Top(top::TopArgs),
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
    /// The key broker's keys, held in the running daemon's memory: add, list, remove
    Keys(keys::KeysArgs),
    /// Which uid is which lane for the key broker: add, list, remove
    Lane(lanes::LaneArgs),
    /// The forge API endpoint's token, held in the running daemon's memory: add
    Token(token::TokenArgs),
    /// What a forge's pre-receive hook runs: reads the push's ref updates on stdin and asks the fence whether the pushing lane's row covers them now (exit 0 only for ALLOWED)
    ForgeCheck(forge_check::ForgeCheckArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) generated from these definitions
    Completion(help::CompletionArgs),
    /// Print the man page, or write every command's page into DIR
    Man(help::ManArgs),
}

fn main() {
    std::process::exit(run_cli());
}

/// Parses the command line, runs the command and returns the exit code.
fn run_cli() -> i32 {
    let cli = match help::command::<Cli>()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches))
    {
        Ok(cli) => cli,
        Err(e) => return parse_failed(e),
    };
    // Generated from the definitions alone: no home, store or daemon is needed.
    match cli.command {
        Some(Command::Completion(args)) => {
            return report(help::completion(args, help::command::<Cli>()), true);
        }
        Some(Command::Man(args)) => return report(help::man(args, help::command::<Cli>()), true),
        _ => {}
    }
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
    let only_reads = reads_only(&command);
    // `check` prints a verdict line whatever happens, so its own deadline (within this
    // one) ends it first; this one stays only as a bound past it.
    let outer = match command {
        Command::Check(_) => timeout + check::VERDICT_SLACK,
        // The console runs until q; each of its reads has its own deadline.
        Command::Top(_) => Duration::MAX,
        // The forge hook's check bounds each of its steps and says REFUSED on any.
        Command::ForgeCheck(_) => Duration::MAX,
        _ => timeout,
    };
    let outcome = runtime.block_on(async {
        tokio::time::timeout(outer, run(command, &settings, timeout))
            .await
            .unwrap_or_else(|_| {
                Err(Failure::could_not(format!(
                    "the command did not finish within {} (--timeout); a write in flight may or may not have committed (row-fence show / records / log tells)",
                    humantime::format_duration(timeout)
                )))
            })
    });
    report(outcome, only_reads)
}

/// The exit code of a finished command; a failure's sentence, or a lost stdout, on stderr.
/// A lost stdout fails only a command that `only_reads` ([`reads_only`]).
fn report(outcome: Outcome, only_reads: bool) -> i32 {
    match outcome {
        Ok(code) if only_reads && row_fence_contract::report::stdout_lost().is_some() => {
            let why = row_fence_contract::report::stdout_lost().unwrap_or_default();
            say!("row-fence: cannot write the output: {why}");
            code.max(exit::COULD_NOT_READ)
        }
        Ok(code) => code,
        Err(failure) => {
            say!("row-fence: {}", failure.message);
            failure.code
        }
    }
}

/// Whether `command` only reads, so its output is its whole result: output lost to a
/// full device then exits 1. A command that writes exits with its write's code whatever
/// became of its output (a committed grant reports success: its descriptor is the
/// result that matters, and it was written).
fn reads_only(command: &Command) -> bool {
    matches!(
        command,
        Command::Show(_)
            | Command::Check(_)
            | Command::Status(_)
            | Command::Health(_)
            | Command::Top(_)
            | Command::Records(_)
            | Command::Log(_)
            | Command::Render(_)
            | Command::Doctor(_)
            | Command::Completion(_)
            | Command::Man(_)
    ) || match command {
        Command::Keys(args) => args.only_reads(),
        Command::Lane(args) => args.only_reads(),
        _ => false,
    }
}

/// Words a newcomer tries for running the daemon, which is its own binary.
const DAEMON_WORDS: &[&str] = &["start", "serve", "daemon", "run"];

/// Prints clap's error (or help, or version) and its exit code; a daemon word gets a
/// pointer to `row-fence-resident`.
fn parse_failed(e: clap::Error) -> i32 {
    let word = e
        .get(clap::error::ContextKind::InvalidSubcommand)
        .map(|v| v.to_string());
    let _ = e.print();
    if let Some(word) = word.filter(|w| DAEMON_WORDS.contains(&w.as_str())) {
        say!(
            "row-fence: `{word}`: the daemon is its own binary: run row-fence-resident --detach (same --home/--socket; without a service manager), or load its launchd/systemd job with row-fence install launchd|systemd"
        );
    }
    e.exit_code()
}

/// Runs `command`; `timeout` is the command's `--timeout`.
async fn run(command: Command, settings: &Settings, timeout: Duration) -> Outcome {
    match command {
        Command::Acquire(args) => leases::acquire(args, settings).await,
        Command::Renew(args) => leases::renew(args, settings).await,
        Command::Release(args) => leases::release(args, settings).await,
        Command::Show(args) => leases::show(args, settings).await,
        Command::Check(args) => check::run(args, settings, timeout).await,
        Command::Status(args) => liveness::status(args, settings),
        Command::Health(args) => liveness::health(args, settings),
        Command::Stop(args) => liveness::stop(args, settings, timeout),
        Command::Top(args) => top::run(args, settings).await,
        Command::Controller(args) => controller::run(args, settings).await,
        Command::Batch(args) => records::batch(args, settings).await,
        Command::Records(args) => records::records(args, settings).await,
        Command::Log(args) => records::log(args, settings).await,
        Command::Migrate(args) => migrate::run(args, settings).await,
        Command::Render(args) => render::run(args, settings),
        Command::Install(args) => install::run(args, settings),
        Command::Doctor(args) => doctor::run(args),
        Command::ForgeCheck(args) => Ok(forge_check::run(args).await),
        Command::Store(args) => store::run(args, settings).await,
        Command::Keys(args) => keys::keys(args, settings),
        Command::Lane(args) => lanes::lane(args, settings),
        Command::Token(args) => token::token(args, settings),
        Command::Completion(args) => help::completion(args, help::command::<Cli>()),
        Command::Man(args) => help::man(args, help::command::<Cli>()),
    }
}
