//! One broker connection: the ssh-agent protocol (ssh-agent-lib) with the peer's uid,
//! taken from the socket when it connected, deciding everything (ARCHITECTURE.md, "Key
//! broker"). Every key signs only a publickey login to an allowed forge, in the session a
//! verified `session-bind@openssh.com` bound this connection to ([`super::destination`]):
//! never chosen bytes, an sshsig or a commit signature. A lane's uid may list and sign a
//! push key only while its lane is ALLOWED, judged by the same gate as every ask at the
//! moment of each request. Read keys (fetch only, as the forge enforces) are listed after
//! the push keys and signed for every peer's login, so a refused lane still fetches. A
//! bound lane may also renew and release its own lease ([`super::lease`]), and any peer
//! (a forge's pre-receive hook) may ask whether a lane's push is covered now
//! ([`super::forge_check`]). Every other
//! request (adding, removing, locking keys) is refused to everyone on this socket, so no
//! peer can change what the broker holds; the daemon's own uid changes keys on the control
//! socket ([`super::admin`]). The daemon's own uid may list the keys here (`ssh-add -l`)
//! but signs nothing: it is no lane.

use super::Broker;
use super::bound;
use super::destination::{Destination, Refused};
use super::forge_check;
use super::keys::{self, fingerprint};
use super::lanes::Binding;
use super::lease::{self, LeaseAnswer, LeaseRequest};
use crate::gate::Gated;
use crate::judge::Claim;
use crate::sync::read;
use row_fence_contract::descriptor::Descriptor;
use row_fence_contract::{Reason, Verdict};
use ssh_agent_lib::agent::Session;
use ssh_agent_lib::error::AgentError;
use ssh_agent_lib::proto::extension::SessionBind;
use ssh_agent_lib::proto::{Extension, Identity, SignRequest};
use ssh_key::Signature;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::net::UnixStream;

/// The session-bind extension OpenSSH's client sends with the server's host key.
pub const SESSION_BIND: &str = "session-bind@openssh.com";

/// Makes one [`PeerSession`] per accepted connection.
#[derive(Clone)]
pub struct Sessions(pub Arc<Broker>);

