//! The asker as a process: closed and full stdio, peers of other uids, socket directories
//! it must not trust, many asks at once.

use crate::util::{Home, Redis, bin, run};
use row_fence_contract::{Reason, Verdict};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

const NOBODY: u32 = 65534;

/// A test that needs another uid fails without root, never passes by skipping: the
/// suite runs as root in CI (`scripts/test` on a clean checkout).
#[track_caller]
fn require_root(why: &str) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "{why} needs root: run the end-to-end suite as root, as CI does"
    );
}

#[test]
fn a_closed_or_full_stdout_or_stderr_never_changes_the_exit_code() {
    let home = Home::file();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    home.acquire("b", "r", "lane-b", &["--takeover"]);
    let _daemon = home.daemon();
    let asker = bin("row-fence-ask");
    for redirect in [
        ">&-",
        "2>&-",
        ">&- 2>&-",
        ">/dev/full",
        "2>/dev/full",
        ">/dev/full 2>/dev/full",
    ] {
        let script = format!("exec \"$0\" --json --descriptor \"$1\" {redirect}");
        let ran = run(home
            .command("sh")
            .arg("-c")
            .arg(&script)
            .arg(&asker)
            .arg(&a));
        assert_eq!(ran.code, 3, "{redirect}: {}", ran.stderr);
    }
    // And the unfenced answer stays 0.
    let ran = run(home
        .command("sh")
        .arg("-c")
        .arg("exec \"$0\" --json >&- 2>/dev/full")
        .arg(&asker)
        .current_dir(home.dir.path()));
    assert_eq!(ran.code, 0);
}

#[test]
fn many_concurrent_asks_are_all_answered() {
    let home = Home::file();
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    let _daemon = home.daemon();
    let children: Vec<_> = (0..40)
        .map(|_| {
            home.command(bin("row-fence-ask"))
                .arg("--descriptor")
                .arg(&a)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert_eq!(child.wait().unwrap().code(), Some(0));
    }
}

/// A descriptor that `nobody` can read, outside the (private) home.
fn world_readable_descriptor(generation: u64) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("rfpub")
        .tempdir_in("/tmp")
        .unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("d.json");
    fs::write(
        &path,
        format!(r#"{{"board":"b","row":"r","lane":"lane-a","generation":{generation}}}"#),
    )
    .unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    (dir, path)
}

#[test]
fn a_peer_of_another_uid_is_refused_without_a_store_call() {
    require_root("running the asker as another uid");
    let redis = Redis::start();
    // Every verdict recorded, so any store call (an ALLOWED one too) would show.
    let home = Home::with_store(format!("{}?asks=all", redis.url()));
    let (generation, _) = home.acquire("b", "r", "lane-a", &[]);
    let daemon = home.daemon();
    let (_pub, d) = world_readable_descriptor(generation);
    let asks = || {
        redis
            .cli(&["XLEN", "rowfence:board:{b}:fence:asks"])
            .trim()
            .to_string()
    };
    let before = asks();
    let as_nobody = || {
        let mut cmd = home.command(bin("row-fence-ask"));
        cmd.arg("--descriptor")
            .arg(&d)
            .current_dir("/")
            .uid(NOBODY)
            .gid(NOBODY);
        run(&mut cmd)
    };

    // As shipped: the home is private, so nobody cannot even reach the socket.
    as_nobody().expect(1, "row-fence: COULD NOT READ (fence_unreadable)");
    assert_eq!(asks(), before, "no store call");

    // Loosened by hand: nobody reaches the socket, and the daemon's own uid check refuses.
    fs::set_permissions(home.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&home.home, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&daemon.socket, fs::Permissions::from_mode(0o777)).unwrap();
    as_nobody().expect(1, "row-fence: COULD NOT READ (peer_refused)");
    as_nobody().expect(1, "row-fence: COULD NOT READ (peer_refused)");
    assert_eq!(asks(), before, "no store call");
    // The probe leaves a trace: a ledger line per ask, filed under what it claimed, and
    // one WARN (rate-limited like every refusal).
    let mut daemon = daemon;
    daemon.stop();
    let ledger = row_fence_contract::ledger::read(&home.home.join("refusals.jsonl")).unwrap();
    let probes: Vec<_> = ledger
        .iter()
        .filter(|r| r.verdict == Verdict::CouldNotRead(Reason::PeerRefused))
        .collect();
    assert_eq!(probes.len(), 2, "{ledger:?}");
    assert_eq!(
        (probes[0].board.as_deref(), probes[0].lane.as_deref()),
        (Some("b"), Some("lane-a"))
    );
    assert!(
        probes[0].detail.contains(&format!("uid {NOBODY}")),
        "{}",
        probes[0].detail
    );
    let warnings = daemon
        .log_text()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("peer_refused"))
        .count();
    assert_eq!(warnings, 1, "{}", daemon.log_text());
}

#[test]
fn a_socket_directory_owned_by_another_uid_is_not_trusted() {
    require_root("making a directory owned by another uid");
    let home = Home::file();
    let other = home.path("other");
    fs::create_dir(&other).unwrap();
    fs::set_permissions(&other, fs::Permissions::from_mode(0o700)).unwrap();
    nix::unistd::chown(&other, Some(nix::unistd::Uid::from_raw(NOBODY)), None).unwrap();
    let d = home.path("d.json");
    fs::write(&d, r#"{"board":"b","row":"r","lane":"l","generation":1}"#).unwrap();
    let socket = other.join("sock");
    let ran = home.ask_with(&d, &["--socket", socket.to_str().unwrap()]);
    ran.expect(1, "row-fence: COULD NOT READ (fence_unreadable)");
    assert!(
        ran.stderr.contains(&other.display().to_string()) && ran.stderr.contains("uid 65534"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("row-fence: asking"), "{}", ran.stderr);
}

#[test]
fn a_group_or_world_writable_socket_directory_is_not_trusted() {
    let home = Home::file();
    let open = home.path("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let d = home.path("d.json");
    fs::write(&d, r#"{"board":"b","row":"r","lane":"l","generation":1}"#).unwrap();
    let ran = home.ask_with(&d, &["--socket", open.join("sock").to_str().unwrap()]);
    ran.expect(1, "row-fence: COULD NOT READ (fence_unreadable)");
    assert!(ran.stderr.contains("writable"), "{}", ran.stderr);
    // The daemon refuses such a directory too.
    let ran = run(home
        .command(bin("row-fence-resident"))
        .env("ROW_FENCE_SOCKET", open.join("sock")));
    assert_ne!(ran.code, 0);
    assert!(ran.stderr.contains("writable"), "{}", ran.stderr);
}
