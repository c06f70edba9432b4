//! Row leases: acquire (grant or take over), renew, release and list, each one fenced
//! write on the `claims` section through [`fencing::write`] — one spelling of every write.
//! A grant's generation is the revision its batch commits at, so generations are unique
//! and strictly increasing per board (ARCHITECTURE.md, "Vocabulary"). Expiry is set with the
//! store's clock.

use crate::document::parse_row_lease;
use crate::fencing::{self, Controller, WriteError};
use crate::judge::rfc3339;
use crate::{AskCheck, CLAIMS, LeaseStore, ReadSet, RowLease, StoreError, judge};
use row_fence_contract::spelling::{Word, command_line};
use row_fence_contract::{Descriptor, LeaseToken, Reason};
use serde_json::Value;

/// Why a row-lease operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another lane holds the row and its lease is live (acquire without takeover).
    #[error(
        "{board}/{row} is held by {holder} at generation {generation} until {until} (--takeover takes it)"
    )]
    Held {
        /// The board.
        board: String,
        /// The row.
        row: String,
        /// The lane holding it.
        holder: String,
        /// Its generation.
        generation: u64,
        /// Its expiry, RFC 3339.
        until: String,
    },
    /// The lease is not this lane's at this generation (renew, release).
    #[error("{detail}")]
    NotYours {
        /// Which of `not_held`, `different_holder`, `stale_generation`, `lease_expired`.
        reason: Reason,
        /// A sentence naming the holder.
        detail: String,
    },
    /// The row or lane is a look-alike of another spelling on the board (ARCHITECTURE.md,
    /// "One spelling"): granting it would make two leases that print alike.
    #[error("{0}")]
    LookAlike(String),
    /// The write was fenced on a controller lease that is stale.
    #[error("the controller lease is stale ({0})")]
    StaleController(String),
    /// The board kept changing for every attempt.
    #[error("the board's fencing state kept changing; nothing was committed")]
    Contention,
    /// The store failed or holds data row-fence did not write.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl LeaseError {
    /// True when the answer is "no" (exit 3) rather than "could not find out" (exit 1).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            LeaseError::Held { .. }
                | LeaseError::NotYours { .. }
                | LeaseError::LookAlike(_)
                | LeaseError::StaleController(_)
        )
    }
}

impl From<WriteError<LeaseError>> for LeaseError {
    fn from(e: WriteError<LeaseError>) -> LeaseError {
        match e {
            WriteError::Change(e) => e,
            WriteError::StaleLease(why) => LeaseError::StaleController(why),
            WriteError::Contention => LeaseError::Contention,
            WriteError::Store(e) => LeaseError::Store(e),
        }
    }
}

/// What to grant.
#[derive(Clone, Debug)]
pub struct Grant<'a> {
    /// The board.
    pub board: &'a str,
    /// The row.
    pub row: &'a str,
    /// The lane to grant it to.
    pub lane: &'a str,
    /// Lease time, in ms.
    pub ttl_ms: u64,
    /// Take the row from another lane even when its lease is live.
    pub takeover: bool,
    /// The board's tenant, recorded in the lease and the descriptor.
    pub tenant: Option<&'a str>,
    /// The new lease token (ARCHITECTURE.md, "Lease token"): the lease stores its hash,
    /// the descriptor it. The caller creates it, so it can save the descriptor before the
    /// grant is made.
    pub token: &'a LeaseToken,
    /// Give the lane's live lease, granted before lease tokens, a token and keep its
    /// generation and expiry, instead of a new grant: refused unless `lane` holds the row
    /// now and the lease stores no token yet (naming the holder proves nothing, so a token
    /// is never replaced: a lost descriptor is a new grant).
    pub reissue: bool,
}

/// The first read of a write on one row lease: its record only, not the claims section.
fn row_read(row: &str) -> ReadSet {
    let mut reads = ReadSet::default();
    reads.add_key(CLAIMS, row);
    reads
}

