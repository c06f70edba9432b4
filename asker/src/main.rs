//! `row-fence-ask`: asks the resident daemon whether this lane still holds its board row.
//!
//! It runs once per fenced write (a `git push`, a pull request): it reads the lane's
//! descriptor itself, asks the resident daemon over a Unix socket whether the lane still
//! holds its board row, prints exactly one verdict line and exits 0 (ALLOWED or UNFENCED),
//! 3 (REFUSED) or 1 (COULD NOT READ). It fails closed: "I could not find out" is never
//! "yes". The contract it speaks (protocol, descriptor, verdicts, paths, the stamp) is the
//! `row-fence-contract` crate; this crate is the program and git's transport gate.
//!
//! # Layout
//!
//! - this file: flags, then [`ask::run`], or one of the gate's modes.
//! - [`ask`]: the asker's flow, from descriptor to exit code.
//! - [`transport`], [`git_ssh`], [`git_credential`], [`git_proxy`]: git's transport gate,
//!   the asker's modes git runs itself as its ssh command, its first credential helper
//!   and its `git://` proxy.

mod ask;
mod git_credential;
mod git_proxy;
mod git_ssh;
mod push_updates;
mod transport;

use ask::Options;
use row_fence_contract::{client, exit, paths, report, stamp, stdio};
use row_fence_stamp::{BUILD_DIGEST, VERSION};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

const USAGE: &str = "\
Usage: row-fence-ask [--descriptor PATH] [--action TEXT] [--push-updates] [--home DIR] [--socket PATH] [--timeout-ms N] [--json]
       row-fence-ask --git-ssh [--home DIR] [--socket PATH] [--repo GIT_DIR] [--then COMMAND] SSH_ARGS...
       row-fence-ask --git-credential [--home DIR] [--socket PATH] [--repo GIT_DIR] get|store|erase
       row-fence-ask --git-proxy [--home DIR] [--socket PATH] [--repo GIT_DIR] HOST PORT
       row-fence-ask --print-stamp | --version | --help

Asks the resident row-fence daemon whether this lane still holds its board row.

Options:
  --descriptor PATH   the lane's descriptor (else $ROW_FENCE_DESCRIPTOR, else <git dir>/row-fence.json)
  --action TEXT       the fenced action, e.g. \"git push origin\" (for the ledger)
  --home DIR          the row-fence home (else $ROW_FENCE_HOME, else ~/.row-fence)
  --socket PATH       the daemon's socket (else $ROW_FENCE_SOCKET, else <home>/sock)
  --timeout-ms N      one deadline for connect, write and read (else $ROW_FENCE_TIMEOUT_MS, default 3000)
  --json              also print the verdict as one JSON object on stdout
  --push-updates      read git's pre-push lines on stdin and have the daemon judge each pushed
                      ref against the row's scope as well as the lease (the pre-push hook)
  --print-stamp       print this build's code stamp and exit
  -V, --version       print the version and exit
  -h, --help          print this help and exit

Git's transport gate (written into a repository's config by `row-fence install git-hook`):
  --git-ssh           git's core.sshCommand: asks before git-receive-pack (a push), passes
                      git-upload-pack (a fetch) untouched, then runs --then COMMAND (else $GIT_SSH, else ssh)
  --git-credential    git's first credential helper: prints quit=1 unless the lane is ALLOWED
  --git-proxy         git's core.gitProxy (git:// remotes): asks before git-receive-pack, then relays
  --repo GIT_DIR      the common git dir of the repository whose config runs the gate

Exit: 0 ALLOWED or UNFENCED, 3 REFUSED, 1 COULD NOT READ, 2 usage error.";

/// A command line the asker does not take (exit 2).
#[derive(Debug)]
enum Usage {
    /// lexopt's reason (an unknown flag, a flag without its value).
    Flag(lexopt::Error),
    /// `--descriptor ''`.
    NoDescriptorPath,
    /// A text flag's value that is not UTF-8.
    NotUtf8(OsString),
    /// A deadline that is not a whole number of milliseconds above 0 (`client::timeout`'s
    /// sentence).
    Timeout(client::BadTimeout),
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Usage::Flag(e) => e.fmt(f),
            Usage::NoDescriptorPath => f.write_str("--descriptor needs a path"),
            Usage::NotUtf8(value) => write!(f, "{value:?} is not valid UTF-8"),
            Usage::Timeout(why) => why.fmt(f),
        }
    }
}

