//! The end-to-end harness: temp homes, a private `redis-server` on a Unix socket, the real
//! daemon and the real binaries, real git. Every child runs with a cleared environment so
//! nothing leaks in from the developer's shell (no shared Redis on 6379, no real home).

#![allow(dead_code)]

use row_fence_contract::client;
use row_fence_contract::protocol::{Answer, Op, PROTOCOL_VERSION, Request};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The directory holding the workspace's binaries (`target/debug`), next to this test.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/debug/deps/..")
        .to_path_buf();
    for name in [
        "row-fence-ask",
        "row-fence",
        "row-fence-resident",
        "row-fence-guard",
    ] {
        assert!(
            dir.join(name).exists(),
            "{} is missing: run `cargo build --workspace --bins` first (scripts/test does)",
            dir.join(name).display()
        );
    }
    dir
}

/// A binary of the workspace.
pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// The repository root (for hooks/).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The user documentation: `README.md`, then every `docs/*.md` chapter by name, each as
/// (its path from the repository's root, its text). Tests that run or compare a snippet
/// look in all of them, so a snippet can move between chapters without a test change.
pub fn user_docs() -> Vec<(String, String)> {
    let root = repo_root();
    let mut chapters: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("a docs/ entry").file_name())
        .filter_map(|name| name.into_string().ok())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    chapters.sort();
    std::iter::once("README.md".to_string())
        .chain(chapters)
        .map(|path| {
            let text =
                std::fs::read_to_string(root.join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
            (path, text)
        })
        .collect()
}

