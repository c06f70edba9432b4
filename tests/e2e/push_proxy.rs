//! The daemon pushes for the lanes (ARCHITECTURE.md, "Push proxy"), on real parts: the
//! broker's `Site` (real users, a real sshd serving the bare repository through
//! `git-shell`), lanes whose `git push` goes through `git-remote-row-fence` (a
//! `pushInsteadOf` to `row-fence::<url>`), and the daemon holding the only push key. A
//! raw client (root, the daemon's own uid: the same-uid mode) drives what git never
//! sends: a malformed pkt-line, a pack cut short or too large, an upload paused while
//! the row is taken over. Root only, as the broker's tests.

use super::*;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;

/// The largest pack the daemon takes in these tests.
const MAX_PACK: u64 = 4 * 1024 * 1024;

/// What the lane's pushes need: the forge's prefix, the push socket, the helper on PATH.
struct Proxy {
    /// `ssh://s@127.0.0.1:port/`.
    forge: String,
    /// The daemon's push socket.
    socket: PathBuf,
    /// The daemon's push spool (`<home>/push`).
    spool: PathBuf,
}

impl Proxy {
    fn new(site: &Site) -> Proxy {
        Proxy {
            forge: format!("ssh://{}@127.0.0.1:{}/", site.server.name, site.sshd.port),
            socket: site.home.path("pushsock/push.sock"),
            spool: site.home.home.join("push-spool"),
        }
    }

    /// The daemon's flags for the push socket.
    fn args(&self) -> Vec<String> {
        vec![
            "--push-socket".into(),
            self.socket.display().to_string(),
            "--push-forge".into(),
            self.forge.clone(),
            "--push-max-pack-bytes".into(),
            MAX_PACK.to_string(),
        ]
    }

