//! A row's scope (ARCHITECTURE.md, "Forge hook"): which repositories and refs the holder of
//! a row may update, set per board in `registry/boards.toml`, and the one judgement of a
//! push against it. Pure: no I/O, no clock; the daemon judges the lease, this judges the
//! refs, and a push passes only when both say yes.
//!
//! # Patterns
//!
//! A pattern is a full ref name (`refs/…`) split at `/` into components. `{row}` inside a
//! component stands for the row's name, which must then itself be a valid ref component
//! (no `..`, no leading `.`, no `.lock` ending): a row whose name is not one cannot use
//! `{row}`, and every push for it is refused with [`ScopeRefusal::RowNotARefComponent`].
//! A component that is exactly `*` may only be the last one and matches **one or more**
//! whole components (`refs/heads/feature/{row}/*` covers `feature/r1/x` and
//! `feature/r1/x/y`, not `feature/r1` itself). Every other component matches itself
//! only: components are compared whole, so `refs/heads/feature/r1x` never matches
//! `refs/heads/feature/{row}` for row `r1`. A ref that is not a valid ref name (git's
//! `check-ref-format` rules: `..`, `@{`, control characters, a leading `.` …) matches
//! nothing.
//!
//! # Rules
//!
//! Every update of a push must be covered: its ref matches a pattern, and
//! - a delete needs `allow_delete`;
//! - a non-fast-forward update needs `allow_force`;
//! - any ref under `refs/tags/` needs `allow_tags` (besides a matching pattern).
//!
//! When `repositories` is given, the pushed repository's path must be one of them,
//! compared as given (the forge hook passes the repository's canonical path).

use serde::{Deserialize, Serialize};

/// The text of `{row}` in a pattern.
pub const ROW: &str = "{row}";

/// A board's scope, as `[boards.B.scope]` in `boards.toml` gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    /// Ref patterns (see the module docs); at least one.
    pub refs: Vec<String>,
    /// Repository paths (absolute, as the forge names them); absent: any repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repositories: Option<Vec<String>>,
    /// Deletes of a covered ref are allowed.
    #[serde(default)]
    pub allow_delete: bool,
    /// Non-fast-forward updates of a covered ref are allowed.
    #[serde(default)]
    pub allow_force: bool,
    /// Refs under `refs/tags/` may be covered at all.
    #[serde(default)]
    pub allow_tags: bool,
}

/// What one ref update does, as the forge classifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateKind {
    /// The ref did not exist.
    Create,
    /// The new commit descends from the old one.
    FastForward,
    /// The new commit does not descend from the old one (or it could not be told).
    NonFastForward,
    /// The ref is removed.
    Delete,
}

impl UpdateKind {
    /// The kind's one spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            UpdateKind::Create => "create",
            UpdateKind::FastForward => "fast_forward",
            UpdateKind::NonFastForward => "non_fast_forward",
            UpdateKind::Delete => "delete",
        }
    }
}

/// One ref update of a push: what `pre-receive` reads on stdin, classified.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefUpdate {
    /// The old object id (all zeros for a create).
    pub old: String,
    /// The new object id (all zeros for a delete).
    pub new: String,
    /// The full ref name.
    #[serde(rename = "ref")]
    pub refname: String,
    /// What the update does.
    pub kind: UpdateKind,
}

/// Why a push is outside the row's scope: the ref and the rule. The wire reason of each
/// is `outside_scope`; the sentence names the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScopeRefusal {
    /// The board's scope uses `{row}` and the row's name is not a valid ref component.
    RowNotARefComponent {
        /// The row.
        row: String,
    },
    /// The repository is not one of the scope's.
    Repository {
        /// The repository as given.
        repository: String,
    },
    /// The ref matches no pattern (or is no valid ref name).
    NotCovered {
        /// The ref.
        refname: String,
    },
    /// A delete, and the board does not allow deletes.
    Delete {
        /// The ref.
        refname: String,
    },
    /// A non-fast-forward update, and the board does not allow them.
    NonFastForward {
        /// The ref.
        refname: String,
    },
    /// A tag, and the board does not allow tags.
    Tag {
        /// The ref.
        refname: String,
    },
    /// A push with no update at all: nothing to judge is no reason to say yes.
    Empty,
}

