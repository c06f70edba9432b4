//! Paths and owners a newcomer's machine has (docs/operations.md, "Installers in detail";
//! docs/hard-mode.md, "Key broker"): a repository or home whose path is not UTF-8 is found
//! where it is and the installers refuse it by name (never a changed copy of the path
//! written into a hook), while the fence itself works there; root on a repository a lane
//! owns is told git's real reason (dubious ownership) first; a key broker socket in a
//! directory lanes cannot traverse is named, with the fix, by the daemon, `install broker`
//! and `doctor`.

use crate::util::{Home, bin, bin_dir, git, run};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// `<tmp>/caf\xe9` (Latin-1 é): a directory name that is not UTF-8.
fn latin1_dir(home: &Home) -> PathBuf {
    let dir = home.dir.path().join(OsStr::from_bytes(b"caf\xe9"));
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// A repository with one commit at `dir`.
fn repo_at(home: &Home, dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    git(home, dir, &["init", "-q", "-b", "main"]);
    git(home, dir, &["commit", "-q", "--allow-empty", "-m", "one"]);
}

/// Fails (never skips) when not root: the scenario needs another user's files.
fn require_root(what: &str) {
    assert_eq!(
        nix::unistd::geteuid().as_raw(),
        0,
        "{what} needs root (another user's files): run it as root (CI does)"
    );
}

#[test]
fn a_path_that_is_not_utf8_is_found_where_it_is_and_refused_by_name_never_changed() {
    let home = Home::file();
    let odd = latin1_dir(&home);
    let repo = odd.join("lane-a");
    repo_at(&home, &repo);
    let config = fs::read(repo.join(".git/config")).unwrap();

    // install git-hook: refused, naming the path byte by byte; nothing written.
    let ran = run(home
        .command(bin("row-fence"))
        .args(["install", "git-hook", "--bin-dir"])
        .arg(bin_dir())
        .arg("--repo")
        .arg(&repo));
    assert_ne!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("caf\\xe9") && ran.stderr.contains("not UTF-8"),
        "{}",
        ran.stderr
    );
    assert!(!repo.join(".git/hooks/pre-push").exists());
    assert_eq!(fs::read(repo.join(".git/config")).unwrap(), config);

    // doctor finds the repository where it is (no lossy path: "No such file") and its
    // JSON names it, escaped, without failing.
    let ran = run(home
        .command(bin("row-fence"))
        .args(["doctor", "--json", "--repo"])
        .arg(&repo));
    assert_eq!(ran.code, 1, "not fenced: {}{}", ran.stdout, ran.stderr);
    let v = ran.json();
    assert_eq!(
        v["repositories"][0]["worktrees"][0]["path"],
        format!("{}/caf\\xe9/lane-a", home.dir.path().display()),
        "{v}"
    );
    assert_eq!(v["repositories"][0]["worktrees"][0]["hook"], "missing");

    // A home there: the fence works (acquire, daemon, ask), the installers refuse to
    // write a changed copy of it into a hook or a settings file.
    let mut odd_home = Home::file();
    odd_home.home = latin1_dir(&odd_home).join("home");
    let lane = odd_home.path("lane");
    repo_at(&odd_home, &lane);
    let _daemon = odd_home.daemon();
    let (_, descriptor) = odd_home.acquire("board-1", "row-1", "lane-a", &[]);
    odd_home
        .ask_with(&descriptor, &[])
        .expect(0, "row-fence: ALLOWED");
    for args in [
        vec!["install", "git-hook", "--repo", lane.to_str().unwrap()],
        vec!["install", "claude-hook"],
        vec!["install", "agent-hook", "--agent", "codex"],
    ] {
        let ran = run(odd_home
            .command(bin("row-fence"))
            .args(&args)
            .arg("--bin-dir")
            .arg(bin_dir()));
        assert_eq!(ran.code, 2, "{args:?}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("caf\\xe9/home is not UTF-8"),
            "{}",
            ran.stderr
        );
    }
    assert!(!lane.join(".git/hooks/pre-push").exists());
    assert!(!odd_home.dir.path().join(".claude").exists());
    assert!(!odd_home.dir.path().join(".codex").exists());
}

