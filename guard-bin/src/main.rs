//! `row-fence-guard`: the agent harnesses' pre-tool hook (every tool). Thin: flags, the
//! hook input read and walked on a thread with a large stack, then `judge`. Exit 0 lets the
//! command run; every other outcome is exit 2 (see the crate docs and ARCHITECTURE.md, "The
//! agent guard's policy").

use row_fence_contract::harness::UnknownHarness;
use row_fence_contract::{paths, report, stdio};
use row_fence_guard::harness::{self, Harness};
use row_fence_guard::judge::{self, ALLOW, DENY, Settings};
use row_fence_guard::{DEFAULT_TIMEOUT_MS, TIMEOUT_ENV, input, parse, walk};
use std::path::PathBuf;
use std::sync::OnceLock;

use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The harness whose convention the guard answers in: set as soon as `--harness` is
/// read, so even a later usage error is answered in it, or to [`Harness::DEFAULT`] once
/// the command line is read without one. Until then no harness is known, and a denial
/// speaks none's convention: stderr and [`DENY`], which every harness reads as a block.
static HARNESS: OnceLock<Harness> = OnceLock::new();

/// The harness's denial line for stdout, made before the hard deadline is armed: the
/// alarm's handler may only write bytes that already exist.
static DENY_STDOUT: OnceLock<String> = OnceLock::new();

/// How the guard ends.
enum End {
    /// The hook's answer, [`ALLOW`] or [`DENY`], given in the harness's convention.
    Answer(i32),
    /// No hook was answered: `--help`, `--version` or `--plan` printed what was asked
    /// (exit 0, nothing more on stdout).
    Printed,
}

/// The one place the guard exits (the alarm's handler aside, which writes the same
/// denial): the harness's answer on stdout, if it reads one, and its exit code.
fn end(end: End) -> ! {
    // The answer is being given: the hard deadline must not give a second one.
    nix::unistd::alarm::cancel();
    match end {
        End::Printed => std::process::exit(ALLOW),
        End::Answer(code) => match HARNESS.get() {
            Some(harness) => {
                let answer = harness::answer(*harness, code);
                if let Some(line) = answer.stdout {
                    println_quiet(&line);
                }
                std::process::exit(answer.code)
            }
            None => std::process::exit(DENY),
        },
    }
}

/// `--help`'s text; `{harnesses}` and `{default}` are filled from [`Harness`].
const USAGE: &str = "\
Usage: row-fence-guard [--harness NAME] [--socket PATH] [--timeout-ms N] [--plan] < hook-input.json
       row-fence-guard --version | --help

The pre-tool hook of Claude Code, Codex, Gemini CLI and Cursor: reads the hook's JSON on
stdin, parses a shell tool's command (and reads a file tool's paths), and asks the row fence
about every fenced write (git push and plumbing, gh outside its read-only commands, row-fence
subcommands but its reads) and, for a row-bound session, every opaque
command (dynamic command words, inline interpreter code, git aliases and config overrides).

Options:
  --harness NAME    the agent harness whose hook input and answer to speak:
                    {harnesses} (default {default})
  --socket PATH     the daemon's socket (else $ROW_FENCE_SOCKET, else $ROW_FENCE_HOME/sock)
  --timeout-ms N    one deadline for the whole hook (else $ROW_FENCE_GUARD_TIMEOUT_MS, default 8000)
  --plan            print what the command writes and where, as JSON lines, and ask nothing
  -V, --version     print the version and exit
  -h, --help        print this help and exit

Exit: 0 the command may run; 2 it may not (Claude Code blocks the call and shows stderr).";

/// A command line the guard does not take (denied: exit 2).
#[derive(Debug)]
enum Usage {
    /// lexopt's reason (an unknown flag, a flag without its value).
    Flag(lexopt::Error),
    /// A `--harness` the guard does not know.
    Harness(UnknownHarness),
    /// `--harness` given more than once.
    HarnessTwice,
    /// A deadline that is not a whole number of milliseconds above 0.
    Timeout {
        /// `--timeout-ms`, the environment variable, or `default`.
        source: &'static str,
        /// The value given.
        text: String,
    },
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Usage::Flag(e) => e.fmt(f),
            Usage::Harness(unknown) => write!(f, "--harness: {unknown}"),
            Usage::HarnessTwice => write!(f, "--harness is given more than once"),
            Usage::Timeout { source, text } => write!(
                f,
                "{source} must be a whole number of milliseconds above 0, got {text:?}"
            ),
        }
    }
}

