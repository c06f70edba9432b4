//! The one client of the daemon: the asker, the agent guard, git's transport gate (which
//! is the asker) and `row-fence status` ask through it, so a fence is spelled once
//! (ARCHITECTURE.md, "The path of an ask"). An ask is four steps, each here:
//!
//! 1. [`prepare`]: the socket path checked (length, a directory only we or root can
//!    write) and the code stamp made from the binary's build digest and the home's
//!    registry; a failure is [`Unasked`], COULD NOT READ without a connection.
//! 2. [`Prepared::request`]: the ask request, with the [`Caller`] made by
//!    [`Prepared::caller_from_env`] (a program asking for itself) or
//!    [`Prepared::caller_for_session`] (the guard, for an agent's session).
//! 3. [`exchange`]: one request and one answer within one deadline ([`wire`]).
//! 4. [`verdict_of`]: the answer, or why there is none, as the verdict and the detail the
//!    verdict line shows, and whether the daemon decided it (and recorded it) or the
//!    client did (and must record it).
//!
//! `row-fence status` is [`status`]: the same socket check and exchange, a status back.

pub mod wire;

pub use wire::{ExchangeError, exchange, exchange_line};

use crate::descriptor::Descriptor;
use crate::paths::{self, HomeError, SocketPathTooLong, Untrusted};
use crate::protocol::{Answer, Ask, Caller, FORWARDED_ENV, Op, PROTOCOL_VERSION, Request};
use crate::stamp::{self, RegistryUnreadable};
use crate::status::Status;
use crate::verdict::{Reason, Verdict};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Default total deadline for one ask (connect, write and read), in ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 3000;

/// Environment variable overriding the deadline, in ms.
pub const TIMEOUT_ENV: &str = "ROW_FENCE_TIMEOUT_MS";

/// Environment variable carrying the caller's session id into the request and ledger.
pub const SESSION_ENV: &str = "ROW_FENCE_SESSION";

/// A deadline that is not a whole number of milliseconds above 0, with where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTimeout {
    /// `--timeout-ms` or `ROW_FENCE_TIMEOUT_MS`.
    pub source: &'static str,
    /// The value as given.
    pub text: String,
}

impl std::fmt::Display for BadTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} must be a whole number of milliseconds above 0, got {:?}",
            self.source, self.text
        )
    }
}

impl std::error::Error for BadTimeout {}

/// The deadline from `--timeout-ms` (`flag`), else `ROW_FENCE_TIMEOUT_MS`, else
/// [`DEFAULT_TIMEOUT_MS`]. The error names the source of a value that is not a whole
/// number of milliseconds above 0.
pub fn timeout(flag: Option<String>) -> Result<Duration, BadTimeout> {
    let (source, text) = match flag {
        Some(text) => ("--timeout-ms", text),
        None => match std::env::var(TIMEOUT_ENV) {
            Ok(text) if !text.is_empty() => (TIMEOUT_ENV, text),
            _ => ("default", DEFAULT_TIMEOUT_MS.to_string()),
        },
    };
    text.trim()
        .parse()
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .ok_or(BadTimeout { source, text })
}

/// Why a client cannot ask the daemon at all: every ask it would have made is COULD NOT
/// READ (`fence_unreadable`), decided by the client.
#[derive(Debug)]
pub enum Unasked {
    /// No home: neither `ROW_FENCE_HOME` nor `HOME` is set, or it cannot be made
    /// absolute ([`HomeError`]'s sentence).
    NoHome(String),
    /// The socket was given relative ([`HomeError::RelativeSocket`]'s sentence).
    NoSocket(String),
    /// The socket path is over the platform's limit.
    SocketPath(SocketPathTooLong),
    /// The socket's directory is not to be trusted.
    Untrusted(Untrusted),
    /// The registry cannot be read, so there is no code stamp.
    Stamp(RegistryUnreadable),
}

impl std::fmt::Display for Unasked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unasked::NoHome(e) => write!(f, "cannot find the row-fence home: {e}"),
            Unasked::NoSocket(e) => write!(f, "cannot find the daemon's socket: {e}"),
            Unasked::SocketPath(e) => e.fmt(f),
            Unasked::Untrusted(e) => write!(f, "refusing to ask: {e}"),
            Unasked::Stamp(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Unasked {}

impl Unasked {
    /// The verdict a client prints for every ask it could not make.
    pub fn judged(&self) -> Judged {
        Judged {
            verdict: Verdict::CouldNotRead(Reason::FenceUnreadable),
            detail: self.to_string(),
            by_daemon: false,
        }
    }
}

/// A socket that may be asked and the code stamp to ask with.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The client's code stamp (64 hex characters).
    pub stamp: String,
    /// The home whose registry the stamp hashed, sent as `caller.home`.
    pub home: PathBuf,
    /// The client binary's build digest, sent as `caller.build`.
    pub build: String,
}

