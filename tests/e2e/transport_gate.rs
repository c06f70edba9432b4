//! Git's transport gate over real transports: ssh (git's ssh protocol to a real
//! `git-receive-pack`, through a fake `ssh` that runs it here) and http (a real HTTP
//! server with basic auth in front of `git http-backend`). For each: an ALLOWED lane
//! pushes; a refused lane's pushes by every route that skips the pre-push hook leave the
//! remote ref where it was; and over ssh a refused lane still fetches.

use crate::gated::{GitDaemon, World, allowed, refused};
use crate::http_git::{HttpGit, PASSWORD, USER};
use crate::util::{Daemon, Ran, bin, run};
use row_fence_contract::ledger;
use row_fence_install::git_gate;
use std::fs;
use std::path::PathBuf;

const REFUSED: &str = "row-fence: REFUSED (different_holder)";

/// A lane bound to row-1 whose `origin` is `url`, with git's layer installed and a daemon.
struct Lane {
    /// First, so it is stopped (and writes its last files) before the home is removed.
    _daemon: Daemon,
    world: World,
    clone: PathBuf,
}

impl Lane {
    fn new(world: World, url: &str) -> Lane {
        let clone = world.clone(url, "lane-a");
        let installed = world.install(&clone, &[]);
        assert_eq!(installed.code, 0, "{}", installed.stderr);
        world.bind(&clone.join(".git"), "row-1", "lane-a");
        let daemon = world.home.daemon();
        Lane {
            world,
            clone,
            _daemon: daemon,
        }
    }

    fn git(&self, args: &[&str]) -> Ran {
        self.world.git(&self.clone, args)
    }

    /// `git push --no-verify origin main` goes through the gate, ALLOWED, and moves
    /// `remote`'s ref to this clone's head.
    fn pushes_allowed(&self, remote: &std::path::Path) {
        allowed(&self.git(&["push", "--no-verify", "origin", "main"]));
        assert_eq!(self.world.main_of(remote), self.world.head_of(&self.clone));
    }

    /// The control: with git's layer rolled back, the same refused lane's push moves the
    /// remote ref, so it was the gate that held it.
    fn rolled_back_push_moves(&self, remote: &std::path::Path) {
        let back = self.world.install(&self.clone, &["--rollback"]);
        assert_eq!(back.code, 0, "{}", back.stderr);
        let push = self.git(&["push", "--no-verify", "origin", "main"]);
        assert_eq!(push.code, 0, "{}", push.stderr);
        assert!(!push.stderr.contains("row-fence:"), "{}", push.stderr);
        assert_eq!(self.world.main_of(remote), self.world.head_of(&self.clone));
    }

    /// Every way to push `main` that skips the pre-push hook.
    fn pushes_past_the_hook(&self, url: &str) -> Vec<(&'static str, Ran)> {
        let python = "import subprocess, sys; sys.exit(subprocess.run(['git', 'push', '--no-verify', 'origin', 'main']).returncode)";
        vec![
            (
                "git push --no-verify",
                self.git(&["push", "--no-verify", "origin", "main"]),
            ),
            ("git send-pack", self.git(&["send-pack", url, "main"])),
            (
                "git -c alias.p=push p",
                self.git(&["-c", "alias.p=push", "p", "--no-verify", "origin", "main"]),
            ),
            (
                "python3 -c subprocess",
                run(self
                    .world
                    .command("python3", &self.clone)
                    .args(["-c", python])),
            ),
            (
                "git -c core.hooksPath=/dev/null push",
                self.git(&["-c", "core.hooksPath=/dev/null", "push", "origin", "main"]),
            ),
            (
                "git push URL",
                self.git(&["push", "--no-verify", url, "main"]),
            ),
        ]
    }
}

fn ssh_lane() -> (Lane, PathBuf, String) {
    let world = World::new();
    let remote = world.bare("remote.git");
    let url = world.ssh_url(&remote);
    (Lane::new(world, &url), remote, url)
}

