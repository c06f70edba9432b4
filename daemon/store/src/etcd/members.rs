//! The cluster as its members (ARCHITECTURE.md, "The etcd store"): one client per member
//! the URL names, tried in turn, each within a per-member timeout well under a call's
//! deadline, starting with the member that answered last. A member that is dead (refused
//! at once), stopped (accepts connections, answers nothing: one per-member timeout, once,
//! then the next call starts elsewhere) or cut off from the quorum (answers "no leader"
//! at once, as every request asks for a leader) costs a call at most that; while a quorum
//! answers, a call is answered. etcd-client's one balanced channel would keep sending a
//! share of the calls to a member that answers nothing.
//!
//! A call the cluster rejected for its authentication token (expired, or issued before
//! the auth store changed) re-authenticates that member's client and is retried once:
//! neither rejection applied it. A write whose answer was lost may have been applied
//! ([`Answered::maybe_applied`]); it is tried on the next member only as the same
//! conditional transaction, which cannot apply twice, and its caller then finds out from
//! the board whether the first one did.

use super::errors::{self, Call, Failure};
use super::url::EtcdUrl;
use crate::StoreError;
use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// The pause before the members are tried again after none answered, doubled each round
/// up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);

/// The longest pause between rounds.
const MAX_PAUSE: Duration = Duration::from_millis(400);

/// One member the URL names and its client, connected on first use.
struct Slot {
    /// `host:port`, as the URL names it.
    endpoint: String,
    /// `http(s)://host:port`.
    uri: String,
    client: tokio::sync::Mutex<Connection>,
}

/// A member's client, as far as it got.
enum Connection {
    /// Not connecting.
    Idle,
    /// Connecting (authenticating, with a user): on a task of its own, so a member slow to
    /// authenticate (bcrypt on a loaded machine) costs a call one per-member timeout and
    /// is ready for a later one, and a stopped member holds up nothing.
    Connecting(tokio::task::JoinHandle<Result<Client, etcd_client::Error>>),
    /// Connected.
    Ready(Box<Client>),
}

/// The members of one etcd URL.
pub struct Members {
    url: EtcdUrl,
    slots: Vec<Slot>,
    /// The member that answered last: the next call starts there.
    preferred: AtomicUsize,
    /// Members found not answering (each costs a call a try elsewhere).
    losses: AtomicU64,
}

/// A call's answer, and whether an earlier try of it (on a member that did not answer in
/// time) may have been applied too.
pub struct Answered<T> {
    pub value: T,
    /// True when a write was sent to a member whose answer was lost before this one
    /// answered: a conditional transaction then applied at most once, but the caller must
    /// read which one did before it says nothing was written.
    pub maybe_applied: bool,
}

/// Why one member's status is not known (`store check` says it beside the member).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemberStatusError {
    /// The member refused the request, or the call failed as a store call.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The member did not answer in time, or was not reached (why, and the client's
    /// error beneath where there is one).
    #[error(transparent)]
    NotAnswered(crate::Detail),
}

/// How one try on one member ended.
enum Tried<T> {
    Answered(T),
    /// The member answered an error about the request itself (a permission, a size): every
    /// member would answer it.
    Refused(etcd_client::Error),
    /// Not served and not applied there (refused connection, no leader): the next member.
    NotSent(crate::Detail),
    /// No answer in time, or the connection broke with it in flight: it may be applied.
    Lost(crate::Detail),
}

impl Members {
    /// The members of `url`, none connected yet.
    pub fn new(url: &EtcdUrl) -> Members {
        let slots = url
            .endpoints
            .iter()
            .zip(url.uris())
            .map(|(endpoint, uri)| Slot {
                endpoint: endpoint.clone(),
                uri,
                client: tokio::sync::Mutex::new(Connection::Idle),
            })
            .collect();
        Members {
            url: url.clone(),
            slots,
            preferred: AtomicUsize::new(0),
            losses: AtomicU64::new(0),
        }
    }

    /// Members found not answering so far.
    pub fn losses(&self) -> u64 {
        self.losses.load(Ordering::Relaxed)
    }

    /// The longest one member is waited for.
    pub fn member_timeout(&self) -> Duration {
        Duration::from_millis(self.url.member_timeout_ms.min(self.url.timeout_ms))
    }

    /// How many members the URL names.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the URL names none (never: the URL needs one).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The endpoint of member `i`, as the URL names it.
    pub fn endpoint(&self, i: usize) -> &str {
        &self.slots[i].endpoint
    }

