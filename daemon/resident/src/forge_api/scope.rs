//! Whether a pull request's head ref is in the row's scope (ARCHITECTURE.md, "Forge API"):
//! the board's scope from the registry (`[boards.B.scope]`, the forge hook's), judged by
//! the contract's one rule (`Scope::covers`).

use row_fence_contract::descriptor::Descriptor;
use row_fence_contract::scope::Scope;

/// True when the branch `head_ref` (a pull request's `headRefName` or REST `head.ref`,
/// without `refs/heads/`) is covered by `scope` for the row `descriptor` names. A board
/// with no scope allows any ref, as every write the fence judged before scopes did. The
/// scope's `repositories` name repositories as a forge's hook sees them (paths), not as
/// the API does (`owner/name`): the row's repository here is the one `install gh`
/// registered. The one place the forge API asks this: a create's head, and the head of a
/// pull request a merge, close or comment acts on.
pub fn head_in_scope(scope: Option<&Scope>, descriptor: &Descriptor, head_ref: &str) -> bool {
    match scope {
        None => true,
        Some(scope) => scope.covers(&descriptor.row, &format!("refs/heads/{head_ref}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor(row: &str) -> Descriptor {
        serde_json::from_value(serde_json::json!({
            "board": "b", "row": row, "lane": "lane-a", "generation": 1
        }))
        .unwrap()
    }

    #[test]
    fn a_head_is_in_scope_when_the_boards_scope_covers_its_branch_or_there_is_none() {
        let d = descriptor("r1");
        assert!(head_in_scope(None, &d, "anything"));
        let scope = Scope {
            refs: vec!["refs/heads/{row}/*".into()],
            ..Scope::default()
        };
        assert!(head_in_scope(Some(&scope), &d, "r1/fix"));
        assert!(!head_in_scope(Some(&scope), &d, "r2/fix"));
        assert!(!head_in_scope(Some(&scope), &d, "feature"));
        assert!(!head_in_scope(Some(&scope), &d, "r1/../x"));
    }
}
