//! The board controller's lease, record `meta/lease` `{owner, epoch, expires_at_ms}`, and
//! the board's epoch counter, record `meta/epoch`. The epoch goes +1 on every takeover and
//! on every grant of an absent or expired lease, and never goes back (a release keeps the
//! counter), so a fence on an old epoch can never pass again. Every change is one fenced
//! write on `meta` through [`fencing::write`].

use crate::fencing::{self, TrackedSection, WriteError};
use crate::judge::rfc3339;
use crate::meta;
use crate::{ControllerLease, LeaseStore, META, StoreError};
use serde_json::{Value, json};

/// Why a controller-lease operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Another owner holds a live lease (acquire without takeover).
    #[error(
        "the controller lease of {board} is held by {owner} at epoch {epoch} until {until} (--takeover takes it)"
    )]
    Held {
        /// The board.
        board: String,
        /// The live owner.
        owner: String,
        /// Its epoch.
        epoch: u64,
        /// Its expiry, RFC 3339.
        until: String,
    },
    /// Renew or release by someone who does not hold the lease (or a lapsed one).
    #[error("{0}")]
    NotHolder(String),
    /// The owner id is not 1–128 printable characters.
    #[error("{0}")]
    Invalid(String),
    /// The board kept changing for every attempt.
    #[error("the board's fencing state kept changing; nothing was committed")]
    Contention,
    /// The store failed or holds data row-fence did not write.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ControllerError {
    /// True when the answer is "no" (exit 3).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ControllerError::Held { .. } | ControllerError::NotHolder(_)
        )
    }
}

impl From<WriteError<ControllerError>> for ControllerError {
    fn from(e: WriteError<ControllerError>) -> ControllerError {
        match e {
            WriteError::Change(e) => e,
            WriteError::Contention => ControllerError::Contention,
            WriteError::StaleLease(why) => ControllerError::NotHolder(why),
            WriteError::Store(e) => ControllerError::Store(e),
        }
    }
}

/// The lease as stored, if any, and whether it is live at `now_ms`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Shown {
    /// The owner.
    pub owner: String,
    /// The epoch.
    pub epoch: u64,
    /// Expiry, ms since the Unix epoch (store clock).
    pub expires_at_ms: u64,
    /// Unexpired at the store's now.
    pub live: bool,
}

fn parse(value: &Value) -> Result<ControllerLease, ControllerError> {
    serde_json::from_value(value.clone()).map_err(|e| {
        ControllerError::Store(StoreError::Corrupt(crate::Detail::caused_by(
            format!("meta/lease is not a controller lease: {e}"),
            e,
        )))
    })
}

/// Grants the controller lease to `owner` for `ttl_ms`. The same owner re-acquiring its
/// live lease keeps the epoch (a renewal); anyone acquiring an absent or expired lease, or
/// taking a live one over with `takeover`, gets the next epoch.
pub async fn acquire(
    store: &dyn LeaseStore,
    board: &str,
    owner: &str,
    ttl_ms: u64,
    takeover: bool,
) -> Result<ControllerLease, ControllerError> {
    validate_owner(owner)?;
    let written = fencing::write(
        store,
        board,
        &[],
        |view| {
            let now = view.now_ms();
            let meta = view.section(META);
            let current = meta.get(meta::LEASE).map(parse).transpose()?;
            let counter = meta.get(meta::EPOCH).and_then(Value::as_u64).unwrap_or(0);
            let live = current.clone().filter(|l| l.expires_at_ms > now);
            let epoch = match live {
                Some(l) if l.owner == owner => l.epoch,
                Some(l) if !takeover => {
                    return Err(ControllerError::Held {
                        board: board.into(),
                        owner: l.owner,
                        epoch: l.epoch,
                        until: rfc3339(l.expires_at_ms),
                    });
                }
                _ => counter.max(current.map_or(0, |l| l.epoch)) + 1,
            };
            let lease = ControllerLease {
                owner: owner.into(),
                epoch,
                expires_at_ms: now.saturating_add(ttl_ms),
            };
            meta.insert(meta::LEASE, json!(lease));
            meta.insert(meta::EPOCH, json!(epoch));
            Ok(lease)
        },
        None,
    )
    .await?;
    Ok(written.value)
}

