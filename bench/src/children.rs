//! Processes the bench starts and must stop: `redis-server`, the daemon, the busy
//! processes. Each is an [`Owned`] that stops its process when dropped (SIGTERM, then
//! SIGKILL after a grace period), so an error, a panic or Ctrl-C leaves nothing running.
//! Each is also started with `PR_SET_PDEATHSIG`, so even a SIGKILLed bench takes its
//! children with it.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running child the bench owns; stopped on drop.
pub struct Owned {
    /// `None` once stopped.
    child: Option<Child>,
    /// For messages: what this process is.
    name: String,
    /// How long SIGTERM gets before SIGKILL.
    grace: Duration,
}

impl Owned {
    /// Spawns `cmd` (stdin closed; stdout and stderr as `cmd` sets them) and owns it.
    /// Must be called from the main thread: the death signal follows the thread that
    /// spawned the child.
    pub fn spawn(cmd: &mut Command, name: &str, grace: Duration) -> Result<Owned, String> {
        cmd.stdin(Stdio::null());
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(Owned {
            child: Some(child),
            name: name.to_string(),
            grace,
        })
    }

    /// The process id (0 once stopped).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The exit status once the process has exited, `None` while it runs.
    pub fn exited(&mut self) -> Result<Option<ExitStatus>, String> {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(status)) => Ok(status),
            Some(Err(e)) => Err(format!("{}: {e}", self.name)),
            None => Err(format!("{} was stopped", self.name)),
        }
    }

    /// `Err` naming the exit status when the process has already exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.exited()? {
            None => Ok(()),
            Some(status) => Err(format!("{} exited: {status}", self.name)),
        }
    }

    /// Waits up to `limit` for the process to exit by itself; its status. `Err` (and the
    /// process stopped as on drop) when it did not.
    pub fn wait(&mut self, limit: Duration) -> Result<ExitStatus, String> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some(status) = self.exited()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        Err(format!("{} did not exit within {limit:?}", self.name))
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, SIGKILL…) to the process while it is unreaped.
    pub fn signal(&mut self, signal: libc::c_int) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        // SAFETY: the pid is our unreaped child, so it cannot have been reused.
        unsafe {
            libc::kill(child.id() as libc::pid_t, signal);
        }
    }

    /// SIGTERM, wait up to the grace period, then SIGKILL; reaps the process.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // Already reaped (its pid may belong to someone else by now): nothing to signal.
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        if self.grace.is_zero() {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        // SAFETY: the pid is our unreaped child, so it cannot have been reused.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let until = Instant::now() + self.grace;
        while Instant::now() < until {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.stop();
    }
}