/// Grants `grant.row` to `grant.lane` with a new generation; returns the lane's
/// descriptor and the lease as written.
pub async fn acquire(
    store: &dyn LeaseStore,
    grant: &Grant<'_>,
    fence: Option<&Controller>,
) -> Result<(Descriptor, RowLease), LeaseError> {
    let written = fencing::write_reading(
        store,
        grant.board,
        row_read(grant.row),
        |view| {
            let now = view.now_ms();
            let current = read_lease(view.section(CLAIMS).get(grant.row))?;
            if grant.reissue {
                let check = AskCheck {
                    board: grant.board.into(),
                    row: grant.row.into(),
                    lane: grant.lane.into(),
                    generation: current.as_ref().map_or(0, |l| l.generation),
                    ..AskCheck::default()
                };
                let mut lease = match (judge(current.as_ref(), &check, now), current) {
                    // Only the holder's live lease is reissued: its token is what is lost.
                    (None | Some(Reason::TokenMismatch), Some(lease)) => lease,
                    (Some(reason), lease) => {
                        return Err(LeaseError::NotYours {
                            reason,
                            detail: format!(
                                "nothing to reissue: {}",
                                crate::judge::refusal_detail(reason, &check, lease.as_ref(), now)
                            ),
                        });
                    }
                    (None, None) => unreachable!("judge allows only a present lease"),
                };
                // Only a lease granted before lease tokens is armed: one with a token is
                // re-armed by nobody, since whoever names the holder is not proof of being
                // it. A holder that lost its descriptor acquires the row again, which
                // fences the lost one by a new generation.
                if lease.token_sha256.is_some() {
                    return Err(LeaseError::NotYours {
                        reason: Reason::TokenMismatch,
                        detail: format!(
                            "nothing to reissue: {}/{} at generation {} has a lease token; --reissue arms only a lease granted before lease tokens. A holder that lost its descriptor acquires the row again ({}): a new generation and token, and the lost descriptor is refused",
                            grant.board,
                            grant.row,
                            lease.generation,
                            command_line(
                                "acquire",
                                &[
                                    Word::Positional(grant.board),
                                    Word::Positional(grant.row),
                                    Word::Option("--lane", grant.lane),
                                    Word::Flag("--write-descriptor"),
                                ],
                            )
                        ),
                    });
                }
                // A lease stored beside a look-alike (by a raw batch, or before the rule)
                // is not armed again: reissuing it would make two rows that read as one
                // both ALLOWED. `store check --board` reports the pair for the operator.
                look_alike(view.section(CLAIMS), grant, now)?;
                lease.token_sha256 = Some(grant.token.sha256());
                view.section(CLAIMS).insert(grant.row, to_value(&lease));
                return Ok(lease);
            }
            look_alike(view.section(CLAIMS), grant, now)?;
            if let Some(held) = current.filter(|l| l.holder != grant.lane && l.expires_at_ms > now)
                && !grant.takeover
            {
                return Err(LeaseError::Held {
                    board: grant.board.into(),
                    row: grant.row.into(),
                    holder: held.holder,
                    generation: held.generation,
                    until: rfc3339(held.expires_at_ms),
                });
            }
            let lease = RowLease {
                holder: grant.lane.into(),
                generation: view.commit_revision(),
                expires_at_ms: now.saturating_add(grant.ttl_ms),
                tenant: grant.tenant.map(str::to_string),
                token_sha256: Some(grant.token.sha256()),
            };
            view.section(CLAIMS).insert(grant.row, to_value(&lease));
            Ok(lease)
        },
        fence,
    )
    .await?;
    let lease = written.value;
    let descriptor = Descriptor {
        board: grant.board.into(),
        row: grant.row.into(),
        lane: grant.lane.into(),
        generation: lease.generation,
        tenant: lease.tenant.clone(),
        token: Some(grant.token.clone()),
    };
    Ok((descriptor, lease))
}

/// Extends the lane's live lease at `generation` by `ttl_ms` from the store's now; the
/// generation is kept.
pub async fn renew(
    store: &dyn LeaseStore,
    held: &Descriptor,
    ttl_ms: u64,
    fence: Option<&Controller>,
) -> Result<RowLease, LeaseError> {
    let written = fencing::write_reading(
        store,
        &held.board,
        row_read(&held.row),
        |view| {
            let now = view.now_ms();
            let mut lease = owned(
                read_lease(view.section(CLAIMS).get(&held.row))?,
                held,
                now,
                false,
            )?;
            lease.expires_at_ms = now.saturating_add(ttl_ms);
            view.section(CLAIMS).insert(&held.row, to_value(&lease));
            Ok(lease)
        },
        fence,
    )
    .await?;
    Ok(written.value)
}

