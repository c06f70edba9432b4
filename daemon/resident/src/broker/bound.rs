//! A bound lane's lease, as the daemon reads it now (ARCHITECTURE.md, "Key broker"): the
//! one lookup from a peer's uid to what it may act for, used by the broker's signatures
//! and its renew and release, and by whatever else the daemon does for a lane. The
//! descriptor is read with the daemon's rights at a path the lane may be able to change,
//! so the binding pins the lease, not a name:
//!
//! - no symbolic link is followed anywhere in the path (`descriptor::read_no_symlinks`);
//! - the descriptor must name the binding's lane, and, when the binding names a board and
//!   row, that lease: another lease held under the same lane name is refused;
//! - a binding that names no board and row needs a descriptor the lane's uid cannot
//!   change (no directory on its path, nor the file, writable by it: permission bits,
//!   ACLs, and the groups its live processes hold), checked each time.

use super::Shared;
use super::lanes::Binding;
use super::writable::Principal;
use crate::gate::Gated;
use crate::sync::read as read_lock;
use row_fence_contract::descriptor::{self, Descriptor};
use row_fence_contract::{Reason, Verdict};

/// The lane bound to `uid` and its descriptor, read and checked now, off the caller's
/// thread (a stuck disk holds up this request only). `None` when no lane is bound to it.
pub async fn lane_of(shared: &Shared, uid: u32) -> Option<(Binding, Result<Descriptor, Gated>)> {
    let binding = read_lock(&shared.lanes).lane_of(uid)?.clone();
    let read = read_now(&binding).await;
    Some((binding, read))
}

/// [`read`] off the caller's thread.
pub async fn read_now(binding: &Binding) -> Result<Descriptor, Gated> {
    let owned = binding.clone();
    tokio::task::spawn_blocking(move || read(&owned))
        .await
        .unwrap_or_else(|e| {
            Err(Gated {
                verdict: Verdict::CouldNotRead(Reason::DescriptorUnreadable),
                detail: format!("the read of the lane's descriptor did not finish: {e}"),
            })
        })
}

/// Reads `binding`'s descriptor and checks it against the binding (see the module docs).
/// A refusal's detail may quote what the daemon read with its own rights: it is for the
/// ledger, not for the lane.
pub fn read(binding: &Binding) -> Result<Descriptor, Gated> {
    let path = &binding.descriptor;
    let refused = |detail: String| Gated {
        verdict: Verdict::CouldNotRead(Reason::PeerRefused),
        detail,
    };
    let d = match descriptor::read_no_symlinks(path) {
        Ok(Some(d)) => d,
        Ok(None) => {
            return Err(Gated {
                verdict: Verdict::CouldNotRead(Reason::DescriptorMissing),
                detail: format!("the lane's descriptor {} does not exist", path.display()),
            });
        }
        Err(e) => {
            let hint = match e {
                descriptor::DescriptorError::LinkInPath(_) => {
                    " (a binding names the real path: row-fence lane add resolves the directory's links when the operator binds)"
                }
                _ => "",
            };
            return Err(Gated {
                verdict: Verdict::CouldNotRead(Reason::DescriptorUnreadable),
                detail: format!("the lane's descriptor {}: {e}{hint}", path.display()),
            });
        }
    };
    let lane = binding.lane.as_deref().unwrap_or("(none)");
    if d.lane != lane {
        return Err(refused(format!(
            "the descriptor {} names lane {}, but uid {} is bound to lane {lane}",
            path.display(),
            d.lane,
            binding.uid
        )));
    }
    match binding.pinned() {
        Some((board, row)) if d.board != board || d.row != row => Err(refused(format!(
            "the descriptor {} names the lease {}/{}, but uid {} is bound to lane {lane}'s lease {board}/{row}: a binding acts for its own lease only",
            path.display(),
            d.board,
            d.row,
            binding.uid
        ))),
        Some(_) => Ok(d),
        None => unpinned(binding, d),
    }
}

/// A binding that pins no lease stands only while the lane cannot change its descriptor.
fn unpinned(binding: &Binding, d: Descriptor) -> Result<Descriptor, Gated> {
    let path = &binding.descriptor;
    let lane = Principal::of(binding.uid);
    match lane.can_change(path) {
        Ok(None) => Ok(d),
        Ok(Some(reach)) => Err(Gated {
            verdict: Verdict::CouldNotRead(Reason::PeerRefused),
            detail: format!(
                "the binding of {} pins no lease and the lane can change its descriptor {} (through {reach}): pin the lease (row-fence lane add --board --row) or keep the descriptor where only the daemon's user writes",
                lane.name(),
                path.display(),
            ),
        }),
        Err(e) => Err(Gated {
            verdict: Verdict::CouldNotRead(Reason::DescriptorUnreadable),
            detail: format!(
                "cannot tell whether the lane can change its descriptor {}: {e}",
                path.display()
            ),
        }),
    }
}
