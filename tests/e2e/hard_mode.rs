//! The hard mode as docs/hard-mode.md prints it ("The daemon pushes for the lanes"): its
//! setup block run by `sh` as root, as written, with one change: `forge.example` is a
//! loopback address where a real `sshd` serves `/srv/git/app.git` to the user `git`
//! through `git-shell` (the forge, which the block leaves to the operator). The block makes
//! the users `fence`, `lane-a` and `lane-b` and the directories it names; the test fails if
//! any of them exists already (it never touches what it did not make), and removes them all
//! after. Then each lane pushes with plain `git push`: the ALLOWED lane's push lands, a
//! refused lane's is `! [remote rejected]` and moves nothing, the new holder's lands.

use crate::util::{Ran, bin_dir, run};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the forge listens: a loopback address of its own, on ssh's port, so the block's
/// `ssh-keyscan forge.example` and `ssh://git@forge.example/` need no port.
const FORGE: &str = "127.0.0.2";

/// The users the block and the forge make.
const USERS: [&str; 4] = ["fence", "lane-a", "lane-b", "git"];

/// The directories they make outside the users' homes.
const DIRS: [&str; 4] = ["/etc/row-fence", "/run/row-fence", "/srv/lanes", "/srv/git"];

/// What the test made; everything goes at drop, whatever failed.
struct Machine {
    sshd: Option<Child>,
    dir: tempfile::TempDir,
}

impl Drop for Machine {
    fn drop(&mut self) {
        if let Some(mut sshd) = self.sshd.take() {
            let _ = sshd.kill();
            let _ = sshd.wait();
        }
        for user in USERS {
            let _ = Command::new("pkill").args(["-KILL", "-u", user]).status();
        }
        std::thread::sleep(Duration::from_millis(200));
        for user in USERS {
            let _ = Command::new("userdel")
                .args(["-r", "-f", user])
                .stderr(Stdio::null())
                .status();
            let _ = Command::new("groupdel")
                .arg(user)
                .stderr(Stdio::null())
                .status();
        }
        for dir in DIRS {
            let _ = fs::remove_dir_all(dir);
        }
        let _ = &self.dir;
    }
}

fn sh(line: &str) -> Ran {
    run(Command::new("timeout")
        .args(["180", "sh", "-c", line])
        .env("PATH", path()))
}

