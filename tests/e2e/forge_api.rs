//! The forge API endpoint end to end (docs/forge-api.md): the real `gh` (the
//! system's package), configured by `row-fence install gh`, talks to the daemon's socket;
//! the daemon judges each request and sends what it passes, with the real token it holds
//! in memory only, to a stand-in GitHub API on loopback HTTPS (tests/e2e/forge_standin.rs).
//! gh never reaches the internet: its only route is the socket, and the daemon dials only
//! the stand-in (`--forge-api-connect`).

use crate::forge_standin::{PR_ID, PR_SHA, REPO_ID, StandIn};
use crate::util::{Home, bin, run};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The real token the daemon holds; no lane file or environment may carry it.
const TOKEN: &str = "ghp_rowfenceRealTokenNeverInALane0123";

/// A home with its daemon serving the forge API in front of the stand-in, lane-a holding
/// row b/r1 with its gh wired to the socket.
struct Site {
    home: Home,
    forge: StandIn,
    socket: PathBuf,
    gh_dir: PathBuf,
    _daemon: crate::util::Daemon,
}

impl Site {
    fn start() -> Site {
        Site::start_with(None)
    }

    /// [`Site::start`] with `boards` as the registry's `boards.toml` (a board's scope).
    fn start_with(boards: Option<&str>) -> Site {
        let home = Home::file();
        if let Some(boards) = boards {
            let registry = home.home.join("registry");
            std::fs::create_dir_all(&registry).unwrap();
            std::fs::write(registry.join("boards.toml"), boards).unwrap();
        }
        let forge = StandIn::start(home.dir.path());
        let socket = home.home.join("forge").join("api.sock");
        let socket_text = socket.display().to_string();
        let ca = forge.ca.display().to_string();
        let addr = forge.addr();
        let daemon = home.daemon_with(
            &[
                "--forge-api-socket",
                &socket_text,
                "--forge-api-ca",
                &ca,
                "--forge-api-connect",
                &addr,
            ],
            &[],
        );
        let (_, descriptor) = home.acquire("b", "r1", "lane-a", &[]);
        let mut add = home.command(bin("row-fence"));
        add.args(["token", "add", "-"]);
        let added = run_with_stdin(&mut add, TOKEN);
        assert_eq!(added.0, 0, "token add: {}", added.1);
        let gh_dir = home.path("lane-a-gh");
        let installed = home.cli(&[
            "install",
            "gh",
            "--lane",
            "lane-a",
            "--repo",
            "o/r",
            "--gh-config-dir",
            gh_dir.to_str().unwrap(),
            "--forge-api-socket",
            &socket_text,
            "--descriptor",
            descriptor.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(installed.code, 0, "install gh: {}", installed.stderr);
        Site {
            home,
            forge,
            socket,
            gh_dir,
            _daemon: daemon,
        }
    }

    /// `gh ARGS` as lane-a: its config dir, no token in its environment, no prompt, no
    /// pager, its working directory outside any repository.
    fn gh(&self, args: &[&str]) -> (i32, String, String) {
        let mut cmd = self.home.command("gh");
        cmd.args(args)
            .env("GH_CONFIG_DIR", &self.gh_dir)
            .env("TMPDIR", self.home.dir.path())
            .env("GH_NO_UPDATE_NOTIFIER", "1")
            .env("GH_PROMPT_DISABLED", "1")
            .env("NO_COLOR", "1")
            .env("GH_PAGER", "cat")
            .env("GIT_TERMINAL_PROMPT", "0")
            .current_dir(self.home.dir.path());
        let ran = run(&mut cmd);
        (ran.code, ran.stdout, ran.stderr)
    }

    /// `curl --unix-socket` to the daemon with lane-a's placeholder token.
    fn curl(&self, args: &[&str]) -> (i32, String) {
        let hosts = std::fs::read_to_string(self.gh_dir.join("hosts.yml")).unwrap();
        let placeholder = hosts
            .lines()
            .find_map(|l| l.trim().strip_prefix("oauth_token: "))
            .expect("a placeholder")
            .to_string();
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--max-time", "20", "--unix-socket"])
            .arg(&self.socket)
            .arg("-H")
            .arg(format!("Authorization: token {placeholder}"))
            .args(args);
        let ran = run(&mut cmd);
        (ran.code, ran.stdout)
    }
}

fn run_with_stdin(cmd: &mut Command, input: &str) -> (i32, String) {
    use std::io::Write;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The ```sh block of docs/forge-api.md holding `needle`.
fn sh_block(needle: &str) -> String {
    let docs = std::fs::read_to_string(crate::util::repo_root().join("docs/forge-api.md")).unwrap();
    docs.split("```sh\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("\n```").map(|(block, _)| block))
        .find(|block| block.contains(needle))
        .unwrap_or_else(|| panic!("docs/forge-api.md has an sh block with {needle:?}"))
        .to_string()
}

/// Every file under `dir`, read whole.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            found.push((path, bytes));
        }
    }
    found
}

