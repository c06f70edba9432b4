//! One request/answer exchange with the daemon over its Unix socket, bounded by one total
//! deadline that covers connect, write and read. It runs on the caller's thread: the
//! connect is non-blocking (a full backlog answers `EAGAIN` at once, and is retried until
//! the deadline), and every write and read is bounded by what is left of the deadline, so
//! nothing the daemon does can hold the caller past it. (A thread per exchange cost each
//! ask a thread start and its stack: DESIGN.md, "It must answer in milliseconds".)

use crate::protocol::{Answer, MAX_MESSAGE_BYTES, Request};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, UnixAddr, sockopt};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

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

/// Sends `request` to the daemon at `socket` and reads its answer, all before `deadline`.
pub fn exchange(
    socket: &Path,
    request: &Request,
    deadline: Instant,
) -> Result<Answer, ExchangeError> {
    let stream = connect(socket, deadline)?;
    let left = time_left(deadline)?;
    stream
        .set_write_timeout(Some(left))
        .map_err(io_unreachable)?;
    (&stream)
        .write_all(&request.to_line())
        .map_err(|e| io_error("send the request", e))?;
    let buf = read_line(&stream, deadline)?;
    serde_json::from_slice(&buf)
        .map_err(|e| ExchangeError::Protocol(format!("the answer is not valid JSON: {e}")))
}

/// A blocking stream connected to `path` before `deadline`.
fn connect(path: &Path, deadline: Instant) -> Result<UnixStream, ExchangeError> {
    let cannot = |e: Errno| {
        ExchangeError::Unreachable(format!(
            "cannot connect to {}: {}",
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
            Ok(()) => break,
            Err(Errno::EINTR) => continue,
            // Linux: the daemon's backlog is full. Wait for a slot, within the deadline.
            Err(Errno::EAGAIN) => {
                let left = time_left(deadline)?;
                std::thread::sleep(left.min(Duration::from_millis(BACKLOG_RETRY_MS)));
            }
            // Other platforms may connect in the background: wait until it is writable.
            Err(Errno::EINPROGRESS) => {
                wait_writable(&fd, deadline)?;
                match socket::getsockopt(&fd, sockopt::SocketError) {
                    Ok(0) => break,
                    Ok(code) => return Err(cannot(Errno::from_raw(code))),
                    Err(e) => return Err(cannot(e)),
                }
            }
            Err(e) => return Err(cannot(e)),
        }
    }
    let stream = UnixStream::from(fd);
    stream.set_nonblocking(false).map_err(io_unreachable)?;
    Ok(stream)
}

fn wait_writable(fd: &OwnedFd, deadline: Instant) -> Result<(), ExchangeError> {
    loop {
        let left = time_left(deadline)?;
        let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => return Ok(()),
            Err(e) => return Err(io_unreachable(io::Error::from(e))),
        }
    }
}

/// One answer line of at most [`MAX_MESSAGE_BYTES`], every read bounded by what is left.
fn read_line(stream: &UnixStream, deadline: Instant) -> Result<Vec<u8>, ExchangeError> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 4096];
    loop {
        let left = time_left(deadline)?;
        stream
            .set_read_timeout(Some(left))
            .map_err(io_unreachable)?;
        let n = match (&*stream).read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error("read the answer", e)),
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
