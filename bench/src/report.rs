//! The Markdown report: the machine and versions, the targets beside the measured
//! figures, every latency phase, the daemon's throughput and memory, the case list, and
//! how it was measured. Figures are in ms (latency), MB = 10^6 bytes (memory), asks/s.

use crate::bounds;
use crate::cases::{Case, Status};
use crate::clients::Client;
use crate::plots::Plots;
use crate::rss::kib_to_mb;
use crate::run::{BUDGET, DELAY, Phase, Results};
use crate::targets::{self, Outcome, thousands};
use std::fmt::Write;

/// Renders the report for `results`, produced by `command` (e.g. `scripts/bench --quick`),
/// embedding `plots` (drawn beside the report from the same results).
pub fn render(results: &Results, plots: &Plots, command: &str) -> String {
    let mut md = String::new();
    let r = results;
    let _ = writeln!(md, "# row-fence benchmark\n");
    let _ = writeln!(
        md,
        "`{command}` — profile **{}**, {:.0} s{}.\n",
        r.plan.name,
        r.seconds,
        if r.plan.name == "smoke" {
            " (smoke: a handful of samples per case; nothing here is a measurement)"
        } else {
            ""
        }
    );
    if let Some(failure) = &r.failure {
        let _ = writeln!(md, "**The run stopped early:** {failure}\n");
    }
    machine(&mut md, r);
    versions(&mut md, r);
    target_table(&mut md, r);
    let _ = writeln!(md, "## Latency: one new process per sample\n");
    let _ = writeln!(
        md,
        "Wall time from spawn to exit, in ms, as the spawning hook sees it. Within a phase \
         the clients are interleaved sample by sample, each client's samples spread evenly \
         over the phase; `÷ warm` is the client's p50 over the warm ask's p50 in the same \
         phase.\n"
    );
    for (i, phase) in r.phases.iter().enumerate() {
        latency_table(&mut md, phase);
        if let Some(plot) = plots
            .phases
            .iter()
            .find(|p| p.file.starts_with(&format!("latency-{}-", i + 1)))
        {
            let _ = writeln!(md, "![{}]({})\n", plot.title, plot.file);
        }
    }
    guard_table(&mut md, r);
    agent_table(&mut md, r);
    daemon_table(&mut md, r);
    profile_section(&mut md, r);
    records_table(&mut md, r);
    file_store_table(&mut md, r);
    barrier_table(&mut md, r);
    if let Some(stores) = &r.stores {
        md.push('\n');
        md.push_str(&crate::stores::markdown(stores));
    }
    for plot in &plots.boards {
        let _ = writeln!(md, "![{}]({})\n", plot.title, plot.file);
    }
    case_list(&mut md);
    method(&mut md, r);
    if !r.notes.is_empty() || !plots.notes.is_empty() {
        let _ = writeln!(md, "## Notes\n");
        for note in r.notes.iter().chain(&plots.notes) {
            let _ = writeln!(md, "- {note}");
        }
        let _ = writeln!(md);
    }
    md
}

fn machine(md: &mut String, r: &Results) {
    let m = &r.machine;
    let _ = writeln!(md, "## Machine\n");
    let _ = writeln!(md, "| | |\n| --- | --- |");
    let _ = writeln!(md, "| CPU | {} |", m.cpu);
    let _ = writeln!(md, "| cores | {} |", m.cores);
    let _ = writeln!(md, "| memory | {:.1} GiB |", m.memory_gib);
    let _ = writeln!(md, "| kernel | {} |", m.kernel);
    let _ = writeln!(md, "| host | {} |", m.host);
    let _ = writeln!(md, "| sched_autogroup_enabled | {} |", m.autogroup);
    let _ = writeln!(
        md,
        "| load average (1, 5, 15 min) | at start {}; at end {} (the end still counts the bench's own busy processes) |\n",
        r.load.0, r.load.1
    );
}

fn versions(md: &mut String, r: &Results) {
    let _ = writeln!(md, "## Versions\n");
    let _ = writeln!(md, "| what | version |\n| --- | --- |");
    for (what, version) in &r.versions {
        let _ = writeln!(md, "| {what} | {} |", cell(version));
    }
    let _ = writeln!(md);
}