#[test]
fn an_allowed_lanes_gh_opens_and_merges_with_the_real_token_and_after_a_takeover_no_write_shape_arrives()
 {
    let site = Site::start();
    let real = format!("token {TOKEN}");

    // The daemon holding the token writes no core file: its hard limit is 0 (the
    // daemon set it, with undumpable, before serving).
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", site._daemon.pid())).unwrap();
    assert!(
        limits.lines().any(
            |l| l.starts_with("Max core file size") && l.split_whitespace().nth(5) == Some("0")
        ),
        "{limits}"
    );

    // A read passes with the real token.
    let (code, out, err) = site.gh(&["api", "/repos/o/r"]);
    assert_eq!(code, 0, "gh api: {out} {err}");
    assert!(out.contains("\"full_name\""), "{out}");

    // The documented curl line reads through the socket.
    let hosts = std::fs::read_to_string(site.gh_dir.join("hosts.yml")).unwrap();
    let placeholder = hosts
        .lines()
        .find_map(|l| l.trim().strip_prefix("oauth_token: "))
        .unwrap();
    let ran = run(site
        .home
        .command("sh")
        .arg("-c")
        .arg(sh_block("curl -sS --unix-socket"))
        .env("SOCKET", &site.socket)
        .env("PLACEHOLDER", placeholder));
    assert!(
        ran.stdout.contains("\"full_name\""),
        "the documented curl: {} {}",
        ran.stdout,
        ran.stderr
    );

    // A redirect goes back to the lane; the daemon follows none with the token.
    let before = site.forge.requests().len();
    let (_, out) = site.curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{redirect_url}",
        "http://api.github.com/repos/o/moved",
    ]);
    assert_eq!(
        out.trim(),
        "301 https://api.github.com/repos/o/r",
        "a redirect"
    );
    let after: Vec<String> = site.forge.requests()[before..]
        .iter()
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(after, ["/repos/o/moved"], "the daemon followed a redirect");

    // gh pr create and gh pr merge arrive, with the real token, the merge pinned.
    let (code, out, err) = site.gh(&[
        "pr", "create", "-R", "o/r", "--head", "feature", "--base", "main", "--title", "t",
        "--body", "b",
    ]);
    assert_eq!(code, 0, "gh pr create: {out} {err}");
    let (code, out, err) = site.gh(&["pr", "merge", "1", "-R", "o/r", "--merge"]);
    assert_eq!(code, 0, "gh pr merge: {out} {err}");
    let requests = site.forge.requests();
    let created = requests
        .iter()
        .find(|r| r.operation.as_deref() == Some("PullRequestCreate"))
        .expect("the create arrived");
    assert_eq!(created.authorization.as_deref(), Some(real.as_str()));
    let input: serde_json::Value = serde_json::from_str(&created.body).unwrap();
    assert_eq!(input["variables"]["input"]["repositoryId"], REPO_ID);
    let merged = requests
        .iter()
        .find(|r| r.operation.as_deref() == Some("PullRequestMerge"))
        .expect("the merge arrived");
    assert_eq!(merged.authorization.as_deref(), Some(real.as_str()));
    let merge: serde_json::Value = serde_json::from_str(&merged.body).unwrap();
    assert_eq!(merge["variables"]["input"]["pullRequestId"], PR_ID);
    assert_eq!(merge["variables"]["input"]["expectedHeadOid"], PR_SHA);
    for r in &requests {
        assert_eq!(
            r.authorization.as_deref(),
            Some(real.as_str()),
            "{} {} arrived without the real token",
            r.method,
            r.path
        );
    }
    let (code, out) = site.curl(&[
        "-X",
        "PUT",
        "-d",
        "{\"merge_method\":\"merge\"}",
        "http://api.github.com/repos/o/r/pulls/1/merge",
    ]);
    assert_eq!(code, 0, "{out}");
    let pinned = site
        .forge
        .writes()
        .into_iter()
        .find(|r| r.path == "/repos/o/r/pulls/1/merge")
        .expect("the REST merge arrived");
    let body: serde_json::Value = serde_json::from_str(&pinned.body).unwrap();
    assert_eq!(body["sha"], PR_SHA, "the REST merge is pinned");

    // gh pr comment and gh pr close arrive too (the daemon read the pull request first).
    for args in [
        &["pr", "comment", "1", "-R", "o/r", "--body", "hi"][..],
        &["pr", "close", "1", "-R", "o/r"],
    ] {
        let (code, out, err) = site.gh(args);
        assert_eq!(code, 0, "gh {args:?}: {out} {err}");
    }
    let arrived: Vec<String> = site
        .forge
        .writes()
        .iter()
        .filter_map(|r| r.operation.clone())
        .collect();
    assert!(
        arrived.contains(&"CommentCreate".to_string())
            && arrived.contains(&"PullRequestClose".to_string()),
        "{arrived:?}"
    );

    // While ALLOWED, a write off the list or outside the row's repository is refused too.
    let writes_allowed = site.forge.writes().len();
    for args in [
        &["api", "-X", "POST", "/repos/o/r/issues", "-f", "title=x"][..],
        &[
            "api",
            "-X",
            "POST",
            "/repos/o/other/pulls",
            "-f",
            "head=feature",
            "-f",
            "base=main",
        ],
        &[
            "api",
            "-X",
            "PATCH",
            "/repos/o/r",
            "-f",
            "default_branch=feature",
        ],
        &[
            "api",
            "-X",
            "PATCH",
            "/repos/o/r/pulls/1",
            "-f",
            "base=other",
        ],
    ] {
        let (code, out, err) = site.gh(args);
        assert_ne!(code, 0, "gh {args:?} passed: {out} {err}");
        assert!(
            err.contains("forge_write_refused"),
            "gh {args:?}: {out} {err}"
        );
    }
    // A merge naming another head than the one the daemon reads, and a create in another
    // repository by node id, are refused while ALLOWED too.
    let (_, out) = site.curl(&[
        "-X",
        "PUT",
        "-d",
        "{\"sha\":\"2222222222222222222222222222222222222222\"}",
        "http://api.github.com/repos/o/r/pulls/1/merge",
    ]);
    assert!(out.contains("forge_write_refused"), "another head: {out}");
    let elsewhere = json!({
        "query": "mutation C($i: CreatePullRequestInput!) { createPullRequest(input: $i) { pullRequest { id } } }",
        "variables": {"i": {"repositoryId": "R_someoneElse", "headRefName": "feature", "baseRefName": "main", "title": "t"}}
    })
    .to_string();
    let (_, out) = site.curl(&["-d", &elsewhere, "http://api.github.com/graphql"]);
    assert!(
        out.contains("forge_write_refused"),
        "another repository: {out}"
    );
    assert_eq!(site.forge.writes().len(), writes_allowed);

    // The takeover.
    site.home.acquire("b", "r1", "lane-b", &["--takeover"]);
    let writes_before = site.forge.writes().len();

    let refused_gh: &[&[&str]] = &[
        &["pr", "comment", "1", "-R", "o/r", "--body", "hi"],
        &["pr", "close", "1", "-R", "o/r"],
        &[
            "pr", "create", "-R", "o/r", "--head", "feature2", "--base", "main", "--title", "t",
            "--body", "b",
        ],
        &["pr", "merge", "1", "-R", "o/r", "--merge"],
        &[
            "api",
            "-X",
            "POST",
            "/repos/o/r/pulls",
            "-f",
            "head=feature",
            "-f",
            "base=main",
            "-f",
            "title=t",
        ],
        &["api", "-X", "PUT", "/repos/o/r/pulls/1/merge"],
        &[
            "api",
            "-X",
            "PATCH",
            "/repos/o/r/pulls/1",
            "-f",
            "state=closed",
        ],
        &["api", "-X", "DELETE", "/repos/o/r/git/refs/heads/feature"],
        &["api", "-X", "POST", "/repos/o/r/issues", "-f", "title=x"],
        &[
            "api",
            "graphql",
            "-f",
            "query=mutation M($i: MergePullRequestInput!) { mergePullRequest(input: $i) { clientMutationId } }",
        ],
        &[
            "api",
            "graphql",
            "-f",
            "query=mutation { a: mergePullRequest(input: {pullRequestId: \"PR_kwDOrowfence1\"}) { clientMutationId } }",
        ],
        &[
            "api",
            "graphql",
            "-f",
            "query=mutation M { ...F } fragment F on Mutation { closePullRequest(input: {pullRequestId: \"PR_kwDOrowfence1\"}) { clientMutationId } }",
        ],
        &[
            "api",
            "-X",
            "GET",
            "graphql",
            "-f",
            "query=mutation { closePullRequest(input: {pullRequestId: \"PR_kwDOrowfence1\"}) { clientMutationId } }",
        ],
    ];
    for args in refused_gh {
        let (code, out, err) = site.gh(args);
        assert_ne!(
            code, 0,
            "gh {args:?} passed after the takeover: {out} {err}"
        );
        assert!(
            err.contains("row-fence") || out.contains("row-fence"),
            "gh {args:?} did not say why: {out} {err}"
        );
    }
    let batch = json!([
        {"query": "{ viewer { login } }"},
        {"query": "mutation { mergePullRequest(input: $i) { clientMutationId } }", "variables": {"i": {"pullRequestId": PR_ID}}}
    ])
    .to_string();
    let (_, out) = site.curl(&["-d", &batch, "http://api.github.com/graphql"]);
    assert!(out.contains("row-fence: REFUSED"), "a batch: {out}");
    let (_, out) = site.curl(&[
        "-d",
        "{\"head\":\"feature\",\"base\":\"main\",\"title\":\"t\"}",
        "http://api.github.com/repos/o/r/pulls",
    ]);
    assert!(out.contains("row-fence: REFUSED"), "curl: {out}");
    let (_, out) = site.curl(&[
        "-d",
        "{\"query\": \"mutation {\"}",
        "http://api.github.com/graphql",
    ]);
    assert!(out.contains("row-fence: REFUSED"), "unparsable: {out}");
    let big = "x".repeat(2 * 1024 * 1024);
    let big_path = site.home.path("big.json");
    std::fs::write(
        &big_path,
        format!("{{\"query\": \"{{ viewer {{ login }} }}\", \"x\": \"{big}\"}}"),
    )
    .unwrap();
    let (_, out) = site.curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--data-binary",
        &format!("@{}", big_path.display()),
        "http://api.github.com/graphql",
    ]);
    assert_eq!(out.trim(), "413", "an oversized body");
    for (raw, status) in [
        (b"NOT HTTP AT ALL\r\n\r\n".to_vec(), "400"),
        (
            format!(
                "GET /repos/o/r HTTP/1.1\r\nHost: api.github.com\r\nX-Big: {}\r\n\r\n",
                "y".repeat(100 * 1024)
            )
            .into_bytes(),
            "431",
        ),
    ] {
        use std::io::{Read, Write};
        let mut stream = std::os::unix::net::UnixStream::connect(&site.socket).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let _ = stream.write_all(&raw);
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "a malformed request: {answer:?}"
        );
    }
    let (_, out) = site.curl(&["http://uploads.github.com/repos/o/r"]);
    assert!(out.contains("row-fence: REFUSED"), "another host: {out}");
    assert_eq!(
        site.forge.writes().len(),
        writes_before,
        "a write arrived after the takeover: {:?}",
        &site.forge.writes()[writes_before..]
    );

    // Reads still work.
    let (code, out, err) = site.gh(&["api", "/repos/o/r"]);
    assert_eq!(code, 0, "a read after the takeover: {out} {err}");

    // The ledger has the refusals, the status counts them.
    let status = crate::util::status(&site.home.socket());
    let forge = &status["forge_api"];
    assert!(
        forge["refused"].as_u64().unwrap() >= refused_gh.len() as u64,
        "{forge}"
    );
    assert!(forge["passed"].as_u64().unwrap() >= 3, "{forge}");
    let prometheus = site.home.cli(&["health", "--prometheus"]);
    assert!(
        prometheus
            .stdout
            .contains("row_fence_forge_api_refused_total ")
            && prometheus
                .stdout
                .contains("row_fence_forge_api_passed_total "),
        "{}",
        prometheus.stdout
    );
    let ledger = std::fs::read_to_string(site.home.home.join("refusals.jsonl")).unwrap_or_default();
    assert!(
        ledger.contains("forge-api graphql mergePullRequest")
            && ledger.contains("forge-api PUT /repos/o/r/pulls/1/merge"),
        "the ledger: {ledger}"
    );

    // The token is in no lane file and no problem was seen by the stand-in.
    for (path, bytes) in files_under(&site.gh_dir).into_iter().chain(
        files_under(site.home.dir.path())
            .into_iter()
            .filter(|(p, _)| !p.starts_with(&site.home.home)),
    ) {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(TOKEN),
            "{} holds the token",
            path.display()
        );
    }
    let problems = site.forge.problems.lock().unwrap().clone();
    assert!(
        problems.is_empty(),
        "shapes the stand-in did not expect: {problems:?}"
    );
}

