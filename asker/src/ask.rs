//! The asker's whole flow: resolve the descriptor, decide what it can decide itself
//! (UNFENCED, a missing or unreadable descriptor, a socket it cannot trust), otherwise
//! print `row-fence: asking …`, ask the daemon within one deadline, check the answer
//! echoes what was asked, print exactly one verdict line and return the exit code.
//! Every path that cannot find out ends COULD NOT READ (fail closed: ARCHITECTURE.md, "Invariants").

use row_fence_contract::client::{self, ExchangeError, SESSION_ENV};
use row_fence_contract::descriptor::{self, Descriptor, Resolution};
use row_fence_contract::ledger::{self, DecidedBy, LedgerRecord};
use row_fence_contract::paths;
use row_fence_contract::protocol::{Ask, Caller, FORWARDED_ENV, Op, PROTOCOL_VERSION, Request};
use row_fence_contract::report::{self, Shown};
use row_fence_contract::stamp;
use row_fence_contract::verdict::{Reason, Verdict};
use row_fence_stamp::BUILD_DIGEST;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What one run of the asker is asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--descriptor PATH`.
    pub descriptor: Option<PathBuf>,
    /// `--action TEXT`, the fenced action, for the ledger and the asks stream.
    pub action: String,
    /// `--socket PATH`.
    pub socket: Option<PathBuf>,
    /// `--home DIR` (else `ROW_FENCE_HOME`, else `~/.row-fence`): the home whose registry
    /// the stamp hashes, whose ledger records what the asker decides, and whose socket it
    /// asks unless `socket` names another.
    pub home: Option<PathBuf>,
    /// The total deadline.
    pub timeout: Duration,
    /// `--json`: also print the verdict object on stdout.
    pub json: bool,
}

/// Runs one ask and returns the process exit code (0, 1 or 3).
pub fn run(options: &Options) -> i32 {
    let started = Instant::now();
    run_resolved(
        options,
        descriptor::resolve_here(options.descriptor.as_deref()),
        started,
    )
}

/// Runs one ask about a descriptor resolved by the caller (git's transport gate binds the
/// lookup to the repository that runs it), from `started` on, and returns the exit code.
/// The lines printed and the ledger records written are the asker's own.
pub fn run_resolved(options: &Options, resolution: Resolution, started: Instant) -> i32 {
    let asker = Asker {
        started,
        options,
        home: paths::home(options.home.as_deref()).and_then(|path| {
            std::path::absolute(&path)
                .map_err(|source| paths::HomeError::NotAbsolute { path, source })
        }),
        cwd: std::env::current_dir().ok(),
        session: std::env::var(SESSION_ENV).ok().filter(|s| !s.is_empty()),
    };
    asker.run(resolution)
}

struct Asker<'a> {
    started: Instant,
    options: &'a Options,
    home: Result<PathBuf, paths::HomeError>,
    cwd: Option<PathBuf>,
    session: Option<String>,
}

impl Asker<'_> {
    fn run(&self, resolution: Resolution) -> i32 {
        match resolution {
            Resolution::Unbound(detail) => self.finish(
                Verdict::Unfenced,
                format!("(not row-bound: {detail})"),
                None,
            ),
            Resolution::Missing(path) => self.decide(
                Verdict::CouldNotRead(Reason::DescriptorMissing),
                format!("the named descriptor {} does not exist", path.display()),
                None,
                Some(&path),
            ),
            Resolution::Unreadable(path, detail) => self.decide(
                Verdict::CouldNotRead(Reason::DescriptorUnreadable),
                format!("{}: {detail}", path.display()),
                None,
                Some(&path),
            ),
            Resolution::Found(path, d) => self.ask(&path, d),
        }
    }

    fn ask(&self, path: &Path, d: Descriptor) -> i32 {
        let unreadable = |detail: String| {
            self.decide(
                Verdict::CouldNotRead(Reason::FenceUnreadable),
                detail,
                Some(&d),
                Some(path),
            )
        };
        let home = match &self.home {
            Ok(home) => home,
            Err(e) => return unreadable(format!("cannot find the row-fence home: {e}")),
        };
        let socket = paths::socket(self.options.socket.as_deref(), home);
        if let Err(e) = paths::check_socket_length(&socket) {
            return unreadable(e.to_string());
        }
        if let Err(e) = paths::check_socket_dir(&socket, paths::euid(), true) {
            return unreadable(format!("refusing to ask: {e}"));
        }
        let stamp = match stamp::code_stamp(home, BUILD_DIGEST) {
            Ok(stamp) => stamp,
            Err(e) => return unreadable(e.to_string()),
        };
        report::say(&report::asking_line(&socket, &d));
        let deadline = self.started + self.options.timeout;
        let request = Request {
            v: PROTOCOL_VERSION,
            op: Op::Ask(Box::new(Ask {
                stamp,
                deadline_ms: deadline
                    .saturating_duration_since(Instant::now())
                    .as_millis() as u64,
                descriptor: d.clone(),
                action: self.options.action.clone(),
                caller: self.caller(home),
            })),
        };
        match client::exchange(&socket, &request, deadline) {
            Ok(answer) => match answer.parsed_verdict() {
                Some(verdict) if answer.answers(&d, verdict) => {
                    self.finish(verdict, answer.detail, Some(d))
                }
                Some(_) => self.decide(
                    Verdict::CouldNotRead(Reason::ProtocolError),
                    format!(
                        "the daemon judged {}/{} as {} at generation {}, not what was asked",
                        answer.board.as_deref().unwrap_or("?"),
                        answer.row.as_deref().unwrap_or("?"),
                        answer.lane.as_deref().unwrap_or("?"),
                        answer.generation.map_or("?".into(), |g| g.to_string())
                    ),
                    Some(&d),
                    Some(path),
                ),
                None => self.decide(
                    Verdict::CouldNotRead(Reason::ProtocolError),
                    format!(
                        "the daemon's answer is not a verdict (verdict {:?}, reason {:?})",
                        answer.verdict, answer.reason
                    ),
                    Some(&d),
                    Some(path),
                ),
            },
            Err(ExchangeError::Timeout) => self.decide(
                Verdict::CouldNotRead(Reason::Timeout),
                format!(
                    "no verdict from {} within {} ms",
                    socket.display(),
                    self.options.timeout.as_millis()
                ),
                Some(&d),
                Some(path),
            ),
            Err(ExchangeError::Unreachable(detail)) => self.decide(
                Verdict::CouldNotRead(Reason::FenceUnreadable),
                detail,
                Some(&d),
                Some(path),
            ),
            Err(ExchangeError::Protocol(detail)) => self.decide(
                Verdict::CouldNotRead(Reason::ProtocolError),
                detail,
                Some(&d),
                Some(path),
            ),
        }
    }

    fn caller(&self, home: &Path) -> Caller {
        Caller {
            session: self.session.clone(),
            cwd: self.cwd.as_ref().map(|c| c.display().to_string()),
            env: FORWARDED_ENV
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
                .collect(),
            build: Some(BUILD_DIGEST.to_string()),
            home: Some(home.display().to_string()),
        }
    }

    /// A verdict the asker decided itself: recorded in the ledger, then printed.
    fn decide(
        &self,
        verdict: Verdict,
        detail: String,
        d: Option<&Descriptor>,
        path: Option<&Path>,
    ) -> i32 {
        if let Ok(home) = &self.home {
            let record = LedgerRecord::new(DecidedBy::Asker, verdict, detail.clone())
                .with_descriptor(d)
                .with_caller(
                    self.session.as_deref(),
                    self.cwd
                        .as_ref()
                        .map(|c| c.display().to_string())
                        .as_deref(),
                    &self.options.action,
                )
                .with_descriptor_path(path);
            // The verdict stands whether or not the ledger could be written.
            let _ = ledger::append(&paths::ledger(home), &record);
        }
        self.finish(verdict, detail, d.cloned())
    }

    fn finish(&self, verdict: Verdict, detail: String, descriptor: Option<Descriptor>) -> i32 {
        let outcome = Shown {
            verdict,
            detail,
            descriptor,
            elapsed_ms: self.started.elapsed().as_millis() as u64,
        };
        outcome.print(self.options.json);
        verdict.exit_code()
    }
}
