//! A write that reports failure wrote nothing; a write that committed reports success
//! (ARCHITECTURE.md, "A failed write wrote nothing"). On Redis every check that can fail
//! runs before a script's first write; on the file store the rename is the commit point and
//! the log is brought up to the document; no binary dies on a closed or full stdout or
//! stderr; a raw batch's claims are checked like `acquire`'s.

use crate::contract::runtime;
use crate::util::{Home, Ran, Redis, bin, run};
use row_fence_store::lease::{self, Grant};
use row_fence_store::redis::RedisStore;
use std::fs;
use std::process::Stdio;
use std::time::Duration;

/// What a board's writes leave on Redis: the claim, the revision and the log's length.
fn board_state(redis: &Redis) -> (String, String, String) {
    (
        redis.cli(&["HGET", "rowfence:board:{b}:fence:claims", "r"]),
        redis.cli(&["GET", "rowfence:board:{b}:fence:revision"]),
        redis.cli(&["XLEN", "rowfence:board:{b}:fence:log"]),
    )
}

/// Every write a lane or a controller makes, as the CLI spells it.
fn writes(home: &Home, generation: u64, held: &std::path::Path) -> Vec<Ran> {
    let batch = home.path("batch.json");
    fs::write(
        &batch,
        r#"[{"kind":"put","section":"notes","key":"k","expected":-1,"value":1}]"#,
    )
    .unwrap();
    let generation = generation.to_string();
    let held = held.display().to_string();
    [
        vec!["acquire", "b", "r", "--lane", "lane-b", "--takeover"],
        vec!["batch", "b", "--file", batch.to_str().unwrap()],
        vec![
            "renew",
            "b",
            "r",
            "--lane",
            "lane-a",
            "--generation",
            &generation,
            "--descriptor",
            &held,
        ],
        vec![
            "release",
            "b",
            "r",
            "--lane",
            "lane-a",
            "--generation",
            &generation,
            "--descriptor",
            &held,
        ],
        vec!["controller", "acquire", "b", "--owner", "c1"],
    ]
    .iter()
    .map(|args| home.cli(args))
    .collect()
}