#[test]
fn root_on_a_repository_a_lane_owns_is_told_gits_real_reason_first() {
    require_root("the dubious-ownership case");
    let home = Home::file();
    let repo = home.path("lane-a");
    repo_at(&home, &repo);
    fs::set_permissions(home.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let chown = run(std::process::Command::new("chown")
        .args(["-R", "nobody"])
        .arg(&repo));
    assert_eq!(chown.code, 0, "{}", chown.stderr);
    let config = fs::read(repo.join(".git/config")).unwrap();
    for args in [
        vec![
            "install",
            "git-hook",
            "--bin-dir",
            bin_dir().to_str().unwrap(),
        ],
        vec!["doctor"],
    ] {
        let ran = run(home
            .command(bin("row-fence"))
            .args(&args)
            .arg("--repo")
            .arg(&repo));
        assert_eq!(ran.code, 1, "{args:?}");
        let said = format!("{}{}", ran.stdout, ran.stderr);
        let first = said
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default();
        assert!(
            first.contains("git refuses to read the repository at")
                && first.contains("owned by nobody")
                && first.contains("safe.directory"),
            "{args:?}: {said}"
        );
        assert!(!said.contains("is not in a git repository"), "{said}");
    }
    assert!(!repo.join(".git/hooks/pre-push").exists());
    assert_eq!(fs::read(repo.join(".git/config")).unwrap(), config);
    // Cleaned up as root: the temp dir's files are nobody's now.
    let _ = run(std::process::Command::new("chown")
        .args(["-R", "root"])
        .arg(&repo));
}

#[test]
fn a_broker_socket_lanes_cannot_reach_is_named_by_the_daemon_install_and_doctor() {
    require_root("the key broker's socket case");
    let home = Home::file();
    fs::set_permissions(home.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    // nobody's lane: its repository and its binding.
    let repo = home.path("lane-a");
    repo_at(&home, &repo);
    let chown = run(std::process::Command::new("chown")
        .args(["-R", "nobody"])
        .arg(&repo));
    assert_eq!(chown.code, 0);
    let uid = nix::unistd::User::from_name("nobody")
        .unwrap()
        .expect("a user named nobody")
        .uid
        .as_raw();
    let lanes = home.path("lanes.toml");
    fs::write(
        &lanes,
        format!(
            "[[lane]]\nlane = \"lane-a\"\nuid = {uid}\ndescriptor = \"{}/.git/row-fence.json\"\n",
            repo.display()
        ),
    )
    .unwrap();
    // The socket in a private (0700) directory, as a runtime directory of the daemon's
    // user would be.
    let private = home.path("run-user");
    fs::create_dir(&private).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    let socket = private.join("agent.sock");
    let made = run(std::process::Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "row-fence-push",
            "-f",
        ])
        .arg(home.path("push")));
    assert_eq!(made.code, 0, "ssh-keygen: {}", made.stderr);
    let key = home.path("push.pub");

    // The broker signs only logins to a forge whose host key it knows: any key will do here.
    let host_key = home.path("push.pub");
    let mut daemon = home.daemon_with(
        &[
            "--broker-socket",
            socket.to_str().unwrap(),
            "--broker-lanes",
            lanes.to_str().unwrap(),
            "--broker-forge-host-key",
            host_key.to_str().unwrap(),
        ],
        &[],
    );
    let named = |said: &str| {
        said.contains(&format!("uid {uid} cannot connect to {}", socket.display()))
            && said.contains(&private.display().to_string())
            && said.contains("chmod o+x")
    };
    // The daemon says so as it starts (it has bound the socket by the time it answers).
    assert!(
        named(&daemon.log_text()),
        "the daemon's log: {}",
        daemon.log_text()
    );

    let config = fs::read(repo.join(".git/config")).unwrap();
    // root's git may read nobody's repository (the ownership case is the test above).
    let install =
        run(home
            .command("git")
            .args(["config", "--global", "--add", "safe.directory", "*"]));
    assert_eq!(install.code, 0, "{}", install.stderr);
    let ran = run(home
        .command(bin("row-fence"))
        .args(["install", "broker", "--bin-dir"])
        .arg(bin_dir())
        .arg("--repo")
        .arg(&repo)
        .arg("--broker-socket")
        .arg(&socket)
        .arg("--key-pub")
        .arg(&key));
    assert_eq!(ran.code, 1, "{}", ran.stderr);
    assert!(named(&ran.stderr), "{}", ran.stderr);
    assert_eq!(
        fs::read(repo.join(".git/config")).unwrap(),
        config,
        "nothing written"
    );

    let ran = run(home
        .command(bin("row-fence"))
        .args(["doctor", "--repo"])
        .arg(&repo)
        .arg("--broker-lanes")
        .arg(&lanes)
        .arg("--broker-socket")
        .arg(&socket));
    assert_eq!(ran.code, 1);
    assert!(
        ran.stdout.contains("the key broker signs nothing for it") && named(&ran.stdout),
        "{}",
        ran.stdout
    );

    // Made traversable, every one of them is quiet about it.
    fs::set_permissions(&private, fs::Permissions::from_mode(0o711)).unwrap();
    let ran = run(home
        .command(bin("row-fence"))
        .args(["doctor", "--json", "--repo"])
        .arg(&repo)
        .arg("--broker-lanes")
        .arg(&lanes)
        .arg("--broker-socket")
        .arg(&socket));
    assert_eq!(
        ran.json()["lanes"][0]["unreachable"],
        serde_json::Value::Null
    );
    daemon.stop();
    let _ = run(std::process::Command::new("chown")
        .args(["-R", "root"])
        .arg(&repo));
}

/// Sends SIGKILL to a detached daemon's pid when dropped (a failed assertion leaves no
/// daemon behind; after a clean stop the pid is gone and the signal finds nothing).
struct KillOnDrop(Option<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

#[test]
fn a_home_whose_path_is_not_utf8_has_a_daemon_that_detach_finds_and_stop_stops() {
    let mut odd_home = Home::file();
    odd_home.home = latin1_dir(&odd_home).join("home");
    let started = run(odd_home.command(bin("row-fence-resident")).arg("--detach"));
    assert_eq!(started.code, 0, "{}", started.stderr);
    let pid = crate::util::status(&odd_home.socket())["pid"].as_i64();
    let _reaper = KillOnDrop(pid.map(|p| p as i32));
    assert!(pid.is_some(), "the detached daemon answers its status");

    // Its status names the home byte for byte, beside the lossy text.
    let status = crate::util::status(&odd_home.socket());
    let bytes = odd_home.home.as_os_str().as_bytes();
    assert_eq!(status["home_bytes"], serde_json::json!(bytes), "{status}");

    // A second --detach finds this home's own daemon (not "another home"): exit 0.
    let again = run(odd_home.command(bin("row-fence-resident")).arg("--detach"));
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("a daemon already serves"),
        "{}",
        again.stderr
    );

    // row-fence stop stops it (it used to refuse: "serves another home").
    let stopped = odd_home.cli(&["stop"]);
    assert_eq!(stopped.code, 0, "{}", stopped.stderr);
    assert!(
        stopped.stderr.contains("row-fence: stopped the daemon"),
        "{}",
        stopped.stderr
    );
    assert!(crate::util::ping(&odd_home.socket()).is_none());
}
