//! `--push-updates`: the ref updates git hands the pre-push hook on stdin, read and
//! classified so the daemon judges them against the row's scope as well as the lease
//! (ARCHITECTURE.md, "Forge hook": a row's scope). Each line is
//! `<local ref> SP <local oid> SP <remote ref> SP <remote oid>`; the update is the remote
//! ref moving from the remote oid to the local one. Fast-forward is proven by git in the
//! lane's own repository (`git merge-base --is-ancestor`); a remote oid the lane has not
//! fetched cannot be proven, and is non-fast-forward, as git itself would refuse it
//! without `--force`.

use row_fence_contract::scope::{self, MAX_UPDATES, RefUpdate, valid_oid, valid_refname};
use std::io::Read;
use std::process::{Command, Stdio};

/// The most of stdin kept: [`MAX_UPDATES`] lines of two refs and two SHA-256 ids.
const MAX_INPUT_BYTES: u64 = (MAX_UPDATES as u64 + 1) * 1024;

/// Why the pre-push hook's lines could not be judged: the push is not asked about, and
/// the asker answers COULD NOT READ (never UNFENCED, never ALLOWED).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// stdin could not be read.
    Read(String),
    /// More lines than one ask judges.
    TooMany,
    /// A line that is not git's pre-push line.
    Line(String),
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::Read(e) => write!(f, "cannot read the pushed refs on stdin: {e}"),
            Unreadable::TooMany => write!(
                f,
                "the push names more ref updates than the {MAX_UPDATES} one ask judges"
            ),
            Unreadable::Line(line) => write!(
                f,
                "{line:?} is not git's pre-push line `<local ref> <local oid> <remote ref> <remote oid>`"
            ),
        }
    }
}

/// Reads every line git writes (all of it, so git never meets a closed pipe), then
/// classifies each update.
pub fn read_stdin() -> Result<Vec<RefUpdate>, Unreadable> {
    let mut input = String::new();
    let mut stdin = std::io::stdin().lock();
    let read = (&mut stdin)
        .take(MAX_INPUT_BYTES + 1)
        .read_to_string(&mut input);
    // Whatever is left is drained: the verdict below refuses it whole.
    let _ = std::io::copy(&mut stdin, &mut std::io::sink());
    read.map_err(|e| Unreadable::Read(e.to_string()))?;
    if input.len() as u64 > MAX_INPUT_BYTES {
        return Err(Unreadable::TooMany);
    }
    parse(&input, is_ancestor)
}

/// The updates of `input`'s lines, classified with `ancestor(old, new)`.
pub fn parse(
    input: &str,
    ancestor: impl Fn(&str, &str) -> bool,
) -> Result<Vec<RefUpdate>, Unreadable> {
    let lines: Vec<&str> = input.lines().filter(|l| !l.is_empty()).collect();
    if lines.len() > MAX_UPDATES {
        return Err(Unreadable::TooMany);
    }
    lines
        .into_iter()
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            let [_local_ref, new, refname, old] = words[..] else {
                return Err(Unreadable::Line(line.into()));
            };
            if !valid_oid(new) || !valid_oid(old) || !valid_refname(refname) {
                return Err(Unreadable::Line(line.into()));
            }
            Ok(RefUpdate {
                old: old.into(),
                new: new.into(),
                refname: refname.into(),
                kind: scope::classify(old, new, || ancestor(old, new)),
            })
        })
        .collect()
}

/// True when git proves `old` an ancestor of `new` in the repository the hook runs in.
fn is_ancestor(old: &str, new: &str) -> bool {
    Command::new("git")
        .args(["merge-base", "--is-ancestor", old, new])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;
    use row_fence_contract::scope::UpdateKind;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const Z: &str = "0000000000000000000000000000000000000000";

    #[test]
    fn each_line_is_the_remote_ref_moving_from_the_remote_oid_to_the_local_one() {
        let input = format!(
            "refs/heads/x {B} refs/heads/feature/r1 {A}\nrefs/heads/y {B} refs/heads/y {Z}\n(delete) {Z} refs/heads/old {A}\nrefs/heads/z {B} refs/heads/z {A}\n"
        );
        let updates = parse(&input, |_, _| false).unwrap();
        let kinds: Vec<(&str, UpdateKind)> = updates
            .iter()
            .map(|u| (u.refname.as_str(), u.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("refs/heads/feature/r1", UpdateKind::NonFastForward),
                ("refs/heads/y", UpdateKind::Create),
                ("refs/heads/old", UpdateKind::Delete),
                ("refs/heads/z", UpdateKind::NonFastForward),
            ]
        );
        assert_eq!((updates[0].old.as_str(), updates[0].new.as_str()), (A, B));
        let ff = parse(&format!("refs/heads/x {B} refs/heads/x {A}\n"), |_, _| true).unwrap();
        assert_eq!(ff[0].kind, UpdateKind::FastForward);
    }

    #[test]
    fn a_line_that_is_not_gits_is_refused_never_guessed() {
        for bad in [
            format!("refs/heads/x {B} refs/heads/x"),
            format!("refs/heads/x {B} refs/heads/x {A} extra"),
            format!("refs/heads/x zz refs/heads/x {A}"),
            format!("refs/heads/x {B} refs/heads/../x {A}"),
            format!("refs/heads/x {B} HEAD {A}"),
        ] {
            assert!(
                matches!(parse(&bad, |_, _| true), Err(Unreadable::Line(_))),
                "{bad}"
            );
        }
        let many = format!("refs/heads/x {B} refs/heads/x {A}\n").repeat(MAX_UPDATES + 1);
        assert_eq!(parse(&many, |_, _| true), Err(Unreadable::TooMany));
    }
}
