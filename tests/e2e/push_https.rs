//! The push proxy's HTTPS arm (ARCHITECTURE.md, "Push proxy"), on real parts: the
//! broker's `Site` (real users, lanes bound by uid), `git http-backend` behind a real
//! HTTPS server on loopback with basic auth ([`https_git`]), lanes whose `git push` goes
//! through `git-remote-row-fence` (a `pushInsteadOf` to `row-fence::https://…`), and the
//! daemon holding the only token, loaded with `row-fence token add`. Root only, as the
//! broker's tests.

use super::*;
#[path = "https_git.rs"]
mod https_git;
use https_git::HttpsGit;

/// The forge's token: the daemon's only, in memory.
const TOKEN: &str = "rf-https-push-token-7c1e55d0a9";

/// The repository the forge serves, as its URL's path names it.
const REPO: &str = "/app.git";

/// One HTTPS forge and the daemon's push socket in front of it.
struct Forge {
    server: HttpsGit,
    /// The bare repository `git http-backend` serves (root's).
    repo: PathBuf,
    /// The daemon's push socket.
    socket: PathBuf,
}

impl Forge {
    /// The forge's repository under `site`, seeded with `main` and `feature/row-1` from
    /// `tree`, with a pre-receive hook that talks on side-band.
    fn new(site: &Site, tree: &Path) -> Forge {
        let root = site.home.path("https-root");
        fs::create_dir(&root).expect("https root");
        let certs = site.home.path("https-certs");
        fs::create_dir(&certs).expect("certs dir");
        let repo = root.join(REPO.trim_start_matches('/'));
        let init = run(Command::new("git")
            .args(["init", "-q", "--bare", "-b", "main"])
            .arg(&repo));
        assert_eq!(init.code, 0, "init: {}", init.stderr);
        let root_config = site.home.path("root-https.gitconfig");
        fs::write(&root_config, "[safe]\n\tdirectory = *\n").expect("root gitconfig");
        let seeded = run(Command::new("git")
            .current_dir(tree)
            .env("GIT_CONFIG_GLOBAL", &root_config)
            .args(["push", "-q"])
            .arg(&repo)
            .args(["HEAD:refs/heads/main", "HEAD:refs/heads/feature/row-1"]));
        assert_eq!(seeded.code, 0, "seed: {}", seeded.stderr);
        let hook = repo.join("hooks").join("pre-receive");
        fs::write(
            &hook,
            "#!/bin/sh\nwhile read old new ref; do\n  echo \"forge: checking $ref\"\ndone\n",
        )
        .expect("forge hook");
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).expect("chmod");
        Forge {
            server: HttpsGit::start(&certs, &root, TOKEN),
            repo,
            socket: site.home.path("pushsock/push.sock"),
        }
    }

    /// `https://127.0.0.1:<port>/app.git`.
    fn url(&self) -> String {
        format!("{}{}", self.server.base(), REPO.trim_start_matches('/'))
    }

    /// The daemon's flags: the broker with both lanes bound, the push socket, this forge
    /// (its user in the URL) and `ca`.
    fn daemon(&self, site: &Site, ca: &Path) -> Daemon {
        self.daemon_beside(site, ca, &[])
    }

    /// [`Forge::daemon`] with more `--push-forge` values beside this forge.
    fn daemon_beside(&self, site: &Site, ca: &Path, others: &[String]) -> Daemon {
        let mut args = vec![
            "--broker-socket".to_string(),
            site.agent.display().to_string(),
            "--broker-key".into(),
            site.key.display().to_string(),
            "--broker-lanes".into(),
            site.lanes.display().to_string(),
        ];
        args.extend(site.forge_args());
        args.extend([
            "--push-socket".into(),
            self.socket.display().to_string(),
            "--push-forge".into(),
            format!(
                "https://{}@127.0.0.1:{}/",
                https_git::USER,
                self.server.port
            ),
            "--push-ca".into(),
            ca.display().to_string(),
        ]);
        for other in others {
            args.extend(["--push-forge".to_string(), other.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let daemon = site.home.daemon_with(&args, &[]);
        assert!(
            self.socket.exists(),
            "no push socket: {}",
            daemon.log_text()
        );
        daemon
    }

    /// `row-fence token add` as the operator, from a 0600 file of root's outside every
    /// directory the lanes or the daemon use.
    fn load_token(&self, site: &Site) -> Ran {
        self.load(site, TOKEN)
    }

    /// `row-fence token add` of `token`, as [`Forge::load_token`].
    fn load(&self, site: &Site, token: &str) -> Ran {
        self.load_for(site, token, None)
    }

    /// `row-fence token add` of `token` with `--forge FORGE` when given.
    fn load_for(&self, site: &Site, token: &str, forge: Option<&str>) -> Ran {
        let dir = site.home.path("operator");
        fs::create_dir_all(&dir).expect("operator dir");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod");
        let file = dir.join("token");
        fs::write(&file, format!("{token}\n")).expect("token file");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).expect("chmod");
        let file = file.display().to_string();
        let mut args = vec!["token", "add", &file];
        if let Some(forge) = forge {
            args.extend(["--forge", forge]);
        }
        let ran = site.home.cli(&args);
        fs::remove_file(&file).expect("remove the token file");
        ran
    }

    /// Sends `user`'s pushes to this forge through the helper.
    fn wire(&self, site: &Site, user: &User, tree: &Path) {
        let base = self.server.base();
        let key = format!("url.row-fence::{base}.pushInsteadOf");
        site.as_lane(user, tree, "git", &["config", &key, &base])
            .expect_ok("wire pushInsteadOf");
    }

    /// `git push ARGS` as `user` in `tree`, the helper on PATH and the socket named.
    fn push(&self, site: &Site, user: &User, tree: &Path, args: &[&str]) -> Ran {
        let path = format!(
            "{}:{}",
            crate::util::bin_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let socket = self.socket.display().to_string();
        let env = [
            ("PATH", path.as_str()),
            ("ROW_FENCE_PUSH_SOCKET", socket.as_str()),
        ];
        site.as_lane_env(user, tree, "git", &[&["push"][..], args].concat(), &env)
    }

    /// The forge's `refname`.
    fn remote_ref(&self, refname: &str) -> Option<String> {
        let ran = run(Command::new("git")
            .args(["-c", "safe.directory=*", "--git-dir"])
            .arg(&self.repo)
            .args(["rev-parse", "--verify", "-q", refname]));
        (ran.code == 0).then(|| ran.stdout.trim().to_string())
    }

    /// The POSTs the forge saw.
    fn posts(&self) -> Vec<https_git::Seen> {
        self.server
            .seen()
            .into_iter()
            .filter(|s| s.method == "POST")
            .collect()
    }
}

/// The row's scope on board-1: the row's feature refs, in the forge's one repository.
fn scope(site: &Site) {
    let registry = row_fence_contract::paths::registry(&site.home.home);
    fs::create_dir_all(&registry).expect("registry dir");
    fs::write(
        registry.join("boards.toml"),
        format!(
            "[boards.board-1.scope]\nrefs = [\"refs/heads/feature/{{row}}\", \"refs/heads/feature/{{row}}/*\"]\nrepositories = [\"{REPO}\"]\n"
        ),
    )
    .expect("boards.toml");
}

/// Binds lane-a and lane-b (both on board-1/row-1) to their users' uids.
fn bind(site: &Site, lanes: &[(&str, &User, &Path)]) {
    let text: String = lanes
        .iter()
        .map(|(lane, user, tree)| {
            format!(
                "[[lane]]\nlane = \"{lane}\"\nuid = {}\ndescriptor = \"{}\"\nboard = \"board-1\"\nrow = \"row-1\"\n\n",
                user.uid,
                tree.join(".git/row-fence.json").display()
            )
        })
        .collect();
    fs::write(&site.lanes, text).expect("lanes.toml");
}

/// Asserts git showed the push refused by the daemon.
fn rejected(ran: &Ran, what: &str) {
    assert_ne!(ran.code, 0, "{what} landed: {}", ran.stderr);
    assert!(
        ran.stderr
            .contains("! [remote rejected] HEAD -> feature/row-1 (row-fence")
            && ran.stderr.contains("remote: row-fence: "),
        "{what}: no `! [remote rejected]` and verdict line: {}",
        ran.stderr
    );
}

/// Pushes lane `a`'s commits through the daemon and a clone's commits directly (git with
/// the token and the CA), 8 each, interleaved; prints both p50s. Returns lane `a`'s last
/// commit, now the forge's `feature/row-1`.
fn timed(site: &Site, forge: &Forge, a: &User, a_tree: &Path) -> String {
    let root_config = site.home.path("root-https.gitconfig");
    let direct = site.home.path("direct-https");
    let cloned = run(Command::new("git")
        .env("GIT_CONFIG_GLOBAL", &root_config)
        .args(["clone", "-q"])
        .arg(&forge.repo)
        .arg(&direct));
    assert_eq!(cloned.code, 0, "clone: {}", cloned.stderr);
    let direct_url = format!(
        "https://{}:{TOKEN}@127.0.0.1:{}{REPO}",
        https_git::USER,
        forge.server.port
    );
    let git = |args: &[&str]| {
        run(Command::new("git")
            .current_dir(&direct)
            .env("GIT_CONFIG_GLOBAL", &root_config)
            .env("GIT_AUTHOR_NAME", "d")
            .env("GIT_AUTHOR_EMAIL", "d@example.invalid")
            .env("GIT_COMMITTER_NAME", "d")
            .env("GIT_COMMITTER_EMAIL", "d@example.invalid")
            .env("GIT_SSL_CAINFO", &forge.server.ca)
            .args(args))
    };
    let (mut through, mut straight) = (Vec::new(), Vec::new());
    let mut last = String::new();
    for i in 0..8 {
        last = site.commit(a, a_tree, &format!("timed-{i}"));
        let ran = forge.push(
            site,
            a,
            a_tree,
            &["-q", &forge.url(), "HEAD:refs/heads/feature/row-1"],
        );
        assert_eq!(ran.code, 0, "timed push: {}", ran.stderr);
        through.push(ran.elapsed);
        fs::write(direct.join(format!("d{i}")), "d").expect("file");
        assert_eq!(git(&["add", "-A"]).code, 0);
        assert_eq!(git(&["commit", "-qm", "d"]).code, 0);
        let ran = git(&["push", "-q", &direct_url, "HEAD:refs/heads/direct"]);
        assert_eq!(ran.code, 0, "direct push: {}", ran.stderr);
        straight.push(ran.elapsed);
    }
    through.sort();
    straight.sort();
    eprintln!(
        "HTTPS push p50 through the daemon {:?}, direct {:?} (8 each, interleaved)",
        through[4], straight[4]
    );
    last
}

/// A commit of 24 MiB of incompressible bytes in `tree`: its pack fills every buffer
/// between the daemon and the forge. Returns the commit.
fn big_commit(site: &Site, user: &User, tree: &Path) -> String {
    let mut noise = Vec::with_capacity(BIG_BYTES);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while noise.len() < BIG_BYTES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    fs::write(tree.join("big.bin"), &noise).expect("big file");
    chown(&tree.join("big.bin"), user.uid, user.gid);
    site.commit(user, tree, "big")
}

/// The big commit's file, in bytes.
const BIG_BYTES: usize = 24 * 1024 * 1024;

/// Every file under `dir` whose bytes hold `needle` (links not followed).
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if kind.is_file()
            && let Ok(bytes) = fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            found.push(path);
        }
    }
    found
}