fn target_table(md: &mut String, r: &Results) {
    let judgements = targets::judge(r);
    let _ = writeln!(md, "## Targets\n");
    let _ = writeln!(md, "| target | measured | |\n| --- | --- | --- |");
    for j in &judgements {
        let verdict = match &j.outcome {
            Outcome::Met => "met".to_string(),
            Outcome::Missed => "**missed**".to_string(),
            Outcome::Unjudged(why) => format!("not judged: {why}"),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {verdict} |",
            j.target.text(),
            cell(&j.measured)
        );
    }
    let _ = writeln!(md);
    let bounds = bounds::explain(r, &judgements);
    if !bounds.is_empty() {
        let _ = writeln!(md, "### What bounds the missed targets\n");
        for (target, why) in bounds {
            let _ = writeln!(md, "- **{}.** {why}", target.text());
        }
        let _ = writeln!(md);
    }
}

fn latency_table(md: &mut String, phase: &Phase) {
    let title = if phase.busy > 0 {
        format!(
            "{}, oversubscribed: {} busy processes",
            phase.route.label(),
            phase.busy
        )
    } else {
        phase.route.label().to_string()
    };
    let _ = writeln!(
        md,
        "### {title}\n\nLoad average {} → {}{}.\n",
        phase.load.0,
        phase.load.1,
        if phase.capped {
            "; the phase hit its time cap, so counts fall short of the plan"
        } else {
            ""
        }
    );
    let _ = writeln!(
        md,
        "| client | count | p50 ms | p99 ms | max ms | ÷ warm | not ALLOWED | > {:.1} s |",
        BUDGET.as_secs_f64()
    );
    let _ = writeln!(
        md,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let warm = phase.row(Client::Warm).map(|w| w.summary.p50_ms);
    for row in &phase.rows {
        let s = &row.summary;
        let vs_warm = match warm {
            Some(w) if w > 0.0 => format!("{:.2}×", s.p50_ms / w),
            _ => "—".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {:.3} | {:.3} | {:.3} | {vs_warm} | {} | {} |",
            row.client.label(),
            s.count,
            s.p50_ms,
            s.p99_ms,
            s.max_ms,
            row.failed,
            row.over_budget
        );
    }
    for (client, why) in &phase.skipped {
        let _ = writeln!(
            md,
            "| {} | skipped: {} | | | | | | |",
            client.label(),
            cell(why)
        );
    }
    let _ = writeln!(md);
}

/// The agent guard's cases beside their yardstick, with the processes each starts.
fn guard_table(md: &mut String, r: &Results) {
    let Some(phase) = r.phase(crate::clients::Route::Unix, false) else {
        return;
    };
    let Some(base) = phase.row(Client::HookTrue).map(|b| b.summary.p50_ms) else {
        return;
    };
    let _ = writeln!(
        md,
        "## Agent guard
"
    );
    let _ = writeln!(
        md,
        "Each sample is `sh -c '<command>'` with the PreToolUse JSON on stdin, as Claude Code \
         runs a hook; the guard's command is the one `row-fence install claude-hook` wrote, in a \
         row-bound worktree of a session bound to it. From the Unix-socket phase above.\n"
    );
    let _ = writeln!(
        md,
        "| case | processes per sample | p50 ms | ÷ `sh -c true` |\n| --- | --- | ---: | ---: |"
    );
    for client in [
        Client::HookTrue,
        Client::HookExecTrue,
        Client::GuardHarmless,
        Client::GuardPush,
    ] {
        if let Some(row) = phase.row(client) {
            let ratio = if base > 0.0 {
                format!("{:.2}×", row.summary.p50_ms / base)
            } else {
                "—".into()
            };
            let _ = writeln!(
                md,
                "| {} | {} | {:.3} | {ratio} |",
                client.label(),
                client.processes(),
                row.summary.p50_ms
            );
        }
    }
    let _ = writeln!(md);
}

/// Every harness's hook beside the one-program floor `sh -c /bin/true`, measured the same
/// way in the same phase.
fn agent_table(md: &mut String, r: &Results) {
    use crate::agent_hooks::{Call, Harness, LARGE_BYTES};
    let Some(phase) = r.agent_phase() else {
        return;
    };
    let Some(floor) = phase.row(Client::HookExecTrue).map(|b| b.summary.p50_ms) else {
        return;
    };
    let _ = writeln!(
        md,
        "## Agent hooks
"
    );
    let _ = writeln!(
        md,
        "Each harness's hook as `row-fence install agent-hook --agent NAME` wrote it, run the way \
         that harness runs a hook (`sh -c '<command>'`, its input on stdin as the harness sends it: \
         Claude Code 2.x `PreToolUse`, Codex CLI 0.169 `PreToolUse` with `tool_cwd`, Gemini CLI \
         0.26 `BeforeTool`, Cursor 1.7 `beforeShellExecution`), interleaved with `sh -c /bin/true` \
         ({floor:.3} ms p50), the floor of any hook that runs one program. Unbound: `git status \
         --short` where no lane is bound (no ask). Row-bound ALLOWED: the same in the worktree of \
         a lane that holds its row (the standing ask). 100 KB: a {} KB harmless command there. \
         Quarantined: the same `git status --short` in the worktree of a lane whose row was taken \
         over (the standing ask REFUSED; no shell runs in quarantine, so the call is denied \
         without reading any git configuration).\n",
        LARGE_BYTES / 1024
    );
    let _ = writeln!(
        md,
        "| harness | unbound p50 ms | ÷ floor | row-bound ALLOWED p50 ms | ÷ floor | 100 KB command p50 ms (max) | quarantined p50 ms (max) |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let cell = |h, c| phase.row(Client::Agent(h, c)).map(|row| row.summary);
    for harness in Harness::ALL {
        let (Some(unbound), Some(allowed), Some(large)) = (
            cell(harness, Call::Unbound),
            cell(harness, Call::Allowed),
            cell(harness, Call::Large),
        ) else {
            continue;
        };
        let quarantined = cell(harness, Call::Quarantined)
            .map_or("not measured".to_string(), |q| {
                format!("{:.3} ({:.3})", q.p50_ms, q.max_ms)
            });
        let _ = writeln!(
            md,
            "| {} | {:.3} | {:.2}× | {:.3} | {:.2}× | {:.3} ({:.3}) | {quarantined} |",
            harness.name(),
            unbound.p50_ms,
            unbound.p50_ms / floor,
            allowed.p50_ms,
            allowed.p50_ms / floor,
            large.p50_ms,
            large.max_ms
        );
    }
    let _ = writeln!(md);
}

fn daemon_table(md: &mut String, r: &Results) {
    let _ = writeln!(md, "## The daemon\n");
    let _ = writeln!(md, "| figure | value |\n| --- | --- |");
    if let Some(t) = &r.single {
        let _ = writeln!(
            md,
            "| one in-process client asking back to back (no process spawn): round trip | p50 {:.3} ms, p99 {:.3} ms ({} asks, {:.0} asks/s) |",
            t.latency.p50_ms, t.latency.p99_ms, t.allowed, t.per_second
        );
        if t.allowed > 0 {
            let per = |s: f64| s * 1e6 / t.allowed as f64;
            let _ = writeln!(
                md,
                "| CPU per ask, one client | daemon {:.1} µs, redis-server {:.1} µs, client {:.1} µs |",
                per(t.cpu_s.0),
                per(t.cpu_s.1),
                per(t.cpu_s.2)
            );
        }
    }
    if let Some(t) = &r.throughput {
        let _ = writeln!(
            md,
            "| asks/s, {} concurrent in-process clients, {:.1} s | **{:.0}** ({} ALLOWED, {} failed) |",
            t.clients, t.seconds, t.per_second, t.allowed, t.failed
        );
        let _ = writeln!(
            md,
            "| one ask's round trip meanwhile (connect, request, answer) | p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms |",
            t.latency.p50_ms, t.latency.p99_ms, t.latency.max_ms
        );
        let core_s = t.seconds * r.machine.cores as f64;
        let _ = writeln!(
            md,
            "| CPU used meanwhile (of {core_s:.1} core-seconds) | daemon {:.2} s, redis-server {:.2} s, the clients {:.2} s |",
            t.cpu_s.0, t.cpu_s.1, t.cpu_s.2
        );
        if t.allowed > 0 {
            let per = |s: f64| s * 1e6 / t.allowed as f64;
            let _ = writeln!(
                md,
                "| CPU per ask | daemon {:.1} µs, redis-server {:.1} µs, client {:.1} µs |",
                per(t.cpu_s.0),
                per(t.cpu_s.1),
                per(t.cpu_s.2)
            );
        }
    }
    if let Some(c) = &r.connections {
        let _ = writeln!(
            md,
            "| peak RSS with {} connections open at once, each with a request in flight | **{:.1} MB** (from {:.1} MB before; {} answered ALLOWED) |",
            c.opened,
            kib_to_mb(c.peak_kib),
            kib_to_mb(c.rss_before_kib),
            c.allowed
        );
    }
    if let Some(kib) = r.idle_rss_kib {
        let _ = writeln!(
            md,
            "| RSS idle, after the Unix-socket phase | **{:.1} MB** |",
            kib_to_mb(kib)
        );
    }
    if let Some(kib) = r.idle_after_load_kib {
        let _ = writeln!(
            md,
            "| RSS idle, after all the load | {:.1} MB |",
            kib_to_mb(kib)
        );
    }
    for (client, what) in [
        (
            Client::Warm,
            "asker (`row-fence-ask`, one warm ask) max RSS",
        ),
        (
            Client::ColdRust,
            "cold `row-fence check` max RSS, for comparison",
        ),
        (Client::True, "`/bin/true` max RSS, for comparison"),
    ] {
        if let Some(kib) = r.peak_rss(client) {
            let bold = if client == Client::Warm { "**" } else { "" };
            let _ = writeln!(md, "| {what} | {bold}{:.1} MB{bold} |", kib_to_mb(kib));
        }
    }
    let _ = writeln!(md);
}

fn records_table(md: &mut String, r: &Results) {
    let Some(f) = &r.records else {
        return;
    };
    let _ = writeln!(md, "## Fenced writes\n");
    let _ = writeln!(
        md,
        "One single-record change through `fencing::write` on boards of growing size, counted \
         by the server (`INFO stats` net bytes, the counting itself subtracted):\n"
    );
    let _ = writeln!(
        md,
        "| layout | records on the board | bytes sent to Redis | bytes received |\n| --- | ---: | ---: | ---: |"
    );
    for b in &f.bytes {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            b.layout,
            thousands(b.board_records as u64),
            thousands(b.sent),
            thousands(b.received)
        );
    }
    let document = f
        .bytes
        .iter()
        .find(|b| b.layout == crate::records::DOCUMENT);
    let records = document.and_then(|d| {
        f.bytes
            .iter()
            .find(|b| b.layout == crate::records::RECORDS && b.board_records == d.board_records)
    });
    if let (Some(records), Some(document)) = (records, document) {
        let _ = writeln!(
            md,
            "\nAt {} records the document layout sends {:.0}× the bytes of the records layout for the same change.",
            thousands(document.board_records as u64),
            document.sent as f64 / records.sent.max(1) as f64
        );
    }
    let _ = writeln!(
        md,
        "\n| store | writers | fenced batches/s | batches | conflict retries | s |\n| --- | ---: | ---: | ---: | ---: | ---: |"
    );
    for rate in &f.rates {
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {} | {} | {:.1} |",
            rate.store,
            rate.writers,
            rate.per_second(),
            rate.batches,
            rate.retries,
            rate.seconds
        );
    }
    let _ = writeln!(md);
}

