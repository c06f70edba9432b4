//! One request/answer exchange with the daemon over its Unix socket, bounded by one total
//! deadline that covers connect, write and read. `UnixStream::connect` can block (a full
//! backlog), so the exchange runs on its own thread and the caller waits on a channel
//! with the deadline: nothing the daemon does can hold the caller past it.

use crate::protocol::{Answer, MAX_MESSAGE_BYTES, Request};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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
    let (tx, rx) = mpsc::channel();
    let socket: PathBuf = socket.to_path_buf();
    let line = request.to_line();
    std::thread::spawn(move || {
        let _ = tx.send(exchange_blocking(&socket, &line, deadline));
    });
    let left = deadline.saturating_duration_since(Instant::now());
    match rx.recv_timeout(left) {
        Ok(result) => result,
        Err(_) => Err(ExchangeError::Timeout),
    }
}

fn exchange_blocking(
    socket: &Path,
    line: &[u8],
    deadline: Instant,
) -> Result<Answer, ExchangeError> {
    let stream = UnixStream::connect(socket).map_err(|e| {
        ExchangeError::Unreachable(format!("cannot connect to {}: {e}", socket.display()))
    })?;
    let left = time_left(deadline)?;
    stream
        .set_write_timeout(Some(left))
        .map_err(io_unreachable)?;
    (&stream)
        .write_all(line)
        .map_err(|e| io_error("send the request", e))?;
    let left = time_left(deadline)?;
    stream
        .set_read_timeout(Some(left))
        .map_err(io_unreachable)?;
    let mut reader = BufReader::new((&stream).take(MAX_MESSAGE_BYTES as u64 + 1));
    let mut buf = Vec::with_capacity(512);
    reader
        .read_until(b'\n', &mut buf)
        .map_err(|e| io_error("read the answer", e))?;
    if buf.len() > MAX_MESSAGE_BYTES {
        return Err(ExchangeError::Protocol(format!(
            "the answer is over {MAX_MESSAGE_BYTES} bytes"
        )));
    }
    if buf.last() != Some(&b'\n') {
        return Err(ExchangeError::Unreachable(if buf.is_empty() {
            "the daemon closed the connection without answering".into()
        } else {
            "the daemon closed the connection mid-answer".into()
        }));
    }
    serde_json::from_slice(&buf)
        .map_err(|e| ExchangeError::Protocol(format!("the answer is not valid JSON: {e}")))
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
