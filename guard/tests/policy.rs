//! The policy on its own, fast: what the walk finds in a command and where, without a
//! daemon (the end-to-end suite runs the same kinds against the real one).

use row_fence_guard::finding::{Dir, Kind};
use row_fence_guard::walk::{Env, Plan, plan};
use std::path::Path;

fn read(command: &str, cwd: &str) -> Plan {
    let env = Env {
        home: Some("/home/u".into()),
        cdpath: false,
    };
    plan(command, Path::new(cwd), &env)
}

/// `F` fenced, `O` opaque, `U` unreadable, `-` nothing, for each finding in order.
fn kinds(p: &Plan) -> String {
    let mut out: String = p
        .findings
        .iter()
        .map(|f| match f.kind {
            Kind::Fenced => 'F',
            Kind::Opaque => 'O',
        })
        .collect();
    if p.unreadable.is_some() {
        out.push('U');
    }
    if out.is_empty() {
        out.push('-');
    }
    out
}

#[test]
fn each_kind_is_found_where_it_runs() {
    for (command, cwd, want, place) in [
        ("git push", "/w", "F", Some("/w")),
        ("git -C a -C ../b push", "/w", "F", Some("/w/b")),
        ("cd /x && git push", "/w", "F", Some("/x")),
        ("(cd /tmp); git push", "/w", "F", Some("/w")),
        ("cd /tmp | cat; git push", "/w", "F", Some("/w")),
        ("cd /tmp & git push", "/w", "F", Some("/w")),
        (
            "cd \"my repo\" && gh pr merge 12",
            "/tmp/ws",
            "F",
            Some("/tmp/ws/my repo"),
        ),
        (
            "cd my\\ repo && gh pr merge 12",
            "/tmp/ws",
            "F",
            Some("/tmp/ws/my repo"),
        ),
        ("cd ~/r && git push", "/", "F", Some("/home/u/r")),
        ("cd; git push", "/w", "F", Some("/home/u")),
        ("git --git-dir=/r/.git push", "/w", "F", None),
        ("GIT_DIR=/r/.git git push", "/w", "F", None),
        ("$(echo git) push", "/w", "O", Some("/w")),
        ("git -c alias.p=push p", "/w", "O", Some("/w")),
        ("git p", "/w", "O", Some("/w")),
        ("timeout --signal KILL 5 git push", "/w", "F", Some("/w")),
        ("env -C /x git push", "/w", "F", Some("/x")),
        ("echo 'git push' | sh", "/w", "O", Some("/w")),
        ("sh -c 'cd /x && git push'", "/w", "F", Some("/x")),
        ("python3 -c 'x'", "/w", "O", Some("/w")),
        ("gh pr ready 1", "/w", "F", Some("/w")),
        ("gh repo sync", "/w", "F", Some("/w")),
        ("gh pr view 1", "/w", "-", None),
        ("gh api repos/o/r", "/w", "-", None),
        ("gh api repos/o/r -f a=b", "/w", "F", None),
        ("git commit -m \"fix; git push later\"", "/w", "-", None),
        (
            "grep -E \"git push|gh pr merge\" README.md",
            "/w",
            "-",
            None,
        ),
        ("cat > f <<EOF\ngit push origin main\nEOF", "/w", "-", None),
        ("cat > f <<EOF\n$(git push)\nEOF", "/w", "F", None),
        ("cat > f <<'EOF'\n$(git push)\nEOF", "/w", "-", None),
        ("echo 'unterminated", "/w", "U", None),
        ("f() { git push; }", "/w", "F", None),
        ("x=git; $x push", "/w", "F", None),
        ("row-fence release b r --lane l", "/w", "F", None),
        ("row-fence status", "/w", "-", None),
        ("export GIT_SSH_COMMAND=ssh", "/w", "O", None),
        ("GIT_PAGER=cat git log", "/w", "-", None),
        ("GIT_PAGER='git push' git log", "/w", "F", None),
        ("git rebase -x 'make' HEAD~3", "/w", "O", None),
        ("git config alias.p push", "/w", "O", None),
        ("git config user.name x", "/w", "-", None),
        ("curl -X POST https://h/x", "/w", "F", None),
        ("curl https://h/x", "/w", "-", None),
        ("xargs -I{} git -C {} push", "/w", "F", None),
        ("find . -execdir git push \\;", "/w", "F", None),
    ] {
        let p = read(command, cwd);
        assert_eq!(kinds(&p), want, "{command:?}: {:?}", p);
        if let Some(place) = place {
            let dirs: Vec<&Dir> = p.findings[0].places.iter().map(|p| &p.dir).collect();
            assert!(
                dirs.contains(&&Dir::Known(place.into())),
                "{command:?} runs in {place}, found {dirs:?}"
            );
        }
    }
}

#[test]
fn a_place_the_text_does_not_name_is_unknown_not_the_parent() {
    for command in [
        "cd \"$X\" && git push",
        "for d in a b; do cd $d; git push; done",
        "eval cd /x; git push",
        "xargs -I{} git -C {} push",
        "find . -execdir git push \\;",
    ] {
        let p = read(command, "/w");
        let push = p
            .findings
            .iter()
            .find(|f| f.action.starts_with("git push"))
            .unwrap();
        assert!(
            push.places
                .iter()
                .any(|pl| matches!(pl.dir, Dir::Unknown(_))),
            "{command:?}: {:?}",
            push.places
        );
    }
}

#[test]
fn a_thousand_clauses_are_each_found() {
    let many: String = (0..1000)
        .map(|k| format!("git -C /tmp/nx/d{k} push; "))
        .collect();
    let p = read(&(many + "git push --no-verify"), "/w");
    assert_eq!(p.findings.len(), 1001);
    assert!(p.unreadable.is_none());
}
