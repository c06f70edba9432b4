//! One latency sample: spawn a new process exactly as a hook does, wait for it, and keep
//! its wall time (from just before `spawn` to just after it exited) and its exit code. A
//! watchdog kills a sample that runs past [`SAMPLE_CAP`], so no client can hang the bench.
//!
//! Peak RSS is not taken here: a child spawned from the bench inherits the bench's own
//! high-water mark at `exec` (`ru_maxrss` keeps the larger), so it is measured through
//! the tiny `row-fence-bench-maxrss` launcher instead ([`crate::rss::peak_of_run`]).

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A sample still running after this long is killed and counted as failed (30 s: far
/// beyond the 5.5 s budget the seed's hook had, so it never clips a real figure).
pub const SAMPLE_CAP: Duration = Duration::from_secs(30);

/// What one spawned process cost.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// Spawn to exit, as the spawning hook sees it.
    pub wall: Duration,
    /// The exit code, or 128 + the signal that ended it.
    pub code: i32,
}

/// The sample being watched: its pid and when it must be killed.
type Watched = Mutex<Option<(libc::pid_t, Instant)>>;

/// The watchdog looks this often. It polls rather than being woken per sample, so the
/// measuring process adds no thread wake-up to any sample (which would count under load).
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Spawns processes one at a time and times them; owns the watchdog thread.
pub struct Sampler {
    /// Shared with the watchdog thread.
    watched: Arc<Watched>,
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler::new()
    }
}

impl Sampler {
    /// A sampler with its watchdog.
    pub fn new() -> Sampler {
        let watched: Arc<Watched> = Arc::new(Mutex::new(None));
        let dog = watched.clone();
        std::thread::spawn(move || watchdog(&dog));
        Sampler { watched }
    }

    /// Runs `cmd` once with stdin, stdout and stderr on /dev/null and times it.
    pub fn time(&self, cmd: &mut Command) -> Result<Sample, String> {
        self.time_in(cmd, None)
    }

    /// Runs `cmd` once with `input` (else /dev/null) on stdin, stdout and stderr on
    /// /dev/null, and times it. The file is opened before the clock starts.
    pub fn time_in(
        &self,
        cmd: &mut Command,
        input: Option<&std::path::Path>,
    ) -> Result<Sample, String> {
        let stdin = match input {
            Some(path) => std::fs::File::open(path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .into(),
            None => Stdio::null(),
        };
        cmd.stdin(stdin).stdout(Stdio::null()).stderr(Stdio::null());
        let started = Instant::now();
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot spawn {:?}: {e}", cmd.get_program()))?;
        let pid = child.id() as libc::pid_t;
        self.watch(Some((pid, started + SAMPLE_CAP)));
        // Wait without reaping first, so the watchdog can never signal a reused pid.
        let waited = wait_exited(pid);
        let wall = started.elapsed();
        self.watch(None);
        waited?;
        let status = reap(pid)?;
        drop(child);
        Ok(Sample {
            wall,
            code: exit_code(status),
        })
    }

    fn watch(&self, what: Option<(libc::pid_t, Instant)>) {
        *self.watched.lock().unwrap_or_else(|e| e.into_inner()) = what;
    }
}

fn watchdog(watched: &Watched) {
    loop {
        std::thread::sleep(WATCH_EVERY);
        let mut current = watched.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((pid, deadline)) = *current
            && Instant::now() >= deadline
        {
            // SAFETY: the pid is a child that has not been reaped (see `time`), and
            // the lock keeps `time` from reaping it meanwhile.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            *current = None;
        }
    }
}

/// Waits until `pid` has exited, leaving it unreaped (`WNOWAIT`).
fn wait_exited(pid: libc::pid_t) -> Result<(), String> {
    loop {
        // SAFETY: plain syscall on our own child with a zeroed out-parameter.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("waitid({pid}): {e}"));
        }
    }
}

/// Reaps `pid`, returning its wait status.
fn reap(pid: libc::pid_t) -> Result<libc::c_int, String> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: plain syscall on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("wait4({pid}): {e}"));
        }
    }
}

fn exit_code(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        -1
    }
}