    async fn options(&self) -> Result<ConnectOptions, StoreError> {
        let timeout = Duration::from_millis(self.url.timeout_ms);
        let mut options = ConnectOptions::new()
            .with_timeout(timeout)
            .with_connect_timeout(self.member_timeout())
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true)
            // A member without a leader answers "no leader" at once rather than waiting:
            // the next member is tried.
            .with_require_leader(true);
        if let Some((user, password)) = &self.url.user {
            options = options.with_user(user, password);
        }
        if self.url.tls {
            let mut tls = TlsOptions::new();
            if let Some(ca) = &self.url.cacert {
                tls = tls.ca_certificate(Certificate::from_pem(read_pem(ca)?));
            }
            if let Some((cert, key)) = &self.url.identity {
                tls = tls.identity(Identity::from_pem(read_pem(cert)?, read_pem(key)?));
            }
            options = options.with_tls(tls);
        }
        Ok(options)
    }

    /// Member `i`'s client, connecting it if it is not, waiting at most `limit` for that
    /// (`Ok(None)`: still connecting). The outer error is the URL's (a PEM file it names);
    /// the inner one the member's.
    async fn client(
        &self,
        i: usize,
        limit: Duration,
    ) -> Result<Option<Result<Client, etcd_client::Error>>, StoreError> {
        let mut slot = self.slots[i].client.lock().await;
        if let Connection::Ready(client) = &*slot {
            return Ok(Some(Ok(client.as_ref().clone())));
        }
        if matches!(&*slot, Connection::Idle) {
            crate::tls::install_crypto_provider();
            let options = self.options().await?;
            let uri = self.slots[i].uri.clone();
            *slot = Connection::Connecting(tokio::spawn(async move {
                Client::connect([uri.as_str()], Some(options)).await
            }));
        }
        let Connection::Connecting(task) = &mut *slot else {
            return Ok(None);
        };
        let connected = match tokio::time::timeout(limit, task).await {
            Err(_) => return Ok(None),
            Ok(Ok(connected)) => connected,
            Ok(Err(e)) => Err(etcd_client::Error::IoError(std::io::Error::other(e))),
        };
        *slot = match &connected {
            Ok(client) => Connection::Ready(Box::new(client.clone())),
            Err(_) => Connection::Idle,
        };
        Ok(Some(connected))
    }

    /// Runs `op` on the members in turn, from the one that answered last, until one
    /// answers; `call` says whether it writes. When none does and one said it has no
    /// leader (an election), they are tried again after a short pause, until the URL's
    /// `timeout_ms`; then, or at once when none said so, it is
    /// `store_unreachable` naming each one's failure (a write that may have been applied
    /// somewhere: `Indeterminate`).
    pub async fn call<T, F, Fut>(&self, call: Call, op: F) -> Result<Answered<T>, StoreError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let count = self.slots.len();
        let budget = tokio::time::Instant::now() + Duration::from_millis(self.url.timeout_ms);
        let mut pause = FIRST_PAUSE;
        let mut maybe_applied = false;
        loop {
            let first = self.preferred.load(Ordering::Relaxed) % count.max(1);
            let mut failures = Vec::new();
            let mut beneath = None;
            let mut electing = false;
            for i in (first..count).chain(0..first) {
                let outcome = self.try_member(i, call, &op).await?;
                match outcome {
                    Tried::Answered(value) => {
                        self.preferred.store(i, Ordering::Relaxed);
                        return Ok(Answered {
                            value,
                            maybe_applied,
                        });
                    }
                    Tried::Refused(e) => {
                        self.preferred.store(i, Ordering::Relaxed);
                        return Err(errors::map(e, Call::Read));
                    }
                    Tried::NotSent(why) => {
                        self.losses.fetch_add(1, Ordering::Relaxed);
                        electing |= errors::is_election(why.text());
                        failures.push(format!("{}: {why}", self.slots[i].endpoint));
                        beneath = beneath.or_else(|| with_cause(why));
                    }
                    Tried::Lost(why) => {
                        self.losses.fetch_add(1, Ordering::Relaxed);
                        maybe_applied |= call == Call::Write;
                        electing |= errors::is_election(why.text());
                        failures.push(format!("{}: {why}", self.slots[i].endpoint));
                        beneath = beneath.or_else(|| with_cause(why));
                    }
                }
            }
            // No member answered this time round: during an election every member says
            // "no leader" or "leader changed" for a moment. Round again, until the
            // call's own budget (the caller's deadline usually ends it first); members
            // that refused the connection or its certificate are said at once.
            if !electing || tokio::time::Instant::now() + pause >= budget {
                let each = failures.join("; ");
                // Every member's sentence is in the text; the first client error met is
                // kept beneath it, for a caller that asks for the cause's kind.
                let detail = |text: String| match beneath {
                    Some(why) => crate::Detail::caused_by(text, why),
                    None => crate::Detail::from(text),
                };
                return Err(if maybe_applied {
                    StoreError::Indeterminate(detail(format!(
                        "no etcd member answered the transaction ({each}); it may have committed"
                    )))
                } else {
                    StoreError::Unreachable(detail(format!("no etcd member answered: {each}")))
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// Each member's own status (`store check`), each within the per-member timeout: a
    /// member that does not answer is its reason.
    pub async fn statuses(
        &self,
    ) -> Vec<(
        String,
        Result<etcd_client::StatusResponse, MemberStatusError>,
    )> {
        let mut all = Vec::new();
        for i in 0..self.slots.len() {
            let status = match self
                .try_member(i, Call::Read, &|mut client: Client| async move {
                    client.status().await
                })
                .await
            {
                Ok(Tried::Answered(status)) => Ok(status),
                Ok(Tried::Refused(e)) => Err(errors::map(e, Call::Read).into()),
                Ok(Tried::NotSent(why) | Tried::Lost(why)) => {
                    Err(MemberStatusError::NotAnswered(why))
                }
                Err(e) => Err(e.into()),
            };
            all.push((self.slots[i].endpoint.clone(), status));
        }
        all
    }

    /// One try on member `i` within the per-member timeout, re-authenticating once when
    /// the member rejected the token.
    async fn try_member<T, F, Fut>(
        &self,
        i: usize,
        call: Call,
        op: &F,
    ) -> Result<Tried<T>, StoreError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let limit = self.member_timeout();
        let client = match self.client(i, limit).await? {
            // Still connecting: a later call (or round) finds it ready.
            None => {
                return Ok(Tried::NotSent(crate::Detail::from(format!(
                    "not connected within {limit:?} (no answer within it)"
                ))));
            }
            Some(Ok(client)) => client,
            // Nothing of the call was sent yet, whatever the connect met.
            Some(Err(e)) => {
                return Ok(match tried::<T>(e, Call::Read) {
                    Tried::Lost(why) => Tried::NotSent(why),
                    other => other,
                });
            }
        };
        let first = self.once(&client, call, op, limit).await;
        if !matches!(&first, Tried::Refused(e) if errors::is_auth_rejection(e))
            || self.url.user.is_none()
        {
            return Ok(first);
        }
        // The token expired, or the auth store changed since it was issued: the request
        // was not applied. A new token, then the same request once more.
        match tokio::time::timeout(limit, client.refresh_token()).await {
            Ok(Ok(())) => Ok(self.once(&client, call, op, limit).await),
            Ok(Err(e)) => Ok(tried(e, Call::Read)),
            Err(_) => Ok(Tried::NotSent(crate::Detail::from(format!(
                "re-authentication not answered within {limit:?}"
            )))),
        }
    }

    async fn once<T, F, Fut>(
        &self,
        client: &Client,
        call: Call,
        op: &F,
        limit: Duration,
    ) -> Tried<T>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        match tokio::time::timeout(limit, op(client.clone())).await {
            Ok(Ok(value)) => Tried::Answered(value),
            Ok(Err(e)) => tried(e, call),
            Err(_) => Tried::Lost(crate::Detail::from(format!("no answer within {limit:?}"))),
        }
    }
}

/// What a client error says about the try that met it.
fn tried<T>(e: etcd_client::Error, call: Call) -> Tried<T> {
    match errors::failure(&e, call) {
        Failure::NotSent(why) => Tried::NotSent(crate::Detail::caused_by(why, e)),
        Failure::Lost(why) => Tried::Lost(crate::Detail::caused_by(why, e)),
        Failure::Answered => Tried::Refused(e),
    }
}

/// A member's failure when it has a client error beneath it (a timeout has none).
fn with_cause(why: crate::Detail) -> Option<crate::Detail> {
    std::error::Error::source(&why).is_some().then_some(why)
}

/// A PEM file the URL names (read at connect: small, local).
fn read_pem(path: &std::path::Path) -> Result<Vec<u8>, StoreError> {
    std::fs::read(path).map_err(|e| {
        StoreError::Invalid(crate::Detail::caused_by(
            format!("{}: {e}", path.display()),
            e,
        ))
    })
}
