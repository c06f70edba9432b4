//! Acknowledged means durable (ARCHITECTURE.md, "Acknowledged means durable"), on real
//! servers: a grant waits for the replicas it must reach, a replica never answers, the
//! store's settings are checked, and a store that went back in time (a stale AOF, an
//! eviction) answers `store_regressed` until an operator accepts it.

use crate::contract::runtime;
use crate::util::{Home, Ran, Redis, status, until};
use nix::sys::signal::Signal;
use row_fence_store::redis::RedisStore;
use row_fence_store::{AskCheck, LeaseStore, StoreError};
use std::time::Duration;

/// A primary that refuses to write without a replica, and its replica, in sync and with
/// its own AOF rewritten after the sync (so what it replicates from now on is on its disk).
fn primary_and_replica() -> (Redis, Redis) {
    let primary = Redis::start_tcp(&["--min-replicas-to-write", "1"]);
    let replica = Redis::start_replica_of(&primary, &[]);
    primary.wait_for(Duration::from_secs(30), "an online replica", |p| {
        p.cli(&["INFO", "replication"]).contains("state=online")
    });
    replica.wait_for(Duration::from_secs(30), "its AOF rewritten", |r| {
        let info = r.cli(&["INFO", "persistence"]);
        [
            "loading:0",
            "aof_enabled:1",
            "aof_rewrite_in_progress:0",
            "aof_rewrite_scheduled:0",
        ]
        .iter()
        .all(|line| info.contains(line))
    });
    (primary, replica)
}

/// The reproduction: lane-a holds the row; the replication link freezes; lane-b takes the
/// row over through the primary; the primary dies and the replica is promoted. The
/// takeover reached no replica, so it was never handed out (exit 1, no descriptor): on the
/// promoted replica lane-a is the only lane that holds a descriptor, and the generation
/// the next takeover gets was never handed out before.
#[test]
fn a_takeover_no_replica_acknowledged_is_not_handed_out_and_survives_no_failover() {
    let (mut primary, mut replica) = primary_and_replica();
    let mut home = Home::with_store(primary.tcp_url());
    let (g1, a) = home.acquire("b", "r", "lane-a", &[]);
    replica.signal(Signal::SIGSTOP);
    let b = home.path("lane-b.json");
    let ran = home.cli(&[
        "acquire",
        "b",
        "r",
        "--lane",
        "lane-b",
        "--takeover",
        "--write-descriptor",
        b.to_str().unwrap(),
    ]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("the grant reached 0 of 1 replicas within 2000 ms; not handed out"),
        "{}",
        ran.stderr
    );
    assert!(!b.exists(), "no descriptor for a grant not handed out");
    assert_eq!(ran.stdout, "", "nothing printed as granted");

    // P dies; R, still frozen with the takeover unread, dies too and comes back from its
    // own AOF, then is promoted.
    primary.stop();
    replica.restart();
    assert_eq!(replica.cli(&["REPLICAOF", "NO", "ONE"]).trim(), "OK");
    home.store = replica.tcp_url();
    let _daemon = home.daemon();
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let (g2, _) = home.acquire("b", "r", "lane-c", &["--takeover"]);
    assert!(g2 > g1, "generation {g2} after {g1}");
    home.ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (different_holder)");
}

