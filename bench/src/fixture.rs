//! What the store cases stand on: the binaries under test, one row lease granted through
//! the real `row-fence acquire`, the lane's descriptor it writes, and the real
//! `row-fence-resident` started per route on its own home. Every child gets a cleared
//! environment (PATH, HOME, the row-fence variables, and `SSL_CERT_FILE` on TLS routes)
//! so nothing leaks in from the caller's shell.

use crate::children::Owned;
use crate::hook_inputs::{input, installed_command};
use row_fence_contract::Descriptor;
use row_fence_contract::client;
use row_fence_contract::harness::Harness;
use row_fence_contract::protocol::{Ask, Caller, Op, PROTOCOL_VERSION, Request};
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The board every case asks about.
pub const BOARD: &str = "bench";
/// The row the lane holds.
pub const ROW: &str = "row-1";
/// The lane holding it.
pub const LANE: &str = "lane-a";
/// The fenced action each ask carries (as the pre-push hook sends it).
pub const ACTION: &str = "git push origin";

/// Where the binaries under test are.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// The directory holding all of them (the run's snapshot).
    pub dir: PathBuf,
}

/// The binaries a run needs.
const NAMES: [&str; 6] = [
    "row-fence-ask",
    "row-fence-guard",
    "row-fence",
    "row-fence-resident",
    "row-fence-bench-echo",
    "row-fence-bench-maxrss",
];

impl Binaries {
    /// Copies the binaries in `dir` into `into`, so a build running beside the bench
    /// cannot swap one mid-run (the asker and the daemon must carry one code stamp, and a
    /// linker may rewrite a file in place, so a hard link would not do). `Err` naming the
    /// first one missing.
    pub fn snapshot(dir: &Path, into: &Path) -> Result<Binaries, String> {
        fs::create_dir_all(into).map_err(|e| format!("{}: {e}", into.display()))?;
        for name in NAMES {
            let (from, to) = (dir.join(name), into.join(name));
            if !from.is_file() {
                return Err(format!(
                    "{} is missing: build it first (scripts/bench does: cargo build --release)",
                    from.display()
                ));
            }
            fs::copy(&from, &to).map_err(|e| format!("{}: {e}", from.display()))?;
        }
        Ok(Binaries {
            dir: into.to_path_buf(),
        })
    }

    /// `Err` unless `row-fence-ask` was built from the same sources as this bench (the
    /// build digest in `--version`, ARCHITECTURE.md "Code stamp"): the in-process clients
    /// build their requests with this bench's contract crate, so a bench left over from
    /// older sources would send what the daemon refuses (a descriptor read without its
    /// lease token is REFUSED token_mismatch) while the real asker is ALLOWED.
    pub fn check_same_build(&self, version: &str) -> Result<(), String> {
        let asker = self.path("row-fence-ask");
        let out = Command::new(&asker)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{} --version: {e}", asker.display()))?;
        if out.status.success() && String::from_utf8_lossy(&out.stdout).contains(version) {
            Ok(())
        } else {
            Err(format!(
                "row-fence-bench {} is not the build of the binaries it measures ({}: {}): \
                 build them together (cargo build --workspace --bins, or scripts/bench)",
                version,
                asker.display(),
                String::from_utf8_lossy(&out.stdout).trim()
            ))
        }
    }

    /// The path of one of them.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// A command with a cleared environment: PATH, HOME (the bench's temp dir), the given
/// home, and `extra`.
pub fn clean_command(
    program: impl AsRef<std::ffi::OsStr>,
    home: &Path,
    extra: &[(String, OsString)],
) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.parent().unwrap_or(home))
        .env("ROW_FENCE_HOME", home);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd
}

/// Grants the lane its row on `store` through `row-fence acquire` (24 h, so it outlives
/// any run) and writes the descriptor to `path`.
pub fn acquire(
    bins: &Binaries,
    home: &Path,
    store: &str,
    path: &Path,
) -> Result<Descriptor, String> {
    acquire_on(bins, home, store, BOARD, path)
}