#[test]
fn an_allowed_lane_pushes_over_ssh_through_the_gate() {
    let (lane, remote, _) = ssh_lane();
    lane.pushes_allowed(&remote);
    assert!(
        lane.world.ssh_log().contains("git-receive-pack"),
        "git ran its ssh (the fake) after the gate: {}",
        lane.world.ssh_log()
    );
    // Git takes the gate for OpenSSH, as it took `ssh`: it passes a port (the "simple"
    // variant would refuse one), and its `-G` probe never reaches ssh.
    lane.world.commit(&lane.clone, "over a port");
    let ported = format!("ssh://host:2222{}", remote.display());
    let push = lane.git(&["push", "--no-verify", &ported, "main"]);
    assert_eq!(push.code, 0, "{}", push.stderr);
    let log = lane.world.ssh_log();
    assert!(
        log.lines()
            .any(|l| l.starts_with("-p 2222 host git-receive-pack")),
        "{log}"
    );
    assert!(!log.lines().any(|l| l.starts_with("-G")), "{log}");
}

/// The first two reproductions, and their kind: every push that skips the hook.
#[test]
fn a_refused_lane_cannot_push_over_ssh_by_any_route_past_the_hook() {
    let (lane, remote, url) = ssh_lane();
    assert_eq!(lane.git(&["push", "-q", "origin", "main"]).code, 0);
    let before = lane.world.main_of(&remote);
    lane.world.take_over("row-1", "lane-b");
    lane.world.commit(&lane.clone, "after the takeover");
    let scp_like = format!("host:{}", remote.display());
    let mut pushes = lane.pushes_past_the_hook(&url);
    pushes.push((
        "scp-like URL",
        lane.git(&["push", "--no-verify", &scp_like, "main"]),
    ));
    pushes.push((
        "git+ssh URL",
        lane.git(&[
            "push",
            "--no-verify",
            &url.replace("ssh://", "git+ssh://"),
            "main",
        ]),
    ));
    pushes.push((
        "protocol version 2",
        lane.git(&[
            "-c",
            "protocol.version=2",
            "push",
            "--no-verify",
            "origin",
            "main",
        ]),
    ));
    pushes.push((
        "a receive-pack of one's own",
        lane.git(&[
            "push",
            "--no-verify",
            "--receive-pack=git receive-pack",
            "origin",
            "main",
        ]),
    ));
    let exec_path = lane.world.git_ok(&lane.clone, &["--exec-path"]);
    let receive_pack = format!("--receive-pack={}/git-receive-pack", exec_path.trim());
    pushes.push((
        "a receive-pack by its path",
        lane.git(&["push", "--no-verify", &receive_pack, "origin", "main"]),
    ));
    let ported = format!("ssh://git@host:2222{}", remote.display());
    pushes.push((
        "ssh://user@host:port/path",
        lane.git(&["push", "--no-verify", &ported, "main"]),
    ));
    let ipv6 = format!("git@[::1]:{}", remote.display());
    pushes.push((
        "scp-like with an IPv6 host",
        lane.git(&["push", "--no-verify", &ipv6, "main"]),
    ));
    pushes.push((
        "git push --all",
        lane.git(&["push", "--no-verify", "--all", "origin"]),
    ));
    pushes.push((
        "git push --mirror",
        lane.git(&["push", "--no-verify", "--mirror", &url]),
    ));
    // One remote, two push URLs (`remote.<name>.pushurl`), one rewritten by pushInsteadOf.
    lane.world
        .git_ok(&lane.clone, &["remote", "add", "both", &url]);
    lane.world.git_ok(
        &lane.clone,
        &["config", "--add", "remote.both.pushurl", &url],
    );
    lane.world.git_ok(
        &lane.clone,
        &[
            "config",
            "--add",
            "remote.both.pushurl",
            &format!("push-lane://{}", remote.display()),
        ],
    );
    lane.world.git_ok(
        &lane.clone,
        &["config", "url.ssh://host/.pushInsteadOf", "push-lane://"],
    );
    pushes.push((
        "several push URLs and pushInsteadOf",
        lane.git(&["push", "--no-verify", "both", "main"]),
    ));
    lane.world.git_ok(
        &lane.clone,
        &["config", "url.ssh://host/.insteadOf", "lane://"],
    );
    pushes.push((
        "an insteadOf rewrite to ssh",
        lane.git(&[
            "push",
            "--no-verify",
            &format!("lane://{}", remote.display()),
            "main",
        ]),
    ));
    for (route, push) in pushes {
        eprintln!("route: {route}");
        refused(&push, &before, &lane.world.main_of(&remote), REFUSED);
    }
    lane.rolled_back_push_moves(&remote);
}