/// Asks and writes on a replica (a read-only one, a writable one, and a primary demoted
/// under a connected daemon) answer `store_not_primary`; nothing is judged from it.
#[test]
fn a_replica_is_never_asked_or_written_store_not_primary() {
    let (primary, replica) = primary_and_replica();
    let home = Home::with_store(primary.tcp_url());
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let mut on_replica = Home::with_store(replica.tcp_url());
    on_replica.home = home.home.clone();
    let socket = home.path("replica.sock");
    let socket_text = socket.to_str().unwrap();
    let mut replica_daemon = on_replica.daemon_with(&[], &[("ROW_FENCE_SOCKET", socket_text)]);
    let ask = |h: &Home| {
        crate::util::run(
            h.command(crate::util::bin("row-fence-ask"))
                .env("ROW_FENCE_SOCKET", socket_text)
                .arg("--descriptor")
                .arg(&a),
        )
    };
    for writable in ["yes", "no"] {
        assert_eq!(
            replica
                .cli(&["CONFIG", "SET", "replica-read-only", writable])
                .trim(),
            "OK"
        );
        let ran = ask(&on_replica);
        ran.expect(1, "row-fence: COULD NOT READ (store_not_primary)");
        assert!(ran.stderr.contains("replica of"), "{}", ran.stderr);
        let write = on_replica.cli(&["acquire", "b", "r", "--lane", "lane-b", "--takeover"]);
        assert_eq!(write.code, 1, "{}", write.stderr);
        assert!(write.stderr.contains("not the primary"), "{}", write.stderr);
    }
    assert_eq!(
        crate::util::run(
            home.command(crate::util::bin("row-fence"))
                .args(["show", "b", "--json"])
        )
        .code,
        0
    );

    // A primary demoted while the daemon is connected to it (one daemon per home: the
    // replica's stops first).
    replica_daemon.stop();
    let other = Redis::start_tcp(&[]);
    let _primary_daemon = home.daemon();
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let port = other.port.unwrap().to_string();
    assert_eq!(primary.cli(&["REPLICAOF", "127.0.0.1", &port]).trim(), "OK");
    let ran = until(
        Duration::from_secs(10),
        || home.ask_with(&a, &[]),
        |r| r.code == 1,
    );
    ran.expect(1, "row-fence: COULD NOT READ (store_not_primary)");
}