/// Releases the lane's lease at `generation` (an expired one too: giving up a row that
/// is still ours is always safe).
pub async fn release(
    store: &dyn LeaseStore,
    held: &Descriptor,
    fence: Option<&Controller>,
) -> Result<RowLease, LeaseError> {
    let written = fencing::write_reading(
        store,
        &held.board,
        row_read(&held.row),
        |view| {
            let now = view.now_ms();
            let lease = owned(
                read_lease(view.section(CLAIMS).get(&held.row))?,
                held,
                now,
                true,
            )?;
            view.section(CLAIMS).remove(&held.row);
            Ok(lease)
        },
        fence,
    )
    .await?;
    Ok(written.value)
}

/// Releases a lease stored under a name from before the spelling rule (ARCHITECTURE.md,
/// "One spelling"), which no descriptor can name any more and so no holder can renew or
/// release: `held` names it exactly as stored (row and lane unchecked). The holder and
/// generation must match; no lease token is asked, as for a takeover: an operator's act,
/// which only ever removes a lease. A name the rule allows is refused here (`None` from
/// [`stored_only`]): such a lease is released by its holder, with its token.
pub async fn release_stored(
    store: &dyn LeaseStore,
    held: &Descriptor,
    fence: Option<&Controller>,
) -> Result<RowLease, LeaseError> {
    let written = fencing::write_reading(
        store,
        &held.board,
        row_read(&held.row),
        |view| {
            let now = view.now_ms();
            let lease = read_lease(view.section(CLAIMS).get(&held.row))?;
            let lease = match owned(lease, held, now, true) {
                Ok(lease) => lease,
                Err(LeaseError::NotYours {
                    reason: Reason::TokenMismatch,
                    ..
                }) => read_lease(view.section(CLAIMS).get(&held.row))?.expect("judged present"),
                Err(e) => return Err(e),
            };
            view.section(CLAIMS).remove(&held.row);
            Ok(lease)
        },
        fence,
    )
    .await?;
    Ok(written.value)
}

/// True when `row` or `lane` is a spelling the allowlist refuses: one only
/// [`release_stored`] acts on.
pub fn stored_only(row: &str, lane: &str) -> bool {
    row_fence_contract::descriptor::validate_row(row).is_err()
        || row_fence_contract::descriptor::validate_lane(lane).is_err()
}

/// One row lease as listed by `show`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Listed {
    /// The row.
    pub row: String,
    /// The lease (its `token_sha256` is never printed: `show --json` leaves it out).
    #[serde(flatten, serialize_with = "public_lease")]
    pub lease: RowLease,
    /// The revision the record was last written at.
    pub revision: u64,
    /// True when unexpired at the store's now.
    pub live: bool,
}

/// The board's row leases (one row when `row` is given), with the store's now.
pub async fn list(
    store: &dyn LeaseStore,
    board: &str,
    row: Option<&str>,
) -> Result<(Vec<Listed>, u64), StoreError> {
    let snapshot = store.sections(board, &[CLAIMS]).await?;
    let now = snapshot.now_ms;
    let mut out = Vec::new();
    for (key, record) in snapshot.sections.get(CLAIMS).into_iter().flatten() {
        if row.is_some_and(|r| r != key) {
            continue;
        }
        let lease = parse_row_lease(&record.value)?;
        out.push(Listed {
            row: key.clone(),
            live: lease.expires_at_ms > now,
            lease,
            revision: record.revision,
        });
    }
    Ok((out, now))
}

/// Refuses a grant whose row has the look-alike skeleton of another row stored on the
/// board, or whose lane has that of another live lease's holder (ARCHITECTURE.md, "One
/// spelling"): `Row-1` beside `row-1` would be a second lease on what reads as one row,
/// and "held by lane-a, not by Lane-a" a refusal that reads as nonsense. Reads the claims
/// section whole, so a concurrent grant of a look-alike conflicts with this one's batch.
/// A takeover does not bypass it, nor does a reissue: a look-alike is never the same lease.
fn look_alike(
    claims: &mut crate::fencing::TrackedSection,
    grant: &Grant<'_>,
    now: u64,
) -> Result<(), LeaseError> {
    use row_fence_contract::spelling::skeleton;
    let (row, lane) = (skeleton(grant.row), skeleton(grant.lane));
    for (key, value) in claims.iter() {
        if key != grant.row && skeleton(key) == row {
            return Err(LeaseError::LookAlike(format!(
                "{}/{} looks like row {key} already on the board (same letters up to case and look-alikes such as 0/o, 1/l); one row has one spelling: use {key}",
                grant.board, grant.row
            )));
        }
        let lease = parse_row_lease(value).map_err(LeaseError::Store)?;
        if lease.expires_at_ms > now
            && lease.holder != grant.lane
            && skeleton(&lease.holder) == lane
        {
            return Err(LeaseError::LookAlike(format!(
                "lane {} looks like lane {}, which holds {}/{key}; one lane has one spelling",
                grant.lane, lease.holder, grant.board
            )));
        }
    }
    Ok(())
}