#[test]
fn a_refused_lane_still_fetches_over_ssh() {
    let (lane, remote, _) = ssh_lane();
    assert_eq!(lane.git(&["push", "-q", "origin", "main"]).code, 0);
    lane.world.take_over("row-1", "lane-b");
    // Lane B moves the remote (over a local path, which has no transport to gate).
    let other = lane.world.clone(remote.to_str().unwrap(), "lane-b");
    lane.world
        .git_ok(&other, &["pull", "-q", "--rebase", "origin", "main"]);
    lane.world.git_ok(&other, &["push", "-q", "origin", "main"]);
    let fetch = lane.git(&["fetch", "origin"]);
    assert_eq!(fetch.code, 0, "{}", fetch.stderr);
    assert!(
        !fetch.stderr.contains("row-fence:"),
        "a fetch is not asked: {}",
        fetch.stderr
    );
    let fetched = lane
        .world
        .git_ok(&lane.clone, &["rev-parse", "origin/main"]);
    assert_eq!(fetched.trim(), lane.world.main_of(&remote));
    let ls = lane.git(&["ls-remote", "origin"]);
    assert_eq!(ls.code, 0, "{}", ls.stderr);
    lane.world.git_ok(
        &lane.clone,
        &["remote", "add", "again", &lane.world.ssh_url(&remote)],
    );
    // An upload-pack named by its path (a host whose PATH lacks git), or git's dashless
    // form: still a fetch, which the gate used to ask about and refuse.
    let exec_path = lane.world.git_ok(&lane.clone, &["--exec-path"]);
    let upload_pack = format!("--upload-pack={}/git-upload-pack", exec_path.trim());
    for fetch in [
        &["remote", "update"][..],
        &["fetch", "--all"][..],
        &["pull", "-q", "--rebase", "origin", "main"][..],
        &["fetch", &upload_pack, "origin"][..],
        &["fetch", "--upload-pack=git upload-pack", "origin"][..],
    ] {
        let ran = lane.git(fetch);
        assert_eq!(ran.code, 0, "git {fetch:?}: {}", ran.stderr);
        assert!(!ran.stderr.contains("row-fence:"), "{}", ran.stderr);
    }
}

