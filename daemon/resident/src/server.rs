//! The accept loop and the per-connection framing (mini-redis's shape: the listener and
//! the shutdown signal are passed in, so tests run the real server on their own socket).
//! A task per connection; one request line (≤ 64 KiB, read within a deadline), the peer's
//! uid checked before anything is judged, one answer line, close ([`crate::connection`]:
//! without the reactor when nothing has to be waited for). Malformed input gets a
//! `protocol_error` answer; nothing a peer sends can panic the daemon or yield ALLOWED.

use crate::budget;
use crate::connection::{Connection, ReadError};
use crate::log_limit::LogLimit;
use crate::resident::Resident;
use row_fence_contract::protocol::{Answer, MAX_MESSAGE_BYTES, Op, Request};
use row_fence_contract::verdict::Reason;
use std::io;
use std::os::unix::net::{UnixListener as StdListener, UnixStream as StdStream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::net::UnixListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zeroize::Zeroize;

/// At most this many connections are served at once; the next accept waits for one to
/// finish. 4096 is well above the 1,000 simultaneous connections the benchmark opens and
/// bounds memory at a few MB of buffers.
pub const MAX_CONNECTIONS: usize = 4096;

/// A peer must send its whole request within this long after connecting.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);

/// A peer must take its whole answer within this long (an answer that does not fit in
/// the socket buffer at once waits for the peer to read).
pub const WRITE_DEADLINE: Duration = Duration::from_secs(5);

/// In-flight asks get this long to finish after a shutdown signal.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(10);

/// Serves `listener` until `shutdown` is cancelled, then waits for in-flight connections
/// (at most [`DRAIN_DEADLINE`]).
pub async fn run(listener: UnixListener, resident: Arc<Resident>, shutdown: CancellationToken) {
    // Accepted sockets stay out of the reactor until they must wait (crate::connection),
    // so the listener is polled as a plain fd.
    let registered = listener.into_std().and_then(|listener| {
        // SAFETY: the AsyncFd owns the listener, so its fd stays open and the same
        // socket until the AsyncFd is dropped (AsyncFd::register's contract).
        unsafe { AsyncFd::register(listener) }.map_err(io::Error::from)
    });
    let listener = match registered {
        Ok(listener) => listener,
        Err(e) => {
            tracing::error!(error = %e, "cannot poll the listening socket");
            shutdown.cancel();
            return;
        }
    };
    let tracker = TaskTracker::new();
    let accept_failures = LogLimit::new(Duration::from_secs(60));
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    // systemd's watchdog is pinged from this loop, so a loop that stops turning is restarted.
    let mut watchdog = crate::supervisor::Watchdog::from_env();
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = watchdog.tick() => continue,
            permit = limit.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = watchdog.tick() => continue,
            accepted = accept(&listener) => accepted,
        };
        match accepted {
            Ok(stream) => {
                resident
                    .judge
                    .stats
                    .connections
                    .fetch_add(1, Ordering::Relaxed);
                let resident = resident.clone();
                tracker.spawn(async move {
                    serve(stream, &resident).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning, and say so once a
                // minute per kind of failure, not every 20 ms.
                if accept_failures.allow(e.kind()) {
                    tracing::warn!(error = %e, "accept failed (logged once a minute while it lasts)");
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    tracker.close();
    if tokio::time::timeout(DRAIN_DEADLINE, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("in-flight asks did not finish within {DRAIN_DEADLINE:?}");
    }
}

/// Accepts one connection (blocking mode, close-on-exec: what `accept4` gives).
async fn accept(listener: &AsyncFd<StdListener>) -> io::Result<StdStream> {
    loop {
        let mut ready = listener.readable().await?;
        if let Ok(accepted) = ready.try_io(|l| l.get_ref().accept()) {
            return accepted.map(|(stream, _)| stream);
        }
    }
}

/// Serves one connection: one request, one answer.
async fn serve(stream: StdStream, resident: &Resident) {
    let mut conn = Connection::new(stream);
    let peer = conn.peer().await;
    let mut line = match tokio::time::timeout(READ_DEADLINE, conn.read_request()).await {
        Ok(Ok(line)) => line,
        Ok(Err(ReadError::TooLong)) => {
            let answer =
                resident.malformed(format!("the request is over {MAX_MESSAGE_BYTES} bytes"));
            return reply(conn, &answer).await;
        }
        Ok(Err(ReadError::Closed)) => return,
        Err(_) => {
            let answer = resident.malformed(format!("no request line within {READ_DEADLINE:?}"));
            return reply(conn, &answer).await;
        }
    };
    let answer = match peer {
        Some(peer) if resident.serves(peer.uid) => {
            let parsed = Request::parse(&line);
            if !matches!(&parsed, Ok(Request { op: Op::Ask(_), .. })) {
                // The line may hold a private key (`keys_add`, also a malformed one): wiped
                // now, the parsed text once used. Asks, the hot path, carry none.
                line.zeroize();
            }
            match parsed {
                Ok(request) => resident.answer(request, peer.uid).await,
                Err(e) => resident.malformed(e.to_string()),
            }
        }
        _ => resident.refuse_peer(peer.map(|p| p.uid), peer.and_then(|p| p.pid), &line),
    };
    reply(conn, &answer).await;
}

async fn reply(conn: Connection, answer: &Answer) {
    conn.reply(&wire_line(answer), WRITE_DEADLINE).await;
}

/// The answer as sent: its detail cut to [`budget::DETAIL_BYTES`], and never over
/// `MAX_MESSAGE_BYTES`, which no client may read. Lists in a status answer have budgets
/// of their own ([`budget`]); should anything still grow past the limit, the peer gets a
/// `protocol_error` it can read instead of an answer it must refuse.
pub fn wire_line(answer: &Answer) -> Vec<u8> {
    let line = if answer.detail.len() > budget::DETAIL_BYTES {
        let mut cut = answer.clone();
        budget::cut_to(&mut cut.detail, budget::DETAIL_BYTES);
        cut.to_line()
    } else {
        answer.to_line()
    };
    if line.len() <= MAX_MESSAGE_BYTES {
        return line;
    }
    Answer::could_not_read(
        Reason::ProtocolError,
        format!(
            "the answer would be {} bytes, over the protocol's {MAX_MESSAGE_BYTES}-byte message limit",
            line.len()
        ),
    )
    .to_line()
}
