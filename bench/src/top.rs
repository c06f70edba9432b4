//! The operator's console (`--only top`): `row-fence top` on a real terminal (a private
//! tmux server) watching a board of 1,000 rows on the file store, served by the daemon
//! under test. Three figures: the console's CPU while idle (its own utime + stime from
//! `/proc/<pid>/stat` over a window, as a share of one core; target ≤ 1 %), its CPU per
//! refresh (the same ticks ÷ the refreshes in the window; target ≤ 5 ms), and the time from
//! an event to the screen: a takeover committed by `row-fence acquire --takeover` until
//! `capture-pane` shows the new holder (polled every 10 ms).

use crate::fixture::{Binaries, Daemon, clean_command};
use crate::local::which;
use crate::options::Options;
use crate::stats::Summary;
use row_fence_store::file::FileStore;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Rows on the watched board.
pub const ROWS: usize = 1_000;

/// The console's refresh, in ms: its default.
pub const REFRESH_MS: u64 = 250;

/// Idle CPU target, % of one core.
pub const IDLE_TARGET_PCT: f64 = 1.0;

/// CPU per refresh target, in ms.
pub const REFRESH_TARGET_MS: f64 = 5.0;

/// The board.
const BOARD: &str = "top-1000";

/// The figures of one run.
#[derive(Clone, Debug)]
pub struct Figures {
    /// The idle window, in s.
    pub window_s: f64,
    /// The console's CPU over the window, in ms.
    pub cpu_ms: f64,
    /// Refreshes in the window (window ÷ the refresh period, at most).
    pub refreshes: f64,
    /// Event to screen, takeover after takeover.
    pub latency: Summary,
    /// Takeovers the screen did not show within 10 s.
    pub missed: usize,
}

impl Figures {
    /// Idle CPU, % of one core.
    pub fn idle_pct(&self) -> f64 {
        self.cpu_ms / (self.window_s * 1e3) * 100.0
    }

    /// CPU per refresh, in ms.
    pub fn per_refresh_ms(&self) -> f64 {
        self.cpu_ms / self.refreshes.max(1.0)
    }
}

/// (idle window in s, takeovers): full, `--quick`, `--smoke`.
fn plan(options: &Options) -> (u64, usize) {
    match (options.smoke, options.quick) {
        (true, _) => (3, 3),
        (false, true) => (10, 10),
        (false, false) => (30, 40),
    }
}