fn case_list(md: &mut String) {
    let _ = writeln!(md, "## Cases\n");
    for (i, case) in Case::ALL.iter().enumerate() {
        let status = match case.status() {
            Status::Measured => String::new(),
            Status::Alone { by } => format!(" — *measured alone: `{by}`*"),
            Status::Planned { by } => format!(" — *not measured yet: {by}*"),
        };
        let _ = writeln!(md, "{}. {}{status}", i + 1, case.title());
    }
    let _ = writeln!(md);
}

fn method(md: &mut String, r: &Results) {
    let _ = writeln!(md, "## How it was measured\n");
    let lines = [
        "Everything is real and private to the run: a `redis-server` in a temp dir on its own Unix socket and loopback ports (never a shared Redis), the binaries under test, one `row-fence-resident` per route on its own home. All of it is stopped at the end, also on Ctrl-C.".to_string(),
        "Every sample spawns a new process, as a hook does, with a cleared environment; stdout and stderr go to /dev/null. Each client answered ALLOWED once, output checked, before it was timed; timed samples count as `not ALLOWED` when they exit non-zero. The bench's watchdog (which kills a sample after 30 s) polls once a second, so the measuring process adds no wake-up to any sample.".to_string(),
        "warm: `row-fence-ask --descriptor D --action 'git push origin'` against the daemon, which keeps one connection to Redis. cold Rust: `row-fence --store URL check` with the same descriptor: the same gate, connecting in every process. redis-cli and Python replay the daemon's own `EVALSHA` of the ask script, captured with `MONITOR` during one warm ask: same script, keys and arguments, so the same store work, connecting per sample.".to_string(),
        "TLS: a CA and a server certificate for 127.0.0.1 made with `openssl` for this run; redis-server serves them on `--tls-port`. Every client verifies the server: the trust bundle is the system's CA file plus the bench's CA (`SSL_CERT_FILE` for the daemon, `row-fence check` and Python, `--cacert` for redis-cli), so the cold clients load a full trust store per connect as they would against a public certificate. Nothing uses `#insecure`.".to_string(),
        format!("Distance: the bench's own loopback TCP proxy forwards each chunk {} ms after reading it, each way (a {} ms round trip). It cannot delay the TCP handshake, so each new connection pays one round trip less than over a real link: the cold clients are flattered by {} ms per connect, the warm ask (one kept connection) is not.", DELAY.as_millis(), 2 * DELAY.as_millis(), 2 * DELAY.as_millis()),
        format!("Oversubscription: {} busy processes per core (the bench's own binary spinning at normal priority), started before the phase and SIGKILLed after it; each also stops by itself and dies with the bench. The asker runs with its default 3 s deadline, so a warm ask that cannot be answered in time exits COULD NOT READ and counts as `not ALLOWED`; `> {:.1} s` counts samples slower than the seed's hook budget.", r.plan.busy_per_core, BUDGET.as_secs_f64()),
        "Max RSS of a client process is `ru_maxrss` of one run, spawned from the tiny `row-fence-bench-maxrss` launcher (a child's `ru_maxrss` also counts the process it was spawned from, so a child of the bench itself would report the bench's size); the largest of a few runs.".to_string(),
        "Throughput: in-process clients (threads of the bench) speak the wire protocol directly, one connection per ask as `row-fence-ask` does, back to back. On a small machine they share the cores with the daemon and Redis; the CPU row says how the time was split. Peak RSS with many connections is the daemon's `VmHWM`, reset just before the case (`/proc/PID/clear_refs`).".to_string(),
        "The store is durable, as the store requires of a production server: redis-server runs with AOF and `appendfsync always` (and `noeviction`), so no URL carries `?durability=volatile` and every write the product makes, the asks log's included, waits for its fsync.".to_string(),
        "CPU per ask: one in-process client asks back to back; the daemon's and redis-server's utime + stime (`/proc/PID/stat`) over the run, divided by the ALLOWED asks counted. The profile: `perf record -g` on the daemon's pid during the same kind of run, `perf report --no-children --sort dso,sym`, grouped by symbol name.".to_string(),
        "Over the link: `row-fence-bench-echo --tcp` does one round trip with the bench's TCP echo server behind its own delay proxy (same 5 ms each way), a new process per sample like the warm ask: the physical bound the warm ask over TLS + 5 ms is judged against, with the local warm ask added.".to_string(),
        "etcd: a single-member `etcd` on two free loopback ports with its data in the run's temp dir; each sample is `etcdctl get` of one row-lease-shaped key (v3 API, plain HTTP on loopback), connecting per process.".to_string(),
        "Pictures: SVGs drawn with `plotters` from this run's samples, beside the report. Each latency picture shows every sample of each client of the phase (points spread across the client's strip) on a log scale, its p50 as a black bar.".to_string(),
        "Percentiles are nearest-rank over all samples of a client in a phase (with fewer than 100 samples p99 is the maximum). MB = 10^6 bytes.".to_string(),
    ];
    for line in lines {
        let _ = writeln!(md, "- {line}");
    }
    let _ = writeln!(md);
}

