//! Descriptor resolution and the cases the asker decides itself, without a daemon.

use crate::util::{Home, Repo, git, run};
use row_fence_contract::ledger::DecidedBy;
use row_fence_contract::{Reason, Verdict};
use std::fs;
use std::time::Duration;

fn unreadable(home: &Home, path: &std::path::Path) {
    let ran = home.ask_with(path, &[]);
    ran.expect(1, "row-fence: COULD NOT READ (descriptor_unreadable)");
    assert!(
        !ran.stderr.contains("row-fence: asking"),
        "decided without the daemon: {}",
        ran.stderr
    );
}

#[test]
fn malformed_descriptors_are_descriptor_unreadable() {
    let home = Home::file();
    let cases: &[(&str, &[u8])] = &[
        ("truncated", br#"{"board":"b","row":"r","lane":"l","genera"#),
        ("empty", b""),
        (
            "missing-generation",
            br#"{"board":"b","row":"r","lane":"l"}"#,
        ),
        (
            "string-generation",
            br#"{"board":"b","row":"r","lane":"l","generation":"10"}"#,
        ),
        (
            "bad-board",
            br#"{"board":"B A D","row":"r","lane":"l","generation":1}"#,
        ),
    ];
    for (name, body) in cases {
        let path = home.path(name);
        fs::write(&path, body).unwrap();
        unreadable(&home, &path);
    }
    let big = home.path("big");
    let mut body = br#"{"board":"b","row":"r","lane":"l","generation":1,"pad":""#.to_vec();
    body.resize(70 * 1024, b'x');
    body.extend_from_slice(b"\"}");
    fs::write(&big, body).unwrap();
    unreadable(&home, &big);
    let dir = home.path("a-directory");
    fs::create_dir(&dir).unwrap();
    unreadable(&home, &dir);
}

#[test]
fn a_fifo_descriptor_is_unreadable_and_never_blocks() {
    let home = Home::file();
    let fifo = home.path("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let ran = home.ask_with(&fifo, &["--timeout-ms", "3000"]);
    ran.expect(1, "row-fence: COULD NOT READ (descriptor_unreadable)");
    assert!(
        ran.elapsed < Duration::from_secs(2),
        "took {:?}",
        ran.elapsed
    );
}

#[test]
fn an_explicit_descriptor_that_does_not_exist_is_descriptor_missing() {
    let home = Home::file();
    let missing = home.path("nope.json");
    home.ask_with(&missing, &[])
        .expect(1, "row-fence: COULD NOT READ (descriptor_missing)");
    let ran = run(home
        .command(crate::util::bin("row-fence-ask"))
        .env("ROW_FENCE_DESCRIPTOR", &missing));
    ran.expect(1, "row-fence: COULD NOT READ (descriptor_missing)");
    let ledger = row_fence_contract::ledger::read(&home.home.join("refusals.jsonl")).unwrap();
    assert_eq!(ledger.len(), 2);
    assert!(ledger.iter().all(
        |r| r.verdict == Verdict::CouldNotRead(Reason::DescriptorMissing)
            && r.decided_by == DecidedBy::Asker
    ));
}

#[test]
fn outside_any_worktree_the_lane_is_unfenced() {
    let home = Home::file();
    let ran = run(home
        .command(crate::util::bin("row-fence-ask"))
        .current_dir(home.dir.path()));
    ran.expect(0, "row-fence: UNFENCED");
    assert!(!ran.stderr.contains("asking"));
}

#[test]
fn a_linked_worktree_reads_its_own_descriptor() {
    let home = Home::file();
    let repo = Repo::new(&home, "wt");
    std::fs::write(repo.clone.join("f"), "x").unwrap();
    git(&home, &repo.clone, &["add", "f"]);
    git(&home, &repo.clone, &["commit", "-q", "-m", "x"]);
    let linked = home.path("linked");
    git(
        &home,
        &repo.clone,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            linked.to_str().unwrap(),
        ],
    );
    let sub = linked.join("deep/er");
    fs::create_dir_all(&sub).unwrap();
    let ask_in = |dir: &std::path::Path| {
        run(home
            .command(crate::util::bin("row-fence-ask"))
            .current_dir(dir))
    };
    // Unbound: neither worktree has a descriptor.
    ask_in(&sub).expect(0, "row-fence: UNFENCED");
    // A descriptor in the main worktree's git dir does not bind the linked one…
    fs::write(
        repo.descriptor(),
        r#"{"board":"b","row":"r","lane":"l","generation":1}"#,
    )
    .unwrap();
    ask_in(&sub).expect(0, "row-fence: UNFENCED");
    // …but one in the linked worktree's own git dir does (no daemon: COULD NOT READ).
    let git_dir = git(&home, &linked, &["rev-parse", "--absolute-git-dir"]);
    fs::write(
        std::path::Path::new(git_dir.trim()).join("row-fence.json"),
        "{broken",
    )
    .unwrap();
    ask_in(&sub).expect(1, "row-fence: COULD NOT READ (descriptor_unreadable)");
    ask_in(&repo.clone).expect(1, "row-fence: COULD NOT READ (fence_unreadable)");
}
