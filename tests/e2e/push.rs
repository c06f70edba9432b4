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
