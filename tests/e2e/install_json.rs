//! `install … --json` prints one JSON object; `install claude-hook|git-hook` warn while
//! no daemon answers for their home (README, "Install", Order); `install systemd` where
//! no user manager answers says the job's state is unknown and keeps the restart in the
//! load line.

use crate::util::{Home, bin, bin_dir, run};
use std::fs;
use std::os::unix::fs::PermissionsExt;

const NO_DAEMON: &str = "no daemon answers for";

#[test]
fn hook_installs_warn_until_a_daemon_answers_for_their_home() {
    let home = Home::file();
    let settings = home.path("claude/settings.json");
    let settings_s = settings.display().to_string();
    let bins = bin_dir().display().to_string();
    let claude = |extra: &[&str]| {
        let mut args = vec!["install", "claude-hook", "--settings", &settings_s];
        args.extend(["--bin-dir", &bins, "--json"]);
        args.extend_from_slice(extra);
        home.cli(&args)
    };
    let ran = claude(&[]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let v = ran.json();
    assert_eq!(
        (v["hook"].as_str(), v["changed"].as_bool()),
        (Some("on"), Some(true))
    );
    assert_eq!(v["daemon"], "silent");
    assert!(ran.stderr.contains(NO_DAEMON), "{}", ran.stderr);

    let repo = home.path("repo");
    let init = run(home.command("git").args(["init", "-q"]).arg(&repo));
    assert_eq!(init.code, 0, "{}", init.stderr);
    let repo_s = repo.display().to_string();
    let git_hook = |extra: &[&str]| {
        let mut args = vec!["install", "git-hook", "--repo", &repo_s, "--bin-dir", &bins];
        args.extend_from_slice(extra);
        args.push("--json");
        home.cli(&args)
    };
    let ran = git_hook(&[]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.json()["daemon"], "silent");
    assert!(ran.stderr.contains(NO_DAEMON), "{}", ran.stderr);

    // Another home's daemon on this home's socket is not this home's daemon.
    let other = Home::file();
    let socket = home.socket().display().to_string();
    let _foreign = other.daemon_with(&["--socket", &socket], &[("ROW_FENCE_SOCKET", &socket)]);
    let ran = claude(&[]);
    assert_eq!(ran.json()["daemon"], "other_home");
    assert!(
        ran.stderr.contains(&other.home.display().to_string()),
        "{}",
        ran.stderr
    );
    drop(_foreign);

    let _daemon = home.daemon();
    let ran = claude(&[]);
    let v = ran.json();
    assert_eq!(
        (v["daemon"].as_str(), v["changed"].as_bool()),
        (Some("answers"), Some(false))
    );
    assert!(!ran.stderr.contains(NO_DAEMON), "{}", ran.stderr);
    let ran = git_hook(&[]);
    assert_eq!(ran.json()["daemon"], "answers");
    assert!(!ran.stderr.contains(NO_DAEMON), "{}", ran.stderr);
    assert_eq!(ran.json()["hooks_dirs"][0], format!("{repo_s}/.git/hooks"));

    // Rollback asks nothing of the daemon.
    let ran = git_hook(&["--rollback"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let v = ran.json();
    assert_eq!(
        (v["rollback"].as_bool(), v["daemon"].is_null()),
        (Some(true), true)
    );
    let ran = claude(&["--rollback"]);
    assert_eq!(ran.json()["hook"], "off");
}

/// `install systemd --json` with a `systemctl` that says `stdout`, `stderr` and exits
/// `code` for `is-active`: the JSON and stderr.
fn install_systemd(stdout: &str, stderr: &str, code: i32) -> (serde_json::Value, String) {
    let home = Home::file();
    let manager = home.path("manager");
    fs::create_dir_all(&manager).unwrap();
    let systemctl = manager.join("systemctl");
    fs::write(
        &systemctl,
        format!("#!/bin/sh\necho '{stdout}'\necho '{stderr}' >&2\nexit {code}\n"),
    )
    .unwrap();
    fs::set_permissions(&systemctl, fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        manager.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let ran = run(home
        .command(bin("row-fence"))
        .env("PATH", path)
        .args(["install", "systemd", "--json", "--bin-dir"])
        .arg(bin_dir()));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let v = ran.json();
    let unit = home
        .dir
        .path()
        .join(".config/systemd/user/row-fence-resident.service");
    assert_eq!(v["path"], unit.display().to_string());
    assert_eq!(v["job"], "systemd");
    (v, ran.stderr)
}

#[test]
fn install_systemd_says_the_state_is_unknown_when_no_user_manager_answers() {
    let restart = "systemctl --user restart row-fence-resident.service";
    let (v, stderr) = install_systemd("", "Failed to connect to bus: No medium found", 1);
    assert_eq!(v["job_state"], "unknown");
    assert!(v["load"].as_str().unwrap().contains(restart), "{v}");
    assert!(
        stderr.contains("no user service manager answered")
            && stderr.contains("Failed to connect to bus"),
        "{stderr}"
    );
    // A machine with none gets a way that works: the daemon by hand, then the hook; and
    // a rollback that goes on past systemctl to remove the unit and stop the daemon.
    let by_hand = v["by_hand"].as_str().unwrap();
    assert!(
        by_hand.contains("row-fence-resident")
            && by_hand.contains("--detach && ")
            && by_hand.contains("install claude-hook"),
        "{v}"
    );
    let rollback = v["rollback"].as_str().unwrap();
    assert!(
        rollback.contains("disable --now row-fence-resident.service ||")
            && rollback.contains("rm -f ")
            && rollback.ends_with(" stop"),
        "{v}"
    );

    let (v, stderr) = install_systemd("inactive", "", 3);
    assert_eq!(v["job_state"], "not_running");
    assert_eq!(v["by_hand"], serde_json::Value::Null, "{v}");
    assert!(!v["load"].as_str().unwrap().contains(restart), "{v}");
    assert!(!stderr.contains("unknown"), "{stderr}");

    let (v, _) = install_systemd("active", "", 0);
    assert_eq!(v["job_state"], "running");
    assert!(v["load"].as_str().unwrap().contains(restart), "{v}");
    assert!(
        v["rollback"].as_str().unwrap().contains("disable --now"),
        "{v}"
    );
}

/// launchd cannot be asked where there is no `launchctl` (Linux, a job written for a Mac):
/// the state is unknown, not "not running", and the load line does not boot a label out.
#[test]
fn install_launchd_says_the_state_is_unknown_without_launchctl() {
    let home = Home::file();
    let empty = home.path("no-launchctl");
    fs::create_dir_all(&empty).unwrap();
    let path = format!("{}:/usr/bin:/bin", empty.display());
    let ran = run(home
        .command(bin("row-fence"))
        .env("PATH", path)
        .args(["install", "launchd", "--json", "--bin-dir"])
        .arg(bin_dir()));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let v = ran.json();
    assert_eq!(v["job"], "launchd");
    assert_eq!(v["job_state"], "unknown");
    assert!(!v["load"].as_str().unwrap().contains("bootout"), "{v}");
    assert!(ran.stderr.contains("state is unknown"), "{}", ran.stderr);
}

/// `install systemd --agent …` switches the harness the operator runs, not Claude Code's
/// for everyone: the load line turns each named hook on after the job, the rollback turns
/// them off (last first) before it; `--agent none` switches none; `--settings` takes one.
#[test]
fn install_systemd_switches_the_hooks_of_the_harnesses_named() {
    let home = Home::file();
    let job = |agents: &[&str]| {
        let mut cmd = home.command(bin("row-fence"));
        cmd.args(["install", "systemd", "--json", "--bin-dir"])
            .arg(bin_dir());
        for a in agents {
            cmd.args(["--agent", a]);
        }
        run(&mut cmd)
    };
    let ran = job(&["codex", "cursor"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let v = ran.json();
    let (load, rollback) = (v["load"].as_str().unwrap(), v["rollback"].as_str().unwrap());
    assert!(
        !load.contains("claude-hook") && !rollback.contains("claude-hook"),
        "{v}"
    );
    let codex = load
        .find("install agent-hook --agent codex")
        .expect("codex on");
    let cursor = load
        .find("install agent-hook --agent cursor")
        .expect("cursor on");
    assert!(
        load.find("enable --now").unwrap() < codex && codex < cursor,
        "{load}"
    );
    let off = |a: &str| rollback.find(&format!("--agent {a} --bin-dir")).unwrap();
    assert!(off("cursor") < off("codex"), "{rollback}");
    assert!(
        off("codex") < rollback.find("disable --now").unwrap(),
        "{rollback}"
    );

    let v = job(&["none"]).json();
    assert!(!v["load"].as_str().unwrap().contains("install"), "{v}");
    assert!(!v["rollback"].as_str().unwrap().contains("install"), "{v}");

    // Refused before anything is written.
    let fresh = Home::file();
    for extra in [
        &["--agent", "none", "--agent", "codex"][..],
        &[
            "--agent",
            "codex",
            "--agent",
            "gemini",
            "--settings",
            "/tmp/x.json",
        ][..],
    ] {
        let ran = run(fresh
            .command(bin("row-fence"))
            .args(["install", "systemd", "--bin-dir"])
            .arg(bin_dir())
            .args(extra));
        assert_eq!(ran.code, 2, "{extra:?}: {}", ran.stderr);
    }
    assert!(
        !fresh.dir.path().join(".config").exists(),
        "nothing written"
    );
}