/// The reproductions: the board's log stream at its last possible ID, a store user
/// without `@stream`, and keys of the wrong type. Each write exits 1 naming what the
/// store refused (never "the store is unreachable"), and the claim, the revision and the
/// log are exactly as before.
#[test]
fn a_write_the_store_refuses_writes_nothing_and_names_why() {
    let redis = Redis::start();
    redis.cli(&[
        "ACL", "SETUSER", "nostream", "on", ">pw", "~*", "+@all", "-@stream",
    ]);
    let home = Home::on(Some(&redis));
    let (generation, held) = home.acquire("b", "r", "lane-a", &[]);
    let before = board_state(&redis);
    type Setup = fn(&Redis);
    let faults: [(&str, Setup, Setup, Option<&str>, &str); 5] = [
        (
            "a log stream at its last possible ID",
            |r| {
                r.cli(&[
                    "XADD",
                    "rowfence:board:{b}:fence:log",
                    "18446744073709551615-18446744073709551615",
                    "x",
                    "y",
                ]);
            },
            |r| {
                r.cli(&["DEL", "rowfence:board:{b}:fence:log"]);
            },
            None,
            "used its last possible ID",
        ),
        (
            "a user without @stream, its permissions probed at connect",
            |_| {},
            |_| {},
            Some("?user=nostream&pass=pw"),
            "may not run XADD",
        ),
        (
            "a user without @stream, checked by the script itself",
            |_| {},
            |_| {},
            Some("?user=nostream&pass=pw&durability=volatile"),
            "NOPERM",
        ),
        (
            "a sections key that is not a set",
            |r| {
                r.cli(&["SET", "rowfence:board:{b}:fence:sections", "x"]);
            },
            |r| {
                r.cli(&["DEL", "rowfence:board:{b}:fence:sections"]);
                r.cli(&[
                    "SADD",
                    "rowfence:board:{b}:fence:sections",
                    "claims",
                    "meta",
                ]);
            },
            None,
            "is a string, not a set",
        ),
        (
            "a revision counter that is not a number",
            |r| {
                r.cli(&["SET", "rowfence:board:{b}:fence:revision", "seven"]);
            },
            |r| {
                r.cli(&["SET", "rowfence:board:{b}:fence:revision", "1"]);
            },
            None,
            "revision",
        ),
    ];
    for (fault, set, undo, user, says) in faults {
        set(&redis);
        let mut faulty = Home::with_store(format!("{}{}", redis.url(), user.unwrap_or("")));
        faulty.home = home.home.clone();
        let mid = board_state(&redis);
        for ran in writes(&faulty, generation, &held) {
            assert_eq!(ran.code, 1, "{fault}: {}", ran.stderr);
            assert!(ran.stderr.contains(says), "{fault}: {}", ran.stderr);
            assert!(
                !ran.stderr.contains("unreachable"),
                "{fault}: {}",
                ran.stderr
            );
            assert_eq!(board_state(&redis), mid, "{fault}: something was written");
        }
        undo(&redis);
        assert_eq!(
            redis.cli(&["HGET", "rowfence:board:{b}:fence:claims", "r"]),
            before.0,
            "{fault}: the claim changed"
        );
    }
    // The store as it was answers again.
    let ran = home.cli(&["acquire", "b", "r", "--lane", "lane-b", "--takeover"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
}

/// A document-layout board on Redis whose history list is not a list: the
/// compare-and-set refuses before it writes the document.
#[test]
fn a_document_write_whose_history_key_is_wrong_writes_nothing() {
    let redis = Redis::start();
    let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
    runtime().block_on(async {
        let grant = Grant {
            board: "b",
            row: "r",
            lane: "lane-a",
            ttl_ms: 3_600_000,
            takeover: false,
            tenant: None,
            token: &crate::util::TEST_TOKEN,
            reissue: false,
        };
        lease::acquire(store.document(), &grant, None)
            .await
            .unwrap();
        let document = redis.cli(&["HGET", "rowfence:state:fencing:current", "b"]);
        redis.cli(&["SET", "rowfence:state:fencing:history:b", "x"]);
        let takeover = Grant {
            lane: "lane-b",
            takeover: true,
            ..grant
        };
        let err = lease::acquire(store.document(), &takeover, None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not a list"), "{err}");
        assert_eq!(
            redis.cli(&["HGET", "rowfence:state:fencing:current", "b"]),
            document,
            "the document was written"
        );
    });
}

/// The reproduction on the file store: the log replaced by a directory, then symlinked to
/// `/dev/full`. The takeover committed (the rename), so it exits 0 with its descriptor
/// and is what the fence judges; the log's entries wait in the document and, once the log
/// can be written, it holds exactly one entry per committed revision.
#[test]
fn a_log_that_cannot_be_written_never_fails_a_committed_write_and_catches_up() {
    let home = Home::file();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let log = home.home.join("store/b.log.jsonl");
    let _daemon = home.daemon();
    fs::remove_file(&log).unwrap();
    fs::create_dir(&log).unwrap();
    let (_, b) = home.acquire("b", "r", "lane-b", &["--takeover"]);
    home.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");
    home.ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (different_holder)");
    let shown = home.cli(&["log", "b"]);
    assert_eq!(shown.code, 1);
    assert!(
        shown.stderr.contains("keeps the newest"),
        "{}",
        shown.stderr
    );

    fs::remove_dir(&log).unwrap();
    std::os::unix::fs::symlink("/dev/full", &log).unwrap();
    let (g3, c) = home.acquire("b", "r", "lane-c", &["--takeover"]);
    home.ask_with(&c, &[]).expect(0, "row-fence: ALLOWED");

    fs::remove_file(&log).unwrap();
    let renewed = home.cli(&[
        "renew",
        "b",
        "r",
        "--lane",
        "lane-c",
        "--generation",
        &g3.to_string(),
        "--descriptor",
        c.to_str().unwrap(),
    ]);
    assert_eq!(renewed.code, 0, "{}", renewed.stderr);
    assert_eq!(log_revisions(&home), (1..=4).collect::<Vec<u64>>());
}

/// The revisions in `row-fence log b --json`, oldest first.
fn log_revisions(home: &Home) -> Vec<u64> {
    let shown = home.cli(&["log", "b", "--count", "1000", "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let entries: Vec<serde_json::Value> = serde_json::from_str(shown.stdout.trim()).unwrap();
    let mut revisions: Vec<u64> = entries
        .iter()
        .map(|e| e["revision"].as_u64().unwrap())
        .collect();
    revisions.reverse();
    revisions
}

/// Writers killed with SIGKILL at random points, many at once: afterwards the log holds
/// exactly one entry per committed revision, a torn last line is skipped (and cut by the
/// next writer), and the temp files the killed writers left are gone after the next write.
#[test]
fn kill_9_storms_leave_exactly_one_log_entry_per_committed_revision() {
    let home = Home::file();
    home.acquire("b", "r", "lane-a", &[]);
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..20 {
        let mut children: Vec<_> = (0..8)
            .map(|i| {
                home.command(bin("row-fence"))
                    .args(["acquire", "b", &format!("row-{}", (round + i) % 5)])
                    .args(["--lane", &format!("lane-{i}"), "--takeover"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::thread::sleep(Duration::from_millis(next() % 25));
        for child in children.iter_mut() {
            if next() % 2 == 0 {
                let _ = child.kill();
            }
        }
        for child in children.iter_mut() {
            let _ = child.wait();
        }
    }
    let log = home.home.join("store/b.log.jsonl");
    let mut file = fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut file, b"{\"revision\":99999,\"own").unwrap();
    let records = home.cli(&["records", "b", "--json"]);
    let revision =
        serde_json::from_str::<serde_json::Value>(records.stdout.trim()).unwrap()["revision"]
            .as_u64()
            .unwrap();
    assert_eq!(
        log_revisions(&home),
        (1..=revision).collect::<Vec<u64>>(),
        "torn last line skipped"
    );
    home.acquire("b", "r", "lane-z", &["--takeover"]);
    assert_eq!(
        log_revisions(&home),
        (1..=revision + 1).collect::<Vec<u64>>()
    );
    let text = fs::read_to_string(&log).unwrap();
    assert!(!text.contains("99999"), "the torn line was cut");
    let leftovers: Vec<String> = fs::read_dir(home.home.join("store"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".b."))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

/// A store directory that cannot be written (its lock file cannot even be opened) is
/// still read: asks are judged and leases shown; a write fails saying why, writing nothing.
#[test]
fn a_store_directory_that_cannot_be_written_can_still_be_read() {
    let home = Home::file();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let store = home.home.join("store");
    fs::remove_file(store.join("b.lock")).unwrap();
    fs::create_dir(store.join("b.lock")).unwrap();
    let mode = |m| fs::set_permissions(&store, std::os::unix::fs::PermissionsExt::from_mode(m));
    mode(0o500).unwrap();
    let _daemon = home.daemon();
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let shown = home.cli(&["show", "b"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.stdout.contains("lane-a"));
    let before = fs::read(store.join("b.json")).unwrap();
    let ran = home.cli(&["acquire", "b", "r", "--lane", "lane-b", "--takeover"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(ran.stderr.contains("b.lock"), "{}", ran.stderr);
    assert_eq!(fs::read(store.join("b.json")).unwrap(), before);
    mode(0o700).unwrap();
}

/// The reproduction: `row-fence acquire … 2>&1 | head -1` exited 101 after the grant
/// committed, with the descriptor unwritten. Now a closed pipe or a full device on stdout
/// and stderr changes nothing: the descriptor is written, the exit code is the write's,
/// and no binary panics.
#[test]
fn a_closed_or_full_stdout_or_stderr_never_panics_and_never_loses_a_grant() {
    let home = Home::file();
    let full = || {
        fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    for (i, closed) in [true, false].into_iter().enumerate() {
        let descriptor = home.path(&format!("d{i}.json"));
        let mut cmd = home.command(bin("row-fence"));
        cmd.args([
            "acquire",
            "b",
            &format!("r{i}"),
            "--lane",
            "lane-a",
            "--json",
        ])
        .arg("--write-descriptor")
        .arg(&descriptor);
        let status = if closed {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            cmd.stdout(writer.try_clone().unwrap())
                .stderr(writer)
                .status()
        } else {
            cmd.stdout(full()).stderr(full()).status()
        }
        .unwrap();
        assert_eq!(status.code(), Some(0), "closed: {closed}");
        assert!(descriptor.exists(), "closed: {closed}: no descriptor");
    }
    let shown = home.cli(&["show", "b", "--json"]);
    assert_eq!(
        serde_json::from_str::<Vec<serde_json::Value>>(shown.stdout.trim())
            .unwrap()
            .len(),
        2
    );
    let programs: [(&str, &[&str]); 6] = [
        ("row-fence", &["--help"]),
        ("row-fence", &["status"]),
        ("row-fence", &["health"]),
        ("row-fence-resident", &["--help"]),
        ("row-fence-resident", &["--print-stamp"]),
        ("row-fence-ask", &["--version"]),
    ];
    for (program, args) in programs {
        for closed in [true, false] {
            let mut cmd = home.command(bin(program));
            cmd.args(args).stdin(Stdio::null());
            let status = if closed {
                let (reader, writer) = std::io::pipe().unwrap();
                drop(reader);
                cmd.stdout(writer.try_clone().unwrap())
                    .stderr(writer)
                    .status()
            } else {
                cmd.stdout(full()).stderr(full()).status()
            }
            .unwrap();
            assert_ne!(status.code(), Some(101), "{program} {args:?} panicked");
            assert!(
                status.code().is_some(),
                "{program} {args:?} died of a signal"
            );
        }
    }
}

/// `row-fence batch` checks a claim as `acquire` would write it: an expiry of -1, null, a
/// string or beyond the 366-day cap, a holder that is not a lane, an unknown field: each
/// exits 2 and writes nothing.
#[test]
fn a_batch_claim_acquire_could_not_have_written_is_refused() {
    let home = Home::file();
    home.acquire("b", "other", "lane-a", &[]);
    let far = row_fence_contract::ledger::now_ms() + 367 * 24 * 3600 * 1000;
    let bad = [
        r#"{"holder":"lane-a","generation":1,"expires_at_ms":-1}"#.to_string(),
        r#"{"holder":"lane-a","generation":1,"expires_at_ms":null}"#.to_string(),
        r#"{"holder":"lane-a","generation":1,"expires_at_ms":"soon"}"#.to_string(),
        format!(r#"{{"holder":"lane-a","generation":1,"expires_at_ms":{far}}}"#),
        r#"{"holder":"","generation":1,"expires_at_ms":1}"#.to_string(),
        r#"{"holder":"lane-a","generation":1,"expires_at_ms":1,"admin":true}"#.to_string(),
        r#"{"generation":1,"expires_at_ms":1}"#.to_string(),
    ];
    let file = home.path("batch.json");
    let before = fs::read(home.home.join("store/b.json")).unwrap();
    for value in bad {
        fs::write(
            &file,
            format!(
                r#"[{{"kind":"put","section":"claims","key":"r","expected":0,"value":{value}}}]"#
            ),
        )
        .unwrap();
        let ran = run(home.command(bin("row-fence")).args([
            "batch",
            "b",
            "--file",
            file.to_str().unwrap(),
        ]));
        assert_eq!(ran.code, 2, "{value}: {}", ran.stderr);
        assert_eq!(fs::read(home.home.join("store/b.json")).unwrap(), before);
    }
}

/// A raw batch's lease gets the generation a grant at its revision would: one at a
/// generation already handed out (the row's current holder's, or any below the board's
/// revision) exits 2 and writes nothing, so no reissue can arm a generation twice; one at
/// the revision the batch commits at is written, at exactly that revision.
#[test]
fn a_batch_claim_at_a_generation_already_handed_out_is_refused() {
    let home = Home::file();
    home.acquire("b", "r", "lane-a", &[]);
    let (g2, _) = home.acquire("b", "r", "lane-b", &["--takeover"]);
    let file = home.path("batch.json");
    let expires = row_fence_contract::ledger::now_ms() + 3_600_000;
    let claim = |generation: u64| {
        format!(
            r#"[{{"kind":"put","section":"claims","key":"r","expected":-1,"value":{{"holder":"lane-x","generation":{generation},"expires_at_ms":{expires}}}}}]"#
        )
    };
    let before = fs::read(home.home.join("store/b.json")).unwrap();
    for generation in [g2, 1, g2 + 2] {
        fs::write(&file, claim(generation)).unwrap();
        let ran = home.cli(&["batch", "b", "--file", file.to_str().unwrap()]);
        assert_eq!(ran.code, 2, "generation {generation}: {}", ran.stderr);
        assert!(
            ran.stderr
                .contains("is not the revision this batch commits at"),
            "{}",
            ran.stderr
        );
        assert_eq!(fs::read(home.home.join("store/b.json")).unwrap(), before);
    }
    fs::write(&file, claim(g2 + 1)).unwrap();
    let ran = home.cli(&["batch", "b", "--file", file.to_str().unwrap()]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.stdout.trim(), (g2 + 1).to_string());
    let (armed, x) = home.acquire("b", "r", "lane-x", &["--reissue"]);
    assert_eq!(armed, g2 + 1);
    home.cli(&["check", "--descriptor", x.to_str().unwrap()])
        .expect(0, "row-fence: ALLOWED");
}
