//! The machine a run measured and the versions it measured, for the report's header: a
//! figure means nothing without the box it came from and how busy that box was.

use std::path::Path;
use std::process::{Command, Stdio};

/// The machine.
#[derive(Clone, Debug)]
pub struct Machine {
    /// `model name` from `/proc/cpuinfo`.
    pub cpu: String,
    /// Cores this process may run on.
    pub cores: usize,
    /// `MemTotal`, in GiB.
    pub memory_gib: f64,
    /// The kernel release.
    pub kernel: String,
    /// The hostname.
    pub host: String,
    /// `kernel.sched_autogroup_enabled` (1, 0, or unknown): whether processes of other
    /// sessions get a share of their own, which matters to the oversubscribed case.
    pub autogroup: String,
}

impl Machine {
    /// Reads the machine from `/proc`.
    pub fn read() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or(0.0);
        Machine {
            cpu: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|r| r.trim_start_matches([' ', '\t', ':']).trim().to_string())
                .unwrap_or_else(|| "unknown".into()),
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            memory_gib: mem_kib / (1024.0 * 1024.0),
            kernel: read_trim("/proc/sys/kernel/osrelease"),
            host: read_trim("/proc/sys/kernel/hostname"),
            autogroup: read_trim("/proc/sys/kernel/sched_autogroup_enabled"),
        }
    }
}

/// The 1-, 5- and 15-minute load averages right now, as `/proc/loadavg` has them.
pub fn load_average() -> String {
    read_trim("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first line `program ARGS` prints (stdout, else stderr), or why it could not run.
pub fn version_of(program: &Path, args: &[&str]) -> String {
    match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) => {
            let text = if out.stdout.is_empty() {
                out.stderr
            } else {
                out.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        }
        Err(e) => format!("not available ({e})"),
    }
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}