/// Neither the hook input nor the guard itself says where the command runs.
#[derive(Debug)]
struct NoCwd(std::io::Error);

impl std::fmt::Display for NoCwd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the hook input has no cwd and the guard's own cannot be read ({})",
            self.0
        )
    }
}

struct Options {
    harness: Harness,
    socket: Option<PathBuf>,
    timeout: Duration,
    plan: bool,
}

fn main() {
    stdio::keep_standard_fds_open();
    // A bug is never a "yes": any panic denies.
    std::panic::set_hook(Box::new(|info| {
        report::say(&format!(
            "row-fence guard: internal error ({info}); denied. The command did not run."
        ));
        end(End::Answer(DENY));
    }));
    let started = Instant::now();
    let options = match parse_args() {
        Ok(Some(options)) => options,
        Ok(None) => end(End::Printed),
        Err(message) => {
            report::say(&format!(
                "row-fence-guard: error: {message}. Denied: the tool call did not run.\n\
                 Fix the hook's command line (`row-fence-guard --help` lists what it takes), \
                 or write the hook again with `row-fence install agent-hook --agent NAME`."
            ));
            end(End::Answer(DENY));
        }
    };
    let deadline = started + options.timeout;
    if let Some(line) = harness::answer(options.harness, DENY).stdout {
        let _ = DENY_STDOUT.set(format!("{line}\n"));
    }
    hard_deadline(options.timeout);
    let hook = match input::read_value(std::io::stdin().lock())
        .and_then(|v| harness::read(options.harness, v))
    {
        Ok(hook) => hook,
        Err(why) => deny(why),
    };
    let (hook, cwd, plan) = if small(&hook.command) {
        // The common case: walked right here, no thread to hand over to.
        walk_hook(hook).unwrap_or_else(|why| deny(why))
    } else {
        // A long or deeply nested command is walked on a thread with a large stack,
        // within the deadline.
        let (tx, rx) = mpsc::channel();
        let worker = std::thread::Builder::new()
            .stack_size(parse::PARSE_STACK_BYTES)
            .spawn(move || {
                let _ = tx.send(walk_hook(hook));
            });
        if let Err(e) = worker {
            deny(format!("cannot start reading the command: {e}"));
        }
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Ok(read)) => read,
            Ok(Err(why)) => deny(why),
            Err(_) => deny("could not read the command before the hook's deadline; retry"),
        }
    };
    if options.plan {
        print_plan(&plan);
        end(End::Printed);
    }
    let settings = Settings {
        home: paths::home(None),
        socket: options.socket,
        descriptor_env: std::env::var_os(row_fence_contract::descriptor::DESCRIPTOR_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
        started,
        deadline,
        build: row_fence_stamp::BUILD_DIGEST,
    };
    end(End::Answer(judge::judge(&hook, &plan, &cwd, &settings)));
}

/// True for a command short and shallow enough to walk on the main thread's stack
/// (16 KiB, nesting at most 32): the walk recurses per level, and the main thread's stack
/// is the platform's default, not [`parse::PARSE_STACK_BYTES`].
fn small(command: &str) -> bool {
    command.len() <= 16 * 1024 && parse::nesting_any(command) <= 32
}

/// The hook, the session's cwd, and the walk's plan.
type Walked = (input::Hook, PathBuf, walk::Plan);

fn walk_hook(hook: input::Hook) -> Result<Walked, NoCwd> {
    let cwd = match &hook.cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir().map_err(NoCwd)?,
    };
    // The command is read where the tool runs (Gemini CLI's `dir_path`, Codex's
    // `tool_cwd`); where that is unknown, from the session's cwd, and the judge takes
    // every place as unknown.
    let origin = match &hook.runs_in {
        input::RunsIn::At(dir) => cwd.join(dir),
        _ => cwd.clone(),
    };
    let env = walk::Env {
        home: std::env::var("HOME").ok().filter(|h| !h.is_empty()),
        cdpath: std::env::var_os("CDPATH").is_some_and(|v| !v.is_empty()),
        // The guard's own PATH is looked up (and cached) by the lookup itself.
        path: None,
    };
    let plan = match &hook.tool {
        input::Tool::Bash { .. } => walk::plan(&hook.command, &origin, &env),
        input::Tool::Other { .. } => walk::Plan::default(),
    };
    Ok((hook, cwd, plan))
}

