//! The resident daemon as a process: store outages, socket hygiene, peers, malformed
//! input, shutdown, heartbeat, status.

use crate::util::{Home, Redis, bin, ping, run, status};
use row_fence_contract::ledger::DecidedBy;
use row_fence_contract::{Reason, Verdict};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

fn heartbeat_written_at(home: &Home) -> Option<u64> {
    let bytes = std::fs::read(home.home.join("heartbeat")).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v["written_at_ms"].as_u64()
}

#[test]
fn a_daemon_started_while_redis_is_down_listens_and_heals_without_a_restart() {
    let mut redis = Redis::start();
    let home = Home::on(Some(&redis));
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    redis.stop();
    let daemon = home.daemon_with(&[], &[("ROW_FENCE_HEARTBEAT_MS", "100")]);
    let pid = daemon.pid();
    let ran = home.ask_with(&a, &["--timeout-ms", "2000"]);
    ran.expect(1, "row-fence: COULD NOT READ (store_unreachable)");
    assert!(
        ran.elapsed < Duration::from_millis(2000 + 1500),
        "took {:?}",
        ran.elapsed
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        heartbeat_written_at(&home),
        None,
        "no heartbeat while the store is down"
    );
    home.cli(&["health", "--max-age", "90s"])
        .expect(1, "row-fence: UNHEALTHY");

    redis.restart(); // its AOF kept what it acknowledged
    let (_, a2) = home.acquire("b", "r", "lane-a", &[]);
    let until = Instant::now() + Duration::from_secs(5);
    let mut last = home.ask_with(&a2, &[]);
    while last.code != 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        last = home.ask_with(&a2, &[]);
    }
    last.expect(0, "row-fence: ALLOWED");
    assert_eq!(daemon.pid(), pid, "same daemon");
    let until = Instant::now() + Duration::from_secs(10);
    while heartbeat_written_at(&home).is_none() {
        assert!(Instant::now() < until, "beats once the store answers");
        std::thread::sleep(Duration::from_millis(20));
    }
    home.cli(&["health", "--max-age", "90s"])
        .expect(0, "row-fence: healthy");

    assert_eq!(redis.cli(&["SCRIPT", "FLUSH"]).trim(), "OK");
    home.ask_with(&a2, &[]).expect(0, "row-fence: ALLOWED");
}