/// A bare repository bound to a row (a lane that works in a mirror): git runs in its
/// directory with no `.git` around it and clears `GIT_DIR` for ssh, and the gate answered
/// UNFENCED while the pre-push hook, which gets `GIT_DIR`, refused.
#[test]
fn a_row_bound_bare_repository_is_refused_by_the_gate_as_by_the_hook() {
    let world = World::new();
    let remote = world.bare("remote.git");
    let seed = world.clone(&world.ssh_url(&remote), "seed");
    world.git_ok(&seed, &["push", "-q", "origin", "main"]);
    let mirror = world.home.path("mirror.git");
    world.git_ok(
        world.home.dir.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &world.ssh_url(&remote),
            mirror.to_str().unwrap(),
        ],
    );
    let installed = world.install(&mirror, &[]);
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    world.bind(&mirror, "row-1", "lane-a");
    let _daemon = world.home.daemon();
    let update_mirror = |message: &str| {
        world.commit(&seed, message);
        world.git_ok(&seed, &["push", "-q", mirror.to_str().unwrap(), "main"]);
    };
    update_mirror("while held");
    allowed(&world.git(&mirror, &["push", "--no-verify", "origin", "main"]));
    assert_eq!(world.main_of(&remote), world.main_of(&mirror));

    world.take_over("row-1", "lane-b");
    update_mirror("after the takeover");
    let before = world.main_of(&remote);
    for args in [
        &["push", "origin", "main"][..],
        &["push", "--no-verify", "origin", "main"][..],
        &["send-pack", &world.ssh_url(&remote), "main"][..],
    ] {
        let push = world.git(&mirror, args);
        refused(&push, &before, &world.main_of(&remote), REFUSED);
        assert!(!push.stderr.contains("UNFENCED"), "{}", push.stderr);
    }
    let asked = run(world
        .command(bin("row-fence-ask"), &mirror.join("refs"))
        .args(["--action", "git push"]));
    asked.expect(3, REFUSED);
}

#[test]
fn the_gates_verdict_line_and_ledger_record_are_the_askers() {
    let (lane, remote, _) = ssh_lane();
    lane.world.take_over("row-1", "lane-b");
    let push = lane.git(&["push", "--no-verify", "origin", "main"]);
    let asked = run(lane
        .world
        .command(bin("row-fence-ask"), &lane.clone)
        .args(["--action", "git push origin"]));
    asked.expect(3, REFUSED);
    assert!(
        push.stderr.lines().any(|l| l == asked.verdict_line()),
        "the gate printed the asker's line {:?}:\n{}",
        asked.verdict_line(),
        push.stderr
    );
    let records = ledger::read(&lane.world.home.home.join("refusals.jsonl")).unwrap();
    let gate = records
        .iter()
        .find(|r| r.action.starts_with("git push over ssh"))
        .expect("a ledger record of the gate's ask");
    assert_eq!(
        gate.action,
        format!(
            "git push over ssh: host git-receive-pack '{}'",
            remote.display()
        )
    );
    assert_eq!(gate.lane.as_deref(), Some("lane-a"));
    assert_eq!(
        serde_json::to_value(gate).unwrap()["reason"],
        "different_holder"
    );
    assert_eq!(serde_json::to_value(gate).unwrap()["decided_by"], "daemon");
}

/// An http remote that wants `lane:secret`, which the repository's own credential helper
/// (configured before install, so it runs after the gate's) gives.
fn http_lane() -> (Lane, HttpGit, PathBuf, String) {
    let world = World::new();
    let root = world.home.path("srv");
    let remote = world.bare("srv/r.git");
    let server = HttpGit::start(&root);
    let url = server.url("r.git");
    let helper = format!("!f() {{ echo username={USER}; echo password={PASSWORD}; }}; f");
    fs::write(
        world.home.dir.path().join(".gitconfig"),
        format!(
            "[credential]\n\thelper = \"{}\"\n",
            helper.replace('"', "\\\"")
        ),
    )
    .unwrap();
    (Lane::new(world, &url), server, remote, url)
}

