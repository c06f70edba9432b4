//! One broker connection: the ssh-agent protocol (ssh-agent-lib) with the peer's uid,
//! taken from the socket when it connected, deciding everything (ARCHITECTURE.md, "Key
//! broker"). A lane's uid may list and sign, and only while its lane is ALLOWED, judged
//! by the same gate as every ask at the moment of each request. Read keys (fetch only, as
//! the forge enforces) are listed after the push keys and signed for every peer, so a
//! refused lane still fetches. Every other request
//! (adding, removing, locking keys) is refused to everyone, so no peer can change what
//! the broker holds. The daemon's own uid may list the keys (`ssh-add -l`) but signs
//! nothing: it is no lane.

use super::Broker;
use super::keys::{self, fingerprint};
use super::lanes::Binding;
use crate::gate::Gated;
use crate::resident::Claim;
use row_fence_contract::descriptor;
use row_fence_contract::{Reason, Verdict};
use ssh_agent_lib::agent::{Agent, Session};
use ssh_agent_lib::error::AgentError;
use ssh_agent_lib::proto::extension::SessionBind;
use ssh_agent_lib::proto::{Extension, Identity, SignRequest};
use ssh_key::Signature;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::net::{UnixListener, UnixStream};

/// The session-bind extension OpenSSH's client sends with the server's host key.
pub const SESSION_BIND: &str = "session-bind@openssh.com";

/// Makes one [`PeerSession`] per accepted connection.
#[derive(Clone)]
pub struct Sessions(pub Arc<Broker>);

impl Agent<UnixListener> for Sessions {
    fn new_session(&mut self, socket: &UnixStream) -> impl Session {
        let cred = socket.peer_cred().ok();
        self.0.stats.connections.fetch_add(1, Ordering::Relaxed);
        PeerSession {
            broker: self.0.clone(),
            uid: cred.map(|c| c.uid()),
            pid: cred.and_then(|c| c.pid()),
            host: None,
        }
    }
}

/// One connection's peer and what it told us about the server.
pub struct PeerSession {
    /// The broker's keys, bindings and the daemon's judge.
    broker: Arc<Broker>,
    /// The peer's uid from `SO_PEERCRED`/`getpeereid`; `None` when it could not be read
    /// (served as no lane: fail closed).
    uid: Option<u32>,
    /// The peer's pid, for the ledger.
    pid: Option<i32>,
    /// The server's host key fingerprint from a verified `session-bind@openssh.com`.
    host: Option<String>,
}

/// Who the peer is to the broker.
enum Peer<'a> {
    /// The daemon's own uid: the operator.
    Own,
    /// A uid bound to a lane.
    Lane(&'a Binding),
    /// Anyone else, or a uid that could not be read.
    Stranger,
}

impl PeerSession {
    fn peer(&self) -> Peer<'_> {
        match self.uid {
            Some(uid) if uid == self.broker.own_uid => Peer::Own,
            Some(uid) => self
                .broker
                .lanes
                .lane_of(uid)
                .map_or(Peer::Stranger, Peer::Lane),
            None => Peer::Stranger,
        }
    }

    /// The ledger's session field: who asked.
    fn who(&self) -> String {
        match (self.uid, self.pid) {
            (Some(uid), Some(pid)) => format!("broker peer uid {uid} pid {pid}"),
            (Some(uid), None) => format!("broker peer uid {uid}"),
            (None, _) => "broker peer of unknown uid".to_string(),
        }
    }

    /// Judges the bound lane's own descriptor, read now by the daemon, for `action`.
    async fn judge(&self, binding: &Binding, action: &str) -> Gated {
        let who = self.who();
        let resident = &self.broker.resident;
        let unreadable = |verdict: Verdict, detail: String| {
            let gated = Gated { verdict, detail };
            resident.record_denial(None, &format!("{action} ({who})"), &gated);
            gated
        };
        let path = &binding.descriptor;
        // A file read off the daemon's one serving thread: a stuck disk holds up this
        // request only (its ssh waits; nothing is signed meanwhile).
        let read = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || descriptor::read(&path)).await
        };
        let read = read.unwrap_or_else(|e| {
            Err(descriptor::DescriptorError::Open(std::io::Error::other(
                format!("the read did not finish: {e}"),
            )))
        });
        match read {
            Ok(Some(d)) => {
                let claim = Claim {
                    descriptor: &d,
                    action,
                    session: Some(&who),
                };
                resident.gate_claim(&claim, super::SIGN_DEADLINE_MS).await
            }
            Ok(None) => unreadable(
                Verdict::CouldNotRead(Reason::DescriptorMissing),
                format!("the lane's descriptor {} does not exist", path.display()),
            ),
            Err(e) => unreadable(
                Verdict::CouldNotRead(Reason::DescriptorUnreadable),
                format!("the lane's descriptor {}: {e}", path.display()),
            ),
        }
    }

    /// Records a request from a peer that is no lane (counted and in the ledger).
    fn refuse_stranger(&self, action: &str) {
        let detail = match self.uid {
            Some(uid) => format!("the key broker binds no lane to uid {uid}"),
            None => "the key broker could not read the peer's uid".to_string(),
        };
        let gated = Gated {
            verdict: Verdict::CouldNotRead(Reason::PeerRefused),
            detail,
        };
        let action = format!("{action} ({})", self.who());
        self.broker.resident.record_denial(None, &action, &gated);
    }

    fn host(&self) -> &str {
        self.host.as_deref().unwrap_or("host unknown")
    }
}

