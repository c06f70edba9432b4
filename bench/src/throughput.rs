//! The daemon under many clients, without process spawns in the way: threads of the bench
//! speak the wire protocol directly (one request line, one answer line, one connection
//! per ask, exactly as `row-fence-ask` does).
//!
//! - [`asks_per_second`]: N concurrent clients asking back to back for a fixed time.
//! - [`hold_connections`]: N connections open at once, each with a request in flight,
//!   for the daemon's peak RSS.

use crate::rss;
use crate::stats::Summary;
use row_fence_contract::client::{self, ExchangeError};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// An answer is counted only when it is ALLOWED.
const ALLOWED: &[u8] = b"\"verdict\":\"allowed\"";

/// What [`asks_per_second`] measured.
#[derive(Clone, Debug)]
pub struct Throughput {
    /// Concurrent clients.
    pub clients: usize,
    /// How long they asked, in s.
    pub seconds: f64,
    /// ALLOWED answers received.
    pub allowed: u64,
    /// Asks that failed or were answered anything but ALLOWED.
    pub failed: u64,
    /// ALLOWED answers per second.
    pub per_second: f64,
    /// Each ask's round trip as its client saw it.
    pub latency: Summary,
    /// CPU time each party used meanwhile, in s: (daemon, redis-server, the clients).
    pub cpu_s: (f64, f64, f64),
}

/// `clients` threads ask the daemon at `socket` back to back for `duration`, each ask a
/// new connection carrying `request` (one line).
pub fn asks_per_second(
    socket: &Path,
    request: &[u8],
    clients: usize,
    duration: Duration,
    pids: (u32, u32),
) -> Throughput {
    let start_gate = Arc::new(Barrier::new(clients + 1));
    let request: Arc<[u8]> = request.into();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (gate, socket, request) =
                (start_gate.clone(), socket.to_path_buf(), request.clone());
            std::thread::spawn(move || {
                gate.wait();
                let until = Instant::now() + duration;
                let (mut walls, mut failed) = (Vec::with_capacity(4096), 0u64);
                while Instant::now() < until && !crate::interrupt::requested() {
                    let started = Instant::now();
                    match ask_once(&socket, &request) {
                        Ok(true) => walls.push(started.elapsed()),
                        _ => failed += 1,
                    }
                }
                (walls, failed)
            })
        })
        .collect();
    let cpu_before = (cpu_s(pids.0), cpu_s(pids.1), own_cpu_s());
    start_gate.wait();
    let started = Instant::now();
    let mut walls = Vec::new();
    let mut failed = 0;
    for thread in threads {
        if let Ok((w, f)) = thread.join() {
            walls.extend(w);
            failed += f;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu_after = (cpu_s(pids.0), cpu_s(pids.1), own_cpu_s());
    Throughput {
        clients,
        seconds,
        allowed: walls.len() as u64,
        failed,
        per_second: walls.len() as f64 / seconds,
        latency: Summary::of(&walls),
        cpu_s: (
            cpu_after.0 - cpu_before.0,
            cpu_after.1 - cpu_before.1,
            cpu_after.2 - cpu_before.2,
        ),
    }
}

/// One ask on a new connection, through the asker's own exchange
/// (`row_fence_contract::client::exchange_line`: the same connect, send and wait): `Ok(true)`
/// when answered ALLOWED.
pub fn ask_once(socket: &Path, request: &[u8]) -> Result<bool, ExchangeError> {
    let answer = client::exchange_line(socket, request, Instant::now() + Duration::from_secs(10))?;
    Ok(answer.windows(ALLOWED.len()).any(|w| w == ALLOWED))
}

/// One ask on a new connection, as [`ask_once`], for the case's first ask: `Err` with the
/// daemon's answer line when it is not ALLOWED (its `reason` and `detail` say why) or why
/// no answer came, so a case whose every ask fails says why instead of measuring refusals.
pub fn check_allowed(socket: &Path, request: &[u8]) -> Result<(), String> {
    let answer = client::exchange_line(socket, request, Instant::now() + Duration::from_secs(10))
        .map_err(|e| format!("no answer from {}: {e}", socket.display()))?;
    if answer.windows(ALLOWED.len()).any(|w| w == ALLOWED) {
        Ok(())
    } else {
        Err(format!(
            "answered {}",
            String::from_utf8_lossy(&answer).trim_end()
        ))
    }
}

/// What [`hold_connections`] measured.
#[derive(Clone, Debug)]
pub struct Connections {
    /// Connections held open at once.
    pub opened: usize,
    /// Of those, answered ALLOWED once released.
    pub allowed: usize,
    /// The daemon's RSS before the first connection, in KiB.
    pub rss_before_kib: u64,
    /// The daemon's peak RSS over the case, in KiB.
    pub peak_kib: u64,
}

/// Opens `count` connections to the daemon at once, each sending all of `request` but
/// its final newline, so the daemon holds a task and a read buffer for every one; waits
/// until it has accepted them; then completes every request and reads every answer. The
/// daemon's peak RSS is taken over exactly this (`VmHWM` after a reset).
pub fn hold_connections(
    socket: &Path,
    request: &[u8],
    count: usize,
    daemon_pid: u32,
) -> Result<Connections, String> {
    let rss_before_kib = rss::current_kib(daemon_pid)?;
    rss::reset_peak(daemon_pid)?;
    let (head, newline) = request.split_at(request.len() - 1);
    let mut streams = Vec::with_capacity(count);
    for i in 0..count {
        let mut stream =
            UnixStream::connect(socket).map_err(|e| format!("connection {i} of {count}: {e}"))?;
        stream
            .write_all(head)
            .map_err(|e| format!("connection {i} of {count}: {e}"))?;
        streams.push(stream);
    }
    // Long enough for the daemon to accept and park every connection, well inside its
    // 5 s read deadline.
    std::thread::sleep(Duration::from_millis(500));
    for stream in &mut streams {
        let _ = stream.write_all(newline);
    }
    let mut allowed = 0;
    for stream in &streams {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let mut answer = Vec::with_capacity(256);
        if BufReader::new(stream)
            .read_until(b'\n', &mut answer)
            .is_ok()
            && answer.windows(ALLOWED.len()).any(|w| w == ALLOWED)
        {
            allowed += 1;
        }
    }
    let peak_kib = rss::peak_kib(daemon_pid)?;
    Ok(Connections {
        opened: streams.len(),
        allowed,
        rss_before_kib,
        peak_kib,
    })
}

/// CPU time (user + system) a process has used, in s; 0 when it cannot be read.
fn cpu_s(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the `(comm)`, which may hold spaces: utime and stime are 14 and 15.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields
        .get(11..13)
        .map(|f| f.iter().filter_map(|t| t.parse::<f64>().ok()).sum())
        .unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks / hz
}

/// CPU time (user + system) this process has used, in s.
fn own_cpu_s() -> f64 {
    // SAFETY: plain syscall with a zeroed out-parameter.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