/// The spellings on `board` that break "one spelling" (ARCHITECTURE.md, "One spelling"),
/// one sentence each: a row or holder outside the name allowlist (stored before it), two
/// rows with one look-alike skeleton, two holders of live leases with one. Found and
/// reported by `row-fence store check --board`, never merged: which spelling a lane means
/// is the operator's call. A lease under a name outside the allowlist is reported with the
/// command that releases it (`release --stored-name`, in the escaped form printed).
pub async fn spellings(store: &dyn LeaseStore, board: &str) -> Result<Vec<String>, StoreError> {
    use row_fence_contract::descriptor::{validate_lane, validate_row, validate_tenant};
    use row_fence_contract::spelling::{escape, skeleton};
    use std::collections::BTreeMap;
    let (leases, _) = list(store, board, None).await?;
    let mut out = Vec::new();
    let mut rows: BTreeMap<String, &str> = BTreeMap::new();
    let mut holders: BTreeMap<String, &str> = BTreeMap::new();
    for l in &leases {
        if let Err(e) = validate_row(&l.row) {
            out.push(format!("{board}: stored {e}"));
        }
        if let Err(e) = validate_lane(&l.lease.holder) {
            out.push(format!("{board}: stored {e}"));
        }
        if stored_only(&l.row, &l.lease.holder) {
            let (row, lane) = (escape(&l.row), escape(&l.lease.holder));
            let generation = l.lease.generation.to_string();
            out.push(format!(
                "{board}: release it with: {}",
                command_line(
                    "release",
                    &[
                        Word::Positional(board),
                        Word::Positional(&row),
                        Word::Option("--lane", &lane),
                        Word::Option("--generation", &generation),
                        Word::Flag("--stored-name"),
                    ],
                )
            ));
        }
        if let Some(Err(e)) = l.lease.tenant.as_deref().map(validate_tenant) {
            out.push(format!("{board}: stored {e}"));
        }
        if let Some(other) = rows.insert(skeleton(&l.row), &l.row) {
            out.push(format!(
                "{board}: rows \"{}\" and \"{}\" look alike",
                escape(other),
                escape(&l.row)
            ));
        }
        if l.live
            && let Some(other) = holders.insert(skeleton(&l.lease.holder), &l.lease.holder)
            && other != l.lease.holder
        {
            out.push(format!(
                "{board}: lanes \"{}\" and \"{}\" hold live leases and look alike",
                escape(other),
                escape(&l.lease.holder)
            ));
        }
    }
    Ok(out)
}

fn read_lease(value: Option<&Value>) -> Result<Option<RowLease>, LeaseError> {
    value
        .map(|v| parse_row_lease(v).map_err(LeaseError::Store))
        .transpose()
}

/// The lease, if it is `held`'s: the same rule as an ask ([`judge`]), so renew and release
/// refuse exactly when a push would.
fn owned(
    lease: Option<RowLease>,
    held: &Descriptor,
    now: u64,
    allow_expired: bool,
) -> Result<RowLease, LeaseError> {
    let check = AskCheck {
        board: held.board.clone(),
        row: held.row.clone(),
        lane: held.lane.clone(),
        generation: held.generation,
        // Renew and release are the holder's: they need its token; no margin (renewing a
        // lease about to end is what renew is for).
        token: held.token.clone(),
        ..AskCheck::default()
    };
    match (judge(lease.as_ref(), &check, now), lease) {
        (None, Some(lease)) => Ok(lease),
        (Some(Reason::LeaseExpired), Some(lease)) if allow_expired => Ok(lease),
        (Some(reason), lease) => Err(LeaseError::NotYours {
            reason,
            detail: crate::judge::refusal_detail(reason, &check, lease.as_ref(), now),
        }),
        (None, None) => unreachable!("judge allows only a present lease"),
    }
}

/// A lease as printed: everything but its token's hash.
fn public_lease<S: serde::Serializer>(lease: &RowLease, out: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(
        &RowLease {
            token_sha256: None,
            ..lease.clone()
        },
        out,
    )
}

fn to_value(lease: &RowLease) -> Value {
    serde_json::to_value(lease).expect("a row lease always serializes")
}