/// Every ```kind block of the user documentation ([`user_docs`]), in order.
pub fn doc_blocks(kind: &str) -> Vec<String> {
    user_docs()
        .iter()
        .flat_map(|(_, text)| {
            text.split(&format!("```{kind}\n"))
                .skip(1)
                .filter_map(|rest| rest.split_once("\n```").map(|(block, _)| block.to_string()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What a finished command left.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Ran {
    fn from(output: Output, elapsed: Duration) -> Ran {
        use std::os::unix::process::ExitStatusExt;
        let code = output
            .status
            .code()
            .unwrap_or_else(|| 128 + output.status.signal().unwrap_or(0));
        Ran {
            code,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            elapsed,
        }
    }

    /// The `row-fence:` verdict line (the last `row-fence:` line that is not `asking`).
    pub fn verdict_line(&self) -> &str {
        self.stderr
            .lines()
            .rfind(|l| l.starts_with("row-fence: ") && !l.starts_with("row-fence: asking"))
            .unwrap_or("")
    }

    /// The `--json` object on stdout.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {:?}", self.stdout))
    }

    /// Asserts the exit code and that the verdict line starts with `prefix`.
    #[track_caller]
    pub fn expect(&self, code: i32, prefix: &str) -> &Ran {
        assert!(
            self.code == code && self.verdict_line().starts_with(prefix),
            "expected exit {code} and {prefix:?}, got exit {} with stderr:\n{}\nstdout:\n{}",
            self.code,
            self.stderr,
            self.stdout
        );
        self
    }
}

/// Runs a command again every 50 ms until `done` holds (at most `limit`); returns the last
/// run, for the caller to assert on.
pub fn until(limit: Duration, mut run: impl FnMut() -> Ran, done: impl Fn(&Ran) -> bool) -> Ran {
    let deadline = Instant::now() + limit;
    loop {
        let ran = run();
        if done(&ran) || Instant::now() >= deadline {
            return ran;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs a command to completion (stdin closed).
pub fn run(cmd: &mut Command) -> Ran {
    let started = Instant::now();
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    Ran::from(output, started.elapsed())
}

/// A row-fence home in a temp dir, with the environment every child gets.
pub struct Home {
    pub dir: TempDir,
    /// `$ROW_FENCE_HOME`.
    pub home: PathBuf,
    /// `ROW_FENCE_STORE` for every child.
    pub store: String,
}

impl Home {
    /// A home on the embedded file store.
    pub fn file() -> Home {
        Home::with_store("file".into())
    }

    /// A home on `store`.
    pub fn with_store(store: String) -> Home {
        let dir = tempfile::Builder::new()
            .prefix("rf")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let home = dir.path().join("home");
        Home { dir, home, store }
    }

    /// A home on the store the test parameter names: `file` or a Redis.
    pub fn on(redis: Option<&Redis>) -> Home {
        match redis {
            Some(r) => Home::with_store(r.url()),
            None => Home::file(),
        }
    }

    /// The default socket.
    pub fn socket(&self) -> PathBuf {
        self.home.join("sock")
    }

    /// A path in the temp dir (outside the home).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A command with a clean environment pointing at this home and store.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("ROW_FENCE_HOME", &self.home)
            .env("ROW_FENCE_STORE", &self.store)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "lane")
            .env("GIT_AUTHOR_EMAIL", "lane@example.invalid")
            .env("GIT_COMMITTER_NAME", "lane")
            .env("GIT_COMMITTER_EMAIL", "lane@example.invalid");
        cmd
    }

    /// `row-fence-ask ARGS`.
    pub fn ask(&self, args: &[&str]) -> Ran {
        run(self.command(bin("row-fence-ask")).args(args))
    }

    /// `row-fence-ask --descriptor PATH ARGS`.
    pub fn ask_with(&self, descriptor: &Path, args: &[&str]) -> Ran {
        run(self
            .command(bin("row-fence-ask"))
            .arg("--descriptor")
            .arg(descriptor)
            .args(args))
    }

    /// `row-fence ARGS`.
    pub fn cli(&self, args: &[&str]) -> Ran {
        run(self.command(bin("row-fence")).args(args))
    }

    /// `row-fence acquire BOARD ROW --lane LANE ARGS…`, asserting success; returns the
    /// generation and writes the descriptor to `<tmp>/<lane>.json`.
    pub fn acquire(&self, board: &str, row: &str, lane: &str, extra: &[&str]) -> (u64, PathBuf) {
        let path = self.path(&format!("{lane}.json"));
        let mut args = vec!["acquire", board, row, "--lane", lane, "--write-descriptor"];
        let path_text = path.display().to_string();
        args.push(&path_text);
        args.extend_from_slice(extra);
        let ran = self.cli(&args);
        assert_eq!(ran.code, 0, "acquire failed: {}", ran.stderr);
        let d: serde_json::Value =
            serde_json::from_str(ran.stdout.trim()).expect("descriptor JSON");
        (d["generation"].as_u64().expect("generation"), path)
    }

    /// Starts the daemon on this home and waits until it answers a ping.
    pub fn daemon(&self) -> Daemon {
        self.daemon_with(&[], &[])
    }

    /// Starts the daemon with extra flags and environment.
    pub fn daemon_with(&self, args: &[&str], envs: &[(&str, &str)]) -> Daemon {
        let daemon = self.spawn_daemon(args, envs);
        daemon.wait_ready();
        daemon
    }

    /// Spawns the daemon without waiting.
    pub fn spawn_daemon(&self, args: &[&str], envs: &[(&str, &str)]) -> Daemon {
        // One log file per daemon this test process started, in start order.
        static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = self.path(&format!("daemon-{n}.log"));
        let mut cmd = self.command(bin("row-fence-resident"));
        cmd.args(args)
            .envs(envs.iter().copied())
            .env("RUST_LOG", "info");
        let socket = envs
            .iter()
            .find(|(k, _)| *k == "ROW_FENCE_SOCKET")
            .map(|(_, v)| PathBuf::from(v))
            .unwrap_or_else(|| self.socket());
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("daemon log"))
            .spawn()
            .expect("spawn row-fence-resident");
        Daemon {
            child: Some(child),
            socket,
            log,
        }
    }
}

/// A running `row-fence-resident`; stopped with SIGTERM when dropped.
pub struct Daemon {
    pub child: Option<Child>,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl Daemon {
    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    /// Waits (≤ 10 s) until the daemon answers a ping.
    pub fn wait_ready(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if ping(&self.socket).is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "the daemon did not answer on {} within 10 s; log:\n{}",
            self.socket.display(),
            self.log_text()
        );
    }

    /// The daemon's stderr so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends a signal.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal);
    }

    /// Waits (≤ `limit`) for the daemon to exit; returns its exit code.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let until = Instant::now() + limit;
        let child = self.child.as_mut()?;
        while Instant::now() < until {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                use std::os::unix::process::ExitStatusExt;
                return Some(
                    status
                        .code()
                        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// SIGTERM, then wait; returns the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        let code = self.wait_exit(Duration::from_secs(15));
        if code.is_none() {
            self.kill();
        }
        code
    }

    /// SIGKILL: the daemon leaves its socket behind.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
    }
}

/// Pings a daemon; `None` when nothing answers within 1 s.
pub fn ping(socket: &Path) -> Option<Answer> {
    let request = Request {
        v: PROTOCOL_VERSION,
        op: Op::Ping,
    };
    client::exchange(socket, &request, Instant::now() + Duration::from_secs(1))
        .ok()
        .filter(|a| a.pong.is_some())
}

/// The daemon's status object.
pub fn status(socket: &Path) -> serde_json::Value {
    let request = Request {
        v: PROTOCOL_VERSION,
        op: Op::Status,
    };
    client::exchange(socket, &request, Instant::now() + Duration::from_secs(3))
        .expect("status")
        .status
        .map(|s| serde_json::to_value(s).expect("a status serializes"))
        .expect("a status object")
}

/// The settings every test server starts with: fsync'd persistence (`appendonly yes`,
/// `appendfsync always`), so the store keeps what it acknowledges, as the product requires
/// (ARCHITECTURE.md, "Acknowledged means durable"). Tests that need a weaker store pass more.
pub const DURABLE: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];

/// A private `redis-server` on a Unix socket (and, for replication and sentinels, a
/// loopback port) in its own temp dir; killed when dropped. Its data (the AOF) lives in
/// the temp dir, so a restart keeps it.
pub struct Redis {
    pub dir: TempDir,
    pub socket: PathBuf,
    /// The loopback port, for servers started with [`Redis::start_tcp`].
    pub port: Option<u16>,
    /// Extra arguments after [`DURABLE`] (later ones win).
    args: Vec<String>,
    /// Extra environment (a clock shifted by libfaketime).
    envs: Vec<(String, String)>,
    child: Option<Child>,
}

/// A free loopback port: bound on port 0, read back, released. The server that takes it
/// next may lose a race for it; [`Redis::launch`] then retries on a new one.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

impl Redis {
    /// Starts a durable redis-server on a Unix socket and waits until it answers PING.
    pub fn start() -> Redis {
        Redis::start_with(&[])
    }

    /// Starts one with `extra` settings after the durable ones (e.g. `--appendfsync
    /// everysec`).
    pub fn start_with(extra: &[&str]) -> Redis {
        Redis::spawn(extra, false)
    }

    /// Starts one that also listens on a free loopback port (replicas and sentinels talk
    /// TCP).
    pub fn start_tcp(extra: &[&str]) -> Redis {
        Redis::spawn(extra, true)
    }

    /// Starts a replica of `primary` (a TCP server) and waits until its link is up.
    pub fn start_replica_of(primary: &Redis, extra: &[&str]) -> Redis {
        Redis::start_replica_of_port(primary.port.expect("the primary listens on TCP"), extra)
    }

    /// Starts a replica of the primary at loopback `port` (a proxy in front of it, say)
    /// and waits until its link is up.
    pub fn start_replica_of_port(port: u16, extra: &[&str]) -> Redis {
        let port = port.to_string();
        let mut args = vec!["--replicaof", "127.0.0.1", &port];
        args.extend_from_slice(extra);
        let replica = Redis::start_tcp(&args);
        replica.wait_for(Duration::from_secs(30), "its link to the primary", |r| {
            r.cli(&["INFO", "replication"])
                .contains("master_link_status:up")
        });
        replica
    }

    /// Starts one whose process runs with `envs`, e.g. [`stepped_clock`]: the server's
    /// `TIME` is then the shifted clock.
    pub fn start_with_env(extra: &[&str], envs: &[(String, String)]) -> Redis {
        let mut redis = Redis::unstarted(extra, false);
        redis.envs = envs.to_vec();
        redis.launch();
        redis
    }

    fn spawn(extra: &[&str], tcp: bool) -> Redis {
        let mut redis = Redis::unstarted(extra, tcp);
        redis.launch();
        redis
    }

    fn unstarted(extra: &[&str], tcp: bool) -> Redis {
        let dir = tempfile::Builder::new()
            .prefix("rfredis")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let socket = dir.path().join("redis.sock");
        Redis {
            dir,
            socket,
            port: tcp.then(free_port),
            args: extra.iter().map(|a| a.to_string()).collect(),
            envs: Vec::new(),
            child: None,
        }
    }

    fn launch(&mut self) {
        for _ in 0..5 {
            let mut cmd = Command::new("redis-server");
            cmd.args(["--save", "", "--unixsocketperm", "700"])
                .args(DURABLE)
                .arg("--unixsocket")
                .arg(&self.socket)
                .arg("--dir")
                .arg(self.dir.path())
                .arg("--logfile")
                .arg(self.dir.path().join("redis.log"));
            match self.port {
                Some(port) => cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"]),
                None => cmd.args(["--port", "0"]),
            };
            let mut child = cmd
                .args(&self.args)
                .envs(self.envs.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server is needed: scripts/test installs it");
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // it exited: a port taken meanwhile; try another
                }
                if self.cli(&["PING"]).trim() == "PONG" {
                    self.child = Some(child);
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
            if self.port.is_some() {
                self.port = Some(free_port());
            }
        }
        panic!(
            "redis-server did not start on {}; log:\n{}",
            self.socket.display(),
            fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
        );
    }

    /// `redis+unix://<socket>`.
    pub fn url(&self) -> String {
        format!("redis+unix://{}", self.socket.display())
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn tcp_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port.expect("listens on TCP"))
    }

    /// Runs `redis-cli -s <socket> ARGS` and returns its stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .arg("-s")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The calls of `command` that succeeded since the last `CONFIG RESETSTAT` (`INFO
    /// commandstats`; an EVALSHA refused with NOSCRIPT, then loaded and retried, counts
    /// once).
    pub fn command_calls(&self, command: &str) -> u64 {
        let stats = self.cli(&["INFO", "commandstats"]);
        let Some(line) = stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
        else {
            return 0;
        };
        let field = |name: &str| -> u64 {
            line.split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .map_or(0, |n| n.trim().parse().unwrap())
        };
        field("calls") - field("failed_calls")
    }

    /// Polls `ready` every 20 ms until it holds, failing the test after `limit`.
    #[track_caller]
    pub fn wait_for(&self, limit: Duration, what: &str, ready: impl Fn(&Redis) -> bool) {
        let until = Instant::now() + limit;
        while !ready(self) {
            assert!(
                Instant::now() < until,
                "redis-server on {} did not reach {what} within {limit:?}",
                self.socket.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's pid, while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// Sends the server a signal (SIGSTOP freezes it, SIGCONT thaws it).
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        if let Some(pid) = self.pid() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
        }
    }

    /// Stops the server with SIGKILL (kill -9): what it acknowledged is in its AOF.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_file(&self.socket);
    }

    /// Starts it again on the same socket, port and data.
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGCONT);
        self.stop();
    }
}