/// Keeps a table cell on one line and free of `|`.
fn cell(text: &str) -> String {
    text.replace('|', "/").replace('\n', " ")
}

/// The file store's ask on boards of growing size.
fn file_store_table(md: &mut String, r: &Results) {
    let Some(f) = &r.file_store else {
        return;
    };
    let _ = writeln!(md, "## The file store as boards grow\n");
    let _ = writeln!(
        md,
        "One daemon on a `file:DIR` store holding one board per size (other lanes' row leases, \
         the lane's own granted by `row-fence acquire`); an in-process client asks back to back \
         over the Unix socket (connect, request, answer: no process start), the boards \
         interleaved ask by ask.\n"
    );
    let _ = writeln!(
        md,
        "| rows on the board | asks | p50 ms | p99 ms | max ms | ÷ smallest | not ALLOWED |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let smallest = f.boards.first().map_or(0.0, |b| b.latency.p50_ms);
    for b in &f.boards {
        let ratio = if smallest > 0.0 {
            format!("{:.2}×", b.latency.p50_ms / smallest)
        } else {
            "—".into()
        };
        let _ = writeln!(
            md,
            "| {} | {} | {:.3} | {:.3} | {:.3} | {ratio} | {} |",
            thousands(b.rows as u64),
            b.latency.count,
            b.latency.p50_ms,
            b.latency.p99_ms,
            b.latency.max_ms,
            b.failed
        );
    }
    let _ = writeln!(md);
}

/// The ask with and without the read barrier.
fn barrier_table(md: &mut String, r: &Results) {
    let Some(b) = &r.barrier else {
        return;
    };
    let _ = writeln!(
        md,
        "## The read barrier of a replicated Redis
"
    );
    let _ = writeln!(
        md,
        "The warm ask on a standalone durable Redis (a pure read) and on a primary with one \
         replica (the read, then a `PUBLISH` the replica must acknowledge, `WAIT`, on the \
         daemon's second connection). One in-process client interleaved between the two \
         daemons ask by ask, then {} clients at once on each (barrier rounds are shared by the \
         asks waiting when one starts).\n",
        crate::barrier::CLIENTS
    );
    let _ = writeln!(
        md,
        "| store | asks | p50 ms | p99 ms | not ALLOWED | {} clients: asks/s | p50 ms | p99 ms |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        crate::barrier::CLIENTS
    );
    for (name, side) in [
        ("standalone (pure read)", &b.pure_read),
        ("primary + 1 replica (barrier)", &b.barrier),
    ] {
        let _ = writeln!(
            md,
            "| {name} | {} | {:.3} | {:.3} | {} | {} | {:.3} | {:.3} |",
            side.latency.count,
            side.latency.p50_ms,
            side.latency.p99_ms,
            side.failed,
            thousands(side.concurrent.per_second.round() as u64),
            side.concurrent.latency.p50_ms,
            side.concurrent.latency.p99_ms
        );
    }
    let _ = writeln!(
        md,
        "\nThe barrier adds {:.3} ms to one ask's p50.\n",
        b.added_p50_ms()
    );
}

/// Where the daemon's CPU goes, from `perf`.
fn profile_section(md: &mut String, r: &Results) {
    let _ = writeln!(md, "## Where the daemon's CPU goes\n");
    let Some(p) = &r.profile else {
        let _ = writeln!(md, "No profile in this run (the notes say why).\n");
        return;
    };
    let _ = writeln!(
        md,
        "`perf record -g -F 2000` on the daemon's pid for {} while one in-process client asks \
         back to back (from before perf attached until it stopped: {} ALLOWED asks in {:.1} s, \
         {:.0} asks/s); `perf report --no-children --sort dso,sym` (self time), {}. Daemon: {}. \
         Shares are of the daemon's own samples; multiply by the daemon's CPU per ask (the \
         targets) for µs per ask.\n",
        format_args!("{:.1} s", r.plan.profile_for.as_secs_f64()),
        thousands(p.asks),
        p.seconds,
        p.asks as f64 / p.seconds.max(f64::EPSILON),
        p.samples,
        p.binary
    );
    let _ = writeln!(md, "| kind of work | share |\n| --- | ---: |");
    for (group, share) in &p.groups {
        let _ = writeln!(md, "| {} | {share:.1} % |", group.label());
    }
    let _ = writeln!(
        md,
        "\n| top symbols (self) | object | kind | share |\n| --- | --- | --- | ---: |"
    );
    for (share, dso, symbol, group) in &p.top {
        let symbol: String = symbol.chars().take(110).collect();
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {share:.1} % |",
            cell(&symbol).replace('`', "'"),
            cell(dso),
            group.label()
        );
    }
    let _ = writeln!(md);
}