/// `gh auth setup-git` writes a reset and its own helper for one URL in the global
/// config; install refused it ("remove that line first"). Replayed with the gate's helper
/// after the reset, the gate stays first for that URL and the user's helper answers.
#[test]
fn a_url_reset_of_credential_helpers_as_gh_writes_keeps_the_gate_first_for_that_url() {
    let world = World::new();
    let root = world.home.path("srv");
    let remote = world.bare("srv/r.git");
    let server = HttpGit::start(&root);
    let url = server.url("r.git");
    let helper = format!("!f() {{ echo username={USER}; echo password={PASSWORD}; }}; f");
    fs::write(
        world.home.dir.path().join(".gitconfig"),
        format!(
            "[credential]\n\thelper = \"!f() {{ echo quit=1; }}; f\"\n[credential \"http://127.0.0.1:{}\"]\n\thelper =\n\thelper = \"{}\"\n",
            server.port,
            helper.replace('"', "\\\"")
        ),
    )
    .unwrap();
    let lane = Lane::new(world, &url);
    lane.pushes_allowed(&remote);
    lane.world.take_over("row-1", "lane-b");
    lane.world.commit(&lane.clone, "after the takeover");
    let before = lane.world.main_of(&remote);
    let push = lane.git(&["push", "--no-verify", "origin", "main"]);
    refused(&push, &before, &lane.world.main_of(&remote), REFUSED);
    assert!(push.stderr.contains("told us to quit"), "{}", push.stderr);
    let doctor = lane
        .world
        .home
        .cli(&["doctor", "--repo", lane.clone.to_str().unwrap()]);
    assert_eq!(doctor.code, 0, "{}", doctor.stdout);
}

#[test]
fn an_allowed_lane_pushes_over_http_and_its_own_helper_answers() {
    let (lane, _server, remote, _) = http_lane();
    lane.pushes_allowed(&remote);
}

#[test]
fn a_refused_lane_cannot_push_over_http_by_any_route_past_the_hook() {
    let (lane, _server, remote, url) = http_lane();
    assert_eq!(lane.git(&["push", "-q", "origin", "main"]).code, 0);
    let before = lane.world.main_of(&remote);
    lane.world.take_over("row-1", "lane-b");
    lane.world.commit(&lane.clone, "after the takeover");
    let mut pushes = lane.pushes_past_the_hook(&url);
    let with_user = url.replace("http://", &format!("http://{USER}@"));
    pushes.push((
        "a user name in the URL",
        lane.git(&["push", "--no-verify", &with_user, "main"]),
    ));
    for (route, push) in pushes {
        eprintln!("route: {route}");
        if route == "git send-pack" {
            // send-pack speaks no http at all: nothing can move.
            assert_ne!(push.code, 0);
            assert_eq!(lane.world.main_of(&remote), before);
            continue;
        }
        refused(&push, &before, &lane.world.main_of(&remote), REFUSED);
        assert!(push.stderr.contains("told us to quit"), "{}", push.stderr);
    }
    lane.rolled_back_push_moves(&remote);
}

#[test]
fn a_gate_whose_asker_cannot_run_stops_git_over_both_transports() {
    let world = World::new();
    let ssh_remote = world.bare("remote.git");
    let root = world.home.path("srv");
    let http_remote = world.bare("srv/r.git");
    let server = HttpGit::start(&root);
    let clone = world.clone(&world.ssh_url(&ssh_remote), "lane-a");
    // The gate names an asker that is then removed.
    let gone = world.home.path("gone-bin");
    fs::create_dir_all(&gone).unwrap();
    fs::copy(bin("row-fence-ask"), gone.join("row-fence-ask")).unwrap();
    let installed = run(world
        .command(bin("row-fence"), world.home.dir.path())
        .args(["install", "git-hook", "--bin-dir"])
        .arg(&gone)
        .arg("--repo")
        .arg(&clone));
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    fs::remove_dir_all(&gone).unwrap();
    let push = world.git(&clone, &["push", "--no-verify", "origin", "main"]);
    assert_ne!(push.code, 0);
    assert_eq!(world.main_of(&ssh_remote), "");
    let helper = format!("!f() {{ echo username={USER}; echo password={PASSWORD}; }}; f");
    let push = world.git(
        &clone,
        &[
            "-c",
            &format!("credential.helper={helper}"),
            "push",
            "--no-verify",
            &server.url("r.git"),
            "main",
        ],
    );
    assert_ne!(push.code, 0);
    assert!(push.stderr.contains("told us to quit"), "{}", push.stderr);
    assert_eq!(world.main_of(&http_remote), "");
}

