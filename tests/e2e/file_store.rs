//! One board's trouble stays on that board, and a clock cannot go back (ARCHITECTURE.md,
//! "The store's clock judges"): a board's lock held by another process stalls neither asks
//! nor other boards nor grows the daemon's threads; a judge or writer whose clock is behind
//! a time already used answers `clock_regressed`.

use crate::util::{Daemon, Home, bin, libfaketime, run, status};
use row_fence_contract::Descriptor;
use row_fence_contract::client;
use row_fence_contract::protocol::{Ask, Caller, Op, PROTOCOL_VERSION, Request};
use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The daemon's thread count, from /proc.
fn threads(pid: i32) -> usize {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

/// The reproduction: `flock -x store/board-1.lock sleep 40` and 520 asks on board-1 made an
/// ask on board-2 time out and the daemon grow from 5 to 516 threads. Reads take no lock
/// (writes are atomic renames): every ask on board-1 and board-2 is answered, the threads
/// stay few, and a writer of board-1 gives up at its own deadline while board-2 is written.
#[test]
fn a_board_lock_held_elsewhere_stalls_no_ask_no_other_board_and_no_threads() {
    let home = Home::file();
    let (_, one) = home.acquire("board-1", "r", "lane-a", &[]);
    let (_, two) = home.acquire("board-2", "r", "lane-b", &[]);
    let daemon = home.daemon();
    let lock = home.home.join("store/board-1.lock");
    // --no-fork: the lock holder is `sleep` itself, so killing it ends the hold.
    let mut holder = Command::new("flock")
        .args(["-x", "--no-fork"])
        .arg(&lock)
        .args(["sleep", "40"])
        .stdin(Stdio::null())
        .spawn()
        .expect("flock (util-linux)");
    let held = Instant::now() + Duration::from_secs(10);
    while Command::new("flock")
        .args(["-n"])
        .arg(&lock)
        .arg("true")
        .status()
        .unwrap()
        .success()
    {
        assert!(Instant::now() < held, "flock did not take the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stamp = run(home.command(bin("row-fence-ask")).arg("--print-stamp"))
        .stdout
        .trim()
        .to_string();
    let descriptor: Descriptor = serde_json::from_slice(&fs::read(&one).unwrap()).unwrap();
    let asks: Vec<_> = (0..520)
        .map(|_| {
            let (socket, stamp, descriptor) =
                (daemon.socket.clone(), stamp.clone(), descriptor.clone());
            std::thread::spawn(move || {
                let request = Request {
                    v: PROTOCOL_VERSION,
                    op: Op::Ask(Box::new(Ask {
                        stamp,
                        deadline_ms: 5000,
                        descriptor,
                        action: "git push".into(),
                        caller: Caller::default(),
                        updates: Vec::new(),
                    })),
                };
                client::exchange(&socket, &request, Instant::now() + Duration::from_secs(6))
                    .map(|a| a.verdict)
            })
        })
        .collect();
    let started = Instant::now();
    home.ask_with(&two, &[]).expect(0, "row-fence: ALLOWED");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let most = threads(daemon.pid());
    for ask in asks {
        let verdict = ask.join().unwrap().expect("an answer");
        assert_eq!(verdict.as_deref(), Some("allowed"));
    }
    assert!(most < 40, "the daemon grew to {most} threads");

    let started = Instant::now();
    let ran = home.cli(&[
        "acquire",
        "board-1",
        "r",
        "--lane",
        "lane-c",
        "--takeover",
        "--timeout",
        "2s",
    ]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("did not finish within 2s"),
        "{}",
        ran.stderr
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    home.acquire("board-2", "r", "lane-c", &["--takeover"]);
    home.ask_with(&one, &[]).expect(0, "row-fence: ALLOWED");
    let s = status(&daemon.socket);
    assert_eq!(s["asks_in_flight"], 0, "{s}");
    assert_eq!(s["store_calls_in_flight"], 0, "{s}");
    let _ = holder.kill();
    let _ = holder.wait();
}

/// Starts the daemon with its clock at `OFFSET` (libfaketime preloaded, as `faketime -f`
/// does) and waits until it answers. The preload is set on the daemon itself, not through
/// the `faketime` wrapper: the wrapper forks, so stopping the wrapper left the daemon
/// running after the test.
fn daemon_under_faketime(home: &Home, offset: &str) -> Daemon {
    let lib = libfaketime();
    let daemon = home.spawn_daemon(
        &[],
        &[
            ("LD_PRELOAD", lib.to_str().expect("a UTF-8 library path")),
            ("FAKETIME", offset),
        ],
    );
    daemon.wait_ready();
    daemon
}

/// The reproduction: a daemon started with its clock 3 hours behind answered ALLOWED for a
/// lease that had expired. The board keeps the highest time its writers saw, so that
/// judge answers `clock_regressed`, and a writer 3 hours behind is refused too.
#[test]
fn a_judge_or_writer_whose_clock_is_behind_the_board_answers_clock_regressed() {
    let home = Home::file();
    let (_, a) = home.acquire("b", "r", "lane-a", &["--ttl", "1s"]);
    std::thread::sleep(Duration::from_millis(1100));
    let _daemon = daemon_under_faketime(&home, "-3h");
    let ran = home.ask_with(&a, &[]);
    ran.expect(1, "row-fence: COULD NOT READ (clock_regressed)");
    assert!(ran.stderr.contains("fix the clock"), "{}", ran.stderr);
    let writer = run(home
        .command("faketime")
        .args(["-f", "-3h"])
        .arg(bin("row-fence"))
        .args(["acquire", "b", "r", "--lane", "lane-b", "--takeover"]));
    assert_eq!(writer.code, 1, "{}", writer.stderr);
    assert!(
        writer.stderr.contains("clock went back"),
        "{}",
        writer.stderr
    );
    let shown = home.cli(&["show", "b", "--json"]);
    assert!(
        shown.stdout.contains("lane-a"),
        "the writer wrote: {}",
        shown.stdout
    );
}

/// A writer whose clock was a day ahead left the board's highest time in the future: every
/// judge and writer with the true clock answers `clock_regressed` (never a verdict from a
/// time below one already used). An operator's `store accept-regression` accepts the clock
/// as it is now; lanes re-acquire and are judged again.
#[test]
fn a_board_written_by_a_clock_far_ahead_is_recovered_by_accepting_it() {
    let home = Home::file();
    let a = home.path("a.json");
    let ahead = run(home
        .command("faketime")
        .args(["-f", "+1d"])
        .arg(bin("row-fence"))
        .args([
            "acquire",
            "b",
            "r",
            "--lane",
            "lane-a",
            "--write-descriptor",
        ])
        .arg(&a));
    assert_eq!(ahead.code, 0, "{}", ahead.stderr);
    let _daemon = home.daemon();
    home.ask_with(&a, &[])
        .expect(1, "row-fence: COULD NOT READ (clock_regressed)");
    let write = home.cli(&["acquire", "b", "r2", "--lane", "lane-b"]);
    assert_eq!(write.code, 1, "{}", write.stderr);
    assert!(write.stderr.contains("clock went back"), "{}", write.stderr);
    let accepted = home.cli(&["store", "accept-regression", "b"]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    home.ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (not_held)");
    let (_, b) = home.acquire("b", "r", "lane-b", &[]);
    home.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");
}

/// The daemon keeps a board's parsed document while its file is unchanged, and
/// a takeover the CLI writes (another process, a rename to a new inode) is seen by the
/// very next ask, with no sleep between them.
#[test]
fn a_takeover_by_the_cli_is_seen_by_the_very_next_ask_of_a_daemon_that_kept_the_document() {
    let home = Home::file();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    // Older than the cache's margin, so the daemon keeps the document it parses.
    std::thread::sleep(row_fence_store::file_cache::FINE_MARGIN * 3);
    let _daemon = home.daemon();
    for _ in 0..3 {
        home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    }
    home.acquire("b", "r", "lane-b", &["--takeover"]);
    home.ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (different_holder)");
}

/// The cache serves a document only while its file is the very same: a file rewritten in
/// place with the same size (same inode) and its mtime set back is read again (its ctime
/// moved), and so is one rewritten in place again at once, within the same clock tick as
/// the change before (a file changed that recently is never kept).
#[test]
fn a_document_rewritten_in_place_with_the_same_size_is_never_served_stale() {
    use row_fence_store::file::FileStore;
    use row_fence_store::{AskCheck, LeaseStore};
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path().join("store"));
    let path = dir.path().join("store/b.json");
    let rt = crate::contract::runtime();
    let holder = |store: &FileStore| {
        let check = AskCheck {
            board: "b".into(),
            row: "r".into(),
            lane: "lane-a".into(),
            generation: 1,
            probe: true,
            ..Default::default()
        };
        rt.block_on(store.ask(&check))
            .unwrap()
            .lease
            .unwrap()
            .holder
    };
    let rewrite_in_place = |from: &str, to: &str| {
        let before = fs::metadata(&path).unwrap();
        let text = fs::read_to_string(&path).unwrap().replace(from, to);
        let mut file = fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file.set_modified(before.modified().unwrap()).unwrap();
        drop(file);
        let after = fs::metadata(&path).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            (after.ino(), after.len(), after.modified().unwrap()),
            (before.ino(), before.len(), before.modified().unwrap()),
            "the same inode, size and mtime"
        );
    };
    rt.block_on(row_fence_store::lease::acquire(
        &store,
        &row_fence_store::lease::Grant {
            board: "b",
            row: "r",
            lane: "lane-a",
            ttl_ms: 3_600_000,
            takeover: false,
            tenant: None,
            token: &crate::util::TEST_TOKEN,
            reissue: false,
        },
        None,
    ))
    .unwrap();
    std::thread::sleep(row_fence_store::file_cache::FINE_MARGIN * 3);
    let parsed = store.documents_parsed();
    assert_eq!(holder(&store), "lane-a");
    assert_eq!(holder(&store), "lane-a");
    assert_eq!(
        store.documents_parsed(),
        parsed + 1,
        "the second ask used the document the first one parsed"
    );
    rewrite_in_place("lane-a", "lane-b");
    assert_eq!(holder(&store), "lane-b");
    rewrite_in_place("lane-b", "lane-c");
    assert_eq!(holder(&store), "lane-c");
}
