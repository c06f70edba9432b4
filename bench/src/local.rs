//! What the cases that build a private world on this machine share (the key broker's,
//! the forge API's, the push's, the console's): a free loopback port, waiting for a
//! part to come up, a program on PATH, an ssh key, logs and error text.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a part may take to come up.
const COME_UP: Duration = Duration::from_secs(10);

/// Runs `command` to its end: its stdout, or `Err` naming `what` with its stderr.
pub fn stdout_of(command: &mut std::process::Command, what: &str) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Turns an I/O error into the case's error text, naming `what` failed.
pub fn io(what: &'static str) -> impl Fn(std::io::Error) -> String {
    move |e| format!("{what}: {e}")
}

/// A path as an argument's text.
pub fn text(path: &Path) -> String {
    path.display().to_string()
}

/// A new log file at `path` for a child's output.
pub fn log(path: &Path) -> Result<fs::File, String> {
    fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `program`'s path on PATH; `Err` names it (scripts/test installs every one used).
pub fn which(program: &str) -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{program} is not installed (scripts/test installs it)"))
}

/// A loopback TCP port free now.
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io("a free port"))
}

/// Waits up to 10 s for `ready`; `Err` names `what` did not come up.
pub fn wait_for(what: &str, ready: impl Fn() -> bool) -> Result<(), String> {
    let until = Instant::now() + COME_UP;
    while !ready() {
        if Instant::now() > until {
            return Err(format!("{what} was not there within {COME_UP:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// An unencrypted Ed25519 key pair at `path` and `path.pub`.
pub fn keygen(path: &Path, comment: &str) -> Result<(), String> {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(io("ssh-keygen"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ssh-keygen: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
