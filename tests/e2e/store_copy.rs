//! `row-fence store copy` into etcd (ARCHITECTURE.md, "The etcd store"): a board larger
//! than one etcd transaction is written in parts bounded by operations and bytes, and made
//! usable last. A copy that fails partway (here: the cluster's `--max-request-bytes` below
//! a part) says how many records are in and how to finish or drop it; the partial board
//! answers `store_regressed` to asks and writes, never ALLOWED; the same copy run again
//! resumes it; `--drop-partial` drops one and refuses a finished board.

use crate::etcd_cluster::SingleEtcd;
use crate::util::Home;

/// A board of 130 small records and 40 of 20 KB each (about 800 KB), with lane-a's lease.
fn big_board(home: &Home, board: &str) -> std::path::PathBuf {
    let (_, a) = home.acquire(board, "row-1", "lane-a", &["--ttl", "1h"]);
    let small: Vec<serde_json::Value> = (0..130)
        .map(|i| serde_json::json!({"kind":"put","section":"a-notes","key":format!("k{i:03}"),"expected":-1,"value":{"t":"x"}}))
        .collect();
    let big: Vec<serde_json::Value> = (0..40)
        .map(|i| serde_json::json!({"kind":"put","section":"z-blobs","key":format!("b{i:03}"),"expected":-1,"value":{"t":"y".repeat(20_000)}}))
        .collect();
    for (name, writes) in [("small", small), ("big", big)] {
        let file = home.path(&format!("{board}-{name}.json"));
        std::fs::write(&file, serde_json::to_vec(&writes).unwrap()).unwrap();
        let ran = home.cli(&["batch", board, "--file", file.to_str().unwrap()]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    }
    a
}

#[test]
fn a_copy_to_etcd_that_fails_partway_is_never_served_and_resumes_or_is_dropped() {
    let limited = ["--max-request-bytes", "400000"];
    let mut etcd = SingleEtcd::start(&limited);
    let url = format!("etcd://{}", etcd.endpoint());
    let source = Home::file();
    let target = Home::with_store(url.clone());
    let a = big_board(&source, "board-1");
    let copy = |board: &str| source.cli(&["store", "copy", "--from", "file", "--to", &url, board]);

    let failed = copy("board-1");
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    assert!(
        failed
            .stderr
            .contains("125 of 171 records are in the target as a partial copy")
            && failed.stderr.contains("run the same store copy again")
            && failed.stderr.contains("--drop-partial")
            && failed.stderr.contains("--max-request-bytes"),
        "{}",
        failed.stderr
    );
    // The partial board is never served: asks and writes answer store_regressed.
    target
        .cli(&["check", "--descriptor", a.to_str().unwrap()])
        .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    let write = target.cli(&["acquire", "board-1", "row-2", "--lane", "lane-b"]);
    assert_eq!(write.code, 1, "{}", write.stderr);
    assert!(
        write.stderr.contains("went back in time"),
        "{}",
        write.stderr
    );

    // Run again where the cluster takes the parts: it resumes and finishes.
    etcd.restart_with(&[]);
    let resumed = copy("board-1");
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert!(resumed.stderr.contains("171 records"), "{}", resumed.stderr);
    target
        .cli(&["check", "--descriptor", a.to_str().unwrap()])
        .expect(0, "row-fence: ALLOWED");
    let records = target.cli(&["records", "board-1", "--json"]);
    assert_eq!(records.code, 0, "{}", records.stderr);
    let held = records.json();
    for (section, count) in [("a-notes", 130), ("z-blobs", 40), ("claims", 1)] {
        let shown = held["sections"][section].as_object().map_or(0, |s| s.len());
        assert_eq!(shown, count, "{section}: {held}");
    }
    // A second copy of a finished board is refused, and nothing drops it.
    let again = copy("board-1");
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(again.stderr.contains("already holds"), "{}", again.stderr);
    let refused = source.cli(&["store", "copy", "--drop-partial", "--to", &url, "board-1"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("not a partial copy"),
        "{}",
        refused.stderr
    );

    // Another partial copy, dropped: the board is gone, and a copy starts afresh.
    let b = big_board(&source, "board-2");
    etcd.restart_with(&limited);
    assert_eq!(copy("board-2").code, 1);
    let dropped = source.cli(&["store", "copy", "--drop-partial", "--to", &url, "board-2"]);
    assert_eq!(dropped.code, 0, "{}", dropped.stderr);
    assert!(dropped.stderr.contains("dropped"), "{}", dropped.stderr);
    let gone = target.cli(&["records", "board-2"]);
    assert!(gone.stderr.contains("no board named board-2"), "{gone:?}");
    etcd.restart_with(&[]);
    let fresh = copy("board-2");
    assert_eq!(fresh.code, 0, "{}", fresh.stderr);
    target
        .cli(&["check", "--descriptor", b.to_str().unwrap()])
        .expect(0, "row-fence: ALLOWED");
}