impl ScopeRefusal {
    /// The rule that refused, one word: `row_name`, `repository`, `refs`, `allow_delete`,
    /// `allow_force`, `allow_tags`, `empty`.
    pub fn rule(&self) -> &'static str {
        match self {
            ScopeRefusal::RowNotARefComponent { .. } => "row_name",
            ScopeRefusal::Repository { .. } => "repository",
            ScopeRefusal::NotCovered { .. } => "refs",
            ScopeRefusal::Delete { .. } => "allow_delete",
            ScopeRefusal::NonFastForward { .. } => "allow_force",
            ScopeRefusal::Tag { .. } => "allow_tags",
            ScopeRefusal::Empty => "empty",
        }
    }

    /// The ref refused, when one is.
    pub fn refname(&self) -> Option<&str> {
        match self {
            ScopeRefusal::NotCovered { refname }
            | ScopeRefusal::Delete { refname }
            | ScopeRefusal::NonFastForward { refname }
            | ScopeRefusal::Tag { refname } => Some(refname),
            _ => None,
        }
    }
}

impl std::fmt::Display for ScopeRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScopeRefusal::RowNotARefComponent { row } => write!(
                f,
                "row {row:?} is not a valid ref component, so the board's {{row}} patterns cover nothing for it (rename the row)"
            ),
            ScopeRefusal::Repository { repository } => write!(
                f,
                "repository {repository} is not in the row's scope (scope.repositories)"
            ),
            ScopeRefusal::NotCovered { refname } => {
                write!(f, "{refname} is outside the row's refs (scope.refs)")
            }
            ScopeRefusal::Delete { refname } => {
                write!(f, "{refname}: deletes are not allowed (scope.allow_delete)")
            }
            ScopeRefusal::NonFastForward { refname } => write!(
                f,
                "{refname}: non-fast-forward updates are not allowed (scope.allow_force)"
            ),
            ScopeRefusal::Tag { refname } => {
                write!(f, "{refname}: tags are not allowed (scope.allow_tags)")
            }
            ScopeRefusal::Empty => f.write_str("the push names no ref update"),
        }
    }
}

impl std::error::Error for ScopeRefusal {}

/// Why a scope in `boards.toml` is refused (the daemon does not start on it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidScope(pub String);

impl std::fmt::Display for InvalidScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidScope {}

impl Scope {
    /// Checks the scope's own shape: at least one pattern; each a `refs/…` name whose
    /// components are valid with `{row}` standing for a valid name, `*` only whole and
    /// last; repositories absolute.
    pub fn validate(&self) -> Result<(), InvalidScope> {
        if self.refs.is_empty() {
            return Err(InvalidScope(
                "scope.refs is empty: give at least one ref pattern, such as \"refs/heads/feature/{row}\"".into(),
            ));
        }
        for pattern in &self.refs {
            validate_pattern(pattern)?;
        }
        for repository in self.repositories.iter().flatten() {
            if !repository.starts_with('/') || repository.split('/').any(|c| c == "..") {
                return Err(InvalidScope(format!(
                    "scope.repositories: {repository:?} is not an absolute path without `..`"
                )));
            }
        }
        Ok(())
    }

    /// True when some pattern uses `{row}`.
    pub fn uses_row(&self) -> bool {
        self.refs.iter().any(|p| p.contains(ROW))
    }

    /// The patterns with `row` put in for `{row}`, as `show` and the ALLOWED line print
    /// them (a row that cannot be put in is left as `{row}`).
    pub fn refs_for(&self, row: &str) -> Vec<String> {
        let fits = valid_ref_component(row);
        self.refs
            .iter()
            .map(|p| if fits { p.replace(ROW, row) } else { p.clone() })
            .collect()
    }