/// Checks the socket (`socket_flag`, else `ROW_FENCE_SOCKET`, else `<home>/sock`) as
/// every client must before it connects, and makes the code stamp of the build `build`
/// (the binary's `row_fence_stamp::BUILD_DIGEST`) with the registry under `home`.
///
/// Errors: [`Unasked`], in this order: no home, a relative socket, a socket path over the limit, a socket
/// directory another uid (not root) can write, a registry that cannot be read.
pub fn prepare(
    home: Result<&Path, &HomeError>,
    socket_flag: Option<&Path>,
    build: &str,
) -> Result<Prepared, Unasked> {
    let home = home.map_err(|e| Unasked::NoHome(e.to_string()))?;
    let socket = paths::socket(socket_flag, home).map_err(|e| Unasked::NoSocket(e.to_string()))?;
    paths::check_socket_length(&socket).map_err(Unasked::SocketPath)?;
    paths::check_socket_dir(&socket, paths::euid(), true).map_err(Unasked::Untrusted)?;
    let stamp = stamp::code_stamp(home, build).map_err(Unasked::Stamp)?;
    Ok(Prepared {
        socket,
        stamp,
        home: home.to_path_buf(),
        build: build.to_string(),
    })
}

/// This program's path, for `caller.program` (None when the OS cannot say).
fn own_program() -> Option<String> {
    std::env::current_exe()
        .ok()
        .map(|p| p.display().to_string())
}

impl Prepared {
    /// The caller of a program that asks for itself (the asker, git's transport gate):
    /// its session from `ROW_FENCE_SESSION`, the variables in [`FORWARDED_ENV`] that are
    /// set, its working directory `cwd`.
    pub fn caller_from_env(&self, cwd: Option<&Path>) -> Caller {
        Caller {
            session: std::env::var(SESSION_ENV).ok().filter(|s| !s.is_empty()),
            cwd: cwd.map(|c| c.display().to_string()),
            env: FORWARDED_ENV
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
                .collect(),
            build: Some(self.build.clone()),
            home: Some(self.home.display().to_string()),
            program: own_program(),
        }
    }

    /// The caller of an agent's session (the guard asks for a session, never for
    /// itself): the session id the hook input gave, forwarded as `ROW_FENCE_SESSION`, and
    /// the directory the command runs in.
    pub fn caller_for_session(&self, session: Option<&str>, cwd: &Path) -> Caller {
        Caller {
            session: session.map(str::to_string),
            cwd: Some(cwd.display().to_string()),
            env: session
                .into_iter()
                .map(|s| (FORWARDED_ENV[0].to_string(), s.to_string()))
                .collect(),
            build: Some(self.build.clone()),
            home: Some(self.home.display().to_string()),
            program: own_program(),
        }
    }

    /// The ask about `descriptor` for `action`, with the time left until `deadline`.
    pub fn request(
        &self,
        descriptor: &Descriptor,
        action: &str,
        caller: Caller,
        deadline: Instant,
    ) -> Request {
        Request {
            v: PROTOCOL_VERSION,
            op: Op::Ask(Box::new(Ask {
                stamp: self.stamp.clone(),
                deadline_ms: deadline
                    .saturating_duration_since(Instant::now())
                    .as_millis() as u64,
                descriptor: descriptor.clone(),
                action: action.to_string(),
                caller,
                updates: Vec::new(),
            })),
        }
    }
}

/// What one ask came to: the verdict, the detail its line shows, and who decided it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judged {
    /// The verdict.
    pub verdict: Verdict,
    /// The daemon's detail, or the client's sentence for what went wrong.
    pub detail: String,
    /// True when the daemon judged (and recorded a denial in its ledger); false when the
    /// client decided, and records a denial itself.
    pub by_daemon: bool,
}

