//! A forge's `pre-receive` hook asks, at ref-update time, whether the pushing lane holds a
//! row whose scope covers every update of the push now (ARCHITECTURE.md, "Forge hook").
//! The forge knows the lane from what authenticated it (the lane's own push key's forced
//! command sets `ROW_FENCE_LANE`, or git-http-backend's `REMOTE_USER`), so the fence is
//! checked at the write, not when a connection authenticated: a kept ssh master or a
//! receive-pack session held open since the lane was ALLOWED is judged again here.
//!
//! Wire: `SSH_AGENTC_EXTENSION` named [`FORGE_CHECK`] on the key broker's socket, whose
//! contents are a JSON [`ForgeCheck`]; answered with an extension of the same name whose
//! contents are the daemon's ordinary answer line ([`Answer`]: verdict, reason, detail,
//! and the echo of the lease judged).
//!
//! **Who may ask: any peer.** The forge runs the hook under its own uid (git-shell's user,
//! the web server's), which is no lane and not the daemon's; the broker socket is the one
//! the daemon opens to every uid. The answer only matters to the forge that enforces it:
//! a lane that asks about itself learns what its own push would meet, and asking about
//! another lane grants nothing (only the forge's hook can refuse or let a ref update).
//! Every denial is recorded in the refusal ledger under the asking uid (its per-uid
//! budget), so a peer that asks in a loop rotates only its own records out, and each is
//! counted as an ask is. The lane's lease is read by the daemon through the lane's
//! binding (the same pin as a signature: [`super::bound`]), then judged by the same gate,
//! margin and counters as an ask, after the scope.

use super::Broker;
use super::bound;
use crate::gate::Gated;
use crate::judge::Claim;
use crate::sync::read;
use row_fence_contract::descriptor::validate_lane;
use row_fence_contract::protocol::Answer;
use row_fence_contract::scope::{RefUpdate, valid_refname};
use row_fence_contract::{Reason, Verdict};
use serde::{Deserialize, Serialize};

/// The extension's name.
pub const FORGE_CHECK: &str = "forge-check@row-fence";

pub use row_fence_contract::scope::MAX_UPDATES;

/// The route a forge hook's refusals are filed under (the ledger's action starts with it).
pub const ROUTE: &str = "forge-hook";

/// What the forge's hook asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForgeCheck {
    /// The lane the forge authenticated (from the key's forced command or `REMOTE_USER`).
    pub lane: String,
    /// The repository pushed to: its canonical path on the forge.
    pub repository: String,
    /// Every ref update of the push, classified by the hook.
    pub updates: Vec<RefUpdate>,
}

/// Judges one forge check from the peer `uid` (`None`: unknown, still answered: the
/// answer is the forge's, and a denial is filed with no uid). `who` names the peer for
/// the ledger.
pub async fn answer(broker: &Broker, uid: Option<u32>, who: &str, check: ForgeCheck) -> Answer {
    let judge = &broker.judge;
    let action = action(&check, who);
    let deny = |verdict: Verdict, detail: String| {
        let gated = Gated { verdict, detail };
        judge.record_denial(None, &action, &gated, uid);
        Answer::verdict(gated.verdict, gated.detail, None)
    };
    if let Err(e) = validate(&check) {
        return deny(Verdict::CouldNotRead(Reason::ProtocolError), e.to_string());
    }
    let binding = read(&broker.shared.lanes).by_lane(&check.lane).cloned();
    let Some(binding) = binding else {
        return deny(
            Verdict::CouldNotRead(Reason::PeerRefused),
            format!(
                "the daemon binds no lane named {} (row-fence lane add)",
                check.lane
            ),
        );
    };
    let d = match bound::read_now(&binding).await {
        Ok(d) => d,
        Err(gated) => {
            judge.record_denial(None, &action, &gated, uid);
            let reason = gated.verdict.reason().map_or("refused", |r| r.as_str());
            // The detail may quote what the daemon read with its own rights: ledger only.
            return Answer::verdict(
                gated.verdict,
                format!(
                    "the daemon could not use lane {}'s descriptor ({reason}; the refusal ledger has the detail)",
                    check.lane
                ),
                None,
            );
        }
    };
    let claim = Claim {
        descriptor: &d,
        action: &action,
        session: Some(who),
        uid,
    };
    if let Some(scope) = judge.registry().scope(&d.board)
        && let Err(refused) = scope.judge(&d.row, &check.repository, &check.updates)
    {
        let gated = Gated {
            verdict: Verdict::Refused(Reason::OutsideScope),
            detail: format!("{}/{}: {refused}", d.board, d.row),
        };
        judge.record_denial(Some(&claim), &action, &gated, uid);
        return Answer::verdict(gated.verdict, gated.detail, Some(&d));
    }
    let gated = judge.gate_claim(&claim, super::SIGN_DEADLINE_MS).await;
    Answer::verdict(gated.verdict, gated.detail, Some(&d))
}

