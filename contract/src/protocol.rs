//! The wire protocol between the asker and the daemon (ARCHITECTURE.md, "Wire protocol"): one
//! request and one answer per connection over a Unix stream socket, each a single line of
//! JSON ending in `\n`, at most 64 KiB, every message carrying `"v":1`. Both programs use
//! these types, so there is one spelling of every message.

use crate::descriptor::Descriptor;
use crate::verdict::{Reason, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The protocol version every message carries.
pub const PROTOCOL_VERSION: u32 = 1;

/// A request or an answer line is at most this many bytes, newline included (64 KiB).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// A request line: `{"v":1,"op":"ask"|"ping"|"status"|"keys_add"|…,…}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    /// Must be `PROTOCOL_VERSION`.
    pub v: u32,
    /// What is asked.
    #[serde(flatten)]
    pub op: Op,
}

/// The operations a daemon answers.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Does this lane still hold its row?
    Ask(Box<Ask>),
    /// Is anybody there? Answered with a `pong`, never with a verdict.
    Ping,
    /// The daemon's status object.
    Status,
    /// Loads a key into the key broker; the daemon's own uid only (ARCHITECTURE.md, "Key
    /// broker"). Answered with `keys` (what it holds after the change) or `error`.
    KeysAdd(KeysAdd),
    /// Lists the key broker's keys (fingerprints, never key material); the daemon's own uid only.
    KeysList,
    /// Drops the key broker's key with this fingerprint; the daemon's own uid only.
    KeysRemove {
        /// `SHA256:…`, as `row-fence keys list` and `ssh-keygen -l` print it.
        fingerprint: String,
    },
    /// Makes the key broker read its lane bindings again (after `row-fence lane add` or
    /// `remove`); the daemon's own uid only. Answered with `lanes` or `error`.
    LanesReload,
    /// Loads the forge API endpoint's token (ARCHITECTURE.md, "Forge API"), replacing the
    /// one held; the daemon's own uid only. Answered with `detail` or `error`.
    ForgeTokenAdd(ForgeTokenAdd),
}

/// `forge_token_add`'s payload: the token the forge API sends upstream. Held in the
/// daemon's memory only, never written.
#[derive(Clone, Serialize, Deserialize)]
pub struct ForgeTokenAdd {
    /// The token, as the forge issued it.
    pub token: String,
    /// The push proxy's HTTPS forge it is for (`https://HOST[:PORT]/…`; its origin is what
    /// counts); `None`: the forge API's, and the push proxy's when it has one HTTPS forge.
    /// A token is never sent to another forge than the one it was loaded for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge: Option<String>,
}

/// The token is wiped wherever the request is dropped.
impl Drop for ForgeTokenAdd {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.token);
    }
}

/// A token never reaches a log or a panic message through `{:?}`.
impl std::fmt::Debug for ForgeTokenAdd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForgeTokenAdd")
            .field("token", &"<secret>")
            .finish()
    }
}

/// A key to load into the key broker.
#[derive(Clone, Serialize, Deserialize)]
pub struct KeysAdd {
    /// The OpenSSH private key file's text (unencrypted).
    pub key: String,
    /// A read key (signed for every peer, fetch only as the forge enforces) rather than a
    /// push key (signed only for ALLOWED lanes).
    #[serde(default)]
    pub read: bool,
    /// The lane a push key belongs to: signed for that lane's uid only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
}

/// The key is wiped wherever the request is dropped: after it is loaded, refused, or
/// parsed only to be refused (an unserved peer's line, another protocol version).
impl Drop for KeysAdd {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.key);
    }
}

/// Key material never reaches a log or a panic message through `{:?}`.
impl std::fmt::Debug for KeysAdd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeysAdd")
            .field("key", &"<private key>")
            .field("read", &self.read)
            .field("lane", &self.lane)
            .finish()
    }
}

/// One key the broker holds, as `keys list` shows it: never the key itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerKey {
    /// `SHA256:…` of the public half.
    pub fingerprint: String,
    /// `ssh-ed25519`, `ssh-rsa`, …
    pub algorithm: String,
    /// The key's comment.
    pub comment: String,
    /// `push` (ALLOWED lanes only) or `read` (every peer).
    pub kind: String,
    /// The lane a push key belongs to (listed and signed for that lane's uid only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
}

