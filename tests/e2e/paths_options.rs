//! Paths are absolute (ARCHITECTURE.md, "Invariants"): a relative `ROW_FENCE_HOME` or
//! `--home` is refused by every program (else each directory gets its own home and store,
//! and two worktrees are both granted the row); a leading `~/` is expanded, as git does.

use crate::util::{Home, bin, run};

#[test]
fn a_relative_home_is_refused_and_a_leading_tilde_is_expanded() {
    let home = Home::file();
    let worktree = home.path("wt");
    std::fs::create_dir(&worktree).unwrap();
    let relative = run(home
        .command(bin("row-fence"))
        .current_dir(&worktree)
        .env("ROW_FENCE_HOME", ".rf")
        .args(["acquire", "board-1", "row-1", "--lane", "lane-a"]));
    assert_eq!(relative.code, 2, "{}", relative.stderr);
    assert!(relative.stderr.contains("relative"), "{}", relative.stderr);
    assert!(!worktree.join(".rf").exists(), "nothing was made");
    let flag = run(home
        .command(bin("row-fence"))
        .current_dir(&worktree)
        .args(["--home", "rf", "show", "board-1"]));
    assert_eq!(flag.code, 2, "{}", flag.stderr);
    // The asker never answers ALLOWED or UNFENCED for a home it cannot place.
    let asked = run(home
        .command(bin("row-fence-ask"))
        .current_dir(&worktree)
        .env("ROW_FENCE_HOME", ".rf")
        .args(["--descriptor", "/nonexistent/d.json"]));
    assert_ne!(asked.code, 0, "{}", asked.stderr);
    assert!(!worktree.join(".rf").exists(), "the asker made nothing");
    // `~/rf` (quoted, so no shell expanded it) is $HOME/rf.
    let tilde = run(home.command(bin("row-fence")).current_dir(&worktree).args([
        "--home", "~/rf", "acquire", "board-1", "row-1", "--lane", "lane-a",
    ]));
    assert_eq!(tilde.code, 0, "{}", tilde.stderr);
    assert!(
        home.path("rf/store").exists(),
        "the store is under $HOME/rf"
    );
}

/// A store URL that cannot be read is a usage error (exit 2) whatever is wrong with it: an
/// unknown scheme, a port that is not a number, a bad option value, and a typo'd option
/// name, which is never silently ignored (`min_replica=1` would grant without replicas).
#[test]
fn every_store_url_mistake_exits_2_and_an_unknown_option_is_named() {
    let home = Home::file();
    for (url, says) in [
        ("redsi://localhost:6379", "is not one of"),
        ("redis://localhost:abc", "port"),
        (
            "redis://localhost:6379?durability=maybe",
            "volatile or durable",
        ),
        (
            "redis+unix:///tmp/r.sock?min_replica=1",
            "unknown store URL option \"min_replica\"",
        ),
        (
            "redis://localhost:6379?durabilty=volatile",
            "min_replicas, replicas",
        ),
    ] {
        let ran = run(home
            .command(bin("row-fence"))
            .env("ROW_FENCE_STORE", url)
            .args(["acquire", "board-1", "row-1", "--lane", "lane-a"]));
        assert_eq!(ran.code, 2, "{url}: {}", ran.stderr);
        assert!(ran.stderr.contains(says), "{url}: {}", ran.stderr);
    }
}
