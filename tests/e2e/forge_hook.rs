//! The forge hook on real parts (ARCHITECTURE.md, "Forge hook"): the broker's `Site` (real
//! users, a real sshd serving the bare repository through `git-shell`), each lane with its
//! own push key whose forced command names its lane (`env ROW_FENCE_LANE=…`), a row scope
//! in the registry, and `row-fence install forge-hook` on the forge's repository. The
//! fence is judged at ref-update time, so what kept or held a connection since the lane
//! was ALLOWED pushes nothing after a takeover. Root only, as the broker's tests.

use super::*;
use std::io::{Read, Write};

/// The row's scope every test here runs with.
fn scope_toml(remote: &Path) -> String {
    format!(
        "[boards.board-1.scope]\nrefs = [\"refs/heads/feature/{{row}}\", \"refs/heads/feature/{{row}}/*\", \"refs/tags/{{row}}/*\"]\nrepositories = [\"{}\"]\n",
        fs::canonicalize(remote).expect("remote").display()
    )
}

/// A lane's own push key (root's, 0600) and its authorized_keys line on the forge, whose
/// forced command tells the forge's hook which lane pushes.
fn lane_key(site: &Site, lane: &str) -> PathBuf {
    let key = site.key.with_file_name(lane);
    ssh_keygen(&key, lane);
    let public = fs::read_to_string(key.with_extension("pub")).expect("lane key .pub");
    let line = format!(
        "command=\"env ROW_FENCE_LANE={lane} {} -c \\\"$SSH_ORIGINAL_COMMAND\\\"\",no-port-forwarding,no-agent-forwarding,no-X11-forwarding,no-pty {public}",
        which("git-shell").display()
    );
    let keys = site.home.path("sshd/authorized_keys");
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(&keys)
        .expect("authorized_keys");
    file.write_all(line.as_bytes()).expect("append a lane key");
    key
}

/// The ssh a lane pushes with through its master at `control` (no new login).
fn through_master(control: &Path) -> String {
    format!(
        "{SSH} -o ControlMaster=no -o ControlPath={}",
        control.display()
    )
}

/// Starts an ssh master (`-M -N -f`, ControlPersist) as `user` while it may log in.
fn start_master(site: &Site, user: &User, tree: &Path, control: &Path) {
    let command = format!(
        "{SSH} -M -N -f -o ControlPath={} -o ControlPersist=120 -p {} {}@127.0.0.1 </dev/null >/dev/null 2>&1",
        control.display(),
        site.sshd.port,
        site.server.name
    );
    site.as_lane(user, tree, "sh", &["-c", &command])
        .expect_ok("ssh master");
    assert!(
        control.exists(),
        "no control socket at {}",
        control.display()
    );
}

/// A git-receive-pack session authenticated now and fed later, as a lane holds one.
struct Held {
    child: Child,
    /// The refs the forge advertised: ref → oid.
    advertised: Vec<(String, String)>,
}