    /// The lane's environment: the helper on PATH, the socket named.
    fn env(&self) -> Vec<(String, String)> {
        let path = format!(
            "{}:{}",
            crate::util::bin_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        vec![
            ("PATH".into(), path),
            (
                "ROW_FENCE_PUSH_SOCKET".into(),
                self.socket.display().to_string(),
            ),
        ]
    }

    /// `git push ARGS` as `user` in `tree`, through the helper (lane-a finds the socket
    /// in its git config, the others in the environment).
    fn push(&self, site: &Site, user: &User, tree: &Path, args: &[&str]) -> Ran {
        let mut env = self.env();
        if user.name.ends_with('a') {
            env.retain(|(k, _)| k != "ROW_FENCE_PUSH_SOCKET");
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        site.as_lane_env(user, tree, "git", &[&["push"][..], args].concat(), &env)
    }

    /// Sends the lane's pushes to the forge through the helper, as `install broker
    /// --repo` wires it.
    fn wire(&self, site: &Site, user: &User, tree: &Path) {
        let key = format!("url.row-fence::{}.pushInsteadOf", self.forge);
        site.as_lane(user, tree, "git", &["config", &key, &self.forge])
            .expect_ok("wire pushInsteadOf");
    }
}

/// A ref of the bare repository `repo`.
fn remote_ref(repo: &Path, refname: &str) -> Option<String> {
    let ran = run(Command::new("git")
        .args(["-c", "safe.directory=*", "--git-dir"])
        .arg(repo)
        .args(["rev-parse", "--verify", "-q", refname]));
    (ran.code == 0).then(|| ran.stdout.trim().to_string())
}

/// Asserts git showed the push refused by the daemon: `! [remote rejected]` for `refname`
/// and the verdict line on side-band channel 2.
fn refused(ran: &Ran, what: &str, refname: &str, verdict: &str) {
    assert_ne!(ran.code, 0, "{what} landed: {}", ran.stderr);
    let rejected = format!("! [remote rejected] HEAD -> {refname} (row-fence");
    let line = format!("remote: row-fence: {verdict}");
    assert!(
        ran.stderr.contains(&rejected) && ran.stderr.contains(&line),
        "{what}: no `{rejected}` and `{line}`: {}",
        ran.stderr
    );
}

/// A raw client of the push socket (root: the daemon's own uid, the same-uid mode).
struct Raw {
    stream: UnixStream,
    /// The advertisement's lines.
    advertised: Vec<String>,
}

impl Raw {
    /// Connects, sends the header and reads the advertisement.
    fn open(proxy: &Proxy, url: &str, descriptor: &Path) -> Raw {
        let mut stream = UnixStream::connect(&proxy.socket).expect("connect the push socket");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let d: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(descriptor).expect("descriptor"))
                .expect("descriptor json");
        let header = serde_json::json!({"url": url, "descriptor": d});
        writeln!(stream, "{header}").expect("header");
        let mut advertised = Vec::new();
        while let Some(line) = read_pkt(&mut stream) {
            advertised.push(String::from_utf8_lossy(&line).into_owned());
        }
        Raw { stream, advertised }
    }

    /// Sends `bytes`.
    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Closes the sending side and reads the answer to the end.
    fn answer(mut self) -> String {
        let _ = self.stream.shutdown(Shutdown::Write);
        let mut out = Vec::new();
        let _ = self.stream.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }
}

fn read_pkt(from: &mut impl Read) -> Option<Vec<u8>> {
    let mut size = [0u8; 4];
    from.read_exact(&mut size).ok()?;
    let len = usize::from_str_radix(std::str::from_utf8(&size).ok()?, 16).ok()?;
    if len == 0 {
        return None;
    }
    let mut line = vec![0u8; len.checked_sub(4)?];
    from.read_exact(&mut line).ok()?;
    Some(line)
}

fn pkt(text: &str) -> Vec<u8> {
    format!("{:04x}{text}", text.len() + 4).into_bytes()
}

/// The pack of `new` for a remote at `old` (root runs git in a lane's repository).
fn pack_of(tree: &Path, new: &str, old: &str) -> Vec<u8> {
    let mut child = Command::new("git")
        .args([
            "-c",
            "safe.directory=*",
            "pack-objects",
            "--stdout",
            "--revs",
            "-q",
        ])
        .current_dir(tree)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git pack-objects");
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{new}\n^{old}").expect("revs");
    drop(stdin);
    let out = child.wait_with_output().expect("pack-objects");
    assert!(out.status.success(), "pack-objects failed");
    out.stdout
}

/// A commit of an incompressible file larger than [`MAX_PACK`] in a repository of its
/// own, and its pack.
fn big_pack(site: &Site) -> (String, Vec<u8>) {
    let repo = site.home.path("big");
    fs::create_dir(&repo).expect("big repo");
    let git = |args: &[&str]| {
        let ran = run(Command::new("git")
            .current_dir(&repo)
            .env("GIT_AUTHOR_NAME", "big")
            .env("GIT_AUTHOR_EMAIL", "big@example.invalid")
            .env("GIT_COMMITTER_NAME", "big")
            .env("GIT_COMMITTER_EMAIL", "big@example.invalid")
            .args(args));
        assert_eq!(ran.code, 0, "git {args:?}: {}", ran.stderr);
        ran.stdout.trim().to_string()
    };
    git(&["init", "-q"]);
    let mut noise = Vec::with_capacity(MAX_PACK as usize + 65536);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while noise.len() < MAX_PACK as usize + 65536 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    fs::write(repo.join("noise.bin"), &noise).expect("noise");
    git(&["add", "noise.bin"]);
    git(&["commit", "-q", "-m", "big"]);
    let head = git(&["rev-parse", "HEAD"]);
    let out = Command::new("git")
        .current_dir(&repo)
        .args(["pack-objects", "--stdout", "--revs", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(format!("{head}\n").as_bytes())?;
            child.wait_with_output()
        })
        .expect("pack-objects");
    (head, out.stdout)
}

/// The spool directories the daemon holds now.
fn spooled(proxy: &Proxy) -> Vec<PathBuf> {
    fs::read_dir(&proxy.spool)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn the_daemon_pushes_for_an_allowed_lane_and_refuses_the_rest_at_the_write() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let (b, b_tree) = site.lane("b");
    let proxy = Proxy::new(&site);
    // The forge: main and a tag already there; push certificates offered (the daemon
    // must not advertise them); a pre-receive hook of its own that talks on side-band
    // and rejects one ref.
    let root_config = site.home.path("root.gitconfig");
    fs::write(&root_config, "[safe]\n\tdirectory = *\n").expect("root gitconfig");
    let seeded = run(Command::new("git")
        .current_dir(&a_tree)
        .env("GIT_CONFIG_GLOBAL", &root_config)
        .args(["push", "-q"])
        .arg(&site.remote)
        .args(["HEAD:refs/heads/main", "HEAD:refs/heads/feature/row-1"]));
    assert_eq!(seeded.code, 0, "seed: {}", seeded.stderr);
    let cert = run(Command::new("git")
        .arg("--git-dir")
        .arg(&site.remote)
        .args(["config", "receive.certNonceSeed", "seed"]));
    assert_eq!(cert.code, 0, "certNonceSeed: {}", cert.stderr);
    let hook = site.remote.join("hooks").join("pre-receive");
    fs::write(
        &hook,
        "#!/bin/sh\nwhile read old new ref; do\n  echo \"forge: checking $ref\"\n  case \"$ref\" in\n    refs/heads/feature/row-1/reject) echo 'forge: this ref is closed' >&2; exit 1 ;;\n  esac\ndone\n",
    )
    .expect("forge hook");
    fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).expect("chmod");
    chown(&site.remote, site.server.uid, site.server.gid);
    let registry = row_fence_contract::paths::registry(&site.home.home);
    fs::create_dir_all(&registry).expect("registry dir");
    fs::write(
        registry.join("boards.toml"),
        format!(
            "[boards.board-1.scope]\nrefs = [\"refs/heads/feature/{{row}}\", \"refs/heads/feature/{{row}}/*\"]\nrepositories = [\"{}\"]\n",
            site.remote.display()
        ),
    )
    .expect("boards.toml");

