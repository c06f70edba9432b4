//! One request/answer exchange with the daemon over its Unix socket, bounded by one total
//! deadline that covers connect, write and read. It runs on the caller's thread: the
//! connect is non-blocking (a full backlog answers `EAGAIN` at once, and is retried until
//! the deadline), and every write and read is bounded by what is left of the deadline, so
//! nothing the daemon does can hold the caller past it. (A thread per exchange cost each
//! ask a thread start and its stack: ARCHITECTURE.md, "Observability and cost".)

use crate::protocol::{Answer, MAX_MESSAGE_BYTES, Request};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, UnixAddr, sockopt};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

/// How to start the daemon, as every client that found none says it.
pub const HOW_TO_START: &str = "start it with row-fence-resident --detach (same --home/--socket; where no service manager runs it), or load its launchd/systemd job (README, \"Install\")";

/// What a connect that found no daemon adds to its error.
pub const NOT_RUNNING: &str = ": the daemon is not running; start it with row-fence-resident --detach (same --home/--socket; where no service manager runs it), or load its launchd/systemd job (README, \"Install\")";

/// While the daemon's backlog is full, the connect is retried this often, in ms.
const BACKLOG_RETRY_MS: u64 = 1;

/// Why an exchange produced no answer. Every kind is COULD NOT READ to a fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeError {
    /// No answer before the deadline (`timeout`).
    Timeout,
    /// No daemon, connection refused or reset, closed before answering
    /// (`fence_unreadable`), with the detail.
    Unreachable(String),
    /// An answer that is not one line of valid JSON within 64 KiB (`protocol_error`).
    Protocol(String),
}

impl std::fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExchangeError::Timeout => f.write_str("no answer before the deadline"),
            ExchangeError::Unreachable(detail) | ExchangeError::Protocol(detail) => {
                f.write_str(detail)
            }
        }
    }
}

/// Sends `request` and reads one answer line, all before `deadline`.
///
/// Errors: [`ExchangeError::Timeout`] past the deadline; `Unreachable` when there is no
/// daemon or it closed without a whole answer; `Protocol` when the answer is not one line
/// of valid JSON within [`MAX_MESSAGE_BYTES`].
pub fn exchange(
    socket: &Path,
    request: &Request,
    deadline: Instant,
) -> Result<Answer, ExchangeError> {
    let buf = exchange_line(socket, &request.to_line(), deadline)?;
    serde_json::from_slice(&buf)
        .map_err(|e| ExchangeError::Protocol(format!("the answer is not valid JSON: {e}")))
}

/// [`exchange`] of bytes already framed (one request line, newline included): the answer
/// line, newline included. The benchmark's in-process clients ask through this, so they
/// wait for an answer exactly as `row-fence-ask` does.
///
/// The socket stays non-blocking and every wait is a `poll` for the one event wanted.
/// A thread blocked in `read` on a Unix socket is also woken when the daemon consumes the
/// request (the kernel's write-space wake-up is not filtered by what the sleeper waits
/// for), which cost the daemon a cross-CPU wake-up per ask; a `poll` for `POLLIN` is only
/// woken by the answer.
pub fn exchange_line(
    socket: &Path,
    request: &[u8],
    deadline: Instant,
) -> Result<Vec<u8>, ExchangeError> {
    let fd = connect(socket, deadline)?;
    write_all(&fd, request, deadline)?;
    read_line(&fd, deadline)
}

fn connect(path: &Path, deadline: Instant) -> Result<OwnedFd, ExchangeError> {
    let cannot = |e: Errno| {
        // No socket file, or nobody listening on it: say what that means and what to do.
        let hint = match e {
            Errno::ENOENT | Errno::ECONNREFUSED => NOT_RUNNING,
            _ => "",
        };
        ExchangeError::Unreachable(format!(
            "cannot connect to {}: {}{hint}",
            path.display(),
            io::Error::from(e)
        ))
    };
    let addr = UnixAddr::new(path).map_err(cannot)?;
    let fd: OwnedFd = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(cannot)?;
    loop {
        match socket::connect(fd.as_raw_fd(), &addr) {
            Ok(()) => return Ok(fd),
            Err(Errno::EINTR) => continue,
            // The daemon's backlog is full: Linux answers a non-blocking connect on a
            // Unix socket with EAGAIN rather than waiting for room.
            Err(Errno::EAGAIN) => {
                let left = time_left(deadline)?;
                std::thread::sleep(left.min(Duration::from_millis(BACKLOG_RETRY_MS)));
            }
            Err(Errno::EINPROGRESS) => {
                wait_for(&fd, PollFlags::POLLOUT, deadline)?;
                return match socket::getsockopt(&fd, sockopt::SocketError) {
                    Ok(0) => Ok(fd),
                    Ok(code) => Err(cannot(Errno::from_raw(code))),
                    Err(e) => Err(cannot(e)),
                };
            }
            Err(e) => return Err(cannot(e)),
        }
    }
}

/// Waits until `fd` has one of `events` (or an error or hang-up, which the next read or
/// write reports), or the deadline passes.
fn wait_for(fd: &OwnedFd, events: PollFlags, deadline: Instant) -> Result<(), ExchangeError> {
    loop {
        let left = time_left(deadline)?;
        let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(fd.as_fd(), events)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => return Ok(()),
            Err(e) => return Err(io_unreachable(io::Error::from(e))),
        }
    }
}

fn write_all(fd: &OwnedFd, mut bytes: &[u8], deadline: Instant) -> Result<(), ExchangeError> {
    while !bytes.is_empty() {
        match socket::send(fd.as_raw_fd(), bytes, send_flags()) {
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => wait_for(fd, PollFlags::POLLOUT, deadline)?,
            Err(e) => return Err(io_error("send the request", io::Error::from(e))),
        }
    }
    Ok(())
}

