//! `row-fence-resident --detach`: the daemon on a machine with no service manager to run
//! it (a container's shell, WSL without systemd, a login over `su` with no user manager;
//! ARCHITECTURE.md, "The daemon"). The command starts the daemon as a child in a session
//! of its own (no terminal: closing the shell does not stop it), its log appended to
//! `$ROW_FENCE_HOME/log/resident.log`, and returns only once that child answers on its
//! socket, so `row-fence-resident --detach && row-fence install claude-hook …` switches
//! the hook on in the fail-closed order. A child that exits first is reported with the
//! end of its log, and the command exits with its code.
//!
//! Nothing restarts a detached daemon, and nothing needs to on an upgrade: without
//! `--supervised` it executes its new binary in place (see [`crate::reexec`]).

use crate::config::Settings;
use row_fence_contract::client;
use std::ffi::OsString;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The environment variable the child is started with; it makes itself a session leader
/// first thing ([`become_session_leader`]).
pub const DETACHED_VAR: &str = "ROW_FENCE_DETACHED";

/// How long the command waits for the child to answer: binding is quick (the store is
/// opened lazily), so this only bounds a child stuck before it binds.
pub const READY_WITHIN: Duration = Duration::from_secs(30);

/// Where a detached daemon's log goes (the launchd job's log directory).
pub fn log_file(home: &Path) -> PathBuf {
    home.join("log").join("resident.log")
}

/// In the child: leaves the terminal's session, so a hang-up or a Ctrl-C there does not
/// reach it. Called before anything else runs (one thread); a daemon that executed
/// itself again is a session leader already, which `setsid` refuses harmlessly.
pub fn become_session_leader() {
    if std::env::var_os(DETACHED_VAR).is_some() {
        let _ = nix::unistd::setsid();
    }
}

/// Starts the daemon detached, with `args` (this command's own, without `--detach`);
/// returns the exit code of the command: 0 once the child answers (or when a daemon of
/// this home answers already), else the child's code or 1, each with a sentence on
/// stderr saying what happened and where the log is.
pub fn run(settings: &Settings, args: Vec<OsString>) -> i32 {
    let say = |line: String| eprintln_safe(&format!("row-fence-resident: {line}"));
    if let Ok(status) = client::status(&settings.socket, Instant::now() + Duration::from_secs(1)) {
        if status.serves(&settings.home) {
            say(format!(
                "a daemon already serves {} on {} (pid {}); leaving it alone",
                settings.home.display(),
                settings.socket.display(),
                status.pid
            ));
            return 0;
        }
        say(format!(
            "{} is taken by a daemon of another home ({}); give this one its own --socket",
            settings.socket.display(),
            status.home
        ));
        return 1;
    }
    let log = log_file(&settings.home);
    let opened = log
        .parent()
        .map_or(Ok(()), |dir| {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
        })
        .and_then(|_| {
            fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&log)
        });
    let (out, err) = match opened.and_then(|f| Ok((f.try_clone()?, f))) {
        Ok(files) => files,
        Err(e) => {
            say(format!("cannot open its log {}: {e}", log.display()));
            return 1;
        }
    };
    let start = fs::metadata(&log).map_or(0, |m| m.len());
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            say(format!("cannot find this program to start it: {e}"));
            return 1;
        }
    };
    let mut child = match Command::new(&exe)
        .args(&args)
        .env(DETACHED_VAR, "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            say(format!("cannot start {}: {e}", exe.display()));
            return 1;
        }
    };
    let pid = child.id();
    let until = Instant::now() + READY_WITHIN;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            say(format!(
                "the daemon exited ({status}) before it served; its log {} ends:\n{}",
                log.display(),
                tail(&log, start)
            ));
            return status.code().filter(|c| *c != 0).unwrap_or(1);
        }
        let answered = client::status(
            &settings.socket,
            Instant::now() + Duration::from_millis(500),
        );
        if answered.is_ok_and(|s| s.pid == pid) {
            say(format!(
                "serving {} on {} (pid {pid}, detached: nothing restarts it, and on an upgrade it runs its new binary in place; stop it with row-fence stop); log in {}",
                settings.home.display(),
                settings.socket.display(),
                log.display()
            ));
            return 0;
        }
        if Instant::now() >= until {
            say(format!(
                "the daemon (pid {pid}) did not answer on {} within {} s; it is left running; its log {} ends:\n{}",
                settings.socket.display(),
                READY_WITHIN.as_secs(),
                log.display(),
                tail(&log, start)
            ));
            return 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What the child wrote to `log` since `start`: the last 20 lines, at most 8 KiB.
fn tail(log: &Path, start: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = fs::File::open(log) {
        let len = f.metadata().map_or(start, |m| m.len());
        let from = start.max(len.saturating_sub(8 * 1024));
        if f.seek(SeekFrom::Start(from)).is_ok() {
            let mut bytes = Vec::new();
            let _ = f.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// A line on stderr, ignoring a closed or full stream.
fn eprintln_safe(line: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}
