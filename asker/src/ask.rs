//! The asker's whole flow: resolve the descriptor, decide what it can decide itself
//! (UNFENCED, a missing or unreadable descriptor, a socket it cannot trust), otherwise
//! print `row-fence: asking …`, ask the daemon within one deadline, check the answer
//! echoes what was asked, print exactly one verdict line and return the exit code.
//! Every path that cannot find out ends COULD NOT READ (fail closed: DESIGN.md, verdicts).

use crate::client::{self, ExchangeError};
use crate::descriptor::{self, Descriptor, Resolution};
use crate::ledger::{self, DecidedBy, LedgerRecord};
use crate::paths;
use crate::protocol::{Ask, Caller, FORWARDED_ENV, Op, PROTOCOL_VERSION, Request};
use crate::report::{self, Outcome};
use crate::stamp;
use crate::verdict::{Reason, Verdict};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Default total deadline for one ask (connect, write and read), in ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 3000;

/// Environment variable overriding the deadline, in ms.
pub const TIMEOUT_ENV: &str = "ROW_FENCE_TIMEOUT_MS";

/// Environment variable carrying the caller's session id into the request and ledger.
pub const SESSION_ENV: &str = "ROW_FENCE_SESSION";

/// What one run of the asker is asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--descriptor PATH`.
    pub descriptor: Option<PathBuf>,
    /// `--action TEXT`, the fenced action, for the ledger and the asks stream.
    pub action: String,
    /// `--socket PATH`.
    pub socket: Option<PathBuf>,
    /// The total deadline.
    pub timeout: Duration,
    /// `--json`: also print the verdict object on stdout.
    pub json: bool,
}

/// Runs one ask and returns the process exit code (0, 1 or 3).
pub fn run(options: &Options) -> i32 {
    let asker = Asker {
        started: Instant::now(),
        options,
        home: paths::home(None),
        cwd: std::env::current_dir().ok(),
        session: std::env::var(SESSION_ENV).ok().filter(|s| !s.is_empty()),
    };
    asker.run()
}

struct Asker<'a> {
    started: Instant,
    options: &'a Options,
    home: Result<PathBuf, String>,
    cwd: Option<PathBuf>,
    session: Option<String>,
}

impl Asker<'_> {
    fn run(&self) -> i32 {
        match descriptor::resolve_here(self.options.descriptor.as_deref()) {
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
            return unreadable(e);
        }
        if let Err(e) = paths::check_socket_dir(&socket, paths::euid(), true) {
            return unreadable(format!("refusing to ask: {e}"));
        }
        let stamp = match stamp::code_stamp(home) {
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
                caller: self.caller(),
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

    fn caller(&self) -> Caller {
        Caller {
            session: self.session.clone(),
            cwd: self.cwd.as_ref().map(|c| c.display().to_string()),
            env: FORWARDED_ENV
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
                .collect(),
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
        let outcome = Outcome {
            verdict,
            detail,
            descriptor,
            elapsed_ms: self.started.elapsed().as_millis() as u64,
        };
        outcome.print(self.options.json);
        verdict.exit_code()
    }
}