    /// One line: the row's refs, then the repositories and what is allowed beyond
    /// fast-forwards and creates, e.g. `refs/heads/feature/r1 refs/heads/feature/r1/*
    /// (no delete, no force, no tags)`.
    pub fn summary(&self, row: &str) -> String {
        let mut text = self.refs_for(row).join(" ");
        if let Some(repositories) = &self.repositories {
            text.push_str(&format!(" in {}", repositories.join(" ")));
        }
        let flag = |allowed: bool, what: &str| {
            if allowed {
                what.to_string()
            } else {
                format!("no {what}")
            }
        };
        text.push_str(&format!(
            " ({}, {}, {})",
            flag(self.allow_delete, "delete"),
            flag(self.allow_force, "force"),
            flag(self.allow_tags, "tags")
        ));
        text
    }

    /// Whether `row`'s holder may push to `repository` at all, before any ref is known:
    /// what the daemon judges before it dials the forge for a lane, so a lane outside the
    /// scope learns nothing of the repository.
    pub fn judge_repository(&self, row: &str, repository: &str) -> Result<(), ScopeRefusal> {
        if self.uses_row() && !valid_ref_component(row) {
            return Err(ScopeRefusal::RowNotARefComponent { row: row.into() });
        }
        if let Some(repositories) = &self.repositories
            && !repositories.iter().any(|r| r == repository)
        {
            return Err(ScopeRefusal::Repository {
                repository: repository.into(),
            });
        }
        Ok(())
    }

    /// Judges a push by the holder of `row` to `repository`: `Ok` when every update is
    /// covered, else the first update refused and the rule.
    pub fn judge(
        &self,
        row: &str,
        repository: &str,
        updates: &[RefUpdate],
    ) -> Result<(), ScopeRefusal> {
        self.judge_repository(row, repository)?;
        if updates.is_empty() {
            return Err(ScopeRefusal::Empty);
        }
        for update in updates {
            self.judge_one(row, update)?;
        }
        Ok(())
    }

    fn judge_one(&self, row: &str, update: &RefUpdate) -> Result<(), ScopeRefusal> {
        let refname = &update.refname;
        let named = || refname.clone();
        if !self.covers(row, refname) {
            return Err(ScopeRefusal::NotCovered { refname: named() });
        }
        if refname.starts_with("refs/tags/") && !self.allow_tags {
            return Err(ScopeRefusal::Tag { refname: named() });
        }
        match update.kind {
            UpdateKind::Delete if !self.allow_delete => {
                Err(ScopeRefusal::Delete { refname: named() })
            }
            UpdateKind::NonFastForward if !self.allow_force => {
                Err(ScopeRefusal::NonFastForward { refname: named() })
            }
            _ => Ok(()),
        }
    }

    /// Judges only the refs of a push by the holder of `row`, for a layer that sees the
    /// refs but not the forge's path of the repository (the lane's pre-push hook): the
    /// daemon's proxy and the forge hook judge the repository at the write.
    pub fn judge_refs(&self, row: &str, updates: &[RefUpdate]) -> Result<(), ScopeRefusal> {
        match &self.repositories {
            None => self.judge(row, "", updates),
            Some(_) => Scope {
                repositories: None,
                ..self.clone()
            }
            .judge(row, "", updates),
        }
    }

    /// True when `refname` is a valid ref name matched by one of the patterns for `row`.
    pub fn covers(&self, row: &str, refname: &str) -> bool {
        valid_ref_component(row)
            && valid_refname(refname)
            && self.refs.iter().any(|p| matches(p, row, refname))
    }
}

/// Matches one pattern (already validated) for `row` against a valid ref name.
fn matches(pattern: &str, row: &str, refname: &str) -> bool {
    let want: Vec<String> = pattern.split('/').map(|c| c.replace(ROW, row)).collect();
    let have: Vec<&str> = refname.split('/').collect();
    match want.split_last() {
        Some((last, head)) if last == "*" => {
            have.len() > head.len() && head.iter().zip(&have).all(|(w, h)| w == h)
        }
        _ => want.len() == have.len() && want.iter().zip(&have).all(|(w, h)| w == h),
    }
}

