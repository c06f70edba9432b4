//! The broker socket's accept loop and framing (ARCHITECTURE.md, "Key broker"). Any uid
//! may connect, so what one peer sends must not cost the others their signatures: a
//! frame is at most [`MAX_FRAME_BYTES`] (OpenSSH's ssh-agent's own limit) and is read
//! into a buffer of its announced length only once it is within that bound; a uid holds
//! at most [`MAX_CONNECTIONS_PER_UID`] connections at once, so no peer can take all the
//! daemon's file descriptors; and an accept that fails (out of descriptors, a connection
//! aborted) is retried, never the end of the broker.

use super::agent::{PeerSession, Sessions};
use crate::log_limit::LogLimit;
use ssh_agent_lib::agent::Session;
use ssh_agent_lib::error::AgentError;
use ssh_agent_lib::proto::{Request, Response};
use ssh_agent_lib::ssh_encoding::{Decode, Encode};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use zeroize::Zeroize;

/// The largest agent message read, in bytes (the length prefix excluded): OpenSSH's
/// `AGENT_MAX_LEN`. A peer announcing more is disconnected before anything is buffered.
pub const MAX_FRAME_BYTES: usize = 256 * 1024;

/// Connections one peer uid may hold open at once; one more is closed at accept. A push
/// opens one; the bound keeps one uid from exhausting the daemon's descriptors.
pub const MAX_CONNECTIONS_PER_UID: usize = 32;

/// How long the loop waits after a failed accept before accepting again, so a daemon out
/// of descriptors does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Open connections per peer uid (`None`: a uid that could not be read).
type Open = Arc<Mutex<HashMap<Option<u32>, usize>>>;

/// One connection's place in its uid's count, given back when the connection ends.
struct Slot {
    open: Open,
    uid: Option<u32>,
}

impl Slot {
    /// Takes a place for `uid`, or `None` when it already holds the most it may.
    fn take(open: &Open, uid: Option<u32>) -> Option<Slot> {
        let mut counts = crate::sync::lock(open);
        let count = counts.entry(uid).or_insert(0);
        if *count >= MAX_CONNECTIONS_PER_UID {
            return None;
        }
        *count += 1;
        Some(Slot {
            open: open.clone(),
            uid,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = crate::sync::lock(&self.open);
        if let Some(count) = counts.get_mut(&self.uid) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.uid);
            }
        }
    }
}

/// Accepts connections for ever, one task each.
pub async fn listen(listener: UnixListener, sessions: Sessions) {
    let open = Open::default();
    // A peer can make these happen in a loop: a line a minute per kind, not one each.
    let said = Arc::new(LogLimit::new(Duration::from_secs(60)));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                if said.allow(("accept", e.kind())) {
                    tracing::warn!(error = %e, "the key broker could not accept a connection; retrying (logged once a minute while it lasts)");
                }
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let uid = stream.peer_cred().ok().map(|c| c.uid());
        let Some(slot) = Slot::take(&open, uid) else {
            if said.allow(("full", uid)) {
                tracing::warn!(
                    uid = ?uid,
                    "a peer uid holds {MAX_CONNECTIONS_PER_UID} broker connections already; closing one more (logged once a minute per uid)"
                );
            }
            continue;
        };
        let session = sessions.session(&stream);
        let said = said.clone();
        tokio::spawn(async move {
            let _slot = slot;
            serve(stream, session, &said).await;
        });
    }
}

/// Serves one connection's requests in order until the peer closes it or breaks the
/// framing. A frame that does not decode is answered `FAILURE` (its length is known, so
/// the next frame is still found); the frame's bytes are wiped after use, since an
/// `ADD_IDENTITY` (always refused) carries a private key.
async fn serve(mut stream: UnixStream, mut session: PeerSession, said: &LogLimit) {
    let mut frame = Vec::new();
    loop {
        let mut prefix = [0u8; 4];
        if stream.read_exact(&mut prefix).await.is_err() {
            return;
        }
        let len = u32::from_be_bytes(prefix) as usize;
        if len == 0 || len > MAX_FRAME_BYTES {
            if said.allow("frame") {
                tracing::warn!(
                    bytes = len,
                    "a broker peer announced a message outside 1..={MAX_FRAME_BYTES} bytes; disconnecting it (logged once a minute)"
                );
            }
            return;
        }
        frame.resize(len, 0);
        let read = stream.read_exact(&mut frame).await;
        let response = match read {
            Err(_) => None,
            Ok(_) => Some(answer(&mut session, &frame).await),
        };
        frame.zeroize();
        let Some(response) = response else { return };
        let Some(bytes) = encode(&response) else {
            return;
        };
        if stream.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

async fn answer(session: &mut PeerSession, mut frame: &[u8]) -> Response {
    let Ok(request) = Request::decode(&mut frame) else {
        return Response::Failure;
    };
    match session.handle(request).await {
        Ok(response) => response,
        Err(AgentError::ExtensionFailure) => Response::ExtensionFailure,
        Err(_) => Response::Failure,
    }
}

/// The response with its length prefix, or `None` when it cannot be encoded (the
/// connection is then closed: the peer gets no half answer).
fn encode(response: &Response) -> Option<Vec<u8>> {
    let len = u32::try_from(response.encoded_len().ok()?).ok()?;
    let mut bytes = Vec::with_capacity(4 + len as usize);
    len.encode(&mut bytes).ok()?;
    response.encode(&mut bytes).ok()?;
    Some(bytes)
}
