//! A judging clock is never behind a lease expiry its home already found passed, wherever
//! the judge runs: the running daemon, a restarted one, a cold `check`, a `renew`. And a
//! clock that ran ahead and was corrected leaves the live holder ALLOWED, or, where a
//! board was written or a lease found expired under it, ends with the operator's
//! `row-fence store accept-clock`, seen by the running daemon without a restart.
//!
//! The file store's clock is the processes' own (the daemon's and the CLI's, shifted with
//! libfaketime from a file the test rewrites); Redis's is the server's `TIME` (the
//! redis-server process under a small preloaded shim reading the same file, since
//! libfaketime cannot start redis-server).

use crate::util::{Daemon, Home, Ran, Redis, bin, run, stepped_clock};
use std::fs;
use std::path::{Path, PathBuf};

/// A clock the test steps: processes started with [`Clock::envs`] read their wall clock as
/// the real one shifted by what the offset file says now (`+0` at first).
struct Clock {
    _dir: tempfile::TempDir,
    offset: PathBuf,
}

impl Clock {
    fn new() -> Clock {
        let dir = tempfile::Builder::new()
            .prefix("rfclock")
            .tempdir_in("/tmp")
            .unwrap();
        let clock = Clock {
            offset: dir.path().join("offset"),
            _dir: dir,
        };
        clock.step("+0");
        clock
    }

    fn step(&self, offset: &str) {
        fs::write(&self.offset, offset).unwrap();
    }

    /// libfaketime on this clock (row-fence's own processes).
    fn envs(&self) -> Vec<(String, String)> {
        stepped_clock(&self.offset)
    }

    /// The clock shim on this clock, for redis-server, which libfaketime cannot start
    /// (`clock_shim.c`, compiled here with `cc`).
    fn server_envs(&self) -> Vec<(String, String)> {
        let shim = self._dir.path().join("libclockshim.so");
        if !shim.exists() {
            let source = crate::util::repo_root().join("tests/e2e/clock_shim.c");
            let built = run(std::process::Command::new("cc")
                .args(["-shared", "-fPIC", "-O2", "-o"])
                .arg(&shim)
                .arg(&source));
            assert_eq!(built.code, 0, "cc: {}", built.stderr);
        }
        vec![
            ("LD_PRELOAD".into(), shim.display().to_string()),
            (
                "ROW_FENCE_TEST_CLOCK_OFFSET".into(),
                self.offset.display().to_string(),
            ),
        ]
    }
}

fn daemon_on(home: &Home, clock: Option<&Clock>) -> Daemon {
    let envs = clock.map(Clock::envs).unwrap_or_default();
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    home.daemon_with(&[], &envs)
}

/// `row-fence ARGS` with its clock on `clock`.
fn cli_on(home: &Home, clock: &Clock, args: &[&str]) -> Ran {
    run(home.command(bin("row-fence")).envs(clock.envs()).args(args))
}

fn check(home: &Home, descriptor: &Path) -> Ran {
    home.cli(&["check", "--descriptor", descriptor.to_str().unwrap()])
}

/// The judge's and writer's clock for `store`: the processes' own for the file store, the
/// server's for Redis.
enum Judge<'a> {
    File(&'a Clock),
    Redis,
}

