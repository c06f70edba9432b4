//! The push socket's one request header (ARCHITECTURE.md, "Push proxy"): what
//! `git-remote-row-fence` sends before it relays git's receive-pack stream to the daemon.
//! One line of JSON ended by `\n`, at most [`MAX_HEADER_BYTES`]; the stream follows it
//! unchanged.

use crate::Descriptor;
use serde::{Deserialize, Serialize};

/// The longest header the daemon reads, in bytes, its `\n` included (a URL and a
/// descriptor are a few hundred).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// The environment variable naming the daemon's push socket for the helper.
pub const SOCKET_ENV: &str = "ROW_FENCE_PUSH_SOCKET";

/// The push socket's file name in the row-fence home, when no other is named.
pub const SOCKET_NAME: &str = "push.sock";

/// The header: where the lane's git pushes, and (same-uid mode only) the lane's claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushHeader {
    /// The URL after `row-fence::`, as git passed it: the daemon resolves it against its
    /// own configured forges and dials nothing else.
    pub url: String,
    /// The lane's descriptor with its lease token, as the asker reads it. The daemon
    /// uses it only when the peer is the daemon's own uid; a lane under its own uid is
    /// the lane bound to that uid, whatever it sends here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor: Option<Descriptor>,
}

impl PushHeader {
    /// The header as sent: one JSON line.
    pub fn line(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut line = serde_json::to_vec(self)?;
        line.push(b'\n');
        Ok(line)
    }
}
