//! The git-layer tests' world: a home on the file store, a fake `ssh` first on `PATH` that
//! runs the remote command on this machine (as sshd would on the host, so git speaks its
//! real ssh protocol to a real `git-receive-pack`), bare remotes, clones, and
//! `row-fence install git-hook` run as a user runs it.

use crate::util::{Home, Ran, bin, bin_dir, run};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The fake ssh: logs its arguments (one line per run), answers `-G` (git's probe for
/// OpenSSH) with success, skips options, drops the host and runs the command.
const FAKE_SSH: &str = r#"#!/bin/sh
printf '%s\n' "$*" >> "$(dirname "$0")/ssh.log"
while [ $# -gt 0 ]; do
  case "$1" in
    -G) exit 0 ;;
    -o|-p|-i|-l|-F) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
shift
exec sh -c "$*"
"#;

pub struct World {
    pub home: Home,
    /// Holds the fake `ssh`, first on every child's `PATH`.
    pub fake_bin: PathBuf,
}

impl World {
    pub fn new() -> World {
        let home = Home::file();
        let fake_bin = home.path("fake-bin");
        fs::create_dir_all(&fake_bin).unwrap();
        let ssh = fake_bin.join("ssh");
        fs::write(&ssh, FAKE_SSH).unwrap();
        fs::set_permissions(&ssh, fs::Permissions::from_mode(0o755)).unwrap();
        World { home, fake_bin }
    }

    /// Every argument line the fake ssh was run with.
    pub fn ssh_log(&self) -> String {
        fs::read_to_string(self.fake_bin.join("ssh.log")).unwrap_or_default()
    }