/// [`acquire`] on another board than [`BOARD`] (the file store's boards of each size).
pub fn acquire_on(
    bins: &Binaries,
    home: &Path,
    store: &str,
    board: &str,
    path: &Path,
) -> Result<Descriptor, String> {
    let out = clean_command(bins.path("row-fence"), home, &[])
        .args(["--store", store, "acquire", board, ROW, "--lane", LANE])
        .args(["--ttl", "24h", "--takeover", "--write-descriptor"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("row-fence acquire: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "row-fence acquire failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// The asker's code stamp for `home` (`row-fence-ask --print-stamp`), for the requests
/// the in-process clients send.
pub fn stamp(bins: &Binaries, home: &Path) -> Result<String, String> {
    let out = clean_command(bins.path("row-fence-ask"), home, &[])
        .arg("--print-stamp")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("row-fence-ask --print-stamp: {e}"))?;
    let stamp = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() && !stamp.is_empty() {
        Ok(stamp)
    } else {
        Err(format!(
            "row-fence-ask --print-stamp failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A running `row-fence-resident` on its own home; stopped (SIGTERM) when dropped.
pub struct Daemon {
    /// The process.
    process: Owned,
    /// Its `ROW_FENCE_HOME` (the socket is `<home>/sock`).
    pub home: PathBuf,
    /// Its socket.
    pub socket: PathBuf,
    /// Its stderr, for the error message when it fails to start.
    log: PathBuf,
}

impl Daemon {
    /// Starts the daemon on `home` against `store` with `extra` environment and waits
    /// (≤ 10 s) until it answers a ping.
    pub fn start(
        bins: &Binaries,
        home: &Path,
        store: &str,
        extra: &[(String, OsString)],
    ) -> Result<Daemon, String> {
        Daemon::start_program(&bins.path("row-fence-resident"), home, store, extra)
    }

    /// [`Daemon::start`] of another build of the daemon (the CPU profile's, with symbols).
    pub fn start_program(
        program: &Path,
        home: &Path,
        store: &str,
        extra: &[(String, OsString)],
    ) -> Result<Daemon, String> {
        let log = home.with_extension("log");
        let stderr = fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let mut cmd = clean_command(program, home, extra);
        cmd.env("ROW_FENCE_STORE", store)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(stderr);
        let process = Owned::spawn(&mut cmd, "row-fence-resident", Duration::from_secs(12))?;
        let mut daemon = Daemon {
            process,
            home: home.to_path_buf(),
            socket: home.join("sock"),
            log,
        };
        daemon.wait_ready()?;
        Ok(daemon)
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let until = Instant::now() + Duration::from_secs(10);
        let ping = Request {
            v: PROTOCOL_VERSION,
            op: Op::Ping,
        };
        while Instant::now() < until {
            let deadline = Instant::now() + Duration::from_millis(500);
            if client::exchange(&self.socket, &ping, deadline).is_ok_and(|a| a.pong.is_some()) {
                return Ok(());
            }
            if let Err(e) = self.process.check_alive() {
                return Err(format!("{e}; its log:\n{}", self.log_text()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "row-fence-resident did not answer on {} within 10 s; its log:\n{}",
            self.socket.display(),
            self.log_text()
        ))
    }

    /// The daemon's stderr so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// `Err` when the daemon has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        self.process
            .check_alive()
            .map_err(|e| format!("{e}; its log:\n{}", self.log_text()))
    }
}

/// The agent guard installed the way `row-fence install claude-hook` installs it, and the
/// hook inputs its cases send.
#[derive(Clone, Debug)]
pub struct GuardHook {
    /// The settings entry's command.
    pub command: String,
    /// The row-bound worktree the agent is in.
    pub cwd: PathBuf,
    /// Claude Code's hook input for a harmless command.
    pub harmless: PathBuf,
    /// Claude Code's hook input for `git push origin main`.
    pub push: PathBuf,
}

/// Installs the agent guard the way `row-fence install claude-hook` does (into a settings
/// file of the bench's own) for the daemon at `home`, makes a row-bound worktree holding
/// the lane's descriptor, and writes the two hook inputs the guard cases send.
pub fn guard_hook(
    bins: &Binaries,
    home: &Path,
    descriptor: &Path,
    work: &Path,
) -> Result<GuardHook, String> {
    let lane = work.join("lane");
    let git_dir = lane.join(".git");
    fs::create_dir_all(&git_dir).map_err(|e| format!("{}: {e}", git_dir.display()))?;
    fs::copy(descriptor, git_dir.join("row-fence.json"))
        .map_err(|e| format!("{}: {e}", descriptor.display()))?;
    let settings = work.join("claude-settings.json");
    let out = clean_command(bins.path("row-fence"), home, &[])
        .args(["install", "claude-hook", "--bin-dir"])
        .arg(&bins.dir)
        .arg("--settings")
        .arg(&settings)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run row-fence install claude-hook: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "row-fence install claude-hook failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let command = installed_command(Harness::Claude, &settings)?;
    let written = |name: &str, command: &str| -> Result<PathBuf, String> {
        let path = work.join(name);
        let json = input(Harness::Claude, "bench-session", &lane, command);
        fs::write(&path, json.to_string()).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    };
    Ok(GuardHook {
        command,
        cwd: lane.clone(),
        harmless: written("harmless.json", "git commit -m \"fix; git push later\"")?,
        push: written("push.json", "git push origin main")?,
    })
}

/// The request line `row-fence-ask` would send for `descriptor` (same stamp, same
/// deadline), for the in-process clients.
pub fn ask_line(
    bins: &Binaries,
    home: &Path,
    descriptor: &row_fence_contract::Descriptor,
) -> Result<Vec<u8>, String> {
    let request = Request {
        v: PROTOCOL_VERSION,
        op: Op::Ask(Box::new(Ask {
            stamp: stamp(bins, home)?,
            deadline_ms: row_fence_contract::client::DEFAULT_TIMEOUT_MS,
            descriptor: descriptor.clone(),
            action: ACTION.into(),
            caller: Caller::default(),
            updates: Vec::new(),
        })),
    };
    Ok(request.to_line())
}