/// The reproduction, on both stores: a 30 min lease is found expired by the running
/// daemon while the clock reads 1 h ahead; the clock steps back to true. Not one judge
/// revives it: the running daemon, a cold `check`, a `renew` and a restarted daemon
/// answer `clock_regressed` (exit 1), naming the way out. The operator's `accept-clock`
/// drops the lease (live again under the corrected clock), and the still running daemon
/// answers `not_held` at once.
fn a_lease_found_expired_is_never_allowed_again_by_any_judge_after_the_clock_steps_back(
    home: &Home,
    clock: &Clock,
    judge: Judge<'_>,
) {
    let (generation, a) = home.acquire("b", "r", "lane-a", &["--ttl", "30m"]);
    let on_daemon = match judge {
        Judge::File(clock) => Some(clock),
        Judge::Redis => None,
    };
    let mut daemon = daemon_on(home, on_daemon);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    clock.step("+1h");
    home.ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (lease_expired)");
    clock.step("+0");
    let ran = home.ask_with(&a, &[]);
    ran.expect(1, "row-fence: COULD NOT READ (clock_regressed)");
    assert!(ran.stderr.contains("accept-clock b"), "{}", ran.stderr);
    check(home, &a).expect(1, "row-fence: COULD NOT READ (clock_regressed)");
    let renewed = home.cli(&[
        "renew",
        "b",
        "r",
        "--lane",
        "lane-a",
        "--generation",
        &generation.to_string(),
        "--descriptor",
        a.to_str().unwrap(),
    ]);
    assert_eq!(renewed.code, 1, "{}", renewed.stderr);
    assert!(
        renewed.stderr.contains("clock went back"),
        "{}",
        renewed.stderr
    );
    daemon.stop();
    let daemon = daemon_on(home, on_daemon);
    home.ask_with(&a, &[])
        .expect(1, "row-fence: COULD NOT READ (clock_regressed)");
    let accepted = home.cli(&["store", "accept-clock", "b", "--json"]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    let v: serde_json::Value = serde_json::from_str(accepted.stdout.trim()).unwrap();
    assert_eq!(v["rows_dropped"], serde_json::json!(["r"]), "{v}");
    home.ask_with(&a, &[])
        .expect(3, "row-fence: REFUSED (not_held)");
    check(home, &a).expect(3, "row-fence: REFUSED (not_held)");
    let (_, b) = home.acquire("b", "r", "lane-b", &[]);
    home.ask_with(&b, &[]).expect(0, "row-fence: ALLOWED");
    drop(daemon);
}

#[test]
fn file_store_a_lease_found_expired_is_never_allowed_again_after_the_clock_steps_back() {
    let home = Home::file();
    let clock = Clock::new();
    a_lease_found_expired_is_never_allowed_again_by_any_judge_after_the_clock_steps_back(
        &home,
        &clock,
        Judge::File(&clock),
    );
}

#[cfg(target_os = "linux")]
#[test]
fn redis_a_lease_found_expired_is_never_allowed_again_after_the_server_clock_steps_back() {
    let clock = Clock::new();
    let redis = Redis::start_with_env(&[], &clock.server_envs());
    let home = Home::on(Some(&redis));
    a_lease_found_expired_is_never_allowed_again_by_any_judge_after_the_clock_steps_back(
        &home,
        &clock,
        Judge::Redis,
    );
}

/// A clock that ran 1 h ahead and was corrected, on both stores: while only asks ran, the
/// holder stays ALLOWED throughout (nothing was found expired, so nothing can come back).
/// A renew made while the clock ran ahead: on Redis the holder stays ALLOWED (the renew
/// only moved its expiry later); on the file store the board's highest written time is
/// ahead, so every judge answers `clock_regressed` until the operator's `accept-clock`,
/// after which the running daemon answers the holder ALLOWED, no restart.
fn a_clock_that_ran_ahead_and_was_corrected_ends_with_the_holder_allowed(
    home: &Home,
    clock: &Clock,
    judge: Judge<'_>,
) {
    let (generation, a) = home.acquire("b", "r", "lane-a", &["--ttl", "2h"]);
    let on_daemon = match judge {
        Judge::File(clock) => Some(clock),
        Judge::Redis => None,
    };
    let _daemon = daemon_on(home, on_daemon);
    clock.step("+1h");
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    clock.step("+0");
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");

    clock.step("+1h");
    let renewed = cli_on(
        home,
        clock,
        &[
            "renew",
            "b",
            "r",
            "--lane",
            "lane-a",
            "--generation",
            &generation.to_string(),
            "--descriptor",
            a.to_str().unwrap(),
        ],
    );
    assert_eq!(renewed.code, 0, "{}", renewed.stderr);
    clock.step("+0");
    if matches!(judge, Judge::File(_)) {
        let ran = home.ask_with(&a, &[]);
        ran.expect(1, "row-fence: COULD NOT READ (clock_regressed)");
        assert!(ran.stderr.contains("accept-clock b"), "{}", ran.stderr);
        let accepted = home.cli(&["store", "accept-clock", "b"]);
        assert_eq!(accepted.code, 0, "{}", accepted.stderr);
        assert!(
            accepted.stderr.contains("no lease dropped"),
            "{}",
            accepted.stderr
        );
    }
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    check(home, &a).expect(0, "row-fence: ALLOWED");
}

#[test]
fn file_store_a_clock_that_ran_ahead_and_was_corrected_ends_with_the_holder_allowed() {
    let home = Home::file();
    let clock = Clock::new();
    a_clock_that_ran_ahead_and_was_corrected_ends_with_the_holder_allowed(
        &home,
        &clock,
        Judge::File(&clock),
    );
}

#[cfg(target_os = "linux")]
#[test]
fn redis_a_clock_that_ran_ahead_and_was_corrected_ends_with_the_holder_allowed() {
    let clock = Clock::new();
    let redis = Redis::start_with_env(&[], &clock.server_envs());
    let home = Home::on(Some(&redis));
    a_clock_that_ran_ahead_and_was_corrected_ends_with_the_holder_allowed(
        &home,
        &clock,
        Judge::Redis,
    );
}

/// The reproduction as it was met, with no daemon: a cold `check` finds a 1 s lease
/// expired; with the clock 3 s behind, neither `check` nor `renew` brings it back (both
/// read the floor the first check wrote to the home), and with the clock right again it
/// is still expired.
#[test]
fn file_store_an_expiry_a_cold_check_found_is_not_revived_by_a_check_or_renew_behind_it() {
    let home = Home::file();
    let clock = Clock::new();
    let (generation, a) = home.acquire("b", "r", "lane-a", &["--ttl", "1s"]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    check(&home, &a).expect(3, "row-fence: REFUSED (lease_expired)");
    clock.step("-3s");
    let behind = cli_on(
        &home,
        &clock,
        &["check", "--descriptor", a.to_str().unwrap()],
    );
    behind.expect(1, "row-fence: COULD NOT READ (clock_regressed)");
    let renewed = cli_on(
        &home,
        &clock,
        &[
            "renew",
            "b",
            "r",
            "--lane",
            "lane-a",
            "--generation",
            &generation.to_string(),
            "--descriptor",
            a.to_str().unwrap(),
            "--ttl",
            "1h",
        ],
    );
    assert_eq!(renewed.code, 1, "{}", renewed.stderr);
    assert!(
        renewed.stderr.contains("clock went back"),
        "{}",
        renewed.stderr
    );
    check(&home, &a).expect(3, "row-fence: REFUSED (lease_expired)");
}
