//! The ssh agent one push's `ssh` uses (ARCHITECTURE.md, "Push proxy"): a socket in the
//! push's own 0700 directory (only the daemon's uid can reach it), served from the keys
//! the daemon holds in memory, listing only the keys this lane's push may use (its own
//! and the keys of no lane). No key is written anywhere; the socket goes with the push.

use crate::broker::Shared;
use crate::broker::keys;
use crate::sync::read;
use ssh_agent_lib::proto::{Request, Response};
use ssh_agent_lib::ssh_encoding::{Decode, Encode};
use std::path::Path;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// The largest agent message read (OpenSSH's `AGENT_MAX_LEN`).
const MAX_FRAME_BYTES: usize = 256 * 1024;

/// Binds the agent socket at `path` and serves it until the returned task is aborted.
pub fn serve(
    path: &Path,
    shared: Arc<Shared>,
    lane: Option<String>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = UnixListener::bind(path)?;
    let own = row_fence_contract::paths::euid();
    Ok(tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // The directory is the daemon's alone; the uid is checked all the same.
            if stream.peer_cred().map(|c| c.uid()).ok() != Some(own) {
                continue;
            }
            let shared = shared.clone();
            let lane = lane.clone();
            tokio::spawn(async move { session(stream, &shared, lane.as_deref()).await });
        }
    }))
}

/// One ssh connection's agent session.
async fn session(mut stream: UnixStream, shared: &Shared, lane: Option<&str>) {
    let mut frame = Vec::new();
    loop {
        let mut prefix = [0u8; 4];
        if stream.read_exact(&mut prefix).await.is_err() {
            return;
        }
        let len = u32::from_be_bytes(prefix) as usize;
        if len == 0 || len > MAX_FRAME_BYTES {
            return;
        }
        frame.resize(len, 0);
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let response = answer(&frame, shared, lane);
        let Some(bytes) = encode(&response) else {
            return;
        };
        if stream.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

/// Lists the lane's keys; signs with one of them; refuses the rest.
fn answer(mut frame: &[u8], shared: &Shared, lane: Option<&str>) -> Response {
    let held = read(&shared.held);
    let identities = held.push.identities_for(lane);
    match Request::decode(&mut frame) {
        Ok(Request::RequestIdentities) => Response::IdentitiesAnswer(identities),
        Ok(Request::SignRequest(request)) => {
            let listed = identities
                .iter()
                .any(|i| i.credential.key_data() == request.credential.key_data());
            let key = held.push.find(request.credential.key_data());
            match (listed, key) {
                (true, Some(key)) => keys::sign(key, &request.data, request.flags)
                    .map(Response::SignResponse)
                    .unwrap_or(Response::Failure),
                _ => Response::Failure,
            }
        }
        _ => Response::Failure,
    }
}

fn encode(response: &Response) -> Option<Vec<u8>> {
    let len = u32::try_from(response.encoded_len().ok()?).ok()?;
    let mut bytes = Vec::with_capacity(4 + len as usize);
    len.encode(&mut bytes).ok()?;
    response.encode(&mut bytes).ok()?;
    Some(bytes)
}