    /// `PATH` with the fake ssh first.
    pub fn path_env(&self) -> String {
        format!(
            "{}:{}",
            self.fake_bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// A command in the home's clean environment, fake ssh first on `PATH`, no prompts.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
        let mut cmd = self.home.command(program);
        cmd.current_dir(dir)
            .env("PATH", self.path_env())
            .env("GIT_TERMINAL_PROMPT", "0");
        cmd
    }

    /// `git ARGS` in `dir`.
    pub fn git(&self, dir: &Path, args: &[&str]) -> Ran {
        run(self.command("git", dir).args(args))
    }

    /// `git ARGS` in `dir`, asserting success; its stdout.
    #[track_caller]
    pub fn git_ok(&self, dir: &Path, args: &[&str]) -> String {
        let ran = self.git(dir, args);
        assert_eq!(
            ran.code,
            0,
            "git {args:?} in {}: {}",
            dir.display(),
            ran.stderr
        );
        ran.stdout
    }

    /// A bare repository at `<tmp>/<name>`.
    pub fn bare(&self, name: &str) -> PathBuf {
        let path = self.home.path(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        self.git_ok(
            self.home.dir.path(),
            &["init", "-q", "--bare", "-b", "main", path.to_str().unwrap()],
        );
        path
    }

    /// `ssh://host<path>`: the fake ssh runs `git-receive-pack '<path>'` here.
    pub fn ssh_url(&self, bare: &Path) -> String {
        format!("ssh://host{}", bare.display())
    }

    /// A clone of `url` at `<tmp>/<name>` on branch `main` with one commit.
    pub fn clone(&self, url: &str, name: &str) -> PathBuf {
        let path = self.home.path(name);
        self.git_ok(
            self.home.dir.path(),
            &["clone", "-q", url, path.to_str().unwrap()],
        );
        self.git_ok(&path, &["checkout", "-q", "-B", "main"]);
        self.commit(&path, &format!("{name} starts"));
        path
    }

    /// `git worktree add <tmp>/<name> -b <name>` from the worktree at `main`.
    pub fn worktree(&self, main: &Path, name: &str) -> PathBuf {
        let path = self.home.path(name);
        self.git_ok(
            main,
            &["worktree", "add", "-q", path.to_str().unwrap(), "-b", name],
        );
        path
    }

    /// Commits a change in the worktree at `dir`.
    pub fn commit(&self, dir: &Path, message: &str) {
        fs::write(dir.join("file.txt"), message).unwrap();
        self.git_ok(dir, &["add", "file.txt"]);
        self.git_ok(dir, &["commit", "-q", "-m", message]);
    }

    /// `row-fence install git-hook --repo REPO --bin-dir <the build's> EXTRA…`.
    pub fn install(&self, repo: &Path, extra: &[&str]) -> Ran {
        run(self
            .command(bin("row-fence"), self.home.dir.path())
            .args(["install", "git-hook", "--repo"])
            .arg(repo)
            .arg("--bin-dir")
            .arg(bin_dir())
            .args(extra))
    }

    /// Binds the worktree whose git dir is `git_dir` to `row` as `lane` (a takeover when
    /// another lane holds it).
    pub fn bind(&self, git_dir: &Path, row: &str, lane: &str) {
        let descriptor = git_dir.join("row-fence.json");
        let ran = self.home.cli(&[
            "acquire",
            "board-1",
            row,
            "--lane",
            lane,
            "--takeover",
            "--write-descriptor",
            descriptor.to_str().unwrap(),
        ]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    }

    /// Takes `row` over for another lane (whose descriptor goes nowhere of interest).
    pub fn take_over(&self, row: &str, lane: &str) {
        self.home.acquire("board-1", row, lane, &["--takeover"]);
    }

    /// `refs/heads/main` of the repository at `git_dir` ("" when absent).
    pub fn main_of(&self, git_dir: &Path) -> String {
        let ran = run(self
            .command("git", self.home.dir.path())
            .arg("--git-dir")
            .arg(git_dir)
            .args(["rev-parse", "--verify", "-q", "refs/heads/main"]));
        ran.stdout.trim().to_string()
    }

    /// `HEAD` of the worktree at `dir`.
    pub fn head_of(&self, dir: &Path) -> String {
        self.git_ok(dir, &["rev-parse", "HEAD"]).trim().to_string()
    }
}

/// Asserts a push went through the fence: exit 0 and an ALLOWED verdict line.
#[track_caller]
pub fn allowed(ran: &Ran) {
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.stderr.contains("row-fence: ALLOWED"), "{}", ran.stderr);
}

/// Asserts a push went nowhere: a failure, the remote ref as before, and the fence's
/// verdict line among git's output.
#[track_caller]
pub fn refused(ran: &Ran, remote_before: &str, remote_now: &str, verdict: &str) {
    assert_ne!(ran.code, 0, "the push succeeded:\n{}", ran.stderr);
    assert_eq!(
        remote_now, remote_before,
        "the remote ref moved:\n{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains(verdict),
        "no {verdict:?} in:\n{}",
        ran.stderr
    );
}

/// A real `git daemon` serving the bare repositories under `root` over `git://` on a
/// loopback port, pushes enabled; killed when dropped.
pub struct GitDaemon {
    pub port: u16,
    child: std::process::Child,
}

impl GitDaemon {
    pub fn start(world: &World, root: &Path) -> GitDaemon {
        for _ in 0..20 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let mut child = world
                .command(git_daemon(world), root)
                .args([
                    "--reuseaddr",
                    "--export-all",
                    "--enable=receive-pack",
                    "--listen=127.0.0.1",
                ])
                .arg(format!("--port={port}"))
                .arg(format!("--base-path={}", root.display()))
                .arg(root)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("git daemon");
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while std::time::Instant::now() < until {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return GitDaemon { port, child };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken in between: another one
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("git daemon did not start");
    }

    /// `git://127.0.0.1:<port>/<name>`.
    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}", self.port)
    }
}

/// `git-daemon` itself (`git daemon` would run it as a child, which outlives a kill).
fn git_daemon(world: &World) -> PathBuf {
    let exec_path = world.git_ok(world.home.dir.path(), &["--exec-path"]);
    Path::new(exec_path.trim()).join("git-daemon")
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