#[ssh_agent_lib::async_trait]
impl Session for PeerSession {
    async fn request_identities(&mut self) -> Result<Vec<Identity>, AgentError> {
        let keys = &self.broker.keys;
        // Push keys first: ssh offers keys in the agent's order, and a forge that accepts
        // the read key first would give an ALLOWED lane a fetch-only session.
        let mut listed = match self.peer() {
            Peer::Own => keys.identities(),
            Peer::Lane(binding) => {
                let action = format!("ssh list identities, {}", self.host());
                let gated = self.judge(binding, &action).await;
                if gated.verdict == Verdict::Allowed {
                    keys.identities()
                } else {
                    Vec::new()
                }
            }
            Peer::Stranger => {
                self.refuse_stranger("ssh list identities");
                Vec::new()
            }
        };
        listed.extend(self.broker.read_keys.identities());
        Ok(listed)
    }

    async fn sign(&mut self, request: SignRequest) -> Result<Signature, AgentError> {
        let stats = &self.broker.stats;
        let public = request.credential.key_data();
        if let Some(key) = self.broker.read_keys.find(public) {
            // A read key fetches only (the forge's forced command): no verdict needed.
            let signature = keys::sign(key, &request.data).map_err(AgentError::other)?;
            stats.signed.fetch_add(1, Ordering::Relaxed);
            return Ok(signature);
        }
        let Some(key) = self.broker.keys.find(public) else {
            // Not a key the broker holds: nothing to judge, nothing it could sign.
            stats.refused.fetch_add(1, Ordering::Relaxed);
            return Err(AgentError::Failure);
        };
        let action = format!("ssh sign with {}, {}", fingerprint(public), self.host());
        let allowed = match self.peer() {
            Peer::Lane(binding) => self.judge(binding, &action).await.verdict == Verdict::Allowed,
            Peer::Own => {
                let gated = Gated {
                    verdict: Verdict::CouldNotRead(Reason::PeerRefused),
                    detail: "the daemon's own uid is no lane; the broker signs for lanes only"
                        .into(),
                };
                let action = format!("{action} ({})", self.who());
                self.broker.resident.record_denial(None, &action, &gated);
                false
            }
            Peer::Stranger => {
                self.refuse_stranger(&action);
                false
            }
        };
        if !allowed {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            return Err(AgentError::Failure);
        }
        let signature = keys::sign(key, &request.data).map_err(AgentError::other)?;
        stats.signed.fetch_add(1, Ordering::Relaxed);
        Ok(signature)
    }

    async fn extension(&mut self, extension: Extension) -> Result<Option<Extension>, AgentError> {
        if extension.name != SESSION_BIND {
            return Err(AgentError::Failure);
        }
        // Only a bind whose signature verifies names the host: an unverified one could
        // put any name in the ledger.
        match extension.parse_message::<SessionBind>()? {
            Some(bind) if bind.verify_signature().is_ok() => {
                self.host = Some(format!("host {}", fingerprint(&bind.host_key)));
                Ok(None)
            }
            _ => Err(AgentError::Failure),
        }
    }
}