#[test]
fn install_gh_rolls_back_byte_for_byte() {
    let home = Home::file();
    let gh_dir = home.path("gh");
    std::fs::create_dir_all(&gh_dir).unwrap();
    let config = b"git_protocol: ssh\neditor: vim".to_vec();
    let hosts = b"github.com:\n    oauth_token: gho_aRealOneTheLaneHad\n    user: me\n".to_vec();
    std::fs::write(gh_dir.join("config.yml"), &config).unwrap();
    std::fs::write(gh_dir.join("hosts.yml"), &hosts).unwrap();
    let socket = home.home.join("forge").join("api.sock");
    let args = |rollback: bool| {
        let mut a = vec![
            "install".to_string(),
            "gh".into(),
            "--lane".into(),
            "lane-a".into(),
            "--gh-config-dir".into(),
            gh_dir.display().to_string(),
        ];
        if rollback {
            a.push("--rollback".into());
        } else {
            a.extend([
                "--repo".into(),
                "o/r".into(),
                "--forge-api-socket".into(),
                socket.display().to_string(),
            ]);
        }
        a
    };
    let refs = |a: &[String]| {
        a.iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\u{0}")
    };
    let installed = home.cli(&refs(&args(false)).split('\u{0}').collect::<Vec<_>>());
    assert_eq!(installed.code, 0, "{}", installed.stderr);
    let wired = std::fs::read_to_string(gh_dir.join("config.yml")).unwrap();
    assert!(
        wired.starts_with("git_protocol: ssh\neditor: vim\n"),
        "{wired}"
    );
    assert!(
        wired.contains(&format!("http_unix_socket: {}\n", socket.display())),
        "{wired}"
    );
    let placeholder = std::fs::read_to_string(gh_dir.join("hosts.yml")).unwrap();
    assert!(
        !placeholder.contains("gho_aRealOneTheLaneHad"),
        "{placeholder}"
    );
    assert!(
        placeholder.contains("oauth_token: rowfence_placeholder_"),
        "{placeholder}"
    );
    let lanes = std::fs::read_to_string(home.home.join("forge-api").join("lanes.toml")).unwrap();
    assert!(
        lanes.contains("lane = \"lane-a\"") && lanes.contains("repo = \"o/r\""),
        "{lanes}"
    );
    let rolled = home.cli(&refs(&args(true)).split('\u{0}').collect::<Vec<_>>());
    assert_eq!(rolled.code, 0, "{}", rolled.stderr);
    assert_eq!(std::fs::read(gh_dir.join("config.yml")).unwrap(), config);
    assert_eq!(std::fs::read(gh_dir.join("hosts.yml")).unwrap(), hosts);
    let lanes = std::fs::read_to_string(home.home.join("forge-api").join("lanes.toml")).unwrap();
    assert!(!lanes.contains("lane-a"), "{lanes}");

    // Files install created are removed by the rollback.
    let fresh = home.path("fresh-gh");
    let mut a = args(false);
    a[5] = fresh.display().to_string();
    assert_eq!(
        home.cli(&refs(&a).split('\u{0}').collect::<Vec<_>>()).code,
        0
    );
    let mut r = args(true);
    r[5] = fresh.display().to_string();
    assert_eq!(
        home.cli(&refs(&r).split('\u{0}').collect::<Vec<_>>()).code,
        0
    );
    assert!(!fresh.join("config.yml").exists() && !fresh.join("hosts.yml").exists());
}