/// A `git://` remote through a real `git daemon`: the gate is git's `core.gitProxy`.
#[test]
fn over_git_protocol_an_allowed_lane_pushes_a_refused_one_cannot_and_still_fetches() {
    let world = World::new();
    let root = world.home.path("srv");
    let remote = world.bare("srv/r.git");
    let daemon = GitDaemon::start(&world, &root);
    let url = daemon.url("r.git");
    let lane = Lane::new(world, &url);
    lane.pushes_allowed(&remote);

    lane.world.take_over("row-1", "lane-b");
    lane.world.commit(&lane.clone, "after the takeover");
    let before = lane.world.main_of(&remote);
    for (route, push) in lane.pushes_past_the_hook(&url) {
        eprintln!("route: {route}");
        refused(&push, &before, &lane.world.main_of(&remote), REFUSED);
    }
    let fetch = lane.git(&["fetch", "origin"]);
    assert_eq!(fetch.code, 0, "{}", fetch.stderr);
    assert!(!fetch.stderr.contains("row-fence:"), "{}", fetch.stderr);
    lane.rolled_back_push_moves(&remote);
}

/// `git config credential.helper ''` then a helper of one's own, in the lane's repository
/// after install (git's documented way to replace the helpers): git appended a
/// `[credential]` after the gate's include, the reset cleared the gate's helper and the
/// push went through. The gate's lines now hold an empty `[credential]` that git writes
/// into, before the gate; an earlier install's three lines are upgraded by a rerun.
#[test]
fn a_helper_reset_with_git_config_after_install_cannot_clear_the_gate() {
    let (lane, server, remote, _) = http_lane();
    assert_eq!(lane.git(&["push", "-q", "origin", "main"]).code, 0);
    let config_path = lane.clone.join(".git/config");
    // An earlier install wrote three lines, without the `[credential]`.
    let config = fs::read_to_string(&config_path).unwrap();
    let at = config.find("# row-fence: git's transport gate").unwrap();
    fs::write(
        &config_path,
        format!(
            "{}# row-fence: git's transport gate (row-fence install git-hook --rollback removes these three lines)\n[include]\n\tpath = row-fence.gitconfig\n",
            &config[..at]
        ),
    )
    .unwrap();
    let again = lane.world.install(&lane.clone, &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(fs::read_to_string(&config_path).unwrap(), config);

    lane.world.take_over("row-1", "lane-b");
    lane.world.commit(&lane.clone, "after the takeover");
    let before = lane.world.main_of(&remote);
    let own = format!("!f() {{ echo username={USER}; echo password={PASSWORD}; }}; f");
    lane.world
        .git_ok(&lane.clone, &["config", "credential.helper", ""]);
    lane.world
        .git_ok(&lane.clone, &["config", "--add", "credential.helper", &own]);
    let push = lane.git(&["push", "--no-verify", "origin", "main"]);
    refused(&push, &before, &lane.world.main_of(&remote), REFUSED);
    assert!(push.stderr.contains("told us to quit"), "{}", push.stderr);

    // A reset for one URL still comes after the gate: doctor names it.
    let url_key = format!("credential.http://127.0.0.1:{}.helper", server.port);
    lane.world.git_ok(&lane.clone, &["config", &url_key, ""]);
    let doctor = lane
        .world
        .home
        .cli(&["doctor", "--repo", lane.clone.to_str().unwrap()]);
    assert_eq!(doctor.code, 1, "{}", doctor.stdout);
    assert!(
        doctor
            .stdout
            .contains("after the gate's helper: it clears the gate"),
        "{}",
        doctor.stdout
    );
    lane.world
        .git_ok(&lane.clone, &["config", "--unset", &url_key]);

    let back = lane.world.install(&lane.clone, &["--rollback"]);
    assert_eq!(back.code, 0, "{}", back.stderr);
    let at = config.find("# row-fence: git's transport gate").unwrap();
    assert_eq!(
        fs::read_to_string(&config_path).unwrap(),
        format!(
            "{}[credential]\n\thelper = \n\thelper = {}\n",
            &config[..at],
            git_gate::config_value(&own)
        )
    );
}

const TOKEN_MISMATCH: &str = "row-fence: REFUSED (token_mismatch)";

impl Lane {
    /// The issue's forged descriptor, through git's transport gate (every route past the
    /// hook, and a plain push through hook and gate) and the agent guard: lane-a, refused
    /// after lane-b took the row over, writes what the refusal told it into its own
    /// descriptor and pushes. Every route is REFUSED `token_mismatch` and the remote ref
    /// stays. A copy of lane-b's real descriptor (token included) is ALLOWED: the
    /// documented limit of one uid (docs/operations.md, "Lease token and margin"), which
    /// separate uids close.
    fn forged_descriptor_pushes_nowhere(&self, remote: &std::path::Path, url: &str, http: bool) {
        assert_eq!(self.git(&["push", "-q", "origin", "main"]).code, 0);
        let before = self.world.main_of(remote);
        let (generation, lane_b) =
            self.world
                .home
                .acquire("board-1", "row-1", "lane-b", &["--takeover"]);
        self.world.commit(&self.clone, "after the takeover");
        let descriptor = self.clone.join(".git/row-fence.json");
        fs::write(
            &descriptor,
            format!(
                r#"{{"board":"board-1","row":"row-1","lane":"lane-b","generation":{generation}}}"#
            ),
        )
        .unwrap();
        let mut pushes = self.pushes_past_the_hook(url);
        pushes.push((
            "git push (hook and gate)",
            self.git(&["push", "origin", "main"]),
        ));
        for (route, push) in pushes {
            eprintln!("route: {route}");
            if http && route == "git send-pack" {
                // send-pack speaks no http at all: nothing can move.
                assert_ne!(push.code, 0);
                assert_eq!(self.world.main_of(remote), before);
                continue;
            }
            refused(&push, &before, &self.world.main_of(remote), TOKEN_MISMATCH);
        }
        // The agent guard, as Claude Code runs it for `git push` in the lane's clone.
        let input = serde_json::json!({
            "session_id": "forger",
            "cwd": self.clone,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "git push origin main"},
        })
        .to_string();
        let guarded = crate::guard::run_with_stdin(
            &mut self.world.command(bin("row-fence-guard"), &self.clone),
            &input,
        );
        assert_eq!(guarded.code, 2, "{}", guarded.stderr);
        assert!(
            guarded.stderr.contains("token_mismatch"),
            "{}",
            guarded.stderr
        );
        assert_eq!(self.world.main_of(remote), before);
        // Another worktree's descriptor without its token (as `show` or a refusal prints
        // it) is the same forgery; with it, the copy is the holder's own.
        let mut copied: serde_json::Value =
            serde_json::from_slice(&fs::read(&lane_b).unwrap()).unwrap();
        copied.as_object_mut().unwrap().remove("token");
        fs::write(&descriptor, copied.to_string()).unwrap();
        let push = self.git(&["push", "--no-verify", "origin", "main"]);
        refused(&push, &before, &self.world.main_of(remote), TOKEN_MISMATCH);
        fs::copy(&lane_b, &descriptor).unwrap();
        allowed(&self.git(&["push", "--no-verify", "origin", "main"]));
    }
}

#[test]
fn a_forged_descriptor_pushes_nowhere_over_ssh_through_the_gate_or_the_guard() {
    let (lane, remote, url) = ssh_lane();
    lane.forged_descriptor_pushes_nowhere(&remote, &url, false);
}

#[test]
fn a_forged_descriptor_pushes_nowhere_over_http_through_the_gate_or_the_guard() {
    let (lane, _server, remote, url) = http_lane();
    lane.forged_descriptor_pushes_nowhere(&remote, &url, true);
}