/// An ask: the asker's code stamp, its time left, what it read from its descriptor, the
/// action it fences, and the caller's context (which travels in the request: the daemon
/// never reads or changes its own environment or working directory for a caller).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ask {
    /// The asker's code stamp (ARCHITECTURE.md, "Code stamp").
    pub stamp: String,
    /// Milliseconds the asker has left; the daemon answers `busy` rather than start work
    /// it cannot finish, and bounds every store call by it.
    pub deadline_ms: u64,
    /// The lane's descriptor as the asker read it.
    pub descriptor: Descriptor,
    /// The fenced action, e.g. `git push origin`.
    #[serde(default)]
    pub action: String,
    /// Who asks, for the ledger and the asks stream.
    #[serde(default)]
    pub caller: Caller,
    /// The ref updates of the push being asked about, when the asker sees them (the
    /// pre-push hook): judged against the row's scope as well as the lease. Empty: the
    /// lease alone (an ask that names no refs, such as git's transport gate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub updates: Vec<crate::scope::RefUpdate>,
}

/// The caller's session, working directory and the few environment variables the gate
/// reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// The agent session id (`ROW_FENCE_SESSION`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The caller's working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The environment variables in `FORWARDED_ENV` that were set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The asker's build digest (`row_fence_stamp::BUILD_DIGEST`): on a stamp mismatch a
    /// daemon of the same build knows the registries differ, not the code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// The row-fence home (absolute) whose registry the asker's stamp hashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
    /// The asking program's own path (`std::env::current_exe`): a `stale_code` answer
    /// names the binary that runs foreign code (the asker, the guard, git's transport
    /// gate), not the one a reader would guess.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
}

/// The environment variables an asker forwards in `caller.env`.
pub const FORWARDED_ENV: &[&str] = &["ROW_FENCE_SESSION"];

/// An answer line. An ask's answer carries `verdict` (+ `reason` unless allowed) and
/// echoes the `board`, `row`, `lane` and `generation` the daemon judged; a ping's carries
/// `pong`; a status's carries `status`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Answer {
    /// Must be `PROTOCOL_VERSION`.
    pub v: u32,
    /// `allowed`, `refused` or `could_not_read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// The reason's spelling (`Reason::as_str`), absent when allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human sentence: who holds the row, until when, what failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// Echo of the board judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board: Option<String>,
    /// Echo of the row judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<String>,
    /// Echo of the lane judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// Echo of the generation judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// A ping's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pong: Option<Pong>,
    /// A status answer's object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Box<crate::status::Status>>,
    /// A key operation's answer: the keys the broker holds after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<BrokerKey>>,
    /// A lanes reload's answer: how many uids are bound now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<u64>,
    /// Why a key or lane operation changed nothing (refused peer, bad key, no broker…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a ping returns: enough to tell which daemon answered.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pong {
    /// The daemon's process id.
    pub pid: u32,
    /// The daemon's code stamp.
    pub stamp: String,
}

impl Answer {
    /// The answer to an ask: the verdict, its detail, and the echo of what was judged.
    pub fn verdict(
        verdict: Verdict,
        detail: impl Into<String>,
        judged: Option<&Descriptor>,
    ) -> Answer {
        Answer {
            v: PROTOCOL_VERSION,
            verdict: Some(verdict.wire_name().to_string()),
            reason: verdict.reason().map(|r| r.as_str().to_string()),
            detail: detail.into(),
            board: judged.map(|d| d.board.clone()),
            row: judged.map(|d| d.row.clone()),
            lane: judged.map(|d| d.lane.clone()),
            generation: judged.map(|d| d.generation),
            ..Answer::default()
        }
    }

    /// A COULD NOT READ answer with no echo (a request that could not be judged).
    pub fn could_not_read(reason: Reason, detail: impl Into<String>) -> Answer {
        Answer::verdict(Verdict::CouldNotRead(reason), detail, None)
    }

    /// Reads the verdict back. `None` for anything not in the table of ARCHITECTURE.md,
    /// "Verdicts and exit codes", which the asker reports as `protocol_error` (fail
    /// closed).
    pub fn parsed_verdict(&self) -> Option<Verdict> {
        if self.v != PROTOCOL_VERSION {
            return None;
        }
        Verdict::from_wire(self.verdict.as_deref()?, self.reason.as_deref())
    }

    /// True when the echo names exactly the descriptor that was asked about. An ALLOWED
    /// for another row is no ALLOWED at all.
    pub fn echoes(&self, asked: &Descriptor) -> bool {
        self.board.as_deref() == Some(asked.board.as_str())
            && self.row.as_deref() == Some(asked.row.as_str())
            && self.lane.as_deref() == Some(asked.lane.as_str())
            && self.generation == Some(asked.generation)
    }

