//! A CPU profile of the daemon's ask path: `perf record -g` on the daemon's
//! pid while one in-process client asks back to back, then `perf report --stdio` by
//! shared object and symbol (self time), summarised into groups (tokio scheduling, JSON,
//! tracing, the ledger, the Redis client, the kernel's syscalls and scheduling…) and the
//! top symbols. When `perf` is missing or not permitted, the report says why instead.
//!
//! The shipped daemon is stripped (the release profile's `strip = "symbols"`), so its
//! own frames would show as addresses; `scripts/bench` builds the same source once more
//! with symbols kept (`--profile-daemon`) for this case only. Every other case runs the
//! shipped binaries.

use crate::children::Owned;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The top list's length (the rest still count in their group).
const TOP_SYMBOLS: usize = 15;

/// perf samples this often per second (enough for a few thousand samples per run,
/// little enough not to slow the daemon much).
const FREQUENCY: &str = "2000";

/// Where the daemon's CPU time goes, by kind of work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    /// The kernel: syscalls (socket accept, read, write, close), wake-ups, scheduling.
    Kernel,
    /// tokio's scheduler, its I/O driver (mio) and timers.
    Tokio,
    /// serde / serde_json: parsing requests, writing answers and records.
    Json,
    /// tracing and its subscriber.
    Tracing,
    /// The refusal ledger and the asks log on the daemon's side.
    Ledger,
    /// The Redis client (redis-rs and its parser).
    Redis,
    /// TLS (rustls, ring, aws-lc).
    Tls,
    /// Hashing (sha2: code stamps, registry digests).
    Hashing,
    /// malloc, free and Rust's allocation glue.
    Allocation,
    /// libc other than allocation (memcpy, string functions…).
    Libc,
    /// Frames perf could not name (a stripped binary).
    Unresolved,
    /// row-fence's own code: the server, the gate, the store adapters.
    Product,
    /// Everything else: std, core, other crates.
    Other,
}

impl Group {
    /// The name in the report.
    pub fn label(self) -> &'static str {
        match self {
            Group::Kernel => "kernel (syscalls, sockets, wake-ups, scheduling)",
            Group::Tokio => "tokio scheduling and I/O driver",
            Group::Json => "JSON (serde, serde_json)",
            Group::Tracing => "tracing",
            Group::Ledger => "ledger (refusals, asks log)",
            Group::Redis => "Redis client",
            Group::Tls => "TLS",
            Group::Hashing => "hashing (sha2)",
            Group::Allocation => "allocation (malloc, free)",
            Group::Libc => "libc, other",
            Group::Unresolved => "unresolved (no symbols)",
            Group::Product => "row-fence's own code (server, gate, store)",
            Group::Other => "other (std, core, other crates)",
        }
    }

    /// The group of one `perf report` line's shared object and symbol.
    pub fn of(dso: &str, symbol: &str, kernel: bool) -> Group {
        let has = |words: &[&str]| words.iter().any(|w| symbol.contains(w));
        if kernel || dso.starts_with("[kernel") {
            Group::Kernel
        } else if symbol.starts_with("0x") {
            Group::Unresolved
        } else if has(&["tracing"]) {
            Group::Tracing
        } else if has(&["serde"]) {
            Group::Json
        } else if has(&["refusal", "ledger", "asks_log"]) {
            Group::Ledger
        } else if has(&["redis::", "redis..", "combine::"]) {
            Group::Redis
        } else if has(&["rustls", "ring::", "aws_lc", "webpki"]) {
            Group::Tls
        } else if has(&["sha2", "Sha256", "sha256"]) {
            Group::Hashing
        } else if has(&["tokio", "mio::"]) {
            Group::Tokio
        } else if has(&[
            "malloc",
            "free",
            "realloc",
            "alloc::alloc",
            "__rust_alloc",
            "__rust_dealloc",
        ]) {
            Group::Allocation
        } else if dso.starts_with("libc") || dso.starts_with("ld-linux") {
            Group::Libc
        } else if has(&["row_fence"]) {
            Group::Product
        } else {
            Group::Other
        }
    }
}

/// One profile of the daemon.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Which daemon binary ran (with symbols, or the shipped stripped one).
    pub binary: String,
    /// perf's event and sample count (its report's header line).
    pub samples: String,
    /// Each group's share of the daemon's samples, in %, largest first.
    pub groups: Vec<(Group, f64)>,
    /// The top symbols by self time: (%, shared object, symbol, group).
    pub top: Vec<(f64, String, String, Group)>,
    /// ALLOWED asks answered while the client asked (a little longer than perf ran).
    pub asks: u64,
    /// How long the client asked, in s.
    pub seconds: f64,
}

/// `Ok(())` when `perf` can profile another process here; else why not.
pub fn available() -> Result<(), String> {
    let version = Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !version.is_ok_and(|s| s.success()) {
        return Err(
            "perf is not installed (Debian package linux-perf; scripts/bench installs it)".into(),
        );
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    match paranoid {
        Some(level) if level > 2 && !root => Err(format!(
            "perf may not profile here: kernel.perf_event_paranoid is {level} (needs ≤ 2, or root)"
        )),
        _ => Ok(()),
    }
}

/// Starts `perf record -g` on `pid` for `seconds` once attached, writing to `data`. The
/// caller asks meanwhile, waits for it to exit, then calls [`finish`].
pub fn start(pid: u32, data: &Path, seconds: Duration) -> Result<Owned, String> {
    let log = data.with_extension("log");
    let mut cmd = Command::new("perf");
    cmd.args([
        "record",
        "-g",
        "-F",
        FREQUENCY,
        "-p",
        &pid.to_string(),
        "-o",
    ])
    .arg(data)
    .arg("--")
    .arg("sleep")
    .arg(format!("{:.1}", seconds.as_secs_f64()))
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?);
    Owned::spawn(&mut cmd, "perf record", Duration::from_secs(5))
}

