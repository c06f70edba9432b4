//! The daemon moving onto new binaries by itself (ARCHITECTURE.md, "Code stamp"). On an
//! upgrade the first ask from new code finds the daemon stale; the daemon answers
//! `stale_code`, stops serving (in-flight asks finished, ledger flushed, socket removed),
//! and then either exits 75 for its service manager to start the new code
//! (`--supervised`, as the launchd and systemd jobs run it), or, with no manager to do
//! that (started by hand, `--detach`, a container's init), executes its own executable
//! again in place: same pid, same arguments and environment, new code. A daemon nobody
//! restarts is never left dead by an upgrade.
//!
//! The new file may still be being copied when the daemon sees it change, so the exec
//! waits until the file has stood still (same inode, size and mtime) for a moment; an
//! exec that fails is retried, and after [`GIVE_UP`] the daemon exits 75 saying so.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the file must stand still before it is executed.
const SETTLE: Duration = Duration::from_millis(200);

/// After this long without a successful exec the daemon gives up and exits.
pub const GIVE_UP: Duration = Duration::from_secs(30);

/// What to execute again: captured at start, before any upgrade replaces the file (the
/// running image's own path then reads `… (deleted)`).
#[derive(Clone, Debug)]
pub struct Again {
    exe: PathBuf,
    args: Vec<OsString>,
}

impl Again {
    /// This process's executable and arguments, as started; `None` when the executable's
    /// path cannot be read (the daemon then exits for a supervisor, as with
    /// `--supervised`).
    pub fn capture() -> Option<Again> {
        Some(Again {
            exe: std::env::current_exe().ok()?,
            args: std::env::args_os().skip(1).collect(),
        })
    }

    /// Executes the daemon's file again; returns only when that kept failing for
    /// [`GIVE_UP`] (the error of the last try).
    pub fn exec(&self) -> std::io::Error {
        let until = Instant::now() + GIVE_UP;
        let mut last = std::io::Error::other("the executable never stood still");
        while Instant::now() < until {
            if settled(&self.exe) {
                tracing::info!(exe = %self.exe.display(), "executing the new code in place");
                last = std::process::Command::new(&self.exe)
                    .args(&self.args)
                    .exec();
                tracing::warn!(error = %last, exe = %self.exe.display(), "cannot execute the new code; retrying");
            }
            std::thread::sleep(SETTLE);
        }
        last
    }
}

/// True when `exe` is an executable file that did not change over [`SETTLE`].
fn settled(exe: &Path) -> bool {
    let id = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .filter(|m| m.is_file() && m.mode() & 0o111 != 0)
            .map(|m| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
    };
    let Some(before) = id(exe) else {
        return false;
    };
    std::thread::sleep(SETTLE);
    id(exe) == Some(before)
}