impl Held {
    fn open(site: &Site, user: &User, tree: &Path) -> Held {
        let remote = site.remote.display().to_string();
        let mut cmd = Command::new("ssh");
        cmd.args(SSH.split_whitespace().skip(1))
            .args(["-p", &site.sshd.port.to_string()])
            .arg(format!("{}@127.0.0.1", site.server.name))
            .arg(format!("git-receive-pack '{remote}'"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &user.home)
            .env("SSH_AUTH_SOCK", &site.agent)
            .current_dir(tree)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .uid(user.uid)
            .gid(user.gid);
        let mut child = cmd.spawn().expect("ssh git-receive-pack");
        let out = child.stdout.as_mut().expect("stdout");
        let mut advertised = Vec::new();
        while let Some(line) = read_pkt(out) {
            let line = line.split(|b| *b == 0).next().unwrap_or_default();
            let text = String::from_utf8_lossy(line).trim_end().to_string();
            if let Some((oid, name)) = text.split_once(' ') {
                advertised.push((name.to_string(), oid.to_string()));
            }
        }
        assert!(!advertised.is_empty(), "no ref advertisement");
        Held { child, advertised }
    }

    /// Sends one update and `pack`, then reads receive-pack's report to the end.
    fn feed(mut self, old: &str, new: &str, refname: &str, pack: &[u8]) -> String {
        let mut stdin = self.child.stdin.take().expect("stdin");
        let command = format!("{old} {new} {refname}\0report-status\n");
        write!(stdin, "{:04x}{command}0000", command.len() + 4).expect("command");
        stdin.write_all(pack).expect("pack");
        drop(stdin);
        let mut report = String::new();
        self.child
            .stdout
            .take()
            .expect("stdout")
            .read_to_string(&mut report)
            .expect("report");
        let _ = self.child.wait();
        report
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_pkt(from: &mut impl Read) -> Option<Vec<u8>> {
    let mut size = [0u8; 4];
    from.read_exact(&mut size).ok()?;
    let size = usize::from_str_radix(std::str::from_utf8(&size).ok()?, 16).ok()?;
    if size == 0 {
        return None;
    }
    let mut line = vec![0u8; size - 4];
    from.read_exact(&mut line).ok()?;
    Some(line)
}

/// The remote's `refname` (a full ref name), or `None`.
fn remote_full_ref(repo: &Path, refname: &str) -> Option<String> {
    let ran = run(Command::new("git")
        .args(["-c", "safe.directory=*", "--git-dir"])
        .arg(repo)
        .args(["rev-parse", "--verify", "-q", refname]));
    (ran.code == 0).then(|| ran.stdout.trim().to_string())
}

/// Asserts a push was rejected by the forge hook with `reason`, naming `names`.
fn rejected(ran: &Ran, what: &str, reason: &str, names: &str) {
    assert_ne!(ran.code, 0, "{what} landed: {}", ran.stderr);
    let line = format!("remote: row-fence: REFUSED ({reason})");
    assert!(
        ran.stderr.contains(&line) && ran.stderr.contains(names),
        "{what}: no `{line}` naming {names}: {}",
        ran.stderr
    );
}

/// Stops the lane's ssh masters whatever happens to the test.
struct Masters(Vec<(User, PathBuf, PathBuf)>);

impl Drop for Masters {
    fn drop(&mut self) {
        for (user, tree, control) in &self.0 {
            let _ = Command::new("ssh")
                .args(["-o", &format!("ControlPath={}", control.display())])
                .args(["-O", "exit", "x"])
                .current_dir(tree)
                .uid(user.uid)
                .gid(user.gid)
                .output();
        }
    }
}

#[test]
fn the_forge_hook_judges_every_push_at_ref_update_time_and_fails_closed() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let (b, b_tree) = site.lane("b");
    let a_key = lane_key(&site, "lane-a");
    let b_key = lane_key(&site, "lane-b");
    // The forge already holds the release work, a tag and another repository.
    let other = site.home.path("other.git");
    as_root_git(
        site.home.dir.path(),
        &["init", "-q", "--bare", "-b", "main"],
        &other,
    );
    // Root pushes into repositories others own: git's receive-pack reads safe.directory
    // from the global config only.
    let root_config = site.home.path("root.gitconfig");
    fs::write(&root_config, "[safe]\n\tdirectory = *\n").expect("root gitconfig");
    for repo in [&site.remote, &other] {
        let ran = run(Command::new("git")
            .current_dir(&a_tree)
            .env("GIT_CONFIG_GLOBAL", &root_config)
            .args(["push", "-q"])
            .arg(repo)
            .args([
                "HEAD:refs/heads/main",
                "HEAD:refs/heads/release",
                "HEAD:refs/tags/v1",
            ]));
        assert_eq!(ran.code, 0, "seed {}: {}", repo.display(), ran.stderr);
        chown(repo, site.server.uid, site.server.gid);
    }
    // The forge's own pre-receive hook, kept and run first (--chain), back byte for byte.
    let own_hook = b"#!/bin/sh\n# the forge's own check\ncat >/dev/null\nexit 0\n";
    let hook_path = site.remote.join("hooks").join("pre-receive");
    fs::write(&hook_path, own_hook).expect("own hook");
    fs::set_permissions(&hook_path, fs::Permissions::from_mode(0o755)).expect("chmod");
    let registry = row_fence_contract::paths::registry(&site.home.home);
    fs::create_dir_all(&registry).expect("registry dir");
    fs::write(registry.join("boards.toml"), scope_toml(&site.remote)).expect("boards.toml");

    grant(&site, "lane-a", &a_tree, &[]);
    let lanes = format!(
        "[[lane]]\nlane = \"lane-a\"\nuid = {}\ndescriptor = \"{}\"\nboard = \"board-1\"\nrow = \"row-1\"\n\n[[lane]]\nlane = \"lane-b\"\nuid = {}\ndescriptor = \"{}\"\nboard = \"board-1\"\nrow = \"row-1\"\n",
        a.uid,
        a_tree.join(".git/row-fence.json").display(),
        b.uid,
        b_tree.join(".git/row-fence.json").display(),
    );
    fs::write(&site.lanes, lanes).expect("lanes.toml");
    let mut args = vec![
        "--broker-socket".to_string(),
        site.agent.display().to_string(),
        "--broker-lane-key".into(),
        format!("lane-a={}", a_key.display()),
        "--broker-lane-key".into(),
        format!("lane-b={}", b_key.display()),
        "--broker-lanes".into(),
        site.lanes.display().to_string(),
    ];
    args.extend(site.forge_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut daemon = site.home.daemon_with(&args, &[]);
    let listed = operator(&site, &["keys", "list", "--json"]).json();
    let lanes_of: Vec<&str> = listed
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(|k| k["lane"].as_str())
        .collect();
    assert_eq!(lanes_of, ["lane-a", "lane-b"], "{listed}");

    let agent = site.agent.display().to_string();
    for repo in [&site.remote, &other] {
        let repo = repo.display().to_string();
        let installed = operator(
            &site,
            &[
                "install",
                "forge-hook",
                "--repo",
                &repo,
                "--agent",
                &agent,
                "--chain",
                "--json",
            ],
        );
        assert!(
            installed.stdout.contains("pre-receive"),
            "{}",
            installed.stdout
        );
    }
    let shown = operator(&site, &["show", "board-1", "--json"]).json();
    assert_eq!(
        shown[0]["scope"]["refs"][0].as_str(),
        Some("refs/heads/feature/row-1"),
        "{shown}"
    );

    // (c) ALLOWED lane-a: its own scoped ref lands; everything else is refused, by rule.
    let push = |user: &User, tree: &Path, args: &[&str]| {
        site.as_lane(user, tree, "git", &[&["push"][..], args].concat())
    };
    let mine = site.commit(&a, &a_tree, "a-1");
    push(&a, &a_tree, &["origin", "HEAD:refs/heads/feature/row-1"])
        .expect_ok("lane-a's push to its own ref");
    assert_eq!(
        remote_full_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(mine.as_str())
    );
    let main = remote_full_ref(&site.remote, "refs/heads/main");
    rejected(
        &push(&a, &a_tree, &["origin", "HEAD:refs/heads/main"]),
        "a push outside the row's refs",
        "outside_scope",
        "refs/heads/main is outside the row's refs",
    );
    assert_eq!(remote_full_ref(&site.remote, "refs/heads/main"), main);
    site.as_lane(
        &a,
        &a_tree,
        "git",
        &["commit", "-q", "--amend", "-m", "a-1b"],
    )
    .expect_ok("amend");
    rejected(
        &push(
            &a,
            &a_tree,
            &["--force", "origin", "HEAD:refs/heads/feature/row-1"],
        ),
        "a force push",
        "outside_scope",
        "scope.allow_force",
    );
    assert_eq!(
        remote_full_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(mine.as_str())
    );
    rejected(
        &push(&a, &a_tree, &["origin", "HEAD:refs/tags/row-1/v1"]),
        "a tag",
        "outside_scope",
        "scope.allow_tags",
    );
    rejected(
        &push(&a, &a_tree, &["origin", ":refs/heads/feature/row-1"]),
        "a branch delete",
        "outside_scope",
        "scope.allow_delete",
    );
    assert!(remote_full_ref(&site.remote, "refs/heads/feature/row-1").is_some());
    rejected(
        &push(&a, &a_tree, &["origin", ":refs/heads/release"]),
        "a delete of another ref",
        "outside_scope",
        "refs/heads/release",
    );
    let other_url = site.url.replace(
        &site.remote.display().to_string(),
        &other.display().to_string(),
    );
    rejected(
        &push(&a, &a_tree, &[&other_url, "HEAD:refs/heads/feature/row-1"]),
        "a push to another repository",
        "outside_scope",
        "is not in the row's scope",
    );
    assert!(remote_full_ref(&other, "refs/heads/feature/row-1").is_none());
    site.as_lane(&a, &a_tree, "git", &["reset", "-q", "--hard", &mine])
        .expect_ok("reset");

    // While ALLOWED, lane-a keeps an ssh master and a receive-pack session.
    let control = a.home.join("cm");
    fs::create_dir_all(&a.home).expect("a home");
    chown(&a.home, a.uid, a.gid);
    let mut masters = Masters(vec![(a.clone(), a_tree.clone(), control.clone())]);
    start_master(&site, &a, &a_tree, &control);
    let held = Held::open(&site, &a, &a_tree);
    let advertised = held
        .advertised
        .iter()
        .find(|(name, _)| name == "refs/heads/feature/row-1")
        .map(|(_, oid)| oid.clone());
    assert_eq!(advertised.as_deref(), Some(mine.as_str()));

    // The takeover: lane-b holds row-1 now.
    grant(&site, "lane-b", &b_tree, &["--takeover"]);
    // (a) A push through the master opened while ALLOWED: no new login, refused at the write.
    let stale = site.commit(&a, &a_tree, "a-stale");
    let through = through_master(&control);
    let ran = site.as_lane_env(
        &a,
        &a_tree,
        "git",
        &["push", "origin", "HEAD:refs/heads/feature/row-1"],
        &[("GIT_SSH_COMMAND", &through)],
    );
    rejected(
        &ran,
        "a push through a kept master",
        "different_holder",
        "lane-b",
    );
    assert_eq!(
        remote_full_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(mine.as_str())
    );
    // (b) The held session fed its pack after the takeover.
    let mut packing = Command::new("git")
        .current_dir(&a_tree)
        .args([
            "-c",
            "safe.directory=*",
            "pack-objects",
            "--revs",
            "--stdout",
            "-q",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git pack-objects");
    write!(packing.stdin.take().expect("stdin"), "{stale}\n^{mine}\n").expect("revs");
    let pack = packing.wait_with_output().expect("pack").stdout;
    assert!(pack.starts_with(b"PACK"), "no pack made");
    let report = held.feed(&mine, &stale, "refs/heads/feature/row-1", &pack);
    assert!(
        report.contains("ng refs/heads/feature/row-1"),
        "the held session's update was not refused: {report}"
    );
    assert_eq!(
        remote_full_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(mine.as_str())
    );
    // The refusals are in the ledger under the forge-hook route.
    let refused = ledger_has(&site, "forge-hook: push to", "is held by lane-b");
    assert!(!refused.is_empty());

    // The new holder pushes on its own key; then keeps a master of its own.
    site.as_lane(&b, &b_tree, "git", &["fetch", "-q", "origin"])
        .expect_ok("lane-b fetch");
    site.as_lane(&b, &b_tree, "git", &["reset", "-q", "--hard", &mine])
        .expect_ok("lane-b reset");
    let theirs = site.commit(&b, &b_tree, "b-1");
    push(&b, &b_tree, &["origin", "HEAD:refs/heads/feature/row-1"])
        .expect_ok("lane-b's push after its takeover");
    assert_eq!(
        remote_full_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(theirs.as_str())
    );
    // A lane's uid gets only its own key: lane-b, ALLOWED now, cannot log in with lane-a's.
    let with_a_key = format!(
        "{SSH} -o IdentitiesOnly=yes -o IdentityFile={}",
        a_key.with_extension("pub").display()
    );
    let ran = site.as_lane_env(
        &b,
        &b_tree,
        "git",
        &["push", "origin", "HEAD:refs/heads/feature/row-1"],
        &[("GIT_SSH_COMMAND", &with_a_key)],
    );
    assert_ne!(
        ran.code, 0,
        "lane-b logged in with lane-a's key: {}",
        ran.stderr
    );
    assert!(ran.stderr.contains("Permission denied"), "{}", ran.stderr);
    let b_control = b.home.join("cm");
    fs::create_dir_all(&b.home).expect("b home");
    chown(&b.home, b.uid, b.gid);
    masters
        .0
        .push((b.clone(), b_tree.clone(), b_control.clone()));
    start_master(&site, &b, &b_tree, &b_control);

    // (d) The daemon stopped: the hook cannot ask, so it refuses.
    daemon.stop();
    site.commit(&b, &b_tree, "b-2");
    let through = through_master(&b_control);
    let ran = site.as_lane_env(
        &b,
        &b_tree,
        "git",
        &["push", "origin", "HEAD:refs/heads/feature/row-1"],
        &[("GIT_SSH_COMMAND", &through)],
    );
    rejected(
        &ran,
        "a push with the daemon stopped",
        "fence_unreadable",
        "cannot reach the fence",
    );
    assert_eq!(
        remote_full_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(theirs.as_str())
    );
    drop(masters);

    // (e) Rollback restores the forge's own hook byte for byte.
    let repo = site.remote.display().to_string();
    operator(
        &site,
        &["install", "forge-hook", "--repo", &repo, "--rollback"],
    );
    assert_eq!(fs::read(&hook_path).expect("hook"), own_hook);
    let hooks = fs::read_dir(site.remote.join("hooks"))
        .expect("hooks")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pre-receive") && !n.ends_with(".sample"))
        .collect::<Vec<_>>();
    assert_eq!(hooks, ["pre-receive"]);
}

/// The same hook behind `git http-backend` (a real HTTP server running it as CGI, basic
/// auth), the lane taken from `REMOTE_USER` (`--lane-from remote-user`): the lane's own
/// ref lands, a ref outside its scope is refused, and after a takeover its push is refused.
#[test]
fn behind_git_http_backend_the_hook_takes_the_lane_from_remote_user() {
    use crate::http_git::{HttpGit, PASSWORD, USER};
    let mut site = Site::new();
    let root = site.home.dir.path().to_path_buf();
    let lane = site.users.add(&root, "h");
    let srv = site.home.path("srv");
    fs::create_dir(&srv).expect("srv");
    let app = srv.join("app.git");
    as_root_git(&root, &["init", "-q", "--bare", "-b", "main"], &app);
    let registry = row_fence_contract::paths::registry(&site.home.home);
    fs::create_dir_all(&registry).expect("registry dir");
    fs::write(registry.join("boards.toml"), scope_toml(&app)).expect("boards.toml");
    let descriptor = site.home.path("lane.json");
    let path = descriptor.display().to_string();
    operator(
        &site,
        &[
            "acquire",
            "board-1",
            "row-1",
            "--lane",
            USER,
            "--write-descriptor",
            &path,
        ],
    );
    fs::write(
        &site.lanes,
        format!(
            "[[lane]]\nlane = \"{USER}\"\nuid = {}\ndescriptor = \"{path}\"\nboard = \"board-1\"\nrow = \"row-1\"\n",
            lane.uid
        ),
    )
    .expect("lanes.toml");
    let mut args = vec![
        "--broker-socket".to_string(),
        site.agent.display().to_string(),
        "--broker-lanes".into(),
        site.lanes.display().to_string(),
    ];
    args.extend(site.forge_args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _daemon = site.home.daemon_with(&args, &[]);
    let (repo, agent) = (app.display().to_string(), site.agent.display().to_string());
    operator(
        &site,
        &[
            "install",
            "forge-hook",
            "--repo",
            &repo,
            "--agent",
            &agent,
            "--lane-from",
            "remote-user",
        ],
    );
    let server = HttpGit::start(&srv);
    let url = server
        .url("app.git")
        .replace("http://", &format!("http://{USER}:{PASSWORD}@"));
    let tree = site.home.path("http-tree");
    as_root_git(&root, &["init", "-q", "-b", "main"], &tree);
    let git = |args: &[&str]| {
        run(Command::new("git")
            .current_dir(&tree)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &root)
            .args(["-c", "user.name=l", "-c", "user.email=l@example.invalid"])
            .args(args))
    };
    git(&["commit", "-q", "--allow-empty", "-m", "one"]).expect_ok("commit");
    git(&["push", &url, "HEAD:refs/heads/feature/row-1"]).expect_ok("the lane's own ref over http");
    rejected(
        &git(&["push", &url, "HEAD:refs/heads/main"]),
        "a push outside the row's refs over http",
        "outside_scope",
        "refs/heads/main",
    );
    assert!(remote_full_ref(&app, "refs/heads/main").is_none());
    operator(
        &site,
        &[
            "acquire",
            "board-1",
            "row-1",
            "--lane",
            "lane-b",
            "--takeover",
        ],
    );
    git(&["commit", "-q", "--allow-empty", "-m", "two"]).expect_ok("commit");
    let before = remote_full_ref(&app, "refs/heads/feature/row-1");
    rejected(
        &git(&["push", &url, "HEAD:refs/heads/feature/row-1"]),
        "a push over http after the takeover",
        "different_holder",
        "lane-b",
    );
    assert_eq!(remote_full_ref(&app, "refs/heads/feature/row-1"), before);
}

/// A lane pinned to a board with no scope may push any ref: doctor says so (a warning, not
/// a problem: no scope is the old behaviour, the operator's choice).
#[test]
fn doctor_warns_of_a_lane_whose_board_has_no_scope() {
    let home = Home::file();
    let lanes = home.path("lanes.toml");
    fs::write(
        &lanes,
        "[[lane]]\nlane = \"lane-a\"\nuid = 65534\ndescriptor = \"/nonexistent/row-fence.json\"\nboard = \"board-9\"\nrow = \"row-1\"\n",
    )
    .expect("lanes.toml");
    let path = lanes.display().to_string();
    let ran = home.cli(&["doctor", "--broker-lanes", &path]);
    assert!(
        ran.stdout
            .contains("warning: board board-9 has no scope in registry/boards.toml"),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
    let registry = row_fence_contract::paths::registry(&home.home);
    fs::create_dir_all(&registry).expect("registry");
    fs::write(
        registry.join("boards.toml"),
        "[boards.board-9.scope]\nrefs = [\"refs/heads/{row}\"]\n",
    )
    .expect("boards.toml");
    let ran = home.cli(&["doctor", "--broker-lanes", &path]);
    assert!(!ran.stdout.contains("has no scope"), "{}", ran.stdout);
}

/// Environment variables a case sets.
type Env<'a> = &'a [(&'a str, &'a str)];

/// `forge-check` fails closed on what it is handed: no lane, a line that is no ref update,
/// no fence to ask. Each is one `REFUSED (<reason>)` line and a non-zero exit.
#[test]
fn forge_check_refuses_bad_input_and_an_unreachable_fence_with_one_line() {
    let home = Home::file();
    let repo = home.path("r.git");
    as_root_git(home.dir.path(), &["init", "-q", "--bare"], &repo);
    let socket = home.path("no-broker.sock").display().to_string();
    let zeros = "0".repeat(40);
    let update = format!("{zeros} {} refs/heads/x\n", "1".repeat(40));
    let too_many = format!(
        "{zeros} {} refs/heads/a-long-enough-branch-name-to-fill\n",
        "1".repeat(40)
    )
    .repeat(6000);
    let cases: [(Env, String, &str); 5] = [
        (
            &[("ROW_FENCE_LANE", "lane-a")],
            too_many,
            "REFUSED (protocol_error) the push names more ref updates",
        ),
        (
            &[],
            update.clone(),
            "REFUSED (peer_refused) ROW_FENCE_LANE is not set",
        ),
        (
            &[("ROW_FENCE_LANE", "")],
            update.clone(),
            "REFUSED (peer_refused)",
        ),
        (
            &[("ROW_FENCE_LANE", "lane-a")],
            "not an update\n".into(),
            "REFUSED (protocol_error)",
        ),
        (
            &[("ROW_FENCE_LANE", "lane-a")],
            update,
            "REFUSED (fence_unreadable) cannot reach the fence",
        ),
    ];
    for (envs, input, said) in cases {
        let mut cmd = home.command(crate::util::bin("row-fence"));
        cmd.env_remove("ROW_FENCE_LANE")
            .envs(envs.iter().copied())
            .args(["forge-check", "--agent", &socket, "--repo"])
            .arg(&repo)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("row-fence forge-check");
        // The check may stop reading early (too much input): a broken pipe is its answer.
        let _ = child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes());
        let out = child.wait_with_output().expect("output");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{said}: {stderr}");
        assert!(
            stderr.starts_with(&format!("row-fence: {said}")) && stderr.lines().count() == 1,
            "{said}: {stderr}"
        );
    }
}

/// A board's scope is shown where its rows are: `show` (text and `--json`), `top --once
/// --json` and the ALLOWED line, with the row put in for `{row}`.
#[test]
fn a_rows_scope_is_shown_by_show_top_and_the_allowed_line() {
    let home = Home::file();
    let registry = row_fence_contract::paths::registry(&home.home);
    fs::create_dir_all(&registry).expect("registry");
    fs::write(
        registry.join("boards.toml"),
        "[boards.board-1.scope]\nrefs = [\"refs/heads/feature/{row}\"]\nallow_force = true\n",
    )
    .expect("boards.toml");
    let (_, descriptor) = home.acquire("board-1", "row-1", "lane-a", &[]);
    let _daemon = home.daemon();
    let want = "refs/heads/feature/row-1 (no delete, force, no tags)";
    let asked = home.ask_with(&descriptor, &[]);
    asked.expect(0, "row-fence: ALLOWED");
    assert!(
        asked.stderr.contains(&format!("scope: {want}")),
        "{}",
        asked.stderr
    );
    let shown = home.cli(&["show", "board-1"]);
    assert!(
        shown.stdout.contains(&format!("scope of row-1: {want}")),
        "{}",
        shown.stdout
    );
    let shown = home.cli(&["show", "board-1", "--json"]).json();
    assert_eq!(shown[0]["scope"]["allow_force"], true, "{shown}");
    let top = home.cli(&["top", "--once", "--json"]).json();
    let rows = &top["boards"][0]["rows"];
    assert_eq!(rows[0]["scope"][0].as_str(), Some(want), "{top}");
    let unscoped = home.cli(&["show", "board-2"]);
    assert_eq!(unscoped.code, 0, "{}", unscoped.stderr);
}

/// A push that reaches the repository by its path on the forge host, over no ssh and no
/// web server (an operator seeding it), is let through only when the hook was installed
/// with `--allow-local-pushes`; one that carries sshd's or a web server's variables is
/// judged as ever (here: no lane named, refused), allowed or not.
#[test]
fn a_local_push_passes_the_forge_hook_only_when_the_operator_allowed_it() {
    let home = Home::file();
    let repo = home.path("seeded.git");
    as_root_git(
        home.dir.path(),
        &["init", "-q", "--bare", "-b", "main"],
        &repo,
    );
    let seed = home.path("seed");
    crate::util::git(
        &home,
        home.dir.path(),
        &["init", "-q", "-b", "main", seed.to_str().unwrap()],
    );
    crate::util::git(
        &home,
        &seed,
        &["commit", "-q", "--allow-empty", "-m", "seed"],
    );
    let socket = home.path("no-broker.sock").display().to_string();
    let install = |extra: &[&str]| {
        let ran = home.cli(
            &[
                &[
                    "install",
                    "forge-hook",
                    "--repo",
                    repo.to_str().unwrap(),
                    "--agent",
                    &socket,
                ][..],
                extra,
            ]
            .concat(),
        );
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    };
    let push = |refname: &str, envs: &[(&str, &str)]| {
        crate::util::run(
            home.command("git")
                .current_dir(&seed)
                .envs(envs.iter().copied())
                .args(["push", "-q", repo.to_str().unwrap()])
                .arg(format!("main:{refname}")),
        )
    };
    let has = |refname: &str| {
        crate::util::run(home.command("git").arg("--git-dir").arg(&repo).args([
            "rev-parse",
            "--verify",
            "-q",
            refname,
        ]))
        .code
            == 0
    };
    install(&[]);
    let refused = push("refs/heads/main", &[]);
    assert_ne!(refused.code, 0, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("REFUSED (peer_refused)"),
        "{}",
        refused.stderr
    );
    assert!(!has("refs/heads/main"));

    install(&["--allow-local-pushes"]);
    let seeded = push("refs/heads/main", &[]);
    assert_eq!(seeded.code, 0, "{}", seeded.stderr);
    assert!(
        seeded
            .stderr
            .contains("a local push (over no ssh and no web server) let through"),
        "{}",
        seeded.stderr
    );
    assert!(has("refs/heads/main"));
    for (var, value) in [
        ("SSH_CONNECTION", "127.0.0.1 40000 127.0.0.1 22"),
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("REMOTE_ADDR", "127.0.0.1"),
    ] {
        let over = push("refs/heads/over", &[(var, value)]);
        assert_ne!(over.code, 0, "{var}: {}", over.stderr);
        assert!(
            over.stderr.contains("REFUSED (peer_refused)"),
            "{var}: {}",
            over.stderr
        );
        assert!(!has("refs/heads/over"), "{var}");
    }
}
