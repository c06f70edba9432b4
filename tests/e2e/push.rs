//! A real `git push` through the pre-push hook, on both stores: each case asserts the
//! remote ref, not only the exit code.

use crate::util::{Home, Redis, Repo};

on_both_stores!(
    a_held_row_pushes_and_the_remote_ref_moves,
    a_push_after_a_takeover_is_refused_and_the_remote_ref_stays,
    a_push_after_expiry_is_refused_and_the_remote_ref_stays,
    a_push_with_the_daemon_stopped_is_could_not_read_and_the_remote_ref_stays,
    a_clone_without_a_descriptor_pushes_unfenced,
);

fn bound(redis: Option<&Redis>, ttl: &str) -> (Home, Repo) {
    let home = Home::on(redis);
    let repo = Repo::new(&home, "lane-a");
    let descriptor = repo.descriptor().display().to_string();
    let ran = home.cli(&[
        "acquire",
        "board-1",
        "row-1",
        "--lane",
        "lane-a",
        "--ttl",
        ttl,
        "--write-descriptor",
        &descriptor,
    ]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    (home, repo)
}

fn a_held_row_pushes_and_the_remote_ref_moves(redis: Option<&Redis>) {
    let (home, repo) = bound(redis, "2h");
    let _daemon = home.daemon();
    let push = repo.commit_and_push(&home, "one");
    assert_eq!(push.code, 0, "{}", push.stderr);
    assert!(
        push.stderr.contains("row-fence: ALLOWED"),
        "{}",
        push.stderr
    );
    assert_eq!(repo.remote_head(&home), repo.local_head(&home));
}

fn a_push_after_a_takeover_is_refused_and_the_remote_ref_stays(redis: Option<&Redis>) {
    let (home, repo) = bound(redis, "2h");
    let _daemon = home.daemon();
    assert_eq!(repo.commit_and_push(&home, "one").code, 0);
    let before = repo.remote_head(&home);
    home.acquire("board-1", "row-1", "lane-b", &["--takeover"]);
    let push = repo.commit_and_push(&home, "two");
    assert_ne!(push.code, 0);
    assert!(
        push.stderr
            .contains("row-fence: REFUSED (different_holder)"),
        "{}",
        push.stderr
    );
    assert_eq!(repo.remote_head(&home), before);
    assert_ne!(repo.local_head(&home), before);
}

fn a_push_after_expiry_is_refused_and_the_remote_ref_stays(redis: Option<&Redis>) {
    let (home, repo) = bound(redis, "1s");
    let _daemon = home.daemon();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let push = repo.commit_and_push(&home, "late");
    assert_ne!(push.code, 0);
    assert!(
        push.stderr.contains("row-fence: REFUSED (lease_expired)"),
        "{}",
        push.stderr
    );
    assert_eq!(repo.remote_head(&home), "");
}

fn a_push_with_the_daemon_stopped_is_could_not_read_and_the_remote_ref_stays(
    redis: Option<&Redis>,
) {
    let (home, repo) = bound(redis, "2h");
    let mut daemon = home.daemon();
    assert_eq!(repo.commit_and_push(&home, "one").code, 0);
    let before = repo.remote_head(&home);
    assert_eq!(daemon.stop(), Some(0));
    let push = repo.commit_and_push(&home, "two");
    assert_ne!(push.code, 0);
    assert!(
        push.stderr
            .contains("row-fence: COULD NOT READ (fence_unreadable)"),
        "{}",
        push.stderr
    );
    assert_eq!(repo.remote_head(&home), before);
}

fn a_clone_without_a_descriptor_pushes_unfenced(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let repo = Repo::new(&home, "unbound");
    // No daemon at all: an unbound lane never needs one.
    let push = repo.commit_and_push(&home, "free");
    assert_eq!(push.code, 0, "{}", push.stderr);
    assert!(
        push.stderr.contains("row-fence: UNFENCED"),
        "{}",
        push.stderr
    );
    assert!(
        !push.stderr.contains("row-fence: asking"),
        "{}",
        push.stderr
    );
    assert_eq!(repo.remote_head(&home), repo.local_head(&home));
}

#[test]
fn a_push_naming_the_git_dir_from_outside_the_worktree_is_still_fenced() {
    let (home, repo) = bound(None, "2h");
    let _daemon = home.daemon();
    assert_eq!(repo.commit_and_push(&home, "one").code, 0);
    let before = repo.remote_head(&home);
    home.acquire("board-1", "row-1", "lane-b", &["--takeover"]);
    std::fs::write(repo.clone.join("file.txt"), "two").unwrap();
    crate::util::git(&home, &repo.clone, &["commit", "-qam", "two"]);
    let git_dir = repo.clone.join(".git");
    let elsewhere = home.path("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let flag = format!("--git-dir={}", git_dir.display());
    for push in [
        crate::util::run(
            home.command("git")
                .current_dir(&elsewhere)
                .env("ROW_FENCE_BIN_DIR", crate::util::bin_dir())
                .args([flag.as_str(), "push", "-q", "origin", "main"]),
        ),
        crate::util::run(
            home.command("git")
                .current_dir(&elsewhere)
                .env("ROW_FENCE_BIN_DIR", crate::util::bin_dir())
                .env("GIT_DIR", &git_dir)
                .args(["push", "-q", "origin", "main"]),
        ),
    ] {
        assert_ne!(push.code, 0);
        assert!(
            push.stderr
                .contains("row-fence: REFUSED (different_holder)"),
            "{}",
            push.stderr
        );
        assert_eq!(repo.remote_head(&home), before);
    }
}

/// The pre-push hook hands the daemon the refs git pushes, judged against the row's
/// scope with the lease: the row's own branch lands; another branch, a force over the
/// row's branch, a tag and a delete are each refused `outside_scope` and the remote keeps
/// what it had; a push of several refs with one outside lands none of them (git runs the
/// hook once for the whole push).
#[test]
fn the_pre_push_hook_refuses_refs_outside_the_rows_scope() {
    let (home, repo) = bound(None, "2h");
    let registry = row_fence_contract::paths::registry(&home.home);
    std::fs::create_dir_all(&registry).expect("registry");
    std::fs::write(
        registry.join("boards.toml"),
        "[boards.board-1.scope]\nrefs = [\"refs/heads/main\", \"refs/heads/feature/{row}\"]\n",
    )
    .expect("boards.toml");
    let _daemon = home.daemon();
    let push = |args: &[&str]| {
        crate::util::run(
            home.command("git")
                .current_dir(&repo.clone)
                .env("ROW_FENCE_BIN_DIR", crate::util::bin_dir())
                .arg("push")
                .args(args),
        )
    };
    let remote_ref = |name: &str| {
        crate::util::run(
            home.command("git")
                .arg("--git-dir")
                .arg(&repo.remote)
                .args(["rev-parse", "--verify", "-q", name]),
        )
        .stdout
        .trim()
        .to_string()
    };
    let landed = repo.commit_and_push(&home, "one");
    assert_eq!(landed.code, 0, "{}", landed.stderr);
    let ok = push(&["-q", "origin", "main:refs/heads/feature/row-1"]);
    assert_eq!(ok.code, 0, "the row's own branch: {}", ok.stderr);
    let main = repo.remote_head(&home);

    crate::util::git(
        &home,
        &repo.clone,
        &["commit", "-q", "--allow-empty", "-m", "two"],
    );
    crate::util::git(&home, &repo.clone, &["tag", "v1"]);
    let root = crate::util::git(
        &home,
        &repo.clone,
        &["commit-tree", "HEAD^{tree}", "-m", "root"],
    );
    let rewrite = format!("{}:refs/heads/feature/row-1", root.trim());
    let outside: [(&[&str], &str); 5] = [
        (
            &["origin", "main:refs/heads/other"],
            "refs/heads/other is outside the row's refs",
        ),
        (
            &["origin", "main", "main:refs/heads/other"],
            "refs/heads/other is outside the row's refs",
        ),
        (&["--force", "origin", &rewrite], "non-fast-forward"),
        (&["origin", "v1"], "refs/tags/v1"),
        (
            &["origin", ":refs/heads/feature/row-1"],
            "deletes are not allowed",
        ),
    ];
    for (args, says) in outside {
        let ran = push(args);
        assert_ne!(ran.code, 0, "{args:?} landed: {}", ran.stderr);
        assert!(
            ran.stderr.contains("row-fence: REFUSED (outside_scope)") && ran.stderr.contains(says),
            "{args:?}: {}",
            ran.stderr
        );
        assert_eq!(repo.remote_head(&home), main, "{args:?} moved main");
        assert_eq!(remote_ref("refs/heads/other"), "", "{args:?}");
        assert_eq!(remote_ref("refs/tags/v1"), "", "{args:?}");
        assert_eq!(remote_ref("refs/heads/feature/row-1"), main, "{args:?}");
    }
    let ff = push(&["-q", "origin", "main"]);
    assert_eq!(ff.code, 0, "a fast-forward of main: {}", ff.stderr);
    assert_eq!(repo.remote_head(&home), repo.local_head(&home));
}