/// A store whose settings can lose an acknowledged grant (no fsync'd persistence and no
/// replica, `appendfsync everysec`, eviction of every key) refuses grants and controller
/// writes naming the setting and the fix, still answers asks, and `status` and `health`
/// report it as not durable. `?durability=volatile` opts out.
#[test]
fn a_store_that_can_lose_a_grant_refuses_grants_and_health_says_so() {
    let redis = Redis::start();
    let mut home = Home::on(Some(&redis));
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let daemon = home.daemon_with(&[], &[("ROW_FENCE_HEARTBEAT_MS", "200")]);
    until(
        Duration::from_secs(10),
        || home.cli(&["health", "--max-age", "60s"]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: healthy");
    let cases: [(&[&str], &str, &str); 3] = [
        (
            &["appendfsync", "everysec"],
            "appendfsync is everysec",
            "appendfsync always",
        ),
        (&["appendonly", "no"], "appendonly is no", "appendonly yes"),
        (
            &["maxmemory-policy", "allkeys-lru"],
            "maxmemory-policy is allkeys-lru",
            "maxmemory-policy noeviction",
        ),
    ];
    for (setting, problem, fix) in cases {
        let mut set = vec!["CONFIG", "SET"];
        set.extend_from_slice(setting);
        assert_eq!(redis.cli(&set).trim(), "OK");
        for write in [
            vec!["acquire", "b", "r2", "--lane", "lane-b"],
            vec!["controller", "acquire", "b", "--owner", "c1"],
        ] {
            let ran = home.cli(&write);
            assert_eq!(ran.code, 1, "{write:?}: {}", ran.stderr);
            assert!(
                ran.stderr.contains(problem) && ran.stderr.contains(fix),
                "{}",
                ran.stderr
            );
        }
        home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
        let health = until(
            Duration::from_secs(10),
            || home.cli(&["health", "--max-age", "60s"]),
            |r| r.code == 1 && r.stderr.contains(problem),
        );
        health.expect(1, "row-fence: UNHEALTHY: the store is not durable");
        assert!(health.stderr.contains(fix), "{}", health.stderr);
        let check = status(&daemon.socket)["store_check"].clone();
        assert_eq!(check["durable"], false, "{check}");
        assert!(check["problems"].to_string().contains(problem), "{check}");
        let shown = home.cli(&["store", "check"]);
        assert_eq!(shown.code, 1);
        assert!(shown.stdout.contains(fix), "{}", shown.stdout);
        // Back to durable: grants go ahead again.
        let undo: &[&str] = match setting[0] {
            "appendfsync" => &["CONFIG", "SET", "appendfsync", "always"],
            "appendonly" => &["CONFIG", "SET", "appendonly", "yes"],
            _ => &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
        };
        assert_eq!(redis.cli(undo).trim(), "OK");
        // AOF rewrite after turning it on runs in the background; the setting is set now.
        let ok = until(
            Duration::from_secs(10),
            || home.cli(&["acquire", "b", "r2", "--lane", "lane-b"]),
            |r| r.code == 0,
        );
        assert_eq!(ok.code, 0, "{}", ok.stderr);
    }
    // The explicit opt-out for a throwaway store.
    assert_eq!(
        redis.cli(&["CONFIG", "SET", "appendonly", "no"]).trim(),
        "OK"
    );
    home.store = format!("{}?durability=volatile", redis.url());
    let ran = home.cli(&["acquire", "b", "r3", "--lane", "lane-c"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
}

/// Where `CONFIG` is disabled the settings cannot be read: `store check`, `status` and
/// the heartbeat say so, and grants go on.
#[test]
fn where_config_is_disabled_the_check_says_so_and_grants_go_on() {
    let redis = Redis::start_with(&["--rename-command", "CONFIG", ""]);
    let home = Home::on(Some(&redis));
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let shown = home.cli(&["store", "check"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("CONFIG is disabled"),
        "{}",
        shown.stdout
    );
    let daemon = home.daemon_with(&[], &[("ROW_FENCE_HEARTBEAT_MS", "200")]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let notes = status(&daemon.socket)["store_check"]["notes"].to_string();
    assert!(notes.contains("CONFIG is disabled"), "{notes}");
    until(
        Duration::from_secs(10),
        || home.cli(&["health", "--max-age", "60s"]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: healthy");
}

/// The reproduction: a takeover acknowledged on a store with `appendfsync everysec` (opted
/// out, so it went ahead) is lost by a restart from an AOF without it. Every ask on the
/// board answers `store_regressed` naming both numbers (also from a restarted daemon,
/// which kept the highest revision it saw), and so does every write, until an operator
/// runs `row-fence store accept-regression`: then every older lease is stale, lanes
/// re-acquire, and no generation is handed out twice.
#[test]
fn a_store_restarted_from_an_aof_that_lost_a_takeover_is_refused_until_accepted() {
    let mut redis = Redis::start_with(&["--appendfsync", "everysec"]);
    let home = Home::with_store(format!("{}?durability=volatile", redis.url()));
    let (g1, a) = home.acquire("b", "r", "lane-a", &[]);
    let aof = redis.dir.path().join("appendonlydir");
    let before = redis.dir.path().join("aof-before-takeover");
    copy_dir(&aof, &before);
    let (g2, b) = home.acquire("b", "r", "lane-b", &["--takeover"]);
    let mut daemon = home.daemon();
    home.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");
    assert_eq!(daemon.stop(), Some(0), "flushes what it saw");

    redis.stop();
    std::fs::remove_dir_all(&aof).unwrap();
    copy_dir(&before, &aof);
    redis.restart();
    let _daemon = home.daemon();
    let ran = home.ask_with(&a, &[]);
    ran.expect(1, "row-fence: COULD NOT READ (store_regressed)");
    assert!(
        ran.stderr.contains(&format!("revision {g1}"))
            && ran.stderr.contains(&format!("revision {g2}")),
        "{}",
        ran.stderr
    );
    let ran = home.ask_with(&b, &[]);
    ran.expect(1, "row-fence: COULD NOT READ (store_regressed)");
    assert!(
        ran.stderr.contains(&format!("generation {g2}")),
        "{}",
        ran.stderr
    );
    let write = home.cli(&["acquire", "b", "r", "--lane", "lane-c", "--takeover"]);
    assert_eq!(write.code, 1, "{}", write.stderr);
    assert!(
        write.stderr.contains("went back in time"),
        "{}",
        write.stderr
    );
    // The operator can look before accepting: show and records read the store as it is
    // now (lane-a holds the row again there), with a warning.
    let shown = home.cli(&["show", "b"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.stdout.contains("lane-a"), "{}", shown.stdout);
    assert!(
        shown.stderr.contains("went back in time")
            && shown.stderr.contains("row-fence store accept-regression b"),
        "{}",
        shown.stderr
    );
    let records = home.cli(&["records", "b"]);
    assert_eq!(records.code, 0, "{}", records.stderr);

    let accepted = home.cli(&["store", "accept-regression", "b", "--json"]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    home.ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (not_held)");
    home.ask_with(&b, &[])
        .expect(3, "row-fence: REFUSED (not_held)");
    let (g3, c) = home.acquire("b", "r", "lane-c", &[]);
    assert!(
        g3 > g2,
        "generation {g3} was handed out before ({g1}, {g2})"
    );
    home.ask_with(&c, &[]).expect(0, "row-fence: ALLOWED");
}

/// The reproduction: Redis (fsync'd AOF) restarts from an AOF copied before lane-b's
/// acknowledged takeover, while the daemon keeps running. The takeover's revision, which
/// the CLI recorded in the home, is the daemon's floor from its very next ask, without a
/// restart: lane-a, whose grant the restore brought back, is never ALLOWED, and every ask
/// says `store_regressed` (the first one after the restart too: the broken connection is
/// replaced within the ask).
#[test]
fn a_restore_from_before_a_takeover_under_a_running_daemon_never_allows_the_old_holder() {
    let mut redis = Redis::start();
    let home = Home::on(Some(&redis));
    let _daemon = home.daemon();
    let (g1, a) = home.acquire("b", "r", "lane-a", &[]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let aof = redis.dir.path().join("appendonlydir");
    let before = redis.dir.path().join("aof-before-takeover");
    copy_dir(&aof, &before);
    let (g2, _b) = home.acquire("b", "r", "lane-b", &["--takeover"]);
    redis.stop();
    std::fs::remove_dir_all(&aof).unwrap();
    copy_dir(&before, &aof);
    redis.restart();
    let answers: Vec<Ran> = (0..10).map(|_| home.ask_with(&a, &[])).collect();
    let allowed = answers.iter().filter(|r| r.code == 0).count();
    let regressed = answers
        .iter()
        .filter(|r| {
            r.verdict_line()
                .starts_with("row-fence: COULD NOT READ (store_regressed)")
        })
        .count();
    eprintln!("restored store: 10 asks for lane-a, {allowed} ALLOWED, {regressed} store_regressed");
    assert_eq!(allowed, 0, "{answers:?}");
    assert_eq!(regressed, 10, "{answers:?}");
    assert!(
        answers[0].stderr.contains(&format!("revision {g1}"))
            && answers[0].stderr.contains(&format!("revision {g2}")),
        "{}",
        answers[0].stderr
    );
}

/// The reproduction: `maxmemory-policy allkeys-lru` evicts the board's keys, and
/// generations and controller epochs would start again at 1. The settings check refuses
/// grants on such a store; here the keys are evicted anyway (deleted as an eviction
/// would): asks answer `store_regressed`, and a batch fenced on the old epoch 1, a
/// controller grant and a row grant are all refused, writing nothing, until accepted;
/// then the next controller epoch is above every one handed out.
#[test]
fn an_evicted_board_is_refused_and_an_old_epoch_never_commits() {
    let redis = Redis::start();
    let home = Home::on(Some(&redis));
    for owner in ["c1", "c2"] {
        let ran = home.cli(&["controller", "acquire", "b", "--owner", owner, "--takeover"]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    }
    let (_, a) = home.acquire("b", "r", "lane-a", &["--owner", "c2", "--epoch", "2"]);
    let _daemon = home.daemon();
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");

    let written = [
        "rowfence:board:{b}:fence:revision",
        "rowfence:board:{b}:fence:meta",
        "rowfence:board:{b}:fence:claims",
        "rowfence:board:{b}:fence:notes",
        "rowfence:board:{b}:fence:log",
    ];
    let keys = redis.cli(&["--raw", "KEYS", "rowfence:board:{b}:*"]);
    for key in keys.lines() {
        redis.cli(&["DEL", key]);
    }
    let exist = |redis: &Redis| {
        let mut args = vec!["EXISTS"];
        args.extend(written);
        redis.cli(&args).trim().to_string()
    };
    home.ask_with(&a, &[])
        .expect(1, "row-fence: COULD NOT READ (store_regressed)");
    let batch = home.path("batch.json");
    std::fs::write(
        &batch,
        r#"[{"kind":"put","section":"notes","key":"k","expected":-1,"value":1}]"#,
    )
    .unwrap();
    for write in [
        vec!["controller", "acquire", "b", "--owner", "c1"],
        vec!["acquire", "b", "r", "--lane", "lane-b"],
        vec![
            "batch",
            "b",
            "--file",
            batch.to_str().unwrap(),
            "--epoch",
            "1",
        ],
    ] {
        let ran = home.cli(&write);
        assert_ne!(ran.code, 0, "{write:?} committed on an evicted board");
    }
    assert_eq!(exist(&redis), "0", "nothing was written");
    let accepted = home.cli(&["store", "accept-regression", "b"]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    let ran = home.cli(&["controller", "acquire", "b", "--owner", "c1", "--json"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let lease: serde_json::Value = serde_json::from_str(ran.stdout.trim()).unwrap();
    assert_eq!(lease["epoch"], 3, "above every epoch handed out: {lease}");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A number from `INFO <section>`.
fn info_number(redis: &Redis, section: &str, field: &str) -> u64 {
    let info = redis.cli(&["INFO", section]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {info}"))
}

/// An ALLOWED ask is a pure read. On a store with `appendfsync always` (the
/// test harness's default), 100 ALLOWED asks append nothing to the AOF, so they propagate
/// nothing and wait for no fsync; a refusal is recorded (it appends), and with `?asks=all`
/// every verdict is. The ask script is still declared writing: a primary short of
/// replicas refuses it (NOREPLICAS) although this ask would write nothing.
#[test]
fn an_allowed_ask_appends_nothing_to_an_appendfsync_always_store_and_a_refusal_does() {
    let redis = Redis::start();
    assert!(
        redis
            .cli(&["CONFIG", "GET", "appendfsync"])
            .contains("always")
    );
    let home = Home::on(Some(&redis));
    let (generation, written) = home.acquire("b", "r", "lane-a", &[]);
    let token = row_fence_contract::descriptor::read(&written)
        .unwrap()
        .unwrap()
        .token;
    let check = |lane: &str| AskCheck {
        board: "b".into(),
        row: "r".into(),
        lane: lane.into(),
        generation,
        token: token.clone(),
        action: "test".into(),
        session: "s".into(),
        ..AskCheck::default()
    };
    let aof = || info_number(&redis, "persistence", "aof_current_size");
    let asks = || {
        redis
            .cli(&["XLEN", "rowfence:board:{b}:fence:asks"])
            .trim()
            .to_string()
    };
    runtime().block_on(async {
        let store = RedisStore::open(&redis.url(), "rowfence").unwrap();
        store.ping().await.unwrap();
        redis.cli(&["CONFIG", "RESETSTAT"]);
        let before = aof();
        for _ in 0..100 {
            let judged = store.ask(&check("lane-a")).await.unwrap();
            assert_eq!(judged.refusal, None);
        }
        assert_eq!(aof(), before, "100 ALLOWED asks appended to the AOF");
        assert_eq!(asks(), "0");
        assert_eq!(redis.command_calls("evalsha"), 100);
        assert_eq!(redis.command_calls("xadd"), 0);

        let refused = store.ask(&check("lane-b")).await.unwrap();
        assert!(refused.refusal.is_some());
        assert!(aof() > before, "a refusal is recorded");
        assert_eq!(asks(), "1");

        let all = RedisStore::open(&format!("{}?asks=all", redis.url()), "rowfence").unwrap();
        let recorded = aof();
        all.ask(&check("lane-a")).await.unwrap();
        assert!(
            aof() > recorded,
            "with ?asks=all an ALLOWED ask is recorded"
        );
        assert_eq!(asks(), "2");
        let entries = redis.cli(&["XRANGE", "rowfence:board:{b}:fence:asks", "-", "+"]);
        assert!(
            entries.contains("refused") && entries.contains("allowed"),
            "{entries}"
        );

        // Still a writing script: refused before it runs on a primary short of replicas.
        redis.cli(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
        let deposed = store.ask(&check("lane-a")).await.unwrap_err();
        assert!(matches!(deposed, StoreError::NotPrimary(_)), "{deposed:?}");
        assert!(deposed.to_string().contains("NOREPLICAS"), "{deposed}");
    });
}