/// The ledger's action: the route, the repository and the refs (cut to a line).
fn action(check: &ForgeCheck, who: &str) -> String {
    let mut refs: Vec<String> = check
        .updates
        .iter()
        .take(8)
        .map(|u| format!("{} {}", u.kind.as_str(), u.refname))
        .collect();
    if check.updates.len() > 8 {
        refs.push(format!("and {} more", check.updates.len() - 8));
    }
    format!(
        "{ROUTE}: push to {} as lane {}: {} ({who})",
        check.repository,
        check.lane,
        refs.join(", ")
    )
}

/// The request's own shape: a valid lane name, an absolute repository, 1 to
/// [`MAX_UPDATES`] updates each with a valid ref name and hex object ids.
fn validate(check: &ForgeCheck) -> Result<(), Malformed> {
    validate_lane(&check.lane)?;
    if !check.repository.starts_with('/') {
        return Err(Malformed::RelativeRepository(check.repository.clone()));
    }
    if check.updates.is_empty() || check.updates.len() > MAX_UPDATES {
        return Err(Malformed::UpdateCount(check.updates.len()));
    }
    let oid = |o: &str| matches!(o.len(), 40 | 64) && o.bytes().all(|b| b.is_ascii_hexdigit());
    for u in &check.updates {
        if !valid_refname(&u.refname) || !oid(&u.old) || !oid(&u.new) {
            return Err(Malformed::Update {
                refname: u.refname.clone(),
                old: u.old.clone(),
                new: u.new.clone(),
            });
        }
    }
    Ok(())
}

/// Why a forge check is not one (answered `protocol_error`).
#[derive(Debug, thiserror::Error)]
enum Malformed {
    /// Its lane is no lane name.
    #[error("the forge check's {0}")]
    Lane(#[from] row_fence_contract::descriptor::InvalidName),
    /// Its repository is not an absolute path.
    #[error("the forge check's repository {0:?} is not an absolute path")]
    RelativeRepository(String),
    /// Not 1 to [`MAX_UPDATES`] updates.
    #[error("the forge check names {0} ref updates, not 1 to {MAX_UPDATES}")]
    UpdateCount(usize),
    /// An update with a bad ref name or object id.
    #[error("the forge check's update {refname:?} {old} {new} is not a ref update")]
    Update {
        /// The ref.
        refname: String,
        /// The old object id given.
        old: String,
        /// The new object id given.
        new: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use row_fence_contract::scope::UpdateKind;

    fn check(refname: &str, old: &str) -> ForgeCheck {
        ForgeCheck {
            lane: "lane-a".into(),
            repository: "/srv/git/app.git".into(),
            updates: vec![RefUpdate {
                old: old.into(),
                new: "b".repeat(40),
                refname: refname.into(),
                kind: UpdateKind::FastForward,
            }],
        }
    }

    #[test]
    fn only_well_formed_checks_are_judged() {
        assert!(validate(&check("refs/heads/x", &"a".repeat(40))).is_ok());
        for bad in [
            check("refs/heads/../x", &"a".repeat(40)),
            check("refs/heads/x", "zz"),
            check("HEAD", &"a".repeat(40)),
            ForgeCheck {
                lane: "lane a".into(),
                ..check("refs/heads/x", &"a".repeat(40))
            },
            ForgeCheck {
                repository: "app.git".into(),
                ..check("refs/heads/x", &"a".repeat(40))
            },
            ForgeCheck {
                updates: Vec::new(),
                ..check("refs/heads/x", &"a".repeat(40))
            },
        ] {
            assert!(validate(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_ledger_action_names_the_route_and_the_refs() {
        let a = action(&check("refs/heads/x", &"a".repeat(40)), "uid 5");
        assert!(
            a.starts_with(
                "forge-hook: push to /srv/git/app.git as lane lane-a: fast_forward refs/heads/x"
            ),
            "{a}"
        );
    }
}