    /// True when the answer may stand for an ask about `asked`: ALLOWED and REFUSED must
    /// echo exactly what was asked; a COULD NOT READ may carry no echo at all (a daemon
    /// that refused the request before judging it), since it can never mean "yes".
    pub fn answers(&self, asked: &Descriptor, verdict: Verdict) -> bool {
        let no_echo = self.board.is_none()
            && self.row.is_none()
            && self.lane.is_none()
            && self.generation.is_none();
        self.echoes(asked) || (no_echo && matches!(verdict, Verdict::CouldNotRead(_)))
    }

    /// Serializes as one line ending in `\n`.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).expect("an answer always serializes");
        line.push(b'\n');
        line
    }
}

impl Request {
    /// Serializes as one line ending in `\n`.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).expect("a request always serializes");
        line.push(b'\n');
        line
    }

    /// Parses one request line (without or with its `\n`). The error's sentence is the
    /// `protocol_error` answer's detail.
    pub fn parse(line: &[u8]) -> Result<Request, RequestError> {
        let request: Request =
            serde_json::from_slice(line).map_err(|e| RequestError::Malformed(e.to_string()))?;
        if request.v != PROTOCOL_VERSION {
            return Err(RequestError::Version(request.v));
        }
        Ok(request)
    }
}

/// Why a request line is not a request (answered `protocol_error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// Not JSON, or not a request's shape; serde's sentence.
    Malformed(String),
    /// Another protocol version.
    Version(u32),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Malformed(e) => write!(f, "malformed request: {e}"),
            RequestError::Version(v) => {
                write!(f, "protocol version {v} is not {PROTOCOL_VERSION}")
            }
        }
    }
}

impl std::error::Error for RequestError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor() -> Descriptor {
        Descriptor {
            board: "b".into(),
            row: "r".into(),
            lane: "l".into(),
            generation: 7,
            tenant: None,
            token: None,
        }
    }

    #[test]
    fn an_ask_round_trips_as_one_line() {
        let request = Request {
            v: 1,
            op: Op::Ask(Box::new(Ask {
                stamp: "s".into(),
                deadline_ms: 3000,
                descriptor: descriptor(),
                action: "git push origin".into(),
                caller: Caller::default(),
                updates: Vec::new(),
            })),
        };
        let line = request.to_line();
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        let text = String::from_utf8(line.clone()).unwrap();
        assert!(text.starts_with(r#"{"v":1,"op":"ask","#), "{text}");
        let back = Request::parse(&line).unwrap();
        assert!(matches!(back.op, Op::Ask(a) if a.descriptor == descriptor()));
    }

    #[test]
    fn ping_and_status_parse() {
        assert!(matches!(
            Request::parse(br#"{"v":1,"op":"ping"}"#).unwrap().op,
            Op::Ping
        ));
        assert!(matches!(
            Request::parse(br#"{"v":1,"op":"status"}"#).unwrap().op,
            Op::Status
        ));
    }

    #[test]
    fn malformed_requests_are_errors() {
        for bad in [
            &b""[..],
            b"{",
            br#"{"v":2,"op":"ping"}"#,
            br#"{"op":"ping"}"#,
            br#"{"v":1,"op":"launch"}"#,
            br#"{"v":1,"op":"ask"}"#,
            br#"{"v":1,"op":"ask","stamp":"s","deadline_ms":-1,"descriptor":{}}"#,
            b"\xff\xfe",
        ] {
            assert!(
                Request::parse(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn an_answer_echoes_only_what_was_asked() {
        let d = descriptor();
        let answer = Answer::verdict(Verdict::Allowed, "", Some(&d));
        assert!(answer.echoes(&d));
        assert_eq!(answer.parsed_verdict(), Some(Verdict::Allowed));
        let mut other = d.clone();
        other.generation = 8;
        assert!(!answer.echoes(&other));
        assert!(!Answer::could_not_read(Reason::Busy, "").echoes(&d));
        let busy = Verdict::CouldNotRead(Reason::Busy);
        assert!(Answer::could_not_read(Reason::Busy, "").answers(&d, busy));
        let mut unechoed_allowed = Answer::verdict(Verdict::Allowed, "", None);
        assert!(!unechoed_allowed.answers(&d, Verdict::Allowed));
        unechoed_allowed.board = Some("b".into());
        assert!(
            !unechoed_allowed.answers(&d, busy),
            "a partial echo is a mismatch"
        );
    }
}
