//! The accept loop and the per-connection framing (mini-redis's shape: the listener and
//! the shutdown signal are passed in, so tests run the real server on their own socket).
//! A task per connection; one request line (≤ 64 KiB, read within a deadline), the peer's
//! uid checked before anything is judged, one answer line, close. Malformed input gets a
//! `protocol_error` answer; nothing a peer sends can panic the daemon or yield ALLOWED.

use crate::resident::Resident;
use row_fence_ask::protocol::{Answer, MAX_MESSAGE_BYTES, Request};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// At most this many connections are served at once; the next accept waits for one to
/// finish. 4096 is well above the 1,000 simultaneous connections the benchmark opens and
/// bounds memory at a few MB of buffers.
pub const MAX_CONNECTIONS: usize = 4096;

/// A peer must send its whole request within this long after connecting.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);

/// In-flight asks get this long to finish after a shutdown signal.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(10);

/// Serves `listener` until `shutdown` is cancelled, then waits for in-flight connections
/// (at most [`DRAIN_DEADLINE`]).
pub async fn run(listener: UnixListener, resident: Arc<Resident>, shutdown: CancellationToken) {
    let tracker = TaskTracker::new();
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
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                resident.stats.connections.fetch_add(1, Ordering::Relaxed);
                let resident = resident.clone();
                tracker.spawn(async move {
                    serve(stream, &resident).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
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

/// Serves one connection: one request, one answer.
async fn serve(mut stream: UnixStream, resident: &Resident) {
    let cred = stream.peer_cred().ok();
    let uid = cred.map(|c| c.uid());
    let line = match tokio::time::timeout(READ_DEADLINE, read_request(&mut stream)).await {
        Ok(Ok(line)) => line,
        Ok(Err(ReadError::TooLong)) => {
            let answer =
                resident.malformed(format!("the request is over {MAX_MESSAGE_BYTES} bytes"));
            return reply(&mut stream, &answer).await;
        }
        Ok(Err(ReadError::Closed)) => return,
        Err(_) => {
            let answer = resident.malformed(format!("no request line within {READ_DEADLINE:?}"));
            return reply(&mut stream, &answer).await;
        }
    };
    let answer = match uid {
        Some(uid) if resident.serves(uid) => match Request::parse(&line) {
            Ok(request) => resident.answer(request).await,
            Err(e) => resident.malformed(e.to_string()),
        },
        _ => resident.refuse_peer(uid, cred.and_then(|c| c.pid()), &line),
    };
    reply(&mut stream, &answer).await;
}

enum ReadError {
    /// Over `MAX_MESSAGE_BYTES` without a newline.
    TooLong,
    /// Closed or failed before a whole line.
    Closed,
}

/// Reads one line of at most `MAX_MESSAGE_BYTES` (newline included).
async fn read_request(stream: &mut UnixStream) -> Result<Vec<u8>, ReadError> {
    let mut reader = BufReader::new(stream.take(MAX_MESSAGE_BYTES as u64 + 1));
    let mut line = Vec::with_capacity(1024);
    match reader.read_until(b'\n', &mut line).await {
        Ok(_) if line.len() > MAX_MESSAGE_BYTES => Err(ReadError::TooLong),
        Ok(_) if line.last() == Some(&b'\n') => Ok(line),
        _ => Err(ReadError::Closed),
    }
}

async fn reply(stream: &mut UnixStream, answer: &Answer) {
    let _ = stream.write_all(&answer.to_line()).await;
    let _ = stream.shutdown().await;
}