/// A user made for the hard-mode test (`useradd`), removed with its processes when dropped.
#[cfg(target_os = "linux")]
struct LaneUser {
    name: String,
    uid: u32,
    gid: u32,
    home: PathBuf,
}

#[cfg(target_os = "linux")]
impl LaneUser {
    fn add(dir: &Path, tag: &str) -> LaneUser {
        use std::os::unix::fs::PermissionsExt;
        let name = format!("rff{}{tag}", std::process::id());
        let home = dir.join(format!("{tag}-home"));
        let made = run(Command::new("useradd")
            .args(["-U", "-M", "-p", "*", "-s", "/bin/sh", "-d"])
            .arg(&home)
            .arg(&name));
        assert_eq!(made.code, 0, "useradd {name}: {}", made.stderr);
        let entry = nix::unistd::User::from_name(&name)
            .expect("getpwnam")
            .expect("the new user exists");
        let user = LaneUser {
            name,
            uid: entry.uid.as_raw(),
            gid: entry.gid.as_raw(),
            home,
        };
        std::fs::create_dir(&user.home).expect("user home");
        std::fs::set_permissions(&user.home, std::fs::Permissions::from_mode(0o700)).unwrap();
        user.chown(&user.home);
        user
    }

    fn chown(&self, path: &Path) {
        let ran = run(Command::new("chown")
            .arg("-R")
            .arg(format!("{}:{}", self.uid, self.gid))
            .arg(path));
        assert_eq!(ran.code, 0, "chown: {}", ran.stderr);
    }
}