impl Sessions {
    /// The session of a connection just accepted, with the peer's uid and pid read from
    /// the socket now.
    pub fn session(&self, socket: &UnixStream) -> PeerSession {
        let cred = socket.peer_cred().ok();
        self.0
            .shared
            .stats
            .connections
            .fetch_add(1, Ordering::Relaxed);
        PeerSession {
            broker: self.0.clone(),
            uid: cred.map(|c| c.uid()),
            pid: cred.and_then(|c| c.pid()),
            destination: Destination::default(),
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
    /// The server this connection is bound to by its one verified
    /// `session-bind@openssh.com`, if any: what a signature may be used for.
    destination: Destination,
}

/// Who the peer is to the broker, as the bindings say at the moment of the request.
enum Peer {
    /// The daemon's own uid: the operator.
    Own,
    /// A uid bound to a lane.
    Lane(Binding),
    /// Anyone else, or a uid that could not be read.
    Stranger,
}

impl PeerSession {
    fn peer(&self) -> Peer {
        match self.uid {
            Some(uid) if uid == self.broker.own_uid => Peer::Own,
            Some(uid) => read(&self.broker.shared.lanes)
                .lane_of(uid)
                .cloned()
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
        let judge = &self.broker.judge;
        match bound::read_now(binding).await {
            Ok(d) => {
                let claim = Claim {
                    descriptor: &d,
                    action,
                    session: Some(&who),
                    uid: self.uid,
                };
                judge.gate_claim(&claim, super::SIGN_DEADLINE_MS).await
            }
            Err(gated) => {
                judge.record_denial(None, &format!("{action} ({who})"), &gated, self.uid);
                gated
            }
        }
    }

    /// Renews or releases the bound lane's own lease, with the token of the descriptor
    /// the daemon read itself ([`super::lease`]).
    async fn lease_act(&self, name: &str, request: LeaseRequest) -> LeaseAnswer {
        let Peer::Lane(binding) = self.peer() else {
            let who = self
                .uid
                .map_or("an unknown uid".to_string(), |u| format!("uid {u}"));
            return LeaseAnswer::could_not(format!(
                "the key broker binds no lane to {who}: only a bound lane renews or releases through it"
            ));
        };
        let d: Descriptor = match bound::read_now(&binding).await {
            Ok(d) => d,
            Err(gated) => {
                // The detail can quote what the daemon read with its own rights through a
                // path the lane controls: it goes to the ledger, and the lane gets the
                // reason.
                let action = format!("{name} ({})", self.who());
                self.broker
                    .judge
                    .record_denial(None, &action, &gated, self.uid);
                let reason = gated.verdict.reason().map_or("refused", |r| r.as_str());
                return LeaseAnswer::could_not(format!(
                    "the daemon could not use the lane's descriptor {} ({reason}; the daemon's refusal ledger has the detail)",
                    binding.descriptor.display()
                ));
            }
        };
        if let Err(e) = d.validate() {
            return LeaseAnswer::could_not(format!("the lane's descriptor is invalid: {e}"));
        }
        let store = self.broker.judge.store.as_ref();
        let deadline = std::time::Duration::from_millis(super::SIGN_DEADLINE_MS);
        let done = if name == lease::RENEW {
            let most = self.broker.shared.renew_max_ms;
            if request.ttl_ms == 0 || request.ttl_ms > most {
                return LeaseAnswer::could_not(format!(
                    "a lease time of {} is not within 1 ms and {}, the longest this daemon renews a lane's lease for (--broker-renew-max)",
                    lease::spell_ms(request.ttl_ms),
                    lease::spell_ms(most)
                ));
            }
            tokio::time::timeout(
                deadline,
                row_fence_store::lease::renew(store, &d, request.ttl_ms, None),
            )
            .await
        } else {
            tokio::time::timeout(deadline, row_fence_store::lease::release(store, &d, None)).await
        };
        let mut answer = LeaseAnswer {
            board: Some(d.board.clone()),
            row: Some(d.row.clone()),
            lane: Some(d.lane.clone()),
            generation: Some(d.generation),
            ..LeaseAnswer::default()
        };
        match done {
            Ok(Ok(lease)) => {
                answer.ok = true;
                answer.expires_at_ms = (name == lease::RENEW).then_some(lease.expires_at_ms);
                tracing::info!(lane = %d.lane, row = %d.row, act = name, "a bound lane's lease act");
            }
            Ok(Err(e)) => {
                answer.refused = e.is_refusal();
                answer.error = e.to_string();
            }
            Err(_) => {
                answer.error = format!(
                    "the store did not answer within {} ms; the lease may or may not have changed (row-fence show tells)",
                    super::SIGN_DEADLINE_MS
                );
            }
        }
        answer
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
        self.broker
            .judge
            .record_denial(None, &action, &gated, self.uid);
    }

    /// Records a bind or a sign request refused by the destination rule, naming the host
    /// the connection's bind verified (never a name the lane chose).
    /// True when the push socket serves: lanes get no push signature at all.
    fn daemon_pushes(&self) -> bool {
        self.broker
            .shared
            .daemon_pushes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn refuse_destination(&self, action: &str, why: Refused) {
        let gated = Gated {
            verdict: Verdict::Refused(Reason::DestinationRefused),
            detail: why.0,
        };
        let action = format!("{action} ({})", self.who());
        self.broker
            .judge
            .record_denial(None, &action, &gated, self.uid);
    }
}

#[ssh_agent_lib::async_trait]
impl Session for PeerSession {
    async fn request_identities(&mut self) -> Result<Vec<Identity>, AgentError> {
        let held = &self.broker.shared.held;
        // Push keys first: ssh offers keys in the agent's order, and a forge that accepts
        // the read key first would give an ALLOWED lane a fetch-only session.
        let mut listed = match self.peer() {
            Peer::Own => read(held).push.identities(),
            Peer::Lane(binding) => {
                let action = format!("ssh list identities, {}", self.destination.host());
                let gated = self.judge(&binding, &action).await;
                if gated.verdict == Verdict::Allowed && !self.daemon_pushes() {
                    read(held).push.identities_for(binding.lane.as_deref())
                } else {
                    Vec::new()
                }
            }
            Peer::Stranger => {
                self.refuse_stranger("ssh list identities");
                Vec::new()
            }
        };
        listed.extend(read(held).read.identities());
        Ok(listed)
    }

    async fn sign(&mut self, request: SignRequest) -> Result<Signature, AgentError> {
        let shared = &self.broker.shared;
        let stats = &shared.stats;
        let public = request.credential.key_data();
        // A push key is judged whatever else it is: the push set is looked in first.
        let push = {
            let held = read(&shared.held);
            match (held.push.find(public), held.read.find(public)) {
                (Some(_), _) => true,
                (None, Some(_)) => false,
                // Not a key the broker holds: nothing to judge, nothing it could sign.
                (None, None) => {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    return Err(AgentError::Failure);
                }
            }
        };
        let action = format!(
            "ssh sign with {}, {}",
            fingerprint(public),
            self.destination.host()
        );
        if let Err(why) = self
            .destination
            .permits(&request.data, public, &shared.forges)
        {
            self.refuse_destination(&action, why);
            stats.refused.fetch_add(1, Ordering::Relaxed);
            return Err(AgentError::Failure);
        }
        if push && self.daemon_pushes() && matches!(self.peer(), Peer::Lane(_)) {
            self.refuse_destination(
                &action,
                Refused(
                    "the daemon pushes for the lanes (--push-socket): a lane's own ssh gets no login with a push key; push with plain git push (git-remote-row-fence)"
                        .into(),
                ),
            );
            stats.refused.fetch_add(1, Ordering::Relaxed);
            return Err(AgentError::Failure);
        }
        let owner = read(&shared.held).push.lane_of(public).map(str::to_string);
        let allowed = !push
            || match self.peer() {
                Peer::Lane(binding) if owner.is_some() && owner != binding.lane => {
                    // Another lane's key: the forge would take this login for that lane.
                    let gated = Gated {
                        verdict: Verdict::CouldNotRead(Reason::PeerRefused),
                        detail: format!(
                            "key {} is lane {}'s; uid {} is bound to lane {}",
                            fingerprint(public),
                            owner.as_deref().unwrap_or_default(),
                            binding.uid,
                            binding.lane.as_deref().unwrap_or("(none)")
                        ),
                    };
                    let action = format!("{action} ({})", self.who());
                    self.broker
                        .judge
                        .record_denial(None, &action, &gated, self.uid);
                    false
                }
                Peer::Lane(binding) => {
                    self.judge(&binding, &action).await.verdict == Verdict::Allowed
                }
                Peer::Own => {
                    let gated = Gated {
                        verdict: Verdict::CouldNotRead(Reason::PeerRefused),
                        detail: "the daemon's own uid is no lane; the broker signs for lanes only"
                            .into(),
                    };
                    let action = format!("{action} ({})", self.who());
                    self.broker
                        .judge
                        .record_denial(None, &action, &gated, self.uid);
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
        // Found again after the verdict: a key the operator removed meanwhile signs nothing.
        let signed = {
            let held = read(&shared.held);
            let set = if push { &held.push } else { &held.read };
            set.find(public)
                .map(|key| keys::sign(key, &request.data, request.flags))
        };
        let Some(signed) = signed else {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            return Err(AgentError::Failure);
        };
        let signature = signed.map_err(|e| {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            AgentError::other(e)
        })?;
        stats.signed.fetch_add(1, Ordering::Relaxed);
        Ok(signature)
    }

    async fn extension(&mut self, extension: Extension) -> Result<Option<Extension>, AgentError> {
        if extension.name == lease::RENEW || extension.name == lease::RELEASE {
            let answer = match serde_json::from_slice::<LeaseRequest>(extension.details.as_ref()) {
                Ok(request) => self.lease_act(&extension.name, request).await,
                Err(e) => {
                    LeaseAnswer::could_not(format!("the request is not a lease request: {e}"))
                }
            };
            let body = serde_json::to_vec(&answer).map_err(AgentError::other)?;
            return Ok(Some(Extension {
                name: extension.name,
                details: body.into(),
            }));
        }
        if extension.name == forge_check::FORGE_CHECK {
            let who = self.who().replace("broker peer", "forge-hook peer");
            let answer = match serde_json::from_slice(extension.details.as_ref()) {
                Ok(check) => forge_check::answer(&self.broker, self.uid, &who, check).await,
                Err(e) => {
                    let verdict = Verdict::CouldNotRead(Reason::ProtocolError);
                    self.broker.judge.count(verdict);
                    row_fence_contract::protocol::Answer::could_not_read(
                        Reason::ProtocolError,
                        format!("the request is not a forge check: {e}"),
                    )
                }
            };
            return Ok(Some(Extension {
                name: extension.name,
                details: answer.to_line().into(),
            }));
        }
        if extension.name != SESSION_BIND {
            return Err(AgentError::Failure);
        }
        let bind = match extension.parse_message::<SessionBind>() {
            Ok(Some(bind)) => bind,
            _ => {
                let why = Refused("a session-bind@openssh.com that does not parse".into());
                self.destination = Destination::Spoiled { print: None };
                self.refuse_destination("ssh session-bind, host unknown", why);
                return Err(AgentError::Failure);
            }
        };
        match self.destination.bind(&bind, &self.broker.shared.forges) {
            Ok(()) => Ok(None),
            Err(why) => {
                let action = format!("ssh session-bind, {}", self.destination.host());
                self.refuse_destination(&action, why);
                Err(AgentError::Failure)
            }
        }
    }
}
