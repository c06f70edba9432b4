//! Reasons and health that tell the truth (ARCHITECTURE.md, "Fail closed"): an error the
//! store sent is `store_error`, only a connection failure is `store_unreachable`; the
//! heartbeat beats only on answered asks; every store call gets the ask's own deadline and
//! every command its `--timeout`.

use crate::util::{Home, Redis, until};
use nix::sys::signal::Signal;
use std::time::{Duration, Instant};

/// The reproduction: `maxmemory` full under `noeviction`. Every ask is COULD NOT READ
/// (`store_error`, OOM), and so `health` goes unhealthy (`row_fence_healthy 0`); room
/// again, and it is healthy again.
#[test]
fn every_ask_failing_on_a_full_store_makes_health_unhealthy() {
    let redis = Redis::start();
    let home = Home::on(Some(&redis));
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let _daemon = home.daemon_with(&[], &[("ROW_FENCE_HEARTBEAT_MS", "200")]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    until(
        Duration::from_secs(10),
        || home.cli(&["health", "--max-age", "1s"]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: healthy");

    assert_eq!(redis.cli(&["CONFIG", "SET", "maxmemory", "1"]).trim(), "OK");
    let asking = || {
        let ran = home.ask_with(&a, &[]);
        ran.expect(1, "row-fence: COULD NOT READ (store_error)");
        assert!(ran.stderr.contains("OOM"), "{}", ran.stderr);
        ran
    };
    let health = until(
        Duration::from_secs(10),
        || {
            asking();
            home.cli(&["health", "--max-age", "1s", "--prometheus"])
        },
        |r| r.code == 1,
    );
    assert!(
        health.stdout.contains("row_fence_healthy 0"),
        "{}",
        health.stdout
    );

    assert_eq!(redis.cli(&["CONFIG", "SET", "maxmemory", "0"]).trim(), "OK");
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    until(
        Duration::from_secs(10),
        || home.cli(&["health", "--max-age", "1s"]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: healthy");
}

/// The reproduction: a hung Redis (SIGSTOP) gave up after about 500 ms whatever the ask's
/// deadline. Now the store call gets the ask's whole deadline (`timeout`, not
/// `store_unreachable`), a command ends at its `--timeout`, and once the store answers
/// again so does the fence.
#[test]
fn a_hung_store_gets_the_asks_whole_deadline_and_a_command_its_timeout() {
    let redis = Redis::start();
    let home = Home::on(Some(&redis));
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let _daemon = home.daemon();
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    redis.signal(Signal::SIGSTOP);
    let ran = home.ask_with(&a, &["--timeout-ms", "3000"]);
    ran.expect(1, "row-fence: COULD NOT READ (timeout)");
    assert!(
        ran.elapsed >= Duration::from_millis(2500),
        "gave up after {:?}",
        ran.elapsed
    );
    let started = Instant::now();
    let shown = home.cli(&["show", "b", "--timeout", "1s"]);
    assert_eq!(shown.code, 1, "{}", shown.stderr);
    assert!(
        shown.stderr.contains("did not finish within 1s"),
        "{}",
        shown.stderr
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    redis.signal(Signal::SIGCONT);
    until(
        Duration::from_secs(10),
        || home.ask_with(&a, &[]),
        |r| r.code == 0,
    )
    .expect(0, "row-fence: ALLOWED");
}

/// Errors the store sends are `store_error` and name what it said (a key of the wrong
/// type, a missing password); a store that cannot be connected to is
/// `store_unreachable`.
#[test]
fn store_errors_and_connection_failures_each_have_their_reason() {
    let mut redis = Redis::start();
    let home = Home::on(Some(&redis));
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let _daemon = home.daemon();
    redis.cli(&["RENAME", "rowfence:board:{b}:fence:claims", "saved"]);
    redis.cli(&["SET", "rowfence:board:{b}:fence:claims", "not a hash"]);
    let ran = home.ask_with(&a, &[]);
    ran.expect(1, "row-fence: COULD NOT READ (store_error)");
    assert!(ran.stderr.contains("WRONGTYPE"), "{}", ran.stderr);
    redis.cli(&["RENAME", "saved", "rowfence:board:{b}:fence:claims"]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");

    redis.cli(&["CONFIG", "SET", "requirepass", "sekrit"]);
    let ran = home.cli(&["show", "b"]);
    assert_eq!(ran.code, 1);
    assert!(
        ran.stderr.contains("the store needs a password"),
        "{}",
        ran.stderr
    );
    redis.cli(&["-a", "sekrit", "CONFIG", "SET", "requirepass", ""]);

    redis.stop();
    home.ask_with(&a, &[])
        .expect(1, "row-fence: COULD NOT READ (store_unreachable)");
}