#[test]
fn a_socket_that_never_answers_times_out_within_the_deadline() {
    let home = Home::file();
    std::fs::create_dir_all(&home.home).unwrap();
    std::fs::set_permissions(&home.home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let listener = UnixListener::bind(home.socket()).unwrap();
    let _hold = std::thread::spawn(move || {
        let conns: Vec<UnixStream> = listener.incoming().filter_map(Result::ok).collect();
        drop(conns);
    });
    let d = home.path("d.json");
    std::fs::write(&d, r#"{"board":"b","row":"r","lane":"l","generation":1}"#).unwrap();
    let ran = home.ask_with(&d, &["--timeout-ms", "500"]);
    ran.expect(1, "row-fence: COULD NOT READ (timeout)");
    assert!(ran.stderr.contains("row-fence: asking"), "{}", ran.stderr);
    assert!(
        ran.elapsed < Duration::from_millis(500 + 1500),
        "took {:?}",
        ran.elapsed
    );
}

#[test]
fn a_sigkilled_daemons_leftover_socket_is_cleared_by_the_next_one() {
    let home = Home::file();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let mut first = home.daemon();
    first.kill();
    assert!(home.socket().exists(), "SIGKILL leaves the socket behind");
    let _second = home.daemon();
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
}

#[test]
fn a_second_daemon_exits_already_running_and_leaves_the_socket_alone() {
    let home = Home::file();
    let first = home.daemon();
    let inode = std::fs::metadata(home.socket()).unwrap().ino();
    let ran = run(&mut home.command(bin("row-fence-resident")));
    assert_ne!(ran.code, 0);
    assert!(ran.stderr.contains("already running"), "{}", ran.stderr);
    assert_eq!(std::fs::metadata(home.socket()).unwrap().ino(), inode);
    assert!(
        ping(&first.socket).is_some(),
        "the first daemon still serves"
    );
}

#[test]
fn a_socket_path_over_the_platform_limit_is_refused_by_both_programs() {
    let home = Home::file();
    let long = home.dir.path().join("x".repeat(120)).join("sock");
    let text = long.display().to_string();
    let ran = run(home
        .command(bin("row-fence-resident"))
        .env("ROW_FENCE_SOCKET", &long));
    assert_ne!(ran.code, 0);
    assert!(
        ran.stderr.contains(&text) && ran.stderr.contains(&format!("{} bytes", text.len())),
        "{}",
        ran.stderr
    );
    let d = home.path("d.json");
    std::fs::write(&d, r#"{"board":"b","row":"r","lane":"l","generation":1}"#).unwrap();
    let ran = home.ask_with(&d, &["--socket", &text]);
    ran.expect(1, "row-fence: COULD NOT READ (fence_unreadable)");
    assert!(
        ran.stderr.contains(&format!("{} bytes", text.len())),
        "{}",
        ran.stderr
    );
}

#[test]
fn sigterm_finishes_and_unlinks_only_its_own_socket() {
    let home = Home::file();
    let mut daemon = home.daemon();
    assert_eq!(daemon.stop(), Some(0));
    assert!(!home.socket().exists(), "its own socket is removed");
}

#[test]
fn a_changed_registry_makes_the_daemon_answer_stale_code_and_exit_for_its_supervisor() {
    let home = Home::file();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let mut daemon = home.daemon_with(&["--supervised"], &[]);
    std::fs::create_dir_all(home.home.join("registry")).unwrap();
    std::fs::write(home.home.join("registry/boards.toml"), "[boards]\n").unwrap();
    home.ask_with(&a, &[])
        .expect(1, "row-fence: COULD NOT READ (stale_code)");
    assert_eq!(daemon.wait_exit(Duration::from_secs(10)), Some(75));
    let _fresh = home.daemon();
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
}

#[test]
fn status_names_the_store_without_its_password() {
    let home = Home::with_store("redis://:s3cret-pw@127.0.0.1:1/0".into());
    let (_, d) = {
        let path = home.path("d.json");
        std::fs::write(
            &path,
            r#"{"board":"b","row":"r","lane":"l","generation":1}"#,
        )
        .unwrap();
        ((), path)
    };
    let daemon = home.daemon();
    home.ask_with(&d, &["--timeout-ms", "1500"])
        .expect(1, "row-fence: COULD NOT READ");
    let s = status(&daemon.socket);
    assert_eq!(s["store"], "redis://:***@127.0.0.1:1/0");
    let text = home.cli(&["status"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    for output in [s.to_string(), text.stdout, text.stderr, daemon.log_text()] {
        assert!(!output.contains("s3cret-pw"), "{output}");
    }
    assert_eq!(s["counts"]["could_not_read"], 1);
    assert_eq!(s["recent_refusals"][0]["reason"], "store_unreachable");
}

#[test]
fn status_stays_one_message_when_refusals_carry_long_actions_and_the_ledger_keeps_them_whole() {
    let home = Home::file();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    home.acquire("b", "r", "lane-b", &["--takeover"]);
    let mut daemon = home.daemon();
    let action = format!("git push origin {}", "x".repeat(3_000));
    for _ in 0..40 {
        home.ask_with(&a, &["--action", &action])
            .expect(3, "row-fence: REFUSED (different_holder)");
    }
    // 40 × 3 KB of actions used to make a 160 KB answer that no client may read.
    let text = home.cli(&["status"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let s = status(&daemon.socket);
    let shown = s["recent_refusals"].as_array().unwrap();
    let omitted = s["recent_refusals_omitted"].as_u64().unwrap_or(0);
    assert_eq!(shown.len() as u64 + omitted, 40);
    assert!(!shown.is_empty());
    for r in shown {
        let kept = r["action"].as_str().unwrap();
        assert!(kept.len() <= 240 && kept.ends_with('…'), "{kept}");
    }
    daemon.stop();
    let ledger = row_fence_contract::ledger::read(&home.home.join("refusals.jsonl")).unwrap();
    assert_eq!(ledger.len(), 40);
    assert!(ledger.iter().all(|r| r.action == action));
}

#[test]
fn the_daemon_files_its_refusals_under_the_callers_session_and_action() {
    let home = Home::file();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    home.acquire("b", "r", "lane-b", &["--takeover"]);
    let mut daemon = home.daemon();
    let ran = run(home
        .command(bin("row-fence-ask"))
        .current_dir(home.dir.path())
        .env("ROW_FENCE_SESSION", "session-42")
        .args(["--action", "gh pr merge", "--descriptor"])
        .arg(&a));
    ran.expect(3, "row-fence: REFUSED (different_holder)");
    daemon.stop();
    let ledger = row_fence_contract::ledger::read(&home.home.join("refusals.jsonl")).unwrap();
    assert_eq!(ledger.len(), 1);
    let r = &ledger[0];
    assert_eq!(
        (r.decided_by, r.verdict, r.action.as_str()),
        (
            DecidedBy::Daemon,
            Verdict::Refused(Reason::DifferentHolder),
            "gh pr merge"
        )
    );
    assert_eq!(r.session.as_deref(), Some("session-42"));
    assert_eq!(r.cwd.as_deref(), Some(home.dir.path().to_str().unwrap()));
    assert_eq!(
        (r.lane.as_deref(), r.row.as_deref()),
        (Some("lane-a"), Some("r"))
    );
}

#[test]
fn a_stored_expiry_past_the_year_9999_is_judged_and_shown_without_a_panic() {
    let home = Home::file();
    // Forged behind row-fence's back (a raw batch refuses an expiry past 366 days).
    let store = home.home.join("store");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(
        store.join("b.json"),
        r#"{"board":"b","revision":1,"sections":{"claims":{"r":{"r":1,"v":{"holder":"lane-a","generation":1,"expires_at_ms":18446744073709551615,"token_sha256":"c0b6304bd6ce9b3e65150392c91a3aa76803a59c29e46f9fb2b9aac235e58386"}}}}}"#,
    )
    .unwrap();
    let d = home.path("d.json");
    // The token's hash above is the SHA-256 of this token (crate::util::TEST_TOKEN).
    std::fs::write(
        &d,
        format!(
            r#"{{"board":"b","row":"r","lane":"lane-a","generation":1,"token":"{}"}}"#,
            crate::util::TEST_TOKEN.expose()
        ),
    )
    .unwrap();
    let daemon = home.daemon();
    home.ask_with(&d, &[]).expect(0, "row-fence: ALLOWED");
    let shown = home.cli(&["show", "b"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("past the year 9999"),
        "{}",
        shown.stdout
    );
    assert_eq!(status(&daemon.socket)["asks_in_flight"], 0);
    let ran = home.cli(&["acquire", "b", "r2", "--lane", "l", "--ttl", "99999999h"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("366 days"), "{}", ran.stderr);
}

#[test]
fn a_write_to_another_store_than_the_daemons_is_refused() {
    let redis = Redis::start();
    let on_redis = Home::on(Some(&redis));
    let (_, a) = on_redis.acquire("b", "r", "lane-a", &[]);
    let _daemon = on_redis.daemon();
    // The same home, but an operator shell that forgot ROW_FENCE_STORE (the file default).
    let mut forgot = on_redis.command(bin("row-fence"));
    forgot.env("ROW_FENCE_STORE", "file").args([
        "acquire",
        "b",
        "r",
        "--lane",
        "lane-b",
        "--takeover",
    ]);
    let ran = run(&mut forgot);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("fences with the store redis+unix://"),
        "{}",
        ran.stderr
    );
    on_redis.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let mut read = on_redis.command(bin("row-fence"));
    read.env("ROW_FENCE_STORE", "file").args(["show", "b"]);
    let shown = run(&mut read);
    // No such board where this command looked, because it looked in the wrong store.
    assert_eq!(shown.code, 1, "{}", shown.stderr);
    assert!(
        shown.stderr.contains("no board named b")
            && shown.stderr.contains("fences with the store redis+unix://")
            && shown.stderr.contains("set --store (or ROW_FENCE_STORE)"),
        "{}",
        shown.stderr
    );
    // Each message says its mismatch once.
    for said in [&ran.stderr, &shown.stderr] {
        assert_eq!(said.matches("file:").count(), 1, "{said}");
    }
}

#[test]
fn a_write_under_another_key_prefix_than_the_daemons_is_refused_and_status_shows_the_prefix() {
    let redis = Redis::start();
    let home = Home::on(Some(&redis));
    let daemon = home.daemon_with(&[], &[("ROW_FENCE_KEY_PREFIX", "kp")]);
    assert_eq!(status(&daemon.socket)["key_prefix"], "kp");
    let until = Instant::now() + Duration::from_secs(10);
    let beat = loop {
        if let Ok(text) = std::fs::read_to_string(home.home.join("heartbeat")) {
            break serde_json::from_str::<serde_json::Value>(&text).unwrap();
        }
        assert!(Instant::now() < until, "no heartbeat");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(beat["key_prefix"], "kp", "{beat}");
    assert!(
        home.cli(&["status"]).stdout.contains("key prefix kp"),
        "status names the key prefix"
    );
    // An operator shell without the daemon's prefix (the default, rowfence).
    let ran = home.cli(&["acquire", "board-k", "row-2", "--lane", "l"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("prefix \"kp\"") && ran.stderr.contains("--key-prefix"),
        "{}",
        ran.stderr
    );
    let keys = redis.cli(&["--scan", "--pattern", "rowfence:*"]);
    assert_eq!(
        keys.trim(),
        "",
        "nothing was written under the default prefix"
    );
    // With the daemon's prefix the grant goes through and the lane is ALLOWED.
    let mut acquire = home.command(bin("row-fence"));
    acquire.env("ROW_FENCE_KEY_PREFIX", "kp").args([
        "acquire",
        "board-k",
        "row-2",
        "--lane",
        "l",
        "--write-descriptor",
    ]);
    let descriptor = home.path("l.json");
    acquire.arg(&descriptor);
    assert_eq!(run(&mut acquire).code, 0);
    home.ask_with(&descriptor, &[])
        .expect(0, "row-fence: ALLOWED");
}

#[test]
fn status_without_a_daemon_says_so_and_json_still_prints_an_object() {
    let home = Home::file();
    let ran = home.cli(&["status"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("no daemon status from"),
        "{}",
        ran.stderr
    );
    assert_eq!(ran.stdout, "");
    let ran = home.cli(&["status", "--json"]);
    assert_eq!(ran.code, 1);
    let v = ran.json();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("no daemon status from"),
        "{v}"
    );
    assert_eq!(v["socket"], home.socket().display().to_string());
}

#[test]
fn health_is_unhealthy_when_the_daemon_died_or_the_heartbeat_is_from_the_future() {
    let home = Home::file();
    let mut daemon = home.daemon();
    // The first beat follows the first store check and probe: wait for it.
    crate::util::until(
        Duration::from_secs(10),
        || home.cli(&["health"]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: healthy");
    daemon.kill();
    let dead = home.cli(&["health", "--json"]);
    assert_eq!(dead.code, 1);
    let v: serde_json::Value = serde_json::from_str(dead.stdout.trim()).unwrap();
    assert!(
        v["problem"].as_str().unwrap().contains("is not running"),
        "{v}"
    );
    let future = serde_json::json!({"pid": std::process::id(), "stamp": "x", "written_at_ms": 4_000_000_000_000u64, "store": "file"});
    std::fs::write(home.home.join("heartbeat"), future.to_string()).unwrap();
    home.cli(&["health"])
        .expect(1, "row-fence: UNHEALTHY: the heartbeat is");
    let ran = run(home
        .command(bin("row-fence-resident"))
        .args(["--heartbeat-ms", "0"]));
    assert_eq!(ran.code, 2, "{}", ran.stderr);
}

/// One daemon per home: a second one on another socket would keep the home's heartbeat
/// fresh while the first is gone. It is refused, and `health` asks the socket the asker
/// uses rather than trusting the file.
#[test]
fn a_second_daemon_on_the_same_home_is_refused_and_health_asks_the_socket() {
    let home = Home::file();
    let mut first = home.daemon();
    crate::util::until(
        Duration::from_secs(10),
        || home.cli(&["health"]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: healthy");
    let other = home.path("s2");
    let ran = run(home
        .command(bin("row-fence-resident"))
        .arg("--socket")
        .arg(&other));
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("another row-fence-resident serves the home")
            && ran.stderr.contains("resident.lock"),
        "{}",
        ran.stderr
    );
    assert!(!other.exists(), "the refused daemon leaves no socket");
    assert!(
        ping(&first.socket).is_some(),
        "the first daemon still serves"
    );
    // A fresh heartbeat whose writer is not the daemon on the socket is not health.
    let beat = |pid: u32| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let beat =
            serde_json::json!({"pid": pid, "stamp": "x", "written_at_ms": now, "store": "file"});
        std::fs::write(home.home.join("heartbeat"), beat.to_string()).unwrap();
    };
    beat(std::process::id());
    home.cli(&["health"])
        .expect(1, "row-fence: UNHEALTHY: the daemon on");
    first.stop();
    beat(std::process::id());
    let ran = home.cli(&["health"]);
    ran.expect(
        1,
        "row-fence: UNHEALTHY: the heartbeat is fresh but no daemon answers",
    );
    assert!(
        ran.stderr
            .contains("the daemon is not running; start it with row-fence-resident"),
        "{}",
        ran.stderr
    );
}

/// A stopped daemon is named as such, with how to start it; the words a newcomer tries
/// for starting it point to the daemon's binary.
#[test]
fn no_daemon_says_it_is_not_running_and_start_points_to_the_daemon() {
    let home = Home::file();
    let ran = home.cli(&["status"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("the daemon is not running; start it with row-fence-resident"),
        "{}",
        ran.stderr
    );
    for word in ["start", "serve", "daemon"] {
        let ran = home.cli(&[word]);
        assert_eq!(ran.code, 2, "{}", ran.stderr);
        assert!(
            ran.stderr
                .contains("the daemon is its own binary: run row-fence-resident"),
            "{}",
            ran.stderr
        );
    }
}

/// `status --json` writes every field docs/operations.md lists, zero or unset ones too.
#[test]
fn status_json_has_every_field_even_when_zero_or_unset() {
    let home = Home::file();
    let _daemon = home.daemon();
    let ran = home.cli(&["status", "--json"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let v: serde_json::Value = serde_json::from_str(ran.stdout.trim()).unwrap();
    for field in [
        "ledger_dropped",
        "store_check",
        "recent_refusals_omitted",
        "store_calls_in_flight",
    ] {
        assert!(v.get(field).is_some(), "{field} missing: {v}");
    }
}