#[cfg(target_os = "linux")]
impl Drop for LaneUser {
    fn drop(&mut self) {
        for _ in 0..50 {
            let _ = Command::new("pkill")
                .args(["-KILL", "-u", &self.name])
                .output();
            let gone = Command::new("userdel")
                .arg(&self.name)
                .output()
                .is_ok_and(|o| o.status.success());
            if gone
                || nix::unistd::User::from_name(&self.name)
                    .ok()
                    .flatten()
                    .is_none()
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}

/// The hard mode: lanes are their own uids and hold no token; the daemon (root here) names
/// the lane by the peer's uid through the key broker's bindings. lane-a's gh opens a pull
/// request with the real token while ALLOWED and is refused after the takeover; a uid bound
/// to no lane is refused even a read; a placeholder copied from lane-a's file names nothing
/// for another uid.
#[cfg(target_os = "linux")]
#[test]
fn in_the_hard_mode_the_peers_uid_names_the_lane_and_an_unbound_uid_gets_nothing() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    assert_eq!(
        nix::unistd::geteuid().as_raw(),
        0,
        "the hard mode's test makes users: run it as root (CI does)"
    );
    let home = Home::file();
    let root = home.dir.path().to_path_buf();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let forge = StandIn::start(&root);
    let lane = LaneUser::add(&root, "a");
    let stranger = LaneUser::add(&root, "x");
    let socket = root.join("forge").join("api.sock");
    let socket_text = socket.display().to_string();
    let (_, descriptor) = home.acquire("b", "r1", "lane-a", &[]);
    let lanes = home.home.join("broker").join("lanes.toml");
    std::fs::create_dir_all(lanes.parent().unwrap()).unwrap();
    std::fs::write(
        &lanes,
        format!(
            "[[lane]]\nlane = \"lane-a\"\nuid = {}\ndescriptor = \"{}\"\nboard = \"b\"\nrow = \"r1\"\n",
            lane.uid,
            descriptor.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&lanes, std::fs::Permissions::from_mode(0o600)).unwrap();
    let ca = forge.ca.display().to_string();
    let addr = forge.addr();
    let _daemon = home.daemon_with(
        &[
            "--forge-api-socket",
            &socket_text,
            "--forge-api-ca",
            &ca,
            "--forge-api-connect",
            &addr,
        ],
        &[],
    );
    let mut add = home.command(bin("row-fence"));
    add.args(["token", "add", "-"]);
    assert_eq!(run_with_stdin(&mut add, TOKEN).0, 0);
    for user in [&lane, &stranger] {
        let gh_dir = user.home.join(".config").join("gh");
        let name = if user.uid == lane.uid {
            "lane-a"
        } else {
            "lane-x"
        };
        let installed = home.cli(&[
            "install",
            "gh",
            "--lane",
            name,
            "--repo",
            "o/r",
            "--gh-config-dir",
            gh_dir.to_str().unwrap(),
            "--forge-api-socket",
            &socket_text,
        ]);
        assert_eq!(installed.code, 0, "install gh: {}", installed.stderr);
        // install gh, as root, gave the files and the directories it made to the lane.
        use std::os::unix::fs::MetadataExt;
        for path in [
            user.home.join(".config"),
            gh_dir.clone(),
            gh_dir.join("config.yml"),
            gh_dir.join("hosts.yml"),
        ] {
            assert_eq!(
                std::fs::metadata(&path).unwrap().uid(),
                user.uid,
                "{}",
                path.display()
            );
        }
    }
    let gh = |user: &LaneUser, args: &[&str]| {
        let mut cmd = home.command("gh");
        cmd.args(args)
            .env("HOME", &user.home)
            .env("GH_CONFIG_DIR", user.home.join(".config").join("gh"))
            .env("TMPDIR", &user.home)
            .env("GH_NO_UPDATE_NOTIFIER", "1")
            .env("GH_PROMPT_DISABLED", "1")
            .env("NO_COLOR", "1")
            .current_dir(&user.home)
            .uid(user.uid)
            .gid(user.gid);
        let ran = run(&mut cmd);
        (ran.code, format!("{}{}", ran.stdout, ran.stderr))
    };
    let create = [
        "pr", "create", "-R", "o/r", "--head", "feature", "--base", "main", "--title", "t",
        "--body", "b",
    ];
    let (code, out) = gh(&lane, &create);
    assert_eq!(code, 0, "lane-a's gh pr create: {out}");
    let created = forge
        .requests()
        .into_iter()
        .find(|r| r.operation.as_deref() == Some("PullRequestCreate"))
        .expect("the create arrived");
    assert_eq!(created.authorization, Some(format!("token {TOKEN}")));

    // A uid bound to no lane: nothing, not even a read, with its own placeholder or
    // lane-a's.
    let before = forge.requests().len();
    let (code, out) = gh(&stranger, &["api", "/repos/o/r"]);
    assert_ne!(code, 0, "an unbound uid read: {out}");
    assert!(out.contains("peer_refused"), "{out}");
    let a_hosts = std::fs::read(lane.home.join(".config/gh/hosts.yml")).unwrap();
    std::fs::write(stranger.home.join(".config/gh/hosts.yml"), a_hosts).unwrap();
    let (code, out) = gh(&stranger, &create);
    assert_ne!(code, 0, "an unbound uid with lane-a's placeholder: {out}");
    assert_eq!(
        forge.requests().len(),
        before,
        "an unbound uid reached the forge"
    );

    // The takeover: lane-a's writes are refused, its reads pass.
    home.acquire("b", "r1", "lane-b", &["--takeover"]);
    let writes = forge.writes().len();
    let (code, out) = gh(&lane, &["pr", "merge", "1", "-R", "o/r", "--merge"]);
    assert_ne!(code, 0, "lane-a merged after the takeover: {out}");
    assert!(out.contains("different_holder"), "{out}");
    assert_eq!(forge.writes().len(), writes);
    let (code, out) = gh(&lane, &["api", "/repos/o/r"]);
    assert_eq!(code, 0, "lane-a's read after the takeover: {out}");

    // doctor: a real gh token the lane can read, or one in a lane process's environment,
    // is a route around the forge API; the placeholder is not.
    let repo = root.join("repo");
    std::fs::create_dir(&repo).unwrap();
    run(home.command("git").current_dir(&repo).args(["init", "-q"])).expect(0, "");
    let doctor = || -> Vec<String> {
        let ran = run(home
            .command(bin("row-fence"))
            .current_dir(&repo)
            .args(["doctor", "--json", "--broker-lanes"])
            .arg(&lanes)
            .arg("--broker-socket")
            .arg(&socket));
        ran.json()["lanes"][0]["warnings"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|w| w.as_str().unwrap_or("").to_string())
            .filter(|w| w.contains("hosts.yml") || w.contains("GH_TOKEN"))
            .collect()
    };
    assert_eq!(
        doctor(),
        Vec::<String>::new(),
        "the placeholder is no route"
    );
    let hosts = lane.home.join(".config/gh/hosts.yml");
    let wired = std::fs::read(&hosts).unwrap();
    std::fs::write(&hosts, "github.com:\n    oauth_token: gho_theLanesOwn\n").unwrap();
    lane.chown(&hosts);
    let warned = doctor();
    assert!(
        warned.len() == 1 && warned[0].contains("hosts.yml"),
        "{warned:?}"
    );
    std::fs::write(&hosts, wired).unwrap();
    let mut sleeper = Command::new("sleep")
        .arg("30")
        .env_clear()
        .env("GH_TOKEN", "gho_inTheEnvironment")
        .uid(lane.uid)
        .gid(lane.gid)
        .spawn()
        .expect("sleep as the lane");
    let warned = doctor();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(
        warned.len() == 1 && warned[0].contains("GH_TOKEN"),
        "{warned:?}"
    );

    // No lane file holds the token; the stand-in saw only the shapes gh sends.
    for user in [&lane, &stranger] {
        for (path, bytes) in files_under(&user.home) {
            assert!(
                !String::from_utf8_lossy(&bytes).contains(TOKEN),
                "{} holds the token",
                path.display()
            );
        }
    }
    let problems = forge.problems.lock().unwrap().clone();
    assert!(
        problems.is_empty(),
        "shapes the stand-in did not expect: {problems:?}"
    );
}

/// With a scope on the board (the registry's, as the forge hook reads it), an ALLOWED
/// lane opens a pull request only from a branch the scope covers for its row, and merges
/// only one whose head it covers.
#[test]
fn an_allowed_lane_writes_only_on_heads_its_rows_scope_covers() {
    let site = Site::start_with(Some("[boards.b.scope]\nrefs = [\"refs/heads/{row}/*\"]\n"));
    let create = |head: &str| {
        site.gh(&[
            "pr", "create", "-R", "o/r", "--head", head, "--base", "main", "--title", "t",
            "--body", "b",
        ])
    };
    let (code, out, err) = create("feature");
    assert_ne!(code, 0, "a head outside the scope: {out} {err}");
    // The forge hook's reason for a ref outside the row's scope, here too.
    assert!(
        err.contains("outside_scope") && err.contains("scope"),
        "{err}"
    );
    let (code, out, err) = create("r1/fix");
    assert_eq!(code, 0, "a head the scope covers: {out} {err}");
    // The stand-in's pull request #1 has head `feature`: outside the scope.
    let (code, out, err) = site.gh(&["pr", "merge", "1", "-R", "o/r", "--merge"]);
    assert_ne!(code, 0, "a merge of a head outside the scope: {out} {err}");
    assert!(err.contains("outside_scope"), "{err}");
    let writes: Vec<String> = site
        .forge
        .writes()
        .iter()
        .filter_map(|r| r.operation.clone())
        .collect();
    assert_eq!(
        writes,
        ["PullRequestCreate"],
        "only the covered create arrived"
    );
}

/// The placeholder token `install gh` gave lane-a.
fn placeholder(site: &Site) -> String {
    let hosts = std::fs::read_to_string(site.gh_dir.join("hosts.yml")).unwrap();
    hosts
        .lines()
        .find_map(|l| l.trim().strip_prefix("oauth_token: "))
        .expect("a placeholder")
        .to_string()
}

/// One raw request on its own connection; the whole answer as text.
fn raw(site: &Site, request: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(&site.socket).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let _ = stream.write_all(request.as_bytes());
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// Request shapes that name an endpoint by another spelling, carry a body on a read, name
/// a GraphQL parameter twice, or ask the forge to read the method from a header: while the
/// lane is ALLOWED none reaches the stand-in at all; a read's extra headers are dropped and
/// a GraphQL read arrives as one value per key.
#[test]
fn an_allowed_lanes_spellings_of_another_endpoint_reach_nothing() {
    let site = Site::start();
    let token = placeholder(&site);
    let mutation = "mutation { closePullRequest(input: {pullRequestId: \\\"PR_kwDOrowfence1\\\"}) { clientMutationId } }";
    let mutation_body = format!("{{\"query\": \"{mutation}\"}}");
    let encoded = "mutation%20%7B%20closePullRequest(input%3A%20%7BpullRequestId%3A%20%22PR_kwDOrowfence1%22%7D)%20%7B%20clientMutationId%20%7D%20%7D";
    let read = "%7Bviewer%7Blogin%7D%7D";
    let head = |method: &str, target: &str| {
        format!(
            "{method} {target} HTTP/1.1\r\nHost: api.github.com\r\nAuthorization: token {token}\r\nConnection: close\r\n"
        )
    };
    let with_body = |method: &str, target: &str, extra: &str, body: &str| {
        format!(
            "{}{extra}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            head(method, target),
            body.len()
        )
    };
    let mut shapes: Vec<String> = Vec::new();
    for target in [
        format!("/graphql/?query={encoded}"),
        format!("//graphql?query={encoded}"),
        format!("/GraphQL?query={encoded}"),
        format!("/graphql.json?query={encoded}"),
        format!("/graphql;x?query={encoded}"),
        format!("/api/v3/graphql?query={encoded}"),
        format!("/%67raphql?query={encoded}"),
        format!("/./graphql?query={encoded}"),
        format!("/repos/../graphql?query={encoded}"),
        format!("/graphql?query={read}&query={encoded}"),
        format!("/graphql?query={read}&extensions=%7B%7D"),
        format!("/graphql?query={read}&operationName=x;query={encoded}"),
        format!("http://api.github.com/graphql/?query={encoded}"),
        "http://uploads.github.com/repos/o/r".to_string(),
        "http://api.github.com.evil.example/repos/o/r".to_string(),
        "/repos/o/r/".to_string(),
        "/repos/o/r;x".to_string(),
    ] {
        shapes.push(format!("{}\r\n", head("GET", &target)));
    }
    for target in ["/graphql", "/graphql/", "/repos/o/r", "//graphql"] {
        shapes.push(with_body("GET", target, "", &mutation_body));
        shapes.push(with_body("HEAD", target, "", &mutation_body));
    }
    shapes.push(format!(
        "{}Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{mutation_body}\r\n0\r\n\r\n",
        head("GET", "/graphql"),
        mutation_body.len()
    ));
    for (method, target) in [
        ("POST", "/graphql/"),
        ("POST", "//graphql"),
        ("POST", "/GRAPHQL"),
        ("POST", "/repos/o/r/pulls/"),
        ("POST", "/repos/o/r/pulls;x"),
        ("POST", "/repos/o/r%2fpulls"),
        ("POST", "/api/v3/repos/o/r/pulls"),
        ("post", "/graphql"),
        ("PUT", "/graphql"),
    ] {
        shapes.push(with_body(method, target, "", &mutation_body));
    }
    // A body of queries with a mutation in the query string.
    let read_body = "{\"query\": \"{ viewer { login } }\"}";
    for target in [
        format!("/graphql?query={encoded}"),
        format!("/graphql?operationName=x&query={encoded}"),
        "/graphql?".to_string(),
        format!("/repos/o/r/pulls?query={encoded}"),
    ] {
        shapes.push(with_body("POST", &target, "", read_body));
    }
    let mut arrived = Vec::new();
    let mut unrefused = Vec::new();
    for shape in &shapes {
        let before = site.forge.requests().len();
        let answer = raw(&site, shape);
        let after = site.forge.requests();
        if after.len() != before {
            arrived.push((shape.clone(), after[before..].to_vec()));
        }
        // A HEAD's answer has no body to say why.
        if !(shape.starts_with("HEAD ")
            || answer.starts_with("HTTP/1.1 4")
            || answer.contains("row-fence: REFUSED"))
        {
            unrefused.push((shape.clone(), answer));
        }
    }
    assert!(
        arrived.is_empty(),
        "{} of {} shapes arrived at the forge: {arrived:#?}",
        arrived.len(),
        shapes.len()
    );
    assert!(unrefused.is_empty(), "not refused: {unrefused:#?}");
    // A read arrives without the lane's method override, forwarding or cookie headers.
    let answer = raw(
        &site,
        &format!(
            "{}X-HTTP-Method-Override: DELETE\r\nX-Forwarded-Host: evil.example\r\nCookie: a=b\r\n\r\n",
            head("GET", "/repos/o/r")
        ),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "a read: {answer:?}");
    let arrived = site.forge.requests();
    let last = arrived.last().unwrap();
    assert_eq!(last.path, "/repos/o/r");
    for name in ["x-http-method-override", "x-forwarded-host", "cookie"] {
        assert!(
            !last.header_names.iter().any(|h| h == name),
            "{name} arrived: {:?}",
            last.header_names
        );
    }
    // A GraphQL read with a key twice arrives once, as judged (the last).
    let twice = "{\"query\": \"mutation { x }\", \"query\": \"{ viewer { login } }\"}";
    let answer = raw(&site, &with_body("POST", "/graphql", "", twice));
    assert!(!answer.contains("row-fence"), "a read: {answer:?}");
    let arrived = site.forge.requests();
    let last = arrived.last().unwrap();
    let sent: serde_json::Value = serde_json::from_str(&last.body).unwrap();
    assert_eq!(
        sent,
        json!({"query": "{ viewer { login } }"}),
        "{}",
        last.body
    );
    assert!(!last.body.contains("mutation"), "{}", last.body);
    assert!(site.forge.writes().is_empty(), "{:?}", site.forge.writes());
}