#[test]
fn the_daemon_pushes_over_https_for_an_allowed_lane_and_refuses_the_rest_at_the_write() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let (b, b_tree) = site.lane("b");
    let forge = Forge::new(&site, &a_tree);
    scope(&site);
    grant(&site, "lane-a", &a_tree, &[]);
    bind(&site, &[("lane-a", &a, &a_tree), ("lane-b", &b, &b_tree)]);
    let daemon = forge.daemon(&site, &forge.server.ca);
    forge.wire(&site, &a, &a_tree);
    forge.wire(&site, &b, &b_tree);
    let url = forge.url();

    // Before the operator loads the token, a push fails with a clear error and nothing
    // is dialled.
    let before = forge.remote_ref("refs/heads/feature/row-1");
    site.commit(&a, &a_tree, "a-0");
    let ran = forge.push(&site, &a, &a_tree, &[&url, "HEAD:refs/heads/feature/row-1"]);
    assert_ne!(ran.code, 0, "a push with no token landed: {}", ran.stderr);
    assert!(
        ran.stderr.contains("holds no token") && ran.stderr.contains("row-fence token add"),
        "no clear error for a missing token: {}",
        ran.stderr
    );
    assert!(forge.server.seen().is_empty(), "{:?}", forge.server.seen());
    assert_eq!(forge.remote_ref("refs/heads/feature/row-1"), before);
    let loaded = forge.load_token(&site);
    assert!(
        loaded.code == 0
            && format!("{}{}", loaded.stdout, loaded.stderr)
                .contains("holds a token for https://127.0.0.1:"),
        "token add: {}{}",
        loaded.stdout,
        loaded.stderr
    );

    // An ALLOWED push lands, and the forge's side-band reaches git.
    let mine = site.commit(&a, &a_tree, "a-1");
    let ran = forge.push(&site, &a, &a_tree, &[&url, "HEAD:refs/heads/feature/row-1"]);
    assert_eq!(
        ran.code,
        0,
        "lane-a's push over HTTPS: {}\n{}",
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
        forge.remote_ref("refs/heads/feature/row-1").as_deref(),
        Some(mine.as_str())
    );
    let seen = forge.server.seen();
    assert!(
        seen.iter().all(|s| s.authorized && s.whole),
        "every request carried the daemon's credential: {seen:?}"
    );
    assert_eq!(forge.posts().len(), 1, "{seen:?}");
    // Smart HTTP's two requests, on the repository the lane named.
    assert!(
        seen.iter().all(|s| {
            (s.method == "GET" && s.target == format!("{REPO}/info/refs?service=git-receive-pack"))
                || (s.method == "POST" && s.target == format!("{REPO}/git-receive-pack"))
        }),
        "{seen:?}"
    );

    // What the daemon costs over HTTPS: pushes through it against direct pushes with the
    // same token to the same server, interleaved (printed for the record).
    let mine = timed(&site, &forge, &a, &a_tree);
    let posted = forge.posts().len();

    // A ref outside the row's scope refuses the whole push: nothing is POSTed.
    let ran = forge.push(
        &site,
        &a,
        &a_tree,
        &[
            &url,
            "HEAD:refs/heads/feature/row-1",
            "HEAD:refs/heads/main",
        ],
    );
    assert_ne!(
        ran.code, 0,
        "a push outside the scope landed: {}",
        ran.stderr
    );
    assert!(ran.stderr.contains("! [remote rejected]"), "{}", ran.stderr);
    assert_eq!(forge.posts().len(), posted, "{:?}", forge.server.seen());

    // A lane that holds no lease: `! [remote rejected]`, nothing moves, nothing POSTed.
    site.commit(&b, &b_tree, "b-1");
    // (--force: lane-b's history is its own, and git would stop a non-fast-forward itself.)
    let ran = forge.push(
        &site,
        &b,
        &b_tree,
        &["--force", &url, "HEAD:refs/heads/feature/row-1"],
    );
    rejected(&ran, "lane-b's push with no lease");
    assert_eq!(
        forge.remote_ref("refs/heads/feature/row-1").as_deref(),
        Some(mine.as_str())
    );
    assert_eq!(forge.posts().len(), posted, "{:?}", forge.server.seen());

    // A URL on no configured forge (the same server, named by another host) is refused
    // and the server sees no request.
    let count = forge.server.seen().len();
    let elsewhere = format!("row-fence::https://localhost:{}{REPO}", forge.server.port);
    let ran = forge.push(
        &site,
        &a,
        &a_tree,
        &[&elsewhere, "HEAD:refs/heads/feature/row-1"],
    );
    assert_ne!(
        ran.code, 0,
        "an unconfigured URL was pushed to: {}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("on no forge the daemon pushes to"),
        "{}",
        ran.stderr
    );
    assert_eq!(
        forge.server.seen().len(),
        count,
        "{:?}",
        forge.server.seen()
    );

    // A takeover between the two judgements: the forge reads the POST's body only after
    // lane-b takes the row over, and the pack is larger than every buffer on the way, so
    // the daemon's second judgement comes after the takeover. The POST is dropped before
    // its body ends, and the forge applies nothing.
    let next = big_commit(&site, &a, &a_tree);
    let started = forge.server.posts_started();
    forge.server.hold_posts();
    let ran = std::thread::scope(|s| {
        let pushing =
            s.spawn(|| forge.push(&site, &a, &a_tree, &[&url, "HEAD:refs/heads/feature/row-1"]));
        let until = Instant::now() + Duration::from_secs(60);
        while forge.server.posts_started() == started {
            assert!(
                Instant::now() < until && !pushing.is_finished(),
                "the POST never came"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        grant(&site, "lane-b", &b_tree, &["--takeover"]);
        forge.server.release();
        pushing.join().expect("the push thread")
    });
    rejected(&ran, "lane-a's push after the takeover");
    assert!(ran.stderr.contains("REFUSED"), "{}", ran.stderr);
    assert_eq!(
        forge.remote_ref("refs/heads/feature/row-1").as_deref(),
        Some(mine.as_str()),
        "the push after the takeover moved the ref ({next})"
    );
    let posts = forge.posts();
    assert!(
        posts.len() == posted + 1 && !posts[posted].whole,
        "the refused POST reached its end: {posts:?}"
    );

    // The token is in no lane's files, no file of the daemon's and not in its log.
    for dir in [
        a.home.as_path(),
        b.home.as_path(),
        a_tree.as_path(),
        b_tree.as_path(),
        site.home.home.as_path(),
    ] {
        let holding = files_holding(dir, TOKEN.as_bytes());
        assert!(holding.is_empty(), "the token is in {holding:?}");
    }
    assert!(
        !daemon.log_text().contains(TOKEN),
        "the token is in the daemon's log"
    );
    let environ = fs::read(format!("/proc/{}/environ", daemon.pid())).expect("environ");
    assert!(
        !environ.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
        "the token is in the daemon's environment"
    );

    // A token the forge does not take: a clear error, nothing moves (the token replaced
    // is wiped; the forge's 401 names no token).
    forge.load(&site, "rf-a-token-the-forge-refuses");
    let now = forge.remote_ref("refs/heads/feature/row-1");
    site.commit(&b, &b_tree, "b-2");
    let ran = forge.push(
        &site,
        &b,
        &b_tree,
        &["--force", &url, "HEAD:refs/heads/feature/row-1"],
    );
    assert_ne!(
        ran.code, 0,
        "a push with a refused token landed: {}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("refused the daemon's credential") && ran.stderr.contains("HTTP 401"),
        "no clear error for a refused token: {}\n{}",
        ran.stderr,
        daemon.log_text()
    );
    assert_eq!(forge.remote_ref("refs/heads/feature/row-1"), now);
    drop(daemon);
}

#[test]
fn a_forge_whose_certificate_the_daemon_does_not_trust_gets_no_push_and_no_token() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let forge = Forge::new(&site, &a_tree);
    scope(&site);
    grant(&site, "lane-a", &a_tree, &[]);
    bind(&site, &[("lane-a", &a, &a_tree)]);
    let daemon = forge.daemon(&site, &forge.server.other_ca);
    forge.load_token(&site);
    forge.wire(&site, &a, &a_tree);
    let before = forge.remote_ref("refs/heads/feature/row-1");
    site.commit(&a, &a_tree, "a-1");
    let ran = forge.push(
        &site,
        &a,
        &a_tree,
        &[&forge.url(), "HEAD:refs/heads/feature/row-1"],
    );
    assert_ne!(
        ran.code, 0,
        "a push to an untrusted forge landed: {}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("certificate") && ran.stderr.contains("--push-ca"),
        "no clear error for an untrusted certificate: {}\n{}",
        ran.stderr,
        daemon.log_text()
    );
    assert_eq!(forge.remote_ref("refs/heads/feature/row-1"), before);
    // The handshake failed: no request, so no credential, reached the server.
    assert!(forge.server.seen().is_empty(), "{:?}", forge.server.seen());
    drop(daemon);
}