/// libfaketime's preload library (`scripts/test` installs faketime).
pub fn libfaketime() -> PathBuf {
    let mut candidates = vec![
        PathBuf::from("/usr/lib/faketime/libfaketime.so.1"),
        PathBuf::from("/usr/local/lib/faketime/libfaketime.so.1"),
        PathBuf::from("/opt/homebrew/lib/faketime/libfaketime.1.dylib"),
        PathBuf::from("/usr/local/lib/faketime/libfaketime.1.dylib"),
    ];
    if let Ok(dirs) = fs::read_dir("/usr/lib") {
        candidates.extend(
            dirs.filter_map(Result::ok)
                .map(|d| d.path().join("faketime/libfaketime.so.1")),
        );
    }
    candidates
        .into_iter()
        .find(|p| p.exists())
        .expect("libfaketime is needed: scripts/test installs faketime")
}

/// The environment that makes a process read its wall clock through libfaketime from
/// `offset_file` (e.g. `+0`, `-1h`), re-read on every call, so the test can step the clock
/// of a running process. Only the wall clock moves (monotonic timers stay true).
pub fn stepped_clock(offset_file: &Path) -> Vec<(String, String)> {
    let preload = if cfg!(target_os = "macos") {
        "DYLD_INSERT_LIBRARIES"
    } else {
        "LD_PRELOAD"
    };
    vec![
        (preload.into(), libfaketime().display().to_string()),
        ("DYLD_FORCE_FLAT_NAMESPACE".into(), "1".into()),
        (
            "FAKETIME_TIMESTAMP_FILE".into(),
            offset_file.display().to_string(),
        ),
        ("FAKETIME_NO_CACHE".into(), "1".into()),
        ("DONT_FAKE_MONOTONIC".into(), "1".into()),
    ]
}

