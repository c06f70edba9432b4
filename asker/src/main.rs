//! `row-fence-ask`: asks the resident daemon whether this lane still holds its board row.
//! Thin: parses flags, then `ask::run`. See the crate docs and DESIGN.md for the contract.

use row_fence_ask::ask::{self, DEFAULT_TIMEOUT_MS, Options, TIMEOUT_ENV};
use row_fence_ask::{exit, paths, report, stamp, stdio};
use std::path::PathBuf;
use std::time::Duration;

const USAGE: &str = "\
Usage: row-fence-ask [--descriptor PATH] [--action TEXT] [--socket PATH] [--timeout-ms N] [--json]
       row-fence-ask --print-stamp | --version | --help

Asks the resident row-fence daemon whether this lane still holds its board row.

Options:
  --descriptor PATH   the lane's descriptor (else $ROW_FENCE_DESCRIPTOR, else <git dir>/row-fence.json)
  --action TEXT       the fenced action, e.g. \"git push origin\" (for the ledger)
  --socket PATH       the daemon's socket (else $ROW_FENCE_SOCKET, else $ROW_FENCE_HOME/sock)
  --timeout-ms N      one deadline for connect, write and read (else $ROW_FENCE_TIMEOUT_MS, default 3000)
  --json              also print the verdict as one JSON object on stdout
  --print-stamp       print this build's code stamp and exit
  -V, --version       print the version and exit
  -h, --help          print this help and exit

Exit: 0 ALLOWED or UNFENCED, 3 REFUSED, 1 COULD NOT READ, 2 usage error.";

enum Mode {
    Ask(Options),
    PrintStamp,
    Version,
    Help,
}

fn main() {
    stdio::keep_standard_fds_open();
    let code = match parse_args() {
        Ok(Mode::Ask(options)) => ask::run(&options),
        Ok(Mode::PrintStamp) => print_stamp(),
        Ok(Mode::Version) => {
            println_quiet(&format!(
                "row-fence-ask {} (build {})",
                env!("CARGO_PKG_VERSION"),
                &stamp::BUILD_DIGEST[..12]
            ));
            exit::ALLOWED
        }
        Ok(Mode::Help) => {
            println_quiet(USAGE);
            exit::ALLOWED
        }
        Err(message) => {
            let usage = USAGE.lines().next().unwrap_or_default();
            report::say(&format!(
                "row-fence-ask: error: {message}\n{usage}\nTry 'row-fence-ask --help' for more."
            ));
            exit::USAGE
        }
    };
    std::process::exit(code);
}

fn print_stamp() -> i32 {
    match paths::home(None).and_then(|home| stamp::code_stamp(&home).map_err(|e| e.to_string())) {
        Ok(stamp) => {
            println_quiet(&stamp);
            exit::ALLOWED
        }
        Err(e) => {
            report::say(&format!("row-fence-ask: {e}"));
            exit::COULD_NOT_READ
        }
    }
}

fn println_quiet(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

fn parse_args() -> Result<Mode, String> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_env();
    let mut options = Options {
        descriptor: None,
        action: String::new(),
        socket: None,
        timeout: Duration::ZERO,
        json: false,
    };
    let mut timeout_ms: Option<String> = None;
    let mut mode = None;
    while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
        match arg {
            Long("descriptor") => {
                let path = value(&mut parser)?;
                if path.is_empty() {
                    return Err("--descriptor needs a path".into());
                }
                options.descriptor = Some(PathBuf::from(path));
            }
            Long("action") => options.action = string(&mut parser)?,
            Long("socket") => options.socket = Some(PathBuf::from(value(&mut parser)?)),
            Long("timeout-ms") => timeout_ms = Some(string(&mut parser)?),
            Long("json") => options.json = true,
            Long("print-stamp") => mode = Some(Mode::PrintStamp),
            Short('V') | Long("version") => mode = Some(Mode::Version),
            Short('h') | Long("help") => return Ok(Mode::Help),
            other => return Err(other.unexpected().to_string()),
        }
    }
    if let Some(mode) = mode {
        return Ok(mode);
    }
    let (source, text) = match timeout_ms {
        Some(text) => ("--timeout-ms", text),
        None => match std::env::var(TIMEOUT_ENV) {
            Ok(text) if !text.is_empty() => (TIMEOUT_ENV, text),
            _ => ("default", DEFAULT_TIMEOUT_MS.to_string()),
        },
    };
    let ms: u64 = text
        .trim()
        .parse()
        .ok()
        .filter(|ms| *ms > 0)
        .ok_or_else(|| {
            format!("{source} must be a whole number of milliseconds above 0, got {text:?}")
        })?;
    options.timeout = Duration::from_millis(ms);
    Ok(Mode::Ask(options))
}

fn value(parser: &mut lexopt::Parser) -> Result<std::ffi::OsString, String> {
    parser.value().map_err(|e| e.to_string())
}

fn string(parser: &mut lexopt::Parser) -> Result<String, String> {
    value(parser)?
        .into_string()
        .map_err(|v| format!("{v:?} is not valid UTF-8"))
}