#[test]
fn a_token_goes_to_the_https_forge_it_was_loaded_for_and_no_other() {
    let mut site = Site::new();
    let (a, a_tree) = site.lane("a");
    let forge = Forge::new(&site, &a_tree);
    scope(&site);
    grant(&site, "lane-a", &a_tree, &[]);
    bind(&site, &[("lane-a", &a, &a_tree)]);
    // A second HTTPS forge on another origin beside the served one.
    let port = forge.server.port;
    let other = format!("https://{}@127.0.0.2:{port}/", https_git::USER);
    let daemon = forge.daemon_beside(&site, &forge.server.ca, std::slice::from_ref(&other));
    forge.wire(&site, &a, &a_tree);
    let url = forge.url();
    let before = forge.remote_ref("refs/heads/feature/row-1");
    site.commit(&a, &a_tree, "a-1");

    // Two HTTPS forges and no --forge: nothing is loaded for either, and the operator is
    // told to name one.
    let ran = forge.load_for(&site, TOKEN, None);
    assert_ne!(ran.code, 0, "an unnamed token was taken: {}", ran.stdout);
    assert!(ran.stderr.contains("--forge"), "{}", ran.stderr);
    // A forge that is none of the daemon's: refused, nothing loaded.
    let ran = forge.load_for(&site, TOKEN, Some("https://forge.example/"));
    assert_ne!(ran.code, 0, "a token for an unknown forge was taken");
    assert!(
        ran.stderr.contains("none of the daemon's HTTPS forges"),
        "{}",
        ran.stderr
    );
    // The other forge's token is never sent to this one.
    let ran = forge.load_for(&site, TOKEN, Some(&other));
    assert_eq!(ran.code, 0, "token add --forge: {}", ran.stderr);
    assert!(ran.stderr.contains("https://127.0.0.2:"), "{}", ran.stderr);
    let ran = forge.push(&site, &a, &a_tree, &[&url, "HEAD:refs/heads/feature/row-1"]);
    assert_ne!(ran.code, 0, "a push with another forge's token landed");
    assert!(
        ran.stderr
            .contains(&format!("no token for https://127.0.0.1:{port}")),
        "{}",
        ran.stderr
    );
    assert!(forge.server.seen().is_empty(), "{:?}", forge.server.seen());
    assert_eq!(forge.remote_ref("refs/heads/feature/row-1"), before);
    // Its own token, named: the push lands.
    let own = format!("https://127.0.0.1:{port}/");
    let ran = forge.load_for(&site, TOKEN, Some(&own));
    assert_eq!(ran.code, 0, "token add --forge: {}", ran.stderr);
    let ran = forge.push(&site, &a, &a_tree, &[&url, "HEAD:refs/heads/feature/row-1"]);
    assert_eq!(ran.code, 0, "{}\n{}", ran.stderr, daemon.log_text());
    assert_ne!(forge.remote_ref("refs/heads/feature/row-1"), before);
    drop(daemon);
}