/// A private `redis-sentinel` on a free loopback port watching master `rf`; killed when
/// dropped.
pub struct Sentinel {
    pub dir: TempDir,
    pub port: u16,
    /// Its own `requirepass`, if any.
    password: Option<String>,
    child: Child,
}

/// The master name the test sentinels watch.
pub const SENTINEL_MASTER: &str = "rf";

impl Sentinel {
    /// Starts a sentinel watching `primary` with quorum 2, a primary down after 1 s
    /// without answers.
    pub fn start(primary: &Redis) -> Sentinel {
        Sentinel::watching(primary.port.expect("the primary listens on TCP"))
    }

    /// Starts one watching the primary at loopback `primary_port` (a proxy in front of it,
    /// say), as [`Sentinel::start`].
    pub fn watching(primary_port: u16) -> Sentinel {
        Sentinel::watching_with(primary_port, "", None)
    }

    /// Starts one watching the primary at loopback `primary_port` with `extra` lines in its
    /// sentinel.conf (`sentinel auth-pass …`) and, when given, its own `requirepass`.
    pub fn watching_with(primary_port: u16, extra: &str, password: Option<&str>) -> Sentinel {
        let requirepass = password
            .map(|p| format!("requirepass {p}\n"))
            .unwrap_or_default();
        for _ in 0..5 {
            let dir = tempfile::Builder::new()
                .prefix("rfsentinel")
                .tempdir_in("/tmp")
                .expect("tempdir");
            let port = free_port();
            let conf = dir.path().join("sentinel.conf");
            fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {dir}/sentinel.log\n\
                     sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {primary_port} 2\n\
                     sentinel down-after-milliseconds {SENTINEL_MASTER} 1000\n\
                     sentinel failover-timeout {SENTINEL_MASTER} 10000\n\
                     sentinel parallel-syncs {SENTINEL_MASTER} 1\n{requirepass}{extra}",
                    dir = dir.path().display()
                ),
            )
            .expect("sentinel.conf");
            let mut child = Command::new("redis-sentinel")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-sentinel is needed: scripts/test installs it");
            let until = Instant::now() + Duration::from_secs(10);
            let mut sentinel = None;
            while Instant::now() < until {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if sentinel_cli(port, password, &["PING"]).trim() == "PONG" {
                    sentinel = Some(port);
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            match sentinel {
                Some(port) => {
                    return Sentinel {
                        dir,
                        port,
                        password: password.map(str::to_string),
                        child,
                    };
                }
                None => {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        panic!("redis-sentinel did not start");
    }

    /// Runs `redis-cli -p <port> ARGS` against this sentinel.
    pub fn cli(&self, args: &[&str]) -> String {
        sentinel_cli(self.port, self.password.as_deref(), args)
    }

    /// The port of the master this sentinel names now.
    pub fn master_port(&self) -> Option<u16> {
        self.cli(&["SENTINEL", "get-master-addr-by-name", SENTINEL_MASTER])
            .lines()
            .nth(1)?
            .trim()
            .parse()
            .ok()
    }
}

fn sentinel_cli(port: u16, password: Option<&str>, args: &[&str]) -> String {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()]);
    if let Some(password) = password {
        cmd.env("REDISCLI_AUTH", password);
    }
    let out = cmd
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs git in `dir`, asserting success; returns stdout.
pub fn git(home: &Home, dir: &Path, args: &[&str]) -> String {
    let ran = run(home.command("git").current_dir(dir).args(args));
    assert_eq!(
        ran.code,
        0,
        "git {args:?} failed in {}: {}",
        dir.display(),
        ran.stderr
    );
    ran.stdout
}

/// A bare remote and a clone with one commit and the pre-push hook installed (finding the
/// asker through `ROW_FENCE_BIN_DIR`).
pub struct Repo {
    pub remote: PathBuf,
    pub clone: PathBuf,
}

impl Repo {
    pub fn new(home: &Home, name: &str) -> Repo {
        let remote = home.path(&format!("{name}-remote.git"));
        let clone = home.path(&format!("{name}-clone"));
        git(
            home,
            home.dir.path(),
            &[
                "init",
                "-q",
                "--bare",
                "-b",
                "main",
                remote.to_str().unwrap(),
            ],
        );
        git(
            home,
            home.dir.path(),
            &[
                "clone",
                "-q",
                remote.to_str().unwrap(),
                clone.to_str().unwrap(),
            ],
        );
        git(home, &clone, &["checkout", "-q", "-b", "main"]);
        let hook = clone.join(".git/hooks/pre-push");
        fs::copy(repo_root().join("hooks/pre-push"), &hook).expect("install the hook");
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
        Repo { remote, clone }
    }

    /// Commits a change and pushes; returns the push's result.
    pub fn commit_and_push(&self, home: &Home, message: &str) -> Ran {
        fs::write(self.clone.join("file.txt"), message).unwrap();
        git(home, &self.clone, &["add", "file.txt"]);
        git(home, &self.clone, &["commit", "-q", "-m", message]);
        run(home
            .command("git")
            .current_dir(&self.clone)
            .env("ROW_FENCE_BIN_DIR", bin_dir())
            .args(["push", "-q", "origin", "main"]))
    }

    /// The remote's `main` (empty when it has none).
    pub fn remote_head(&self, home: &Home) -> String {
        let ran = run(home
            .command("git")
            .arg("--git-dir")
            .arg(&self.remote)
            .args(["rev-parse", "--verify", "-q", "refs/heads/main"]));
        ran.stdout.trim().to_string()
    }

    /// The clone's `HEAD`.
    pub fn local_head(&self, home: &Home) -> String {
        git(home, &self.clone, &["rev-parse", "HEAD"])
            .trim()
            .to_string()
    }

    /// The clone's git dir descriptor path.
    pub fn descriptor(&self) -> PathBuf {
        self.clone.join(".git").join("row-fence.json")
    }
}

/// A fixed lease token for grants made through the store library (never by `acquire`,
/// which creates a random one).
pub static TEST_TOKEN: std::sync::LazyLock<row_fence_contract::LeaseToken> =
    std::sync::LazyLock::new(|| row_fence_contract::LeaseToken::parse(&"7".repeat(64)).unwrap());

/// This machine's first address that is not loopback (`hostname -I`), if it has one.
pub fn this_machines_address() -> Option<String> {
    let out = Command::new("hostname").arg("-I").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find(|a| {
            a.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| !ip.is_loopback())
        })
        .map(str::to_string)
}