/// Half a second past the deadline (rounded up to a whole second), the process denies
/// (in the harness's convention: [`DENY_STDOUT`]) and exits, wherever it is: a file system that hangs a `stat` must not take the hook past
/// Claude Code's timeout, after which the command would run. The handler only writes and
/// exits (async-signal-safe).
fn hard_deadline(timeout: Duration) {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    extern "C" fn on_alarm(_: nix::libc::c_int) {
        const LINE: &[u8] =
            b"row-fence guard: the hook's deadline passed before the guard could answer. Denied: the command did not run; retry.\n";
        // SAFETY: write(2) and _exit(2) are async-signal-safe; LINE is static, and
        // DENY_STDOUT, once set (before the alarm is armed), is never changed or freed:
        // reading it is an atomic load, no lock, no allocation.
        unsafe {
            if let Some(answer) = DENY_STDOUT.get() {
                nix::libc::write(1, answer.as_ptr().cast(), answer.len());
            }
            nix::libc::write(2, LINE.as_ptr().cast(), LINE.len());
            nix::libc::_exit(DENY);
        }
    }
    let action = SigAction::new(
        SigHandler::Handler(on_alarm),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler above only calls async-signal-safe functions.
    if unsafe { sigaction(Signal::SIGALRM, &action) }.is_ok() {
        let seconds = (timeout.as_millis() + 500)
            .div_ceil(1000)
            .min(u32::MAX as u128) as u32;
        nix::unistd::alarm::set(seconds);
    }
}

fn deny(why: impl std::fmt::Display) -> ! {
    report::say(&format!(
        "row-fence guard: {why}. Denied: the command did not run."
    ));
    end(End::Answer(DENY));
}

fn print_plan(plan: &walk::Plan) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for f in &plan.findings {
        let places: Vec<String> = f
            .places
            .iter()
            .map(|p| match &p.git_dir {
                Some(g) => format!("{} (git dir {g})", p.dir),
                None => p.dir.to_string(),
            })
            .collect();
        let kind = match f.kind {
            row_fence_guard::finding::Kind::Fenced => "fenced",
            row_fence_guard::finding::Kind::Opaque => "opaque",
        };
        let line = serde_json::json!({"kind": kind, "action": f.action, "places": places});
        let _ = writeln!(out, "{line}");
    }
    if let Some(why) = &plan.unreadable {
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({"kind": "unreadable", "action": why, "places": []})
        );
    }
}

fn parse_args() -> Result<Option<Options>, Usage> {
    use lexopt::prelude::*;
    let mut parser = lexopt::Parser::from_env();
    let mut options = Options {
        harness: Harness::DEFAULT,
        socket: None,
        timeout: Duration::ZERO,
        plan: false,
    };
    let mut timeout: Option<String> = None;
    while let Some(arg) = parser.next().map_err(Usage::Flag)? {
        match arg {
            Long("socket") => {
                options.socket = Some(PathBuf::from(parser.value().map_err(Usage::Flag)?))
            }
            Long("timeout-ms") => {
                timeout = Some(
                    parser
                        .value()
                        .map_err(Usage::Flag)?
                        .to_string_lossy()
                        .into_owned(),
                )
            }
            Long("plan") => options.plan = true,
            Long("harness") => {
                let name = parser.value().map_err(Usage::Flag)?;
                let name = name.to_string_lossy();
                options.harness = name.parse().map_err(Usage::Harness)?;
                // One harness per hook: a second `--harness` would answer in a convention
                // the one already set does not speak.
                HARNESS
                    .set(options.harness)
                    .map_err(|_| Usage::HarnessTwice)?;
            }
            Short('V') | Long("version") => {
                println_quiet(&format!("row-fence-guard {}", row_fence_stamp::VERSION));
                return Ok(None);
            }
            Short('h') | Long("help") => {
                println_quiet(
                    &USAGE
                        .replace("{harnesses}", &Harness::listed())
                        .replace("{default}", Harness::DEFAULT.name()),
                );
                return Ok(None);
            }
            other => return Err(Usage::Flag(other.unexpected())),
        }
    }
    // The whole command line is read: without `--harness`, the hook is the default's.
    HARNESS.get_or_init(|| options.harness);
    let (source, text) = match timeout {
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
        .ok_or_else(|| Usage::Timeout {
            source,
            text: text.clone(),
        })?;
    options.timeout = Duration::from_millis(ms);
    Ok(Some(options))
}

fn println_quiet(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}