/// On Linux a daemon gone mid-write is `EPIPE`, never SIGPIPE, whatever the caller
/// did with the signal.
fn send_flags() -> socket::MsgFlags {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    return socket::MsgFlags::MSG_NOSIGNAL;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    return socket::MsgFlags::empty();
}

fn read_line(fd: &OwnedFd, deadline: Instant) -> Result<Vec<u8>, ExchangeError> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 4096];
    loop {
        // The answer comes after the daemon's store round trip: wait for it, then read.
        wait_for(fd, PollFlags::POLLIN, deadline)?;
        let n = match nix::unistd::read(fd, &mut chunk) {
            Ok(n) => n,
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            Err(e) => return Err(io_error("read the answer", io::Error::from(e))),
        };
        if n == 0 {
            return Err(ExchangeError::Unreachable(if buf.is_empty() {
                "the daemon closed the connection without answering".into()
            } else {
                "the daemon closed the connection mid-answer".into()
            }));
        }
        let newline = chunk[..n].iter().position(|b| *b == b'\n');
        buf.extend_from_slice(&chunk[..newline.map_or(n, |i| i + 1)]);
        if buf.len() > MAX_MESSAGE_BYTES {
            return Err(ExchangeError::Protocol(format!(
                "the answer is over {MAX_MESSAGE_BYTES} bytes"
            )));
        }
        if newline.is_some() {
            return Ok(buf);
        }
    }
}

fn time_left(deadline: Instant) -> Result<Duration, ExchangeError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(ExchangeError::Timeout)
    } else {
        Ok(left)
    }
}

fn io_error(what: &str, e: io::Error) -> ExchangeError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ExchangeError::Timeout,
        _ => ExchangeError::Unreachable(format!("could not {what}: {e}")),
    }
}

fn io_unreachable(e: io::Error) -> ExchangeError {
    ExchangeError::Unreachable(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::path::PathBuf;

    /// What a daemon stand-in does with a connection once it has read the request.
    type Behave = fn(UnixStream);

    /// A daemon stand-in on a socket of its own, in a temp dir removed when the first
    /// value is dropped: `behave` gets each accepted connection after the whole request
    /// line has been read.
    fn daemon(behave: Behave) -> (tempfile::TempDir, PathBuf, std::thread::JoinHandle<()>) {
        let dir = tempfile::Builder::new()
            .prefix("rf-client")
            .tempdir()
            .unwrap();
        let path = dir.path().join("sock");
        let listener = UnixListener::bind(&path).unwrap();
        let serving = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut line = Vec::new();
            let mut byte = [0u8; 1];
            while stream.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
                line.push(byte[0]);
            }
            behave(stream);
        });
        (dir, path, serving)
    }

    fn ask(path: &Path, within: Duration) -> Result<Vec<u8>, ExchangeError> {
        exchange_line(
            path,
            b"{\"v\":1,\"op\":\"ping\"}\n",
            Instant::now() + within,
        )
    }

    #[test]
    fn not_running_ends_with_how_to_start() {
        assert!(NOT_RUNNING.ends_with(HOW_TO_START));
    }

    #[test]
    fn an_answer_in_two_parts_is_read_whole_and_nothing_after_its_newline() {
        let (_dir, path, serving) = daemon(|mut s| {
            s.write_all(b"{\"v\":1,").unwrap();
            std::thread::sleep(Duration::from_millis(30));
            s.write_all(b"\"pong\":true}\nextra").unwrap();
        });
        let got = ask(&path, Duration::from_secs(5)).unwrap();
        assert_eq!(got, b"{\"v\":1,\"pong\":true}\n");
        serving.join().unwrap();
    }

    #[test]
    fn a_daemon_that_closes_early_is_unreachable_saying_when_not_a_timeout() {
        let cases: [(Behave, &str); 2] = [
            (drop, "the daemon closed the connection without answering"),
            (
                |mut s| s.write_all(b"{\"v\":1").unwrap(),
                "the daemon closed the connection mid-answer",
            ),
        ];
        for (behave, said) in cases {
            let (_dir, path, serving) = daemon(behave);
            let got = ask(&path, Duration::from_secs(5));
            assert_eq!(got, Err(ExchangeError::Unreachable(said.into())));
            serving.join().unwrap();
        }
    }

    #[test]
    fn an_answer_over_the_limit_is_a_protocol_error() {
        let (_dir, path, serving) = daemon(|mut s| {
            let _ = s.write_all(&vec![b'x'; MAX_MESSAGE_BYTES + 10]);
        });
        let got = ask(&path, Duration::from_secs(5));
        assert!(matches!(got, Err(ExchangeError::Protocol(_))), "{got:?}");
        serving.join().unwrap();
    }

    #[test]
    fn a_daemon_that_never_answers_is_a_timeout_at_the_deadline() {
        let (_dir, path, serving) = daemon(|s| {
            std::thread::sleep(Duration::from_millis(1500));
            drop(s);
        });
        let started = Instant::now();
        let got = ask(&path, Duration::from_millis(200));
        assert_eq!(got, Err(ExchangeError::Timeout));
        // Before the daemon's close, which would be `Unreachable`.
        assert!(started.elapsed() < Duration::from_millis(1400));
        serving.join().unwrap();
    }

    #[test]
    fn no_daemon_is_unreachable_naming_the_socket() {
        let path = std::env::temp_dir().join(format!("rf-client-none-{}", std::process::id()));
        let got = ask(&path, Duration::from_secs(1));
        match got {
            Err(ExchangeError::Unreachable(detail)) => {
                assert!(detail.contains(&*path.to_string_lossy()), "{detail}")
            }
            other => panic!("{other:?}"),
        }
    }
}