    grant(&site, "lane-a", &a_tree, &[]);
    let a_descriptor = a_tree.join(".git/row-fence.json");
    let lanes = format!(
        "[[lane]]\nlane = \"lane-a\"\nuid = {}\ndescriptor = \"{}\"\nboard = \"board-1\"\nrow = \"row-1\"\n\n[[lane]]\nlane = \"lane-b\"\nuid = {}\ndescriptor = \"{}\"\nboard = \"board-1\"\nrow = \"row-1\"\n",
        a.uid,
        a_descriptor.display(),
        b.uid,
        b_tree.join(".git/row-fence.json").display(),
    );
    fs::write(&site.lanes, lanes).expect("lanes.toml");
    let mut args = vec![
        "--broker-socket".to_string(),
        site.agent.display().to_string(),
        "--broker-key".into(),
        site.key.display().to_string(),
        "--broker-read-key".into(),
        site.key.with_file_name("read").display().to_string(),
        "--broker-lanes".into(),
        site.lanes.display().to_string(),
    ];
    args.extend(site.forge_args());
    args.extend(proxy.args());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // What a daemon killed mid-push left in the spool is cleared by the next one.
    let stale = proxy.spool.join("999999-0");
    fs::create_dir_all(&stale).expect("a stale spool dir");
    fs::write(stale.join("pack"), b"PACK").expect("a stale pack");
    let daemon = site.home.daemon_with(&args, &[]);
    assert!(
        proxy.socket.exists(),
        "no push socket: {}",
        daemon.log_text()
    );
    assert!(!stale.exists(), "a dead daemon's spool was kept");
    // lane-a is wired by `install broker --push-forge` (the socket from its git config);
    // lane-b by hand (the pushInsteadOf alone, the socket from the environment).
    let a_config = a_tree.join(".git/config");
    let original = fs::read(&a_config).expect("lane-a's config");
    let public = site.home.path("push.pub");
    fs::copy(site.key.with_extension("pub"), &public).expect("push.pub");
    fs::set_permissions(&public, fs::Permissions::from_mode(0o644)).expect("chmod push.pub");
    let agent = site.agent.display().to_string();
    let socket = proxy.socket.display().to_string();
    let wired = install_broker(
        &site,
        &a,
        &a_tree,
        &[
            "--broker-socket",
            &agent,
            "--key-pub",
            &public.display().to_string(),
            "--push-socket",
            &socket,
            "--push-forge",
            &proxy.forge,
        ],
    );
    assert_eq!(
        wired.code, 0,
        "install broker --push-forge: {}",
        wired.stderr
    );
    proxy.wire(&site, &b, &b_tree);