/// Runs the case; `bin_dir` holds `row-fence` and `row-fence-resident`.
pub fn run(options: &Options, bin_dir: &Path) -> Result<Figures, String> {
    let tmux = which("tmux")?;
    let dir = tempfile::Builder::new()
        .prefix("rf-bench-top")
        .tempdir_in("/tmp")
        .map_err(|e| format!("temp dir: {e}"))?;
    let work = dir.path();
    let bins = Binaries {
        dir: bin_dir.to_path_buf(),
    };
    let store_dir = work.join("store");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    runtime.block_on(crate::file_boards::fill(
        &FileStore::new(store_dir.clone()),
        BOARD,
        ROWS,
    ))?;
    let spec = format!("file:{}", store_dir.display());
    let home = work.join("home");
    let mut daemon = Daemon::start(&bins, &home, &spec, &[])?;
    let console = Console::start(&tmux, work, &bins, &home, &spec)?;
    // The board is on screen before anything is timed.
    console.until("other-0", Duration::from_secs(20))?;
    let pid = console.pid()?;

    let (window_s, takeovers) = plan(options);
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu_ticks(pid)?;
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(window_s));
    let ticks = cpu_ticks(pid)? - before;
    let window = started.elapsed().as_secs_f64();
    let cpu_ms = ticks as f64 * 1e3 / clock_ticks_per_second();

    let mut walls = Vec::new();
    let mut missed = 0;
    for i in 0..takeovers {
        crate::interrupt::check()?;
        let lane = format!("bench-{i}");
        let out = clean_command(bins.path("row-fence"), &home, &[])
            .env("ROW_FENCE_STORE", &spec)
            .args(["acquire", BOARD, "other-0", "--lane", &lane, "--takeover"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("row-fence acquire: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "row-fence acquire --takeover failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let committed = Instant::now();
        match console.until(&format!("other-0 {lane} "), Duration::from_secs(10)) {
            Ok(()) => walls.push(committed.elapsed()),
            Err(_) => missed += 1,
        }
    }
    daemon.check_alive()?;
    Ok(Figures {
        window_s: window,
        cpu_ms,
        refreshes: window * 1e3 / REFRESH_MS as f64,
        latency: Summary::of(&walls),
        missed,
    })
}

/// The console under a private tmux server, killed on drop.
struct Console {
    tmux: PathBuf,
    socket: PathBuf,
}

impl Console {
    fn start(
        tmux: &Path,
        work: &Path,
        bins: &Binaries,
        home: &Path,
        spec: &str,
    ) -> Result<Console, String> {
        let console = Console {
            tmux: tmux.to_path_buf(),
            socket: work.join("tmux.sock"),
        };
        let command = format!(
            "ROW_FENCE_HOME='{}' ROW_FENCE_STORE='{spec}' exec '{}' top --board {BOARD} --refresh-ms {REFRESH_MS}",
            home.display(),
            bins.path("row-fence").display()
        );
        let out = console
            .cmd()
            .args([
                "new-session",
                "-d",
                "-s",
                "top",
                "-x",
                "120",
                "-y",
                "40",
                &command,
            ])
            .output()
            .map_err(|e| format!("tmux: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "tmux new-session: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(console)
    }

    fn cmd(&self) -> Command {
        let mut cmd = Command::new(&self.tmux);
        cmd.env("TERM", "xterm-256color")
            .arg("-f")
            .arg("/dev/null")
            .arg("-S")
            .arg(&self.socket)
            .stdin(Stdio::null());
        cmd
    }

    /// The console's pid (the pane runs it by `exec`).
    fn pid(&self) -> Result<u32, String> {
        let out = self
            .cmd()
            .args(["display-message", "-p", "-t", "top", "#{pane_pid}"])
            .output()
            .map_err(|e| format!("tmux: {e}"))?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|e| format!("tmux gave no pane pid: {e}"))
    }

    /// Polls the screen every 10 ms until a line holds `text` (words joined by one space).
    fn until(&self, text: &str, limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let out = self
                .cmd()
                .args(["capture-pane", "-p", "-t", "top"])
                .output()
                .map_err(|e| format!("tmux: {e}"))?;
            let screen = String::from_utf8_lossy(&out.stdout);
            if screen.lines().any(|l| {
                format!("{} ", l.split_whitespace().collect::<Vec<_>>().join(" ")).contains(text)
            }) {
                return Ok(());
            }
            if started.elapsed() > limit {
                return Err(format!(
                    "the console did not show {text:?} within {limit:?}:\n{screen}"
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64, String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // The fields after the command's closing parenthesis; utime and stime are the 14th and
    // 15th of the whole line, the 12th and 13th after it.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or("a /proc stat line without its command")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<u64, String> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| format!("/proc/{pid}/stat has no field {i}"))
    };
    Ok(field(11)? + field(12)?)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// The case's report, in Markdown.
pub fn report(figures: Option<&Figures>, error: Option<&str>, command: &str) -> String {
    let mut md = String::from("# row-fence bench: the operator's console\n\n");
    let _ = writeln!(md, "`{command}`\n");
    let _ = writeln!(
        md,
        "`row-fence top --board {BOARD} --refresh-ms {REFRESH_MS}` on a real terminal (tmux, 120×40) watching a board of {ROWS} rows on the file store, served by the daemon under test.\n"
    );
    if let Some(f) = figures {
        let verdict = |met: bool| if met { "met" } else { "MISSED" };
        let _ = writeln!(md, "| figure | value | target | |");
        let _ = writeln!(md, "|---|---:|---:|---|");
        let _ = writeln!(
            md,
            "| idle CPU, % of one core ({:.0} s window) | {:.2} % | ≤ {IDLE_TARGET_PCT} % | {} |",
            f.window_s,
            f.idle_pct(),
            verdict(f.idle_pct() <= IDLE_TARGET_PCT)
        );
        let _ = writeln!(
            md,
            "| CPU per refresh (≈ {:.0} refreshes) | {:.2} ms | ≤ {REFRESH_TARGET_MS} ms | {} |",
            f.refreshes,
            f.per_refresh_ms(),
            verdict(f.per_refresh_ms() <= REFRESH_TARGET_MS)
        );
        let _ = writeln!(
            md,
            "| event to screen p50 / p99 / max ({} takeovers, {} missed) | {:.0} / {:.0} / {:.0} ms | — | |",
            f.latency.count, f.missed, f.latency.p50_ms, f.latency.p99_ms, f.latency.max_ms
        );
        let _ = writeln!(md);
    }
    if let Some(error) = error {
        let _ = writeln!(md, "Not measured: {error}\n");
    }
    let _ = writeln!(md, "## How it was measured\n\n{HOW}");
    md
}

const HOW: &str = "The board is filled in process through the store crate's own fenced batches, the daemon under test serves it, and the console runs under a tmux server of the run's own, its pane running `row-fence top` by `exec` so the pane's pid is the console's. Idle: after the board is on screen and one more second, the console's own utime + stime (`/proc/<pid>/stat`) over the window, as a share of one core; per refresh: the same CPU ÷ the refreshes the window holds at most (window ÷ the refresh period: a refresh that takes longer makes fewer, so this overstates each one's cost). Event to screen: `row-fence acquire --takeover` of the first row for a new lane, then `tmux capture-pane` every 10 ms until the row's line names the new holder, from the acquire's exit; the refresh period (250 ms) bounds it from above plus one refresh's work.";