enum Mode {
    Ask(Options),
    PrintStamp(Option<PathBuf>),
    Version,
    Help,
}

fn main() {
    stdio::keep_standard_fds_open();
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let code = match args.first().and_then(|a| a.to_str()) {
        Some(git_ssh::FLAG) => git_ssh::main(&args[1..]).unwrap_or_else(usage_error),
        Some(git_credential::FLAG) => git_credential::main(&args[1..]).unwrap_or_else(usage_error),
        Some(git_proxy::FLAG) => git_proxy::main(&args[1..]).unwrap_or_else(usage_error),
        _ => asker(args),
    };
    std::process::exit(code);
}

fn asker(args: Vec<OsString>) -> i32 {
    match parse_args(args) {
        Ok(Mode::Ask(options)) => ask::run(&options),
        Ok(Mode::PrintStamp(home)) => print_stamp(home),
        Ok(Mode::Version) => {
            println_quiet(&format!("row-fence-ask {VERSION}"));
            exit::ALLOWED
        }
        Ok(Mode::Help) => {
            println_quiet(USAGE);
            exit::ALLOWED
        }
        Err(message) => usage_error(message),
    }
}

fn usage_error(message: impl std::fmt::Display) -> i32 {
    let usage = USAGE.lines().next().unwrap_or_default();
    report::say(&format!(
        "row-fence-ask: error: {message}\n{usage}\nTry 'row-fence-ask --help' for more."
    ));
    exit::USAGE
}

fn print_stamp(home: Option<PathBuf>) -> i32 {
    let could_not = |e: &dyn std::fmt::Display| {
        report::say(&format!("row-fence-ask: {e}"));
        exit::COULD_NOT_READ
    };
    match paths::home(home.as_deref()).map(|home| stamp::code_stamp(&home, BUILD_DIGEST)) {
        Ok(Ok(stamp)) => {
            println_quiet(&stamp);
            exit::ALLOWED
        }
        Ok(Err(e)) => could_not(&e),
        Err(e) => could_not(&e),
    }
}

fn println_quiet(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

fn parse_args(args: Vec<OsString>) -> Result<Mode, Usage> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_args(args);
    let mut options = Options {
        descriptor: None,
        action: String::new(),
        socket: None,
        home: None,
        timeout: Duration::ZERO,
        json: false,
        updates: Ok(Vec::new()),
    };
    let mut push_updates = false;
    let mut timeout_ms: Option<String> = None;
    let mut print_stamp = false;
    let mut version = false;
    while let Some(arg) = parser.next().map_err(Usage::Flag)? {
        match arg {
            Long("descriptor") => {
                let path = value(&mut parser)?;
                if path.is_empty() {
                    return Err(Usage::NoDescriptorPath);
                }
                options.descriptor = Some(PathBuf::from(path));
            }
            Long("action") => options.action = string(&mut parser)?,
            Long("socket") => options.socket = Some(PathBuf::from(value(&mut parser)?)),
            Long("home") => options.home = Some(PathBuf::from(value(&mut parser)?)),
            Long("timeout-ms") => timeout_ms = Some(string(&mut parser)?),
            Long("json") => options.json = true,
            Long("push-updates") => push_updates = true,
            Long("print-stamp") => print_stamp = true,
            Short('V') | Long("version") => version = true,
            Short('h') | Long("help") => return Ok(Mode::Help),
            other => return Err(Usage::Flag(other.unexpected())),
        }
    }
    if version {
        return Ok(Mode::Version);
    }
    if print_stamp {
        return Ok(Mode::PrintStamp(options.home));
    }
    options.timeout = client::timeout(timeout_ms).map_err(Usage::Timeout)?;
    if push_updates {
        options.updates = push_updates::read_stdin();
    }
    Ok(Mode::Ask(options))
}

fn value(parser: &mut lexopt::Parser) -> Result<OsString, Usage> {
    parser.value().map_err(Usage::Flag)
}

fn string(parser: &mut lexopt::Parser) -> Result<String, Usage> {
    value(parser)?.into_string().map_err(Usage::NotUtf8)
}