    // An ALLOWED push to the row's own ref lands, and the forge's side-band reaches git.
    let first = remote_ref(&site.remote, "refs/heads/feature/row-1");
    let mine = site.commit(&a, &a_tree, "a-1");
    let ran = proxy.push(
        &site,
        &a,
        &a_tree,
        &["origin", "HEAD:refs/heads/feature/row-1"],
    );
    assert_eq!(
        ran.code,
        0,
        "lane-a's push: {}\n{}",
        ran.stderr,
        daemon.log_text()
    );
    assert!(
        ran.stderr
            .contains("remote: forge: checking refs/heads/feature/row-1"),
        "the forge's side-band did not reach git: {}",
        ran.stderr
    );
    assert_eq!(
        remote_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(mine.as_str())
    );
    assert_ne!(first.as_deref(), Some(mine.as_str()));

    // What the daemon costs: pushes through it against direct pushes with the same key
    // to the same sshd, interleaved (printed for the record; the bench holds the bound).
    let direct = site.home.path("direct");
    let cloned = run(Command::new("git")
        .env("GIT_CONFIG_GLOBAL", &root_config)
        .args(["clone", "-q"])
        .arg(&site.remote)
        .arg(&direct));
    assert_eq!(cloned.code, 0, "clone: {}", cloned.stderr);
    let direct_ssh = format!(
        "{SSH} -o IdentitiesOnly=yes -o IdentityAgent=none -i {}",
        site.key.display()
    );
    let (mut through, mut straight) = (Vec::new(), Vec::new());
    let mut last = mine.clone();
    for i in 0..8 {
        last = site.commit(&a, &a_tree, &format!("timed-{i}"));
        let ran = proxy.push(
            &site,
            &a,
            &a_tree,
            &["-q", "origin", "HEAD:refs/heads/feature/row-1"],
        );
        assert_eq!(ran.code, 0, "timed push: {}", ran.stderr);
        through.push(ran.elapsed);
        fs::write(direct.join(format!("d{i}")), "d").expect("file");
        let added = run(Command::new("git")
            .current_dir(&direct)
            .env("GIT_CONFIG_GLOBAL", &root_config)
            .args(["add", "-A"]));
        assert_eq!(added.code, 0, "{}", added.stderr);
        let committed = run(Command::new("git")
            .current_dir(&direct)
            .env("GIT_CONFIG_GLOBAL", &root_config)
            .env("GIT_AUTHOR_NAME", "d")
            .env("GIT_AUTHOR_EMAIL", "d@example.invalid")
            .env("GIT_COMMITTER_NAME", "d")
            .env("GIT_COMMITTER_EMAIL", "d@example.invalid")
            .args(["commit", "-qm", "d"]));
        assert_eq!(committed.code, 0, "{}", committed.stderr);
        let ran = run(Command::new("git")
            .current_dir(&direct)
            .env("GIT_CONFIG_GLOBAL", &root_config)
            .env("GIT_SSH_COMMAND", &direct_ssh)
            .args(["push", "-q", &site.url, "HEAD:refs/heads/direct"]));
        assert_eq!(ran.code, 0, "direct push: {}", ran.stderr);
        straight.push(ran.elapsed);
    }
    through.sort();
    straight.sort();
    eprintln!(
        "push p50 through the daemon {:?}, direct {:?} (8 each, interleaved)",
        through[4], straight[4]
    );
    let mine = last;