/// Extends `owner`'s live lease by `ttl_ms` from the store's now (same epoch).
pub async fn renew(
    store: &dyn LeaseStore,
    board: &str,
    owner: &str,
    ttl_ms: u64,
) -> Result<ControllerLease, ControllerError> {
    change_own(store, board, owner, false, |meta, mut lease, now| {
        lease.expires_at_ms = now.saturating_add(ttl_ms);
        meta.insert(meta::LEASE, json!(lease));
        lease
    })
    .await
}

/// Gives up `owner`'s lease (a lapsed one too); the epoch counter stays.
pub async fn release(
    store: &dyn LeaseStore,
    board: &str,
    owner: &str,
) -> Result<ControllerLease, ControllerError> {
    change_own(store, board, owner, true, |meta, lease, _| {
        meta.remove(meta::LEASE);
        lease
    })
    .await
}

/// One fenced write on `owner`'s own lease: `change` gets meta, the lease and the store's
/// now, and returns the lease to report.
async fn change_own(
    store: &dyn LeaseStore,
    board: &str,
    owner: &str,
    allow_expired: bool,
    change: impl Fn(&mut TrackedSection, ControllerLease, u64) -> ControllerLease,
) -> Result<ControllerLease, ControllerError> {
    let written = fencing::write(
        store,
        board,
        &[],
        |view| {
            let now = view.now_ms();
            let meta = view.section(META);
            let lease = held_by(
                meta.get(meta::LEASE).map(parse).transpose()?,
                board,
                owner,
                now,
                allow_expired,
            )?;
            Ok(change(meta, lease, now))
        },
        None,
    )
    .await?;
    Ok(written.value)
}

/// The lease as stored, with whether it is live at the store's now.
pub async fn show(store: &dyn LeaseStore, board: &str) -> Result<Option<Shown>, ControllerError> {
    let snapshot = store.sections(board, &[META]).await?;
    let Some(record) = snapshot.record(META, meta::LEASE) else {
        return Ok(None);
    };
    let lease = parse(&record.value)?;
    Ok(Some(Shown {
        live: lease.expires_at_ms > snapshot.now_ms,
        owner: lease.owner,
        epoch: lease.epoch,
        expires_at_ms: lease.expires_at_ms,
    }))
}

/// An owner is 1–128 printable characters, not all blank (an empty owner in a fence means
/// "any owner", so it cannot name a holder).
fn validate_owner(owner: &str) -> Result<(), ControllerError> {
    let count = owner.chars().count();
    if owner.trim().is_empty() || count > 128 || owner.chars().any(char::is_control) {
        return Err(ControllerError::Invalid(format!(
            "the controller owner must be 1-128 printable characters, not {owner:?}"
        )));
    }
    Ok(())
}

fn held_by(
    lease: Option<ControllerLease>,
    board: &str,
    owner: &str,
    now: u64,
    allow_expired: bool,
) -> Result<ControllerLease, ControllerError> {
    match lease {
        None => Err(ControllerError::NotHolder(format!(
            "{board} has no controller lease"
        ))),
        Some(l) if l.owner != owner => Err(ControllerError::NotHolder(format!(
            "the controller lease of {board} is held by {}, not by {owner}",
            l.owner
        ))),
        Some(l) if l.expires_at_ms <= now && !allow_expired => {
            Err(ControllerError::NotHolder(format!(
                "{owner}'s controller lease of {board} expired at {}; acquire it again",
                rfc3339(l.expires_at_ms)
            )))
        }
        Some(l) => Ok(l),
    }
}
