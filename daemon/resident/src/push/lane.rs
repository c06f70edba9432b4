//! Who pushes, and whether they may now (ARCHITECTURE.md, "Push proxy"). In the hard
//! mode the lane is the one bound to the peer's uid (its lease read by the daemon through
//! the binding, [`crate::broker::bound`]); when the peer is the daemon's own uid (the
//! same-uid mode) it is the descriptor and lease token the helper sent, as an ask
//! carries them. Either way the push is judged by the daemon's one judge (gate, margin,
//! counters, ledger) and every ref against the row's scope, filed under [`ROUTE`].

use crate::broker::bound;
use crate::broker::lanes::Binding;
use crate::gate::Gated;
use crate::judge::{Claim, Judge};
use row_fence_contract::descriptor::Descriptor;
use row_fence_contract::scope::{RefUpdate, UpdateKind};
use row_fence_contract::{Reason, Verdict};

/// The route a push's refusals are filed under (the ledger's action starts with it).
pub const ROUTE: &str = "push";

/// A judgement's budget, in ms (as a signature's).
pub const DEADLINE_MS: u64 = crate::broker::SIGN_DEADLINE_MS;

/// The lane a push is for.
#[derive(Clone, Debug)]
pub enum Lane {
    /// The lane bound to the peer's uid.
    Bound(Binding),
    /// The daemon's own uid, naming its lane by descriptor and lease token.
    SameUid(Descriptor),
}

impl Lane {
    /// The lane's name, for the ledger.
    pub fn name(&self) -> &str {
        match self {
            Lane::Bound(b) => b.lane.as_deref().unwrap_or("(none)"),
            Lane::SameUid(d) => &d.lane,
        }
    }

    /// The lane whose push keys the push may use (`None`: keys of no lane only).
    pub fn key_owner(&self) -> Option<String> {
        Some(self.name().to_string())
    }
}

/// A refusal: the verdict for the lane, and the ref the scope refused, if one was.
#[derive(Clone, Debug)]
pub struct Refusal {
    /// The verdict and the sentence the lane may see.
    pub gated: Gated,
    /// The ref refused by the scope, when the refusal is about one ref.
    pub refname: Option<String>,
}

/// Judges the push of `updates` to `repository` for `lane`, now; `who` names the peer.
/// `Ok` is ALLOWED; the descriptor judged comes back for the verdict line.
pub async fn judge(
    judge: &Judge,
    lane: &Lane,
    uid: Option<u32>,
    who: &str,
    repository: &str,
    updates: &[RefUpdate],
) -> Result<Descriptor, Refusal> {
    judge_with(judge, lane, uid, who, repository, Some(updates)).await
}

/// Judges whether `lane` may push to `repository` at all, now: the lease and the
/// repository against the row's scope, before the forge is dialled, so a refused lane
/// gets nothing of the forge (not even its refs) and spends none of its sessions.
pub async fn judge_reach(
    judge: &Judge,
    lane: &Lane,
    uid: Option<u32>,
    who: &str,
    repository: &str,
) -> Result<Descriptor, Refusal> {
    judge_with(judge, lane, uid, who, repository, None).await
}

/// [`judge`], or [`judge_reach`] when `updates` is `None`.
async fn judge_with(
    judge: &Judge,
    lane: &Lane,
    uid: Option<u32>,
    who: &str,
    repository: &str,
    updates: Option<&[RefUpdate]>,
) -> Result<Descriptor, Refusal> {
    let action = action(lane, repository, updates.unwrap_or(&[]), who);
    let d = match lane {
        Lane::SameUid(d) => d.clone(),
        Lane::Bound(binding) => match bound::read_now(binding).await {
            Ok(d) => d,
            Err(gated) => {
                judge.record_denial(None, &action, &gated, uid);
                let reason = gated.verdict.reason().map_or("refused", |r| r.as_str());
                // The detail may quote what the daemon read with its own rights: ledger only.
                return Err(Refusal {
                    gated: Gated {
                        verdict: gated.verdict,
                        detail: format!(
                            "the daemon could not use lane {}'s descriptor ({reason}; the refusal ledger has the detail)",
                            lane.name()
                        ),
                    },
                    refname: None,
                });
            }
        },
    };
    let claim = Claim {
        descriptor: &d,
        action: &action,
        session: Some(who),
        uid,
    };
    let scoped = |scope: &row_fence_contract::scope::Scope| match updates {
        Some(updates) => scope.judge(&d.row, repository, updates),
        None => scope.judge_repository(&d.row, repository),
    };
    if let Some(scope) = judge.registry().scope(&d.board)
        && let Err(refused) = scoped(scope)
    {
        let unproven = refused.rule() == "allow_force"
            && updates.unwrap_or(&[]).iter().any(|u| {
                Some(u.refname.as_str()) == refused.refname()
                    && u.kind == UpdateKind::NonFastForward
            });
        let why = if unproven {
            " (the daemon proves a fast-forward only by walking the pushed commits from the new commit to the old one; a walk that leaves the pack cannot prove it)"
        } else {
            ""
        };
        let gated = Gated {
            verdict: Verdict::Refused(Reason::OutsideScope),
            detail: format!("{}/{}: {refused}{why}", d.board, d.row),
        };
        judge.record_denial(Some(&claim), &action, &gated, uid);
        return Err(Refusal {
            gated,
            refname: refused.refname().map(str::to_string),
        });
    }
    let gated = judge.gate_claim(&claim, DEADLINE_MS).await;
    if gated.verdict == Verdict::Allowed {
        Ok(d)
    } else {
        Err(Refusal {
            gated,
            refname: None,
        })
    }
}

/// A refusal decided before any lease was read (no lane, a URL of no forge, a bad
/// request), recorded and counted like any ask.
pub fn refuse(judge: &Judge, uid: Option<u32>, who: &str, reason: Reason, detail: String) -> Gated {
    let gated = Gated {
        verdict: Verdict::CouldNotRead(reason),
        detail,
    };
    judge.record_denial(None, &format!("{ROUTE}: ({who})"), &gated, uid);
    gated
}

/// The ledger's action: the route, the repository, the lane and the refs (cut to a line).
fn action(lane: &Lane, repository: &str, updates: &[RefUpdate], who: &str) -> String {
    let mut refs: Vec<String> = updates
        .iter()
        .take(8)
        .map(|u| format!("{} {}", u.kind.as_str(), u.refname))
        .collect();
    if updates.len() > 8 {
        refs.push(format!("and {} more", updates.len() - 8));
    }
    format!(
        "{ROUTE}: push to {repository} as lane {}: {} ({who})",
        lane.name(),
        refs.join(", ")
    )
}