/// The one answer-to-verdict function: what an exchange about `asked` came to.
///
/// An answer stands only when it is a verdict of this protocol version whose echo names
/// exactly `asked` (a COULD NOT READ may carry no echo); anything else is COULD NOT READ
/// `protocol_error`. No answer is `timeout` ([`ExchangeError::Timeout`], or `None`: the
/// client stopped waiting, "no verdict from `socket` within `within`"), `fence_unreadable`
/// (no daemon, closed early) or `protocol_error` (not one line of JSON). Never ALLOWED
/// unless the daemon said so about this very descriptor.
pub fn verdict_of(
    asked: &Descriptor,
    socket: &Path,
    within: Duration,
    exchanged: Option<Result<Answer, ExchangeError>>,
) -> Judged {
    let client = |verdict, detail| Judged {
        verdict,
        detail,
        by_daemon: false,
    };
    let answer = match exchanged {
        Some(Ok(answer)) => answer,
        None | Some(Err(ExchangeError::Timeout)) => {
            return client(
                Verdict::CouldNotRead(Reason::Timeout),
                format!(
                    "no verdict from {} within {} ms",
                    socket.display(),
                    within.as_millis()
                ),
            );
        }
        Some(Err(ExchangeError::Unreachable(detail))) => {
            return client(Verdict::CouldNotRead(Reason::FenceUnreadable), detail);
        }
        Some(Err(ExchangeError::Protocol(detail))) => {
            return client(Verdict::CouldNotRead(Reason::ProtocolError), detail);
        }
    };
    match answer.parsed_verdict() {
        Some(verdict) if answer.answers(asked, verdict) => Judged {
            verdict,
            detail: answer.detail,
            by_daemon: true,
        },
        Some(_) => client(
            Verdict::CouldNotRead(Reason::ProtocolError),
            format!(
                "the daemon judged {}/{} as {} at generation {}, not what was asked",
                answer.board.as_deref().unwrap_or("?"),
                answer.row.as_deref().unwrap_or("?"),
                answer.lane.as_deref().unwrap_or("?"),
                answer.generation.map_or("?".into(), |g| g.to_string())
            ),
        ),
        None => client(
            Verdict::CouldNotRead(Reason::ProtocolError),
            format!(
                "the daemon's answer is not a verdict (verdict {:?}, reason {:?})",
                answer.verdict, answer.reason
            ),
        ),
    }
}

/// Why `row-fence status` got no status, with the socket asked.
#[derive(Debug)]
pub enum StatusError {
    /// The socket path is over the platform's limit.
    SocketPath(SocketPathTooLong),
    /// No answer (no daemon, a timeout, not JSON).
    NoAnswer {
        /// The socket asked.
        socket: PathBuf,
        /// Why.
        why: ExchangeError,
    },
    /// An answer without a status object.
    NoStatus {
        /// The socket asked.
        socket: PathBuf,
    },
}

impl std::fmt::Display for StatusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusError::SocketPath(e) => e.fmt(f),
            StatusError::NoAnswer { socket, why } => {
                write!(f, "no daemon status from {}: {why}", socket.display())
            }
            StatusError::NoStatus { socket } => {
                write!(f, "{} answered without a status", socket.display())
            }
        }
    }
}

impl std::error::Error for StatusError {}

/// The daemon's status object from `socket`, before `deadline`.
pub fn status(socket: &Path, deadline: Instant) -> Result<Status, StatusError> {
    paths::check_socket_length(socket).map_err(StatusError::SocketPath)?;
    let request = Request {
        v: PROTOCOL_VERSION,
        op: Op::Status,
    };
    let answer = exchange(socket, &request, deadline).map_err(|why| StatusError::NoAnswer {
        socket: socket.to_path_buf(),
        why,
    })?;
    answer
        .status
        .map(|s| *s)
        .ok_or_else(|| StatusError::NoStatus {
            socket: socket.to_path_buf(),
        })
}

/// [`status`], the status object as the daemon wrote it: fields this build's [`Status`]
/// does not know yet are kept (`row-fence top` shows what a newer daemon adds), and one
/// this build needs but cannot parse is the caller's to find (`serde_json::from_value`).
pub fn status_json(socket: &Path, deadline: Instant) -> Result<serde_json::Value, StatusError> {
    paths::check_socket_length(socket).map_err(StatusError::SocketPath)?;
    let request = Request {
        v: PROTOCOL_VERSION,
        op: Op::Status,
    };
    let no_answer = |why| StatusError::NoAnswer {
        socket: socket.to_path_buf(),
        why,
    };
    let line = wire::exchange_line(socket, &request.to_line(), deadline).map_err(no_answer)?;
    let mut answer: serde_json::Value = serde_json::from_slice(&line).map_err(|e| {
        no_answer(ExchangeError::Protocol(format!(
            "the answer is not valid JSON: {e}"
        )))
    })?;
    match answer.get_mut("status").map(serde_json::Value::take) {
        Some(status @ serde_json::Value::Object(_)) => Ok(status),
        _ => Err(StatusError::NoStatus {
            socket: socket.to_path_buf(),
        }),
    }
}
