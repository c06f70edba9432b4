//! `row-fence-resident`: the warm daemon the asker talks to. Thin: flags, logging, then
//! `startup::run`. Runs in the foreground: under launchd or systemd (`--supervised`), as
//! a container's main process or under its init, or started from a shell with
//! `--detach` (`detach`). Unsupervised, it executes its new binary in place on an
//! upgrade (`reexec`).

use clap::Parser;
use row_fence_resident::config::{CommonArgs, LocationArgs, Settings};
use row_fence_resident::heartbeat::DEFAULT_INTERVAL_MS;
use row_fence_resident::resident::EXIT_STALE_CODE;
use row_fence_resident::startup::{self, EXIT_START_FAILED, Options};
use row_fence_resident::{detach, reexec};
use row_fence_stamp::{BUILD_DIGEST, VERSION};
use std::time::Duration;

/// The row fence's resident daemon: answers row-fence-ask over a Unix socket.
#[derive(Parser, Debug)]
#[command(name = "row-fence-resident", version = VERSION, about = ABOUT, long_about = None,
          after_help = EXAMPLES)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    location: LocationArgs,
    #[command(flatten)]
    broker: row_fence_resident::broker::BrokerArgs,
    #[command(flatten)]
    forge_api: row_fence_resident::forge_api::ForgeApiArgs,
    #[command(flatten)]
    push: row_fence_resident::push::PushArgs,
    /// Milliseconds between heartbeats (at least 100)
    #[arg(long, env = "ROW_FENCE_HEARTBEAT_MS", hide_env_values = true, default_value_t = DEFAULT_INTERVAL_MS,
          value_name = "MS", value_parser = clap::value_parser!(u64).range(100..))]
    heartbeat_ms: u64,
    /// Extra uids to serve besides our own (comma-separated)
    #[arg(
        long,
        env = "ROW_FENCE_ALLOWED_UIDS",
        hide_env_values = true,
        value_delimiter = ',',
        value_name = "UIDS"
    )]
    allowed_uids: Vec<u32>,
    /// Print this build's code stamp (with the registry under the home) and exit
    #[arg(long)]
    print_stamp: bool,
    /// A service manager restarts this daemon when it exits (the launchd and systemd jobs pass this): on an upgrade it exits 75 for the manager, instead of executing its new binary in place
    #[arg(long)]
    supervised: bool,
    /// Start in the background, in a session of its own, logging to $ROW_FENCE_HOME/log/resident.log; returns once the daemon answers on its socket (for a machine with no service manager)
    #[arg(long, conflicts_with_all = ["supervised", "print_stamp"])]
    detach: bool,
}

/// `--help`'s first line.
const ABOUT: &str = "The row fence's resident daemon: answers row-fence-ask over a Unix socket";

/// `--help`'s examples: each way the daemon is kept running.
const EXAMPLES: &str = "Examples:
  row-fence-resident            # in the foreground: a container's main process, a terminal
  row-fence-resident --detach   # no service manager: in the background, once it answers
  row-fence install systemd     # or launchd: the job that runs it --supervised";

/// Writes a line, ignoring a closed or full stream: never a panic.
fn say(stream: &mut dyn std::io::Write, line: &str) {
    let _ = writeln!(stream, "{line}");
    let _ = stream.flush();
}

/// The daemon's log on stderr with every unsafe character of a line (a lane's action text,
/// session id or detail: controls, bidi, zero-width, an inner newline) written as `\u{…}`
/// (ARCHITECTURE.md, "One spelling"), so no log line can forge another or clear a screen.
/// tracing writes one event per `write`; its closing newline is kept. No ANSI colours:
/// the log holds no escape sequence at all.
struct EscapedLog;

impl std::io::Write for EscapedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (body, end) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (&*text, ""),
        };
        let line = row_fence_contract::spelling::escape_unsafe(body, false);
        let mut err = std::io::stderr().lock();
        err.write_all(line.as_bytes())?;
        err.write_all(end.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

fn main() {
    detach::become_session_leader();
    let again = reexec::Again::capture();
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(|| EscapedLog)
        .with_ansi(false)
        .init();
    let settings = match Settings::resolve(&args.common) {
        Ok(settings) => settings,
        Err(e) => {
            say(&mut std::io::stderr(), &format!("row-fence-resident: {e}"));
            std::process::exit(EXIT_START_FAILED);
        }
    };
    if args.print_stamp {
        match row_fence_contract::stamp::code_stamp(&settings.home, BUILD_DIGEST) {
            Ok(stamp) => say(&mut std::io::stdout(), &stamp),
            Err(e) => {
                say(&mut std::io::stderr(), &format!("row-fence-resident: {e}"));
                std::process::exit(row_fence_contract::exit::COULD_NOT_READ);
            }
        }
        return;
    }
    if args.detach {
        let rest = std::env::args_os()
            .skip(1)
            .filter(|a| a != "--detach")
            .collect();
        std::process::exit(detach::run(&settings, rest));
    }
    let code = startup::run(Options {
        settings,
        heartbeat_interval: Duration::from_millis(args.heartbeat_ms),
        extra_uids: args.allowed_uids,
        location: args.location.settings(),
        broker: args.broker.settings(),
        forge_api: args.forge_api.settings(),
        push: args.push.settings(),
        build: BUILD_DIGEST,
        supervised: args.supervised,
    });
    if code == EXIT_STALE_CODE
        && !args.supervised
        && let Some(again) = again
    {
        let e = again.exec();
        say(
            &mut std::io::stderr(),
            &format!(
                "row-fence-resident: cannot execute the new code in place ({e}); exiting {EXIT_STALE_CODE}: start row-fence-resident again"
            ),
        );
    }
    std::process::exit(code);
}
