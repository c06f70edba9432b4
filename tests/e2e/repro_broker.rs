//! The handed hard-mode reproductions (`tests/repro/broker/`), run as they are: the attack
//! scripts unchanged, `lib.sh` changed only to today's documented setup (docs/hard-mode.md
//! "Key broker", docs/forge.md: a push key per lane forced into git-shell with its lane's
//! name, a row scope, the forge's pre-receive hook). Each script makes its users, a real
//! sshd serving bare repositories through git-shell and the daemon as its own user, then
//! prints one `RESULT <route>: PUSH LANDED | BLOCKED | …` line per attempt. Every route a
//! refused lane takes must be BLOCKED, no signature over anything but a login may come out,
//! and the control pushes of ALLOWED lanes must land (so a broken setup cannot pass by
//! blocking everything). Root only, as the broker's tests.

use crate::util::{bin_dir, repo_root};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

/// Runs one script (bounded by `timeout`), returning its stdout; its setup must not fail.
fn run(script: &str) -> String {
    assert_eq!(
        nix::unistd::geteuid().as_raw(),
        0,
        "the reproductions make users and run sshd: run them as root (CI does)"
    );
    // A directory every user made can traverse, removed after.
    let tmp = tempfile::Builder::new()
        .prefix("rf-repro")
        .tempdir()
        .expect("temp dir");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = Command::new("timeout")
        .args(["300", "bash"])
        .arg(repo_root().join("tests/repro/broker").join(script))
        .env("BIN", bin_dir())
        .env("RT_TMP", tmp.path())
        // The held session waits this long after the takeover before it feeds its pack.
        .env("HOLD_SECONDS", "3")
        .output()
        .expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !stderr.contains("SETUP FAILED"),
        "{script} exited {:?}:\n{stdout}\n{stderr}",
        out.status.code()
    );
    stdout
}

/// The `RESULT` lines: (route, outcome).
fn results(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .filter_map(|l| {
            l.rsplit_once(": ")
                .map(|(a, b)| (a.to_string(), b.to_string()))
        })
        .map(|(route, outcome)| {
            // "BLOCKED (refs/heads/main = …)": the outcome is its first words.
            let outcome = outcome.split(" (").next().unwrap_or_default().to_string();
            (route, outcome)
        })
        .collect()
}

/// Every route of a refused lane is BLOCKED; each route in `landed` lands.
fn check(script: &str, refused_routes: usize, landed: &[&str]) {
    let stdout = run(script);
    let results = results(&stdout);
    let refused: Vec<&(String, String)> = results
        .iter()
        .filter(|(route, _)| route.contains("REFUSED"))
        .collect();
    assert!(
        refused.len() >= refused_routes,
        "{script}: too few routes tried:\n{stdout}"
    );
    for (route, outcome) in &refused {
        assert_eq!(outcome, "BLOCKED", "{script}: {route}:\n{stdout}");
    }
    for want in landed {
        assert!(
            results
                .iter()
                .any(|(route, outcome)| route == want && outcome == "PUSH LANDED"),
            "{script}: {want} did not land:\n{stdout}"
        );
    }
}

#[test]
fn an_ssh_master_kept_from_while_allowed_pushes_nothing_after_the_takeover() {
    check("01-controlmaster.sh", 4, &[]);
}

#[test]
fn a_receive_pack_session_held_from_while_allowed_pushes_nothing_after_the_takeover() {
    check(
        "02-held-session.sh",
        2,
        &["lane-b (new holder) pushes main"],
    );
}

#[test]
fn the_broker_signs_nothing_but_a_login() {
    let stdout = run("03-sign-oracle.sh");
    let results = results(&stdout);
    assert!(results.len() >= 3, "{stdout}");
    for (route, outcome) in &results {
        assert_eq!(outcome, "BLOCKED", "{route}:\n{stdout}");
    }
    assert!(
        !stdout.contains("USABLE SIGNATURE") && !stdout.contains("SIGNED"),
        "{stdout}"
    );
}

#[test]
fn a_descriptor_pointed_at_another_lease_pushes_nothing() {
    check(
        "05-descriptor-swap.sh",
        2,
        &["lane-a ALLOWED, git push with its own ssh through the broker"],
    );
}

#[test]
fn an_allowed_lane_writes_only_its_rows_refs_in_its_rows_repository() {
    let stdout = run("08-scope.sh");
    let results = results(&stdout);
    assert_eq!(results.len(), 5, "{stdout}");
    for (route, outcome) in &results {
        let want = if route == "its own row's branch" {
            "PUSH LANDED"
        } else {
            "BLOCKED"
        };
        assert_eq!(outcome, want, "{route}:\n{stdout}");
    }
}