fn path() -> String {
    format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `git` in `dir` as `user`, the way a lane runs it.
fn as_lane(user: &str, dir: &str, args: &[&str]) -> Ran {
    run(Command::new("runuser")
        .args(["-u", user, "--", "git", "-C", dir])
        .args(args)
        .env("PATH", path())
        .env("GIT_AUTHOR_NAME", user)
        .env("GIT_AUTHOR_EMAIL", "lane@example.invalid")
        .env("GIT_COMMITTER_NAME", user)
        .env("GIT_COMMITTER_EMAIL", "lane@example.invalid"))
}

fn remote_ref(refname: &str) -> String {
    run(Command::new("git")
        .args(["-c", "safe.directory=*", "--git-dir", "/srv/git/app.git"])
        .args(["rev-parse", "--verify", "-q", refname]))
    .stdout
    .trim()
    .to_string()
}

/// The forge: the user `git`, a bare repository, sshd on [`FORGE`]:22
/// (its host key and config in the test's temp dir; the authorized key comes later).
fn forge(dir: &Path) -> Child {
    // A login shell of /bin/sh: the key's forced command (step 8) is what runs git-shell.
    let made =
        run(Command::new("useradd")
            .args(["-M", "-d", "/srv/git", "-s", "/bin/sh", "-p", "*", "git"]));
    assert_eq!(made.code, 0, "useradd git: {}", made.stderr);
    fs::create_dir_all("/srv/git").expect("/srv/git");
    let init =
        run(Command::new("git").args(["init", "-q", "--bare", "-b", "main", "/srv/git/app.git"]));
    assert_eq!(init.code, 0, "{}", init.stderr);
    assert_eq!(
        run(Command::new("chown").args(["-R", "git:git", "/srv/git"])).code,
        0
    );
    let key = dir.join("host");
    let keygen = run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key));
    assert_eq!(keygen.code, 0, "{}", keygen.stderr);
    fs::create_dir_all("/run/sshd").expect("/run/sshd");
    let config = dir.join("sshd_config");
    fs::write(
        &config,
        format!(
            "Port 22\nListenAddress {FORGE}\nHostKey {}\nPidFile {}\nAuthorizedKeysFile {}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nAllowUsers git\n",
            key.display(),
            dir.join("sshd.pid").display(),
            dir.join("authorized_keys").display()
        ),
    )
    .expect("sshd_config");
    let sshd = PathBuf::from("/usr/sbin/sshd");
    let child = Command::new(&sshd)
        .args(["-D", "-e", "-f"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(fs::File::create(dir.join("sshd.log")).expect("sshd.log"))
        .spawn()
        .expect("sshd");
    let until = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect((FORGE, 22)).is_err() {
        assert!(
            Instant::now() < until,
            "sshd did not listen on {FORGE}:22: {}",
            fs::read_to_string(dir.join("sshd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

#[test]
fn the_hard_modes_setup_runs_as_written_and_only_the_allowed_lane_pushes() {
    assert_eq!(
        nix::unistd::geteuid().as_raw(),
        0,
        "the hard mode's setup makes users and runs sshd: run it as root (CI does)"
    );
    for user in USERS {
        let exists = run(Command::new("id").arg(user)).code == 0;
        assert!(
            !exists,
            "user {user} exists already: this test makes it and removes it after; run it where {user} is free"
        );
    }
    for dir in DIRS {
        assert!(
            !Path::new(dir).exists(),
            "{dir} exists already: this test makes it and removes it after"
        );
    }
    let dir = tempfile::Builder::new()
        .prefix("rf-hard")
        .tempdir()
        .expect("temp dir");
    let mut machine = Machine { sshd: None, dir };
    machine.sshd = Some(forge(machine.dir.path()));

    let block = crate::readme::sh_block(
        "--push-socket /run/row-fence/push.sock --push-forge ssh://git@forge.example/ \\",
    )
    .replace("forge.example", FORGE);
    let ran = sh(&format!("set -e\n{block}"));
    assert_eq!(
        ran.code,
        0,
        "the block failed:\n{}\n{}\ndaemon log: {}",
        ran.stdout,
        ran.stderr,
        fs::read_to_string("/var/lib/fence/daemon.log").unwrap_or_default()
    );
    // Step 8, the forge's part: the public half the block made, forced into git-shell.
    let public = fs::read_to_string("/etc/row-fence/push.pub").expect("push.pub");
    fs::write(
        machine.dir.path().join("authorized_keys"),
        format!(
            "command=\"git-shell -c \\\"$SSH_ORIGINAL_COMMAND\\\"\",no-port-forwarding,no-agent-forwarding,no-pty {public}"
        ),
    )
    .expect("authorized_keys");

    assert_eq!(
        as_lane(
            "lane-a",
            "/srv/lanes/a",
            &["commit", "-q", "--allow-empty", "-m", "a-1"]
        )
        .code,
        0
    );
    let pushed = as_lane("lane-a", "/srv/lanes/a", &["push", "origin", "HEAD:main"]);
    let head = as_lane("lane-a", "/srv/lanes/a", &["rev-parse", "HEAD"])
        .stdout
        .trim()
        .to_string();
    assert_eq!(pushed.code, 0, "lane-a ALLOWED: {}", pushed.stderr);
    assert_eq!(remote_ref("refs/heads/main"), head, "{}", pushed.stderr);

    // While ALLOWED, the lane's own ssh through the broker's agent gets no login: nothing
    // to keep open (a master started now would push after a takeover).
    let master = run(Command::new("runuser")
        .args([
            "-u",
            "lane-a",
            "--",
            "ssh",
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
        ])
        .args([
            "-o",
            "IdentityAgent=/run/row-fence/agent.sock",
            "-o",
            "IdentitiesOnly=yes",
        ])
        .args([
            "-o",
            "IdentityFile=/etc/row-fence/push.pub",
            "-o",
            "StrictHostKeyChecking=no",
        ])
        .args([
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "ControlMaster=yes",
        ])
        .args(["-o", "ControlPath=/tmp/rf-hard-master-%C", "-N", "-f"])
        .arg(format!("git@{FORGE}")));
    assert_ne!(
        master.code, 0,
        "lane-a's own ssh logged in: {}",
        master.stderr
    );
    assert!(
        master.stderr.contains("Permission denied"),
        "{}",
        master.stderr
    );

    let took = sh(
        "runuser -u fence -- row-fence acquire board-1 row-1 --lane lane-b --takeover --write-descriptor /var/lib/fence/lanes/lane-b.json",
    );
    assert_eq!(took.code, 0, "{}", took.stderr);
    assert_eq!(
        as_lane(
            "lane-a",
            "/srv/lanes/a",
            &["commit", "-q", "--allow-empty", "-m", "a-2"]
        )
        .code,
        0
    );
    let refused = as_lane("lane-a", "/srv/lanes/a", &["push", "origin", "HEAD:main"]);
    assert_ne!(refused.code, 0, "lane-a REFUSED pushed: {}", refused.stderr);
    assert!(
        refused.stderr.contains("[remote rejected]") && refused.stderr.contains("REFUSED"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        remote_ref("refs/heads/main"),
        head,
        "a refused push moved main"
    );

    // The new holder's own branch lands (a new ref: lane-b has not fetched main).
    assert_eq!(
        as_lane(
            "lane-b",
            "/srv/lanes/b",
            &["commit", "-q", "--allow-empty", "-m", "b-1"]
        )
        .code,
        0
    );
    let b = as_lane(
        "lane-b",
        "/srv/lanes/b",
        &["push", "origin", "HEAD:refs/heads/feature/row-1"],
    );
    assert_eq!(b.code, 0, "lane-b ALLOWED: {}", b.stderr);
    let b_head = as_lane("lane-b", "/srv/lanes/b", &["rev-parse", "HEAD"])
        .stdout
        .trim()
        .to_string();
    assert_eq!(remote_ref("refs/heads/feature/row-1"), b_head);
}