    // A ref outside the scope refuses the whole push: the in-scope ref does not move.
    let main = remote_ref(&site.remote, "refs/heads/main");
    let next = site.commit(&a, &a_tree, "a-2");
    let ran = proxy.push(
        &site,
        &a,
        &a_tree,
        &[
            "origin",
            "HEAD:refs/heads/feature/row-1",
            "HEAD:refs/heads/main",
        ],
    );
    assert_ne!(
        ran.code, 0,
        "a push outside the scope landed: {}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("! [remote rejected] HEAD -> main (row-fence: REFUSED (outside_scope): outside the row's scope)")
            && ran.stderr.contains("! [remote rejected] HEAD -> feature/row-1 (row-fence: REFUSED (outside_scope): another ref")
            && ran.stderr.contains("remote: row-fence: REFUSED (outside_scope)"),
        "{}",
        ran.stderr
    );
    assert_eq!(remote_ref(&site.remote, "refs/heads/main"), main);
    assert_eq!(
        remote_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(mine.as_str())
    );
    let _ = next;

    // A non-fast-forward is refused (the walk cannot reach the old commit).
    site.as_lane(&a, &a_tree, "git", &["reset", "-q", "--hard", &mine])
        .expect_ok("reset");
    site.as_lane(
        &a,
        &a_tree,
        "git",
        &["commit", "-q", "--amend", "-m", "a-1b"],
    )
    .expect_ok("amend");
    let ran = proxy.push(
        &site,
        &a,
        &a_tree,
        &["--force", "origin", "HEAD:refs/heads/feature/row-1"],
    );
    refused(
        &ran,
        "a force push",
        "feature/row-1",
        "REFUSED (outside_scope)",
    );
    assert!(
        ran.stderr.contains("allow_force") || ran.stderr.contains("fast-forward"),
        "{}",
        ran.stderr
    );
    assert_eq!(
        remote_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(mine.as_str())
    );
    site.as_lane(&a, &a_tree, "git", &["reset", "-q", "--hard", &mine])
        .expect_ok("reset back");

    // A delete is refused (the board allows none).
    let ran = proxy.push(&site, &a, &a_tree, &["origin", ":refs/heads/feature/row-1"]);
    assert_ne!(ran.code, 0, "a delete landed: {}", ran.stderr);
    assert!(
        ran.stderr.contains("[remote rejected]")
            && ran
                .stderr
                .contains("remote: row-fence: REFUSED (outside_scope)"),
        "{}",
        ran.stderr
    );
    assert!(remote_ref(&site.remote, "refs/heads/feature/row-1").is_some());

    // The forge's own refusal reaches git, and nothing of the push is applied.
    let ran = proxy.push(
        &site,
        &a,
        &a_tree,
        &["origin", "HEAD:refs/heads/feature/row-1/reject"],
    );
    assert_ne!(
        ran.code, 0,
        "the forge's refusal was not seen: {}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("remote: forge: this ref is closed")
            && ran.stderr.contains("pre-receive hook declined"),
        "{}",
        ran.stderr
    );
    assert!(remote_ref(&site.remote, "refs/heads/feature/row-1/reject").is_none());

    // A URL of no configured forge is refused and never dialled.
    let decoy = std::net::TcpListener::bind("127.0.0.1:0").expect("decoy listener");
    decoy.set_nonblocking(true).expect("nonblocking");
    let port = decoy.local_addr().expect("addr").port();
    let elsewhere = format!(
        "row-fence::ssh://{}@127.0.0.1:{port}{}",
        site.server.name,
        site.remote.display()
    );
    let ran = proxy.push(
        &site,
        &a,
        &a_tree,
        &[&elsewhere, "HEAD:refs/heads/feature/row-1"],
    );
    assert_ne!(
        ran.code, 0,
        "a push to an unconfigured forge: {}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("on no forge the daemon pushes to"),
        "{}",
        ran.stderr
    );
    assert!(
        matches!(decoy.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the daemon dialled a URL it was not configured for"
    );

    // A refused lane (lane-b: lane-a holds the row) gets `! [remote rejected]`, and
    // the remote's refs do not move; its fetch still works.
    let before = remote_ref(&site.remote, "refs/heads/feature/row-1");
    site.commit(&b, &b_tree, "b-1");
    let ran = proxy.push(
        &site,
        &b,
        &b_tree,
        &["--force", "origin", "HEAD:refs/heads/feature/row-1"],
    );
    assert_ne!(ran.code, 0, "refused lane-b's push landed: {}", ran.stderr);
    assert!(
        ran.stderr
            .contains("! [remote rejected] HEAD -> feature/row-1 (row-fence:")
            && ran.stderr.contains("remote: row-fence: "),
        "{}",
        ran.stderr
    );
    assert_eq!(remote_ref(&site.remote, "refs/heads/feature/row-1"), before);
    site.as_lane(&b, &b_tree, "git", &["fetch", "-q", "origin"])
        .expect_ok("refused lane-b's fetch");
    // The refusal is in the ledger under the push route, as an ask's would be.
    let ledger = row_fence_contract::paths::ledger(&site.home.home);
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let text = fs::read_to_string(&ledger).unwrap_or_default();
        if text.contains("push: push to") && text.contains("as lane lane-b") {
            break;
        }
        assert!(
            Instant::now() < until,
            "no push refusal in the ledger: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Push certificates are not advertised; a malformed pkt-line is an error and the
    // daemon serves the next push.
    let url = format!("{}{}", proxy.forge, &site.remote.display().to_string()[1..]);
    let mut raw = Raw::open(&proxy, &url, &a_descriptor);
    assert!(!raw.advertised.is_empty(), "no advertisement");
    assert!(
        !raw.advertised.iter().any(|l| l.contains("push-cert")),
        "{:?}",
        raw.advertised
    );
    assert!(
        raw.advertised[0].contains("report-status"),
        "{:?}",
        raw.advertised
    );
    raw.send(b"zzzz");
    let said = raw.answer();
    assert!(
        said.contains("ERR row-fence: the push request: a malformed pkt-line length"),
        "{said}"
    );

    // A lane that disconnects mid-pack: nothing is applied.
    let head = site
        .as_lane(&a, &a_tree, "git", &["rev-parse", "HEAD"])
        .stdout
        .trim()
        .to_string();
    let c = site.commit(&a, &a_tree, "a-3");
    let pack = pack_of(&a_tree, &c, &head);
    let command = pkt(&format!(
        "{head} {c} refs/heads/feature/row-1\0report-status side-band-64k\n"
    ));
    let mut raw = Raw::open(&proxy, &url, &a_descriptor);
    raw.send(&command);
    raw.send(b"0000");
    raw.send(&pack[..pack.len() / 2]);
    let said = raw.answer();
    assert!(said.contains("incomplete or corrupt"), "{said}");
    assert_eq!(
        remote_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(head.as_str())
    );

    // An oversized pack is refused.
    let big = big_pack(&site);
    assert!(big.1.len() as u64 > MAX_PACK, "{}", big.1.len());
    let mut raw = Raw::open(&proxy, &url, &a_descriptor);
    raw.send(&pkt(&format!(
        "{head} {} refs/heads/feature/row-1\0report-status side-band-64k\n",
        big.0
    )));
    raw.send(b"0000");
    let _ = raw.stream.write_all(&big.1);
    let said = raw.answer();
    assert!(said.contains("larger than the daemon takes"), "{said}");
    assert_eq!(
        remote_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(head.as_str())
    );

    // A takeover while the pack uploads does not land.
    let mut raw = Raw::open(&proxy, &url, &a_descriptor);
    raw.send(&command);
    raw.send(b"0000");
    raw.send(&pack[..pack.len() / 2]);
    let until = Instant::now() + Duration::from_secs(10);
    while !spooled(&proxy).iter().any(|d| d.join("pack").exists()) {
        assert!(Instant::now() < until, "no spool file appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
    grant(&site, "lane-b", &b_tree, &["--takeover"]);
    raw.send(&pack[pack.len() / 2..]);
    let said = raw.answer();
    assert!(
        said.contains("ng refs/heads/feature/row-1 row-fence: REFUSED"),
        "{said}"
    );
    assert_eq!(
        remote_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(head.as_str())
    );
    // Every push's spool is gone.
    assert!(spooled(&proxy).is_empty(), "{:?}", spooled(&proxy));
    // The forge's receive-pack was let end on the pack cut short, so it removed what it
    // had received: nothing of the refused push stays on the forge's disk.
    let quarantined = || {
        fs::read_dir(site.remote.join("objects"))
            .expect("objects")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("tmp_objdir"))
            .count()
    };
    let until = Instant::now() + Duration::from_secs(10);
    while quarantined() > 0 {
        assert!(
            Instant::now() < until,
            "a refused push's objects stayed on the forge"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // lane-a, refused now, is answered before the forge is dialled: it sees no ref.
    let raw = Raw::open(&proxy, &url, &a_descriptor);
    assert!(
        raw.advertised.len() == 1 && raw.advertised[0].contains(" capabilities^{}\0"),
        "a refused lane saw the forge's refs: {:?}",
        raw.advertised
    );
    // A push option is passed to the forge only when the operator names it: none is
    // offered, and one sent anyway refuses the push.
    let b_descriptor = b_tree.join(".git/row-fence.json");
    let mut raw = Raw::open(&proxy, &url, &b_descriptor);
    assert!(
        !raw.advertised[0].contains("push-options"),
        "{:?}",
        raw.advertised
    );
    raw.send(&pkt(&format!(
        "{head} {c} refs/heads/feature/row-1\0report-status side-band-64k push-options\n"
    )));
    raw.send(b"0000");
    raw.send(&pkt("merge_request.create\n"));
    raw.send(b"0000");
    raw.send(&pack);
    let said = raw.answer();
    assert!(
        said.contains("ng refs/heads/feature/row-1") && said.contains("--push-option"),
        "{said}"
    );
    assert_eq!(
        remote_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(head.as_str())
    );

    // A push judged ALLOWED when it starts and whose lease expires while its pack
    // uploads does not land: the second judgement is at the write.
    let short = site.home.path("short-lease.json");
    operator(
        &site,
        &[
            "acquire",
            "board-1",
            "row-3",
            "--lane",
            "lane-r",
            "--ttl",
            "8s",
            "--write-descriptor",
            &short.display().to_string(),
        ],
    );
    let lease_ends = Instant::now() + Duration::from_secs(8);
    let mut raw = Raw::open(&proxy, &url, &short);
    raw.send(&pkt(&format!(
        "{} {c} refs/heads/feature/row-3\0report-status side-band-64k\n",
        "0".repeat(40)
    )));
    raw.send(b"0000");
    raw.send(&pack[..pack.len() / 2]);
    while Instant::now() < lease_ends + Duration::from_millis(500) {
        std::thread::sleep(Duration::from_millis(100));
    }
    raw.send(&pack[pack.len() / 2..]);
    let said = raw.answer();
    assert!(
        said.contains("ng refs/heads/feature/row-3 row-fence: REFUSED"),
        "a push whose lease expired mid-upload: {said}"
    );
    assert_eq!(remote_ref(&site.remote, "refs/heads/feature/row-3"), None);

    // The new holder's push lands right after, through the same daemon.
    let ran = proxy.push(
        &site,
        &b,
        &b_tree,
        &["--force", "origin", "HEAD:refs/heads/feature/row-1"],
    );
    // lane-b's history does not descend from the remote's: a non-fast-forward.
    assert_ne!(ran.code, 0, "{}", ran.stderr);
    site.as_lane(&b, &b_tree, "git", &["fetch", "-q", "origin"])
        .expect_ok("fetch");
    site.as_lane(
        &b,
        &b_tree,
        "git",
        &["reset", "-q", "--hard", "origin/feature/row-1"],
    )
    .expect_ok("reset to the remote");
    let theirs = site.commit(&b, &b_tree, "b-2");
    let ran = proxy.push(
        &site,
        &b,
        &b_tree,
        &["origin", "HEAD:refs/heads/feature/row-1"],
    );
    assert_eq!(
        ran.code, 0,
        "lane-b's push after its takeover: {}",
        ran.stderr
    );
    assert_eq!(
        remote_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(theirs.as_str())
    );
    // A commit for a push the daemon's stop interrupts (at the end).
    let streaming = {
        let mut noise = Vec::new();
        fs::File::open("/dev/urandom")
            .expect("urandom")
            .take(1_500_000)
            .read_to_end(&mut noise)
            .expect("noise");
        fs::write(b_tree.join("noise.bin"), noise).expect("noise file");
        let new = site.commit(&b, &b_tree, "b-noise");
        (new.clone(), pack_of(&b_tree, &new, &theirs))
    };
    // The same-uid mode: the daemon's own uid (root here) names its lane by descriptor and
    // lease token, as an ask does; without a descriptor it is no lane and gets nothing.
    let same = site.home.path("same");
    let git_root = |args: &[&str]| {
        let env = proxy.env();
        run(Command::new("git")
            .current_dir(&same)
            .env("GIT_CONFIG_GLOBAL", &root_config)
            .env("GIT_AUTHOR_NAME", "r")
            .env("GIT_AUTHOR_EMAIL", "r@example.invalid")
            .env("GIT_COMMITTER_NAME", "r")
            .env("GIT_COMMITTER_EMAIL", "r@example.invalid")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .args(args))
    };
    let cloned = run(Command::new("git")
        .env("GIT_CONFIG_GLOBAL", &root_config)
        .args(["clone", "-q"])
        .arg(&site.remote)
        .arg(&same));
    assert_eq!(cloned.code, 0, "clone: {}", cloned.stderr);
    git_root(&["remote", "set-url", "origin", &site.url]).expect_ok("set-url");
    let key = format!("url.row-fence::{}.pushInsteadOf", proxy.forge);
    git_root(&["config", &key, &proxy.forge]).expect_ok("pushInsteadOf");
    let descriptor = same.join(".git/row-fence.json");
    operator(
        &site,
        &[
            "acquire",
            "board-1",
            "row-2",
            "--lane",
            "lane-r",
            "--write-descriptor",
            &descriptor.display().to_string(),
        ],
    );
    fs::write(same.join("r.txt"), "r").expect("file");
    git_root(&["add", "-A"]).expect_ok("add");
    git_root(&["commit", "-qm", "r"]).expect_ok("commit");
    let ran = git_root(&["push", "origin", "HEAD:refs/heads/feature/row-2"]);
    assert_eq!(ran.code, 0, "the same-uid push: {}", ran.stderr);
    assert!(remote_ref(&site.remote, "refs/heads/feature/row-2").is_some());
    fs::remove_file(&descriptor).expect("rm descriptor");
    fs::write(same.join("r2.txt"), "r").expect("file");
    git_root(&["add", "-A"]).expect_ok("add");
    git_root(&["commit", "-qm", "r2"]).expect_ok("commit");
    let before = remote_ref(&site.remote, "refs/heads/feature/row-2");
    let ran = git_root(&["push", "origin", "HEAD:refs/heads/feature/row-2"]);
    assert_ne!(
        ran.code, 0,
        "a push with no descriptor landed: {}",
        ran.stderr
    );
    assert!(ran.stderr.contains("has no descriptor"), "{}", ran.stderr);
    assert_eq!(remote_ref(&site.remote, "refs/heads/feature/row-2"), before);

    // The wiring comes out byte for byte.
    let back = install_broker(&site, &a, &a_tree, &["--rollback"]);
    assert_eq!(back.code, 0, "rollback: {}", back.stderr);
    assert_eq!(fs::read(&a_config).expect("config"), original);

    // The pushes shared the daemon's own ssh master (a socket in its 0700 directory, a
    // process of the daemon's uid); the daemon's stop ends it.
    let masters = site.home.home.join("push-masters");
    let sockets: Vec<PathBuf> = fs::read_dir(&masters)
        .expect("push-masters")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert!(
        !sockets.is_empty(),
        "no ssh master in {}",
        masters.display()
    );
    let mode = fs::metadata(&masters)
        .expect("masters")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "{}", masters.display());
    let named = |needle: &Path| masters_running(needle);
    assert!(
        named(&masters),
        "no ssh master process for {}",
        masters.display()
    );
    // The daemon stops while a push streams to the forge: nothing is applied, and the
    // forge's receive-pack is let end, so nothing of the push stays on its disk.
    let (new, pack) = streaming;
    let mut raw = Raw::open(&proxy, &url, &b_descriptor);
    raw.send(&pkt(&format!(
        "{theirs} {new} refs/heads/feature/row-1\0report-status side-band-64k\n"
    )));
    raw.send(b"0000");
    raw.send(&pack[..pack.len() - 100]);
    let until = Instant::now() + Duration::from_secs(10);
    while quarantined() == 0 {
        assert!(Instant::now() < until, "the pack never reached the forge");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut daemon = daemon;
    daemon.stop();
    drop(raw);
    let until = Instant::now() + Duration::from_secs(10);
    while quarantined() > 0 {
        assert!(
            Instant::now() < until,
            "the daemon's stop left the push's objects on the forge"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        remote_ref(&site.remote, "refs/heads/feature/row-1").as_deref(),
        Some(theirs.as_str())
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while named(&masters) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!named(&masters), "an ssh master outlived the daemon");
}

/// Whether a process whose command line names `dir` runs (an ssh master's `ControlPath`,
/// or its title `<path> [mux]`).
fn masters_running(dir: &Path) -> bool {
    let needle = dir.display().to_string();
    fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
                .any(|cmd| String::from_utf8_lossy(&cmd).contains(&needle))
        })
        .unwrap_or(false)
}