fn validate_pattern(pattern: &str) -> Result<(), InvalidScope> {
    let bad = |why: &str| Err(InvalidScope(format!("scope.refs: {pattern:?} {why}")));
    if !pattern.starts_with("refs/") {
        return bad("does not start with refs/");
    }
    let components: Vec<&str> = pattern.split('/').collect();
    let last = components.len() - 1;
    for (i, component) in components.iter().enumerate() {
        if *component == "*" {
            if i != last {
                return bad("has `*` before its last component (`*` matches the rest of a ref)");
            }
            if i < 2 {
                return bad("covers every ref (`refs/*`): name the refs");
            }
            continue;
        }
        if component.contains('*') {
            return bad("has `*` inside a component (`*` is a whole component only)");
        }
        let filled = component.replace(ROW, "r");
        if component.contains('{') && filled.contains(['{', '}']) {
            return bad("has a brace that is not `{row}`");
        }
        if !valid_ref_component(&filled) {
            return bad(&format!(
                "has the component {component:?}, no valid ref component"
            ));
        }
    }
    Ok(())
}

/// At most this many ref updates in one push are judged; more is refused whole (git
/// pushes a few; a mirror push of thousands of refs is no lane's).
pub const MAX_UPDATES: usize = 1000;

/// A full object id: 40 (SHA-1) or 64 (SHA-256) hex digits.
pub fn valid_oid(oid: &str) -> bool {
    matches!(oid.len(), 40 | 64) && oid.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Git's "no object": an all-zero object id (a create's old, a delete's new).
pub fn is_zero_oid(oid: &str) -> bool {
    !oid.is_empty() && oid.bytes().all(|b| b == b'0')
}

/// Classifies `old` → `new`: a create when old is zeros, a delete when new is zeros, a
/// fast-forward only when `is_ancestor` (asked only then) proves old an ancestor of new;
/// anything else, a failing git included, is non-fast-forward, the stricter rule.
pub fn classify(old: &str, new: &str, is_ancestor: impl FnOnce() -> bool) -> UpdateKind {
    if is_zero_oid(old) {
        UpdateKind::Create
    } else if is_zero_oid(new) {
        UpdateKind::Delete
    } else if is_ancestor() {
        UpdateKind::FastForward
    } else {
        UpdateKind::NonFastForward
    }
}

/// A ref update whose shape is wrong: a ref name git would not take or an object id that
/// is not one. Names the update as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MalformedUpdate {
    /// The update as given: `<old> <new> <ref>`.
    pub update: String,
}

impl std::fmt::Display for MalformedUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} is not a ref update (`<old> <new> <ref>` with object ids and a ref name)",
            self.update
        )
    }
}

impl std::error::Error for MalformedUpdate {}

/// Checks each update's shape (a valid ref name, full object ids): a push is judged only
/// when every one of its updates is one.
pub fn check_updates(updates: &[RefUpdate]) -> Result<(), MalformedUpdate> {
    match updates
        .iter()
        .find(|u| !valid_refname(&u.refname) || !valid_oid(&u.old) || !valid_oid(&u.new))
    {
        Some(u) => Err(MalformedUpdate {
            update: format!("{} {} {}", u.old, u.new, u.refname),
        }),
        None => Ok(()),
    }
}

/// One component of a ref name as git's `check-ref-format` allows it: not empty, no
/// leading `.`, no `..`, no `.lock` or `.` ending, no `@{`, not `@`, and none of the
/// control characters, space, `~ ^ : ? * [ \`, DEL (nor `/`, which separates components).
pub fn valid_ref_component(component: &str) -> bool {
    !component.is_empty()
        && !component.starts_with('.')
        && !component.ends_with('.')
        && !component.ends_with(".lock")
        && !component.contains("..")
        && !component.contains("@{")
        && component != "@"
        && component.bytes().all(|b| {
            b > 0x20
                && b != 0x7f
                && !matches!(b, b'~' | b'^' | b':' | b'?' | b'*' | b'[' | b'\\' | b'/')
        })
}