/// Reads what `perf record` (exited with `status`) wrote to `data` with `perf report`;
/// `asks` were answered in `seconds` while it ran.
pub fn finish(
    status: std::process::ExitStatus,
    data: &Path,
    binary: &str,
    asks: u64,
    seconds: f64,
) -> Result<Profile, String> {
    if !status.success() {
        let log = std::fs::read_to_string(data.with_extension("log")).unwrap_or_default();
        return Err(format!("perf record failed ({status}): {}", log.trim()));
    }
    // A profile of a daemon that answered nothing ALLOWED (a stamp mismatch after the
    // source changed between the two builds, a dead store) is not a profile of the ask path.
    if asks == 0 {
        return Err(format!(
            "the client got no ALLOWED answer in {seconds:.1} s while perf recorded, so the profile \
             would not be of the ask path (is the symbols build from the same source as the shipped one?)"
        ));
    }
    let out = Command::new("perf")
        .args(["report", "--stdio", "--no-children", "-g", "none"])
        .args(["--sort", "dso,sym", "-t", "\t", "-i"])
        .arg(data)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("perf report: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "perf report failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut profile = summarise(&text);
    if profile.groups.is_empty() {
        let log = std::fs::read_to_string(data.with_extension("log")).unwrap_or_default();
        return Err(format!(
            "perf recorded no samples of the daemon ({} asks meanwhile): perf record said {:?}; perf report said {:?}",
            asks,
            log.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    profile.binary = binary.to_string();
    profile.asks = asks;
    profile.seconds = seconds;
    Ok(profile)
}

/// Summarises `perf report --sort dso,sym -t '\t'` output.
pub fn summarise(report: &str) -> Profile {
    // "# Samples: 839  of event 'cpu-clock:ppp'" → "839 samples of event 'cpu-clock:ppp'".
    let samples = report
        .lines()
        .find_map(|l| l.strip_prefix("# Samples: "))
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .map(|s| s.replacen(" of event", " samples of event", 1))
        .unwrap_or_default();
    let mut lines: Vec<(f64, String, String, Group)> = Vec::new();
    for line in report.lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [overhead, dso, symbol] = fields.as_slice() else {
            continue;
        };
        let Ok(percent) = overhead.trim().trim_end_matches('%').parse::<f64>() else {
            continue;
        };
        let symbol = symbol.trim();
        let kernel = symbol.starts_with("[k]");
        let symbol = symbol
            .strip_prefix("[k] ")
            .or_else(|| symbol.strip_prefix("[.] "))
            .unwrap_or(symbol)
            .trim();
        let dso = dso.trim();
        lines.push((
            percent,
            dso.to_string(),
            symbol.to_string(),
            Group::of(dso, symbol, kernel),
        ));
    }
    let mut groups: Vec<(Group, f64)> = Vec::new();
    for (percent, _, _, group) in &lines {
        match groups.iter_mut().find(|(g, _)| g == group) {
            Some((_, total)) => *total += percent,
            None => groups.push((*group, *percent)),
        }
    }
    groups.sort_by(|a, b| b.1.total_cmp(&a.1));
    lines.sort_by(|a, b| b.0.total_cmp(&a.0));
    lines.truncate(TOP_SYMBOLS);
    Profile {
        binary: String::new(),
        samples,
        groups,
        top: lines,
        asks: 0,
        seconds: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_summarised_by_group_and_symbol() {
        let report = "# Samples: 4K of event 'cpu-clock:ppp'\n\
                      #\n\
                      \x2040.00%\t[kernel.kallsyms]\t[k] do_syscall_64\n\
                      \x2020.00%\trow-fence-resident\t[.] tokio::runtime::scheduler::multi_thread::worker::Context::run\n\
                      \x2010.00%\trow-fence-resident\t[.] serde_json::de::from_str\n\
                      \x205.00%\trow-fence-resident\t[.] <tracing_subscriber::fmt::Layer as tracing_core::Subscriber>::event\n\
                      \x205.00%\tlibc.so.6\t[.] malloc\n\
                      \x205.00%\trow-fence-resident\t[.] redis::parser::parse\n\
                      \x205.00%\trow-fence-resident\t[.] 0x0000000000012345\n\
                      \x2010.00%\trow-fence-resident\t[.] row_fence_resident::gate::ask\n";
        let p = summarise(report);
        assert_eq!(p.samples, "4K samples of event 'cpu-clock:ppp'");
        assert_eq!(p.groups[0], (Group::Kernel, 40.0));
        let share = |g| p.groups.iter().find(|(x, _)| *x == g).map(|(_, s)| *s);
        assert_eq!(share(Group::Tokio), Some(20.0));
        assert_eq!(share(Group::Json), Some(10.0));
        assert_eq!(share(Group::Tracing), Some(5.0));
        assert_eq!(share(Group::Allocation), Some(5.0));
        assert_eq!(share(Group::Redis), Some(5.0));
        assert_eq!(share(Group::Unresolved), Some(5.0));
        assert_eq!(share(Group::Product), Some(10.0));
        assert_eq!(p.top[0].2, "do_syscall_64");
    }
}
