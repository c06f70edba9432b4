//! `row-fence-resident`: the warm daemon the asker talks to. Thin: flags, logging, then
//! `startup::run`. Runs in the foreground under launchd or systemd.

use clap::Parser;
use row_fence_resident::config::{CommonArgs, LocationArgs, Settings};
use row_fence_resident::heartbeat::DEFAULT_INTERVAL_MS;
use row_fence_resident::startup::{self, EXIT_START_FAILED, Options};
use row_fence_stamp::{BUILD_DIGEST, VERSION};
use std::time::Duration;

/// The row fence's resident daemon: answers row-fence-ask over a Unix socket.
#[derive(Parser, Debug)]
#[command(name = "row-fence-resident", version = VERSION, about, long_about = None)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    location: LocationArgs,
    #[command(flatten)]
    broker: row_fence_resident::broker::BrokerArgs,
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
}

/// Writes a line, ignoring a closed or full stream: never a panic.
fn say(stream: &mut dyn std::io::Write, line: &str) {
    let _ = writeln!(stream, "{line}");
    let _ = stream.flush();
}

fn main() {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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
    let code = startup::run(Options {
        settings,
        heartbeat_interval: Duration::from_millis(args.heartbeat_ms),
        extra_uids: args.allowed_uids,
        location: args.location.settings(),
        broker: args.broker.settings(),
        build: BUILD_DIGEST,
    });
    std::process::exit(code);
}