/// A full ref name git would accept for a push: `refs/` and at least one more valid
/// component.
pub fn valid_refname(refname: &str) -> bool {
    let mut components = refname.split('/');
    components.next() == Some("refs")
        && refname.split('/').count() >= 2
        && refname.split('/').skip(1).all(valid_ref_component)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(refs: &[&str]) -> Scope {
        Scope {
            refs: refs.iter().map(|r| r.to_string()).collect(),
            ..Scope::default()
        }
    }

    fn update(refname: &str, kind: UpdateKind) -> RefUpdate {
        RefUpdate {
            old: "1".repeat(40),
            new: "2".repeat(40),
            refname: refname.into(),
            kind,
        }
    }

    const FEATURE: &[&str] = &["refs/heads/feature/{row}", "refs/heads/feature/{row}/*"];

    #[test]
    fn a_row_covers_its_own_refs_and_no_neighbours() {
        let s = scope(FEATURE);
        s.validate().unwrap();
        for ok in [
            "refs/heads/feature/r1",
            "refs/heads/feature/r1/x",
            "refs/heads/feature/r1/x/y",
        ] {
            assert!(s.covers("r1", ok), "{ok}");
        }
        for no in [
            "refs/heads/feature/r1x",
            "refs/heads/feature/r",
            "refs/heads/feature/r1/",
            "refs/heads/feature/r1/../r2",
            "refs/heads/feature/r1/..",
            "refs/heads/feature/r2/x",
            "refs/heads/feature",
            "refs/heads/main",
            "refs/heads/feature/r1/x.lock",
            "refs/heads/feature/r1/.hidden",
            "refs/heads/feature/r1/a@{1}",
            "refs/heads/feature//r1",
            "heads/feature/r1",
        ] {
            assert!(!s.covers("r1", no), "{no}");
        }
    }

    #[test]
    fn each_rule_names_the_ref_and_the_rule() {
        let s = scope(&["refs/heads/feature/{row}", "refs/tags/{row}/*"]);
        let row = "r1";
        let judge = |u: RefUpdate| s.judge(row, "/srv/a.git", &[u]);
        assert_eq!(
            judge(update("refs/heads/feature/r1", UpdateKind::FastForward)),
            Ok(())
        );
        assert_eq!(
            judge(update("refs/heads/feature/r1", UpdateKind::Create)),
            Ok(())
        );
        let cases = [
            (
                update("refs/heads/main", UpdateKind::FastForward),
                "refs",
                "refs/heads/main",
            ),
            (
                update("refs/heads/feature/r1", UpdateKind::NonFastForward),
                "allow_force",
                "refs/heads/feature/r1",
            ),
            (
                update("refs/heads/feature/r1", UpdateKind::Delete),
                "allow_delete",
                "refs/heads/feature/r1",
            ),
            (
                update("refs/tags/r1/v1", UpdateKind::Create),
                "allow_tags",
                "refs/tags/r1/v1",
            ),
        ];
        for (u, rule, refname) in cases {
            let refused = judge(u).unwrap_err();
            assert_eq!(refused.rule(), rule);
            assert_eq!(refused.refname(), Some(refname));
            assert!(refused.to_string().contains(refname), "{refused}");
        }
        let open = Scope {
            allow_delete: true,
            allow_force: true,
            allow_tags: true,
            ..s.clone()
        };
        for kind in [UpdateKind::Delete, UpdateKind::NonFastForward] {
            assert_eq!(
                open.judge(row, "/x", &[update("refs/tags/r1/v1", kind)]),
                Ok(())
            );
        }
        // One refused update refuses the push.
        let mixed = [
            update("refs/heads/feature/r1", UpdateKind::FastForward),
            update("refs/heads/release", UpdateKind::Delete),
        ];
        assert_eq!(s.judge(row, "/x", &mixed).unwrap_err().rule(), "refs");
        assert_eq!(s.judge(row, "/x", &[]), Err(ScopeRefusal::Empty));
    }

    #[test]
    fn repositories_are_matched_whole() {
        let s = Scope {
            repositories: Some(vec!["/srv/git/app.git".into()]),
            ..scope(FEATURE)
        };
        s.validate().unwrap();
        let u = [update("refs/heads/feature/r1", UpdateKind::Create)];
        assert_eq!(s.judge("r1", "/srv/git/app.git", &u), Ok(()));
        for other in ["/srv/git/other.git", "/srv/git/app.git/", "/srv/git/app"] {
            assert_eq!(s.judge("r1", other, &u).unwrap_err().rule(), "repository");
        }
    }

    #[test]
    fn a_row_that_is_no_ref_component_cannot_use_row() {
        let s = scope(FEATURE);
        let u = [update("refs/heads/feature/x", UpdateKind::Create)];
        for row in [".hidden", "a..b", "x.lock", "end."] {
            let refused = s.judge(row, "/x", &u).unwrap_err();
            assert_eq!(refused.rule(), "row_name", "{row}");
            assert!(refused.to_string().contains("not a valid ref component"));
        }
        // A scope without {row} does not care about the row's name.
        let fixed = scope(&["refs/heads/shared"]);
        let u = [update("refs/heads/shared", UpdateKind::Create)];
        assert_eq!(fixed.judge("ok-row", "/x", &u), Ok(()));
    }

    #[test]
    fn bad_patterns_are_refused_at_load() {
        for bad in [
            "heads/x",
            "refs/*",
            "refs/heads/*/x",
            "refs/heads/x*",
            "refs/heads/{rows}",
            "refs/heads/{row",
            "refs/heads/../x",
            "refs/heads/.x",
            "refs/heads//x",
            "refs/heads/x.lock",
        ] {
            assert!(scope(&[bad]).validate().is_err(), "{bad}");
        }
        assert!(scope(&[]).validate().is_err());
        assert!(scope(&["refs/heads/*"]).validate().is_ok());
        let relative = Scope {
            repositories: Some(vec!["srv/a.git".into()]),
            ..scope(FEATURE)
        };
        assert!(relative.validate().is_err());
    }

    #[test]
    fn the_summary_shows_the_rows_refs_and_flags() {
        let s = scope(FEATURE);
        assert_eq!(
            s.summary("r1"),
            "refs/heads/feature/r1 refs/heads/feature/r1/* (no delete, no force, no tags)"
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn component() -> impl Strategy<Value = String> {
            prop_oneof![
                "[a-z0-9][a-z0-9._-]{0,8}",
                Just("..".to_string()),
                Just(".x".to_string()),
                Just("x.lock".to_string()),
                Just("@{u}".to_string()),
                Just(String::new()),
                "[ -~]{1,4}",
            ]
        }

        proptest! {
            /// A ref with `..` or an empty component is never covered, whatever the row.
            #[test]
            fn no_pattern_covers_a_path_walk(row in "[a-z0-9]{1,6}", parts in proptest::collection::vec(component(), 0..4)) {
                let s = scope(&["refs/heads/feature/{row}", "refs/heads/feature/{row}/*", "refs/heads/*"]);
                let refname = format!("refs/heads/feature/{row}/{}", parts.join("/"));
                let walks = refname.split('/').any(|c| c.is_empty() || c.contains("..") || c.starts_with('.'));
                if walks {
                    prop_assert!(!s.covers(&row, &refname), "{refname}");
                }
            }

            /// A row's name plus anything that is not `/` never matches the row's own
            /// pattern: another row's branch is another row's.
            #[test]
            fn a_longer_name_is_another_row(row in "[a-z0-9]{1,6}", tail in "[a-z0-9._-]{1,6}") {
                let s = scope(&["refs/heads/feature/{row}", "refs/heads/feature/{row}/*"]);
                let refname = format!("refs/heads/feature/{row}{tail}");
                prop_assert!(!s.covers(&row, &refname));
                let other = format!("refs/heads/feature/{row}{tail}/x");
                prop_assert!(!s.covers(&row, &other));
            }

            /// Whatever a row's own `*` covers is a valid ref name under the row's prefix.
            #[test]
            fn a_covered_ref_is_under_the_prefix(row in "[a-z0-9]{1,6}", parts in proptest::collection::vec(component(), 1..4)) {
                let s = scope(&["refs/heads/feature/{row}/*"]);
                let refname = format!("refs/heads/feature/{row}/{}", parts.join("/"));
                if s.covers(&row, &refname) {
                    prop_assert!(valid_refname(&refname));
                    let prefix = format!("refs/heads/feature/{row}/");
                    prop_assert!(refname.starts_with(&prefix));
                }
            }
        }
    }
}
