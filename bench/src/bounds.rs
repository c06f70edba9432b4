//! For each missed target, what bounds it, in this run's own figures: the report says
//! not only that a target was missed but which floor or which share of the machine
//! stands in the way. The fixes these point to were measured once and are written up in
//! docs/performance.md.

use crate::clients::{Client, Route};
use crate::run::{DELAY, Results};
use crate::targets::{Judgement, Outcome, Target, WARM_VS_TRUE_MAX};

/// (target, what bounds it) for every missed target that has an explanation.
pub fn explain(results: &Results, judgements: &[Judgement]) -> Vec<(Target, String)> {
    judgements
        .iter()
        .filter(|j| j.outcome == Outcome::Missed)
        .filter_map(|j| Some((j.target, why(results, j.target)?)))
        .collect()
}

fn why(r: &Results, target: Target) -> Option<String> {
    match target {
        Target::WarmVsTrue => warm_vs_true(r),
        Target::WarmVsColdDistant | Target::DistantBound => distance(r),
        Target::LoadedP99 | Target::LoadedMisses => loaded(r),
        Target::Throughput => throughput(r),
        Target::DaemonCpu | Target::RedisCpu => cpu_per_ask(r),
        Target::GuardHarmless | Target::GuardPush => guard(r),
        Target::BytesPerChange => bytes(r),
        Target::FileStoreFlat => file_store(r),
        Target::WarmVsPython
        | Target::IdleRss
        | Target::ConnectionsRss
        | Target::AskerRss
        | Target::AgentUnbound(_)
        | Target::AgentAllowed(_) => None,
    }
}

fn p50(r: &Results, route: Route, loaded: bool, client: Client) -> Option<f64> {
    Some(r.phase(route, loaded)?.row(client)?.summary.p50_ms)
}

fn warm_vs_true(r: &Results) -> Option<String> {
    let t = p50(r, Route::Unix, false, Client::True)?;
    let warm = p50(r, Route::Unix, false, Client::Warm)?;
    let start = p50(r, Route::Unix, false, Client::AskerStart)?;
    let echo = p50(r, Route::Unix, false, Client::Echo)?;
    let round_trip = r.single.as_ref().map_or(0.0, |s| s.latency.p50_ms);
    Some(format!(
        "The budget is {WARM_VS_TRUE_MAX} × {t:.3} = {:.3} ms. Starting the asker alone (`row-fence-ask --version`) \
         takes {start:.3} ms ({:.2}× /bin/true): a statically linked Rust binary still pays \
         std's start and its own page faults before `main` (the std-only echo floor, one round \
         trip included, takes {echo:.3} ms). The ask itself adds {:.3} ms, of which the daemon's \
         round trip (one in-process client, no spawn) is {round_trip:.3} ms; the rest is the \
         asker's own work (finding and parsing the descriptor, the socket checks, hashing \
         `registry/` for the code stamp, the non-blocking connect, the lines it prints).",
        WARM_VS_TRUE_MAX * t,
        start / t,
        warm - start
    ))
}

fn guard(r: &Results) -> Option<String> {
    let sh = p50(r, Route::Unix, false, Client::HookTrue)?;
    let exec = p50(r, Route::Unix, false, Client::HookExecTrue)?;
    let harmless = p50(r, Route::Unix, false, Client::GuardHarmless)?;
    let push = p50(r, Route::Unix, false, Client::GuardPush)?;
    let t = p50(r, Route::Unix, false, Client::True)?;
    Some(format!(
        "`sh -c true` runs no program at all (`true` is a builtin): {sh:.3} ms. Any hook that runs \
         one program costs at least `sh -c /bin/true`, {exec:.3} ms ({:.2}× `sh -c true`), since \
         a new process image costs {t:.3} ms on this machine. The guard adds {:.3} ms to that \
         floor for a harmless command (reading the JSON, parsing, binding, the standing ask every \
         call of a row-bound session makes) and {:.3} ms for an \
         ALLOWED push (one ask of the warm daemon in process): against the one-program floor \
         it is {:.2}× and {:.2}×.",
        exec / sh,
        harmless - exec,
        push - exec,
        harmless / exec,
        push / exec
    ))
}

fn distance(r: &Results) -> Option<String> {
    let rtt = 2.0 * DELAY.as_secs_f64() * 1e3;
    let warm = p50(r, Route::TlsDelayed, false, Client::Warm)?;
    let local_warm = p50(r, Route::Unix, false, Client::Warm)?;
    let mut text = format!(
        "Distance: the warm ask keeps its connection but still pays one {rtt:.0} ms round trip \
         per ask ({warm:.1} ms over TLS + 5 ms against {local_warm:.3} ms on the Unix socket), \
         so every ratio against it shrinks towards (the other client's start + its round \
         trips) ÷ (one round trip)."
    );
    if let Some(link) = p50(r, Route::TlsDelayed, false, Client::EchoLink) {
        text.push_str(&format!(
            " The echo client over the same link (a process start, a connect and one round \
             trip): {link:.2} ms; the warm ask spends {:.2} ms beyond it and the local ask, \
             which is TLS's per-record work and the daemon's and Redis's on the far side.",
            warm - link - local_warm
        ));
    }
    if let (Some(py), Some(py_near), Some(py_local)) = (
        p50(r, Route::TlsDelayed, false, Client::Python),
        p50(r, Route::Tls, false, Client::Python),
        p50(r, Route::Unix, false, Client::Python),
    ) {
        text.push_str(&format!(
            " Python: {py_local:.0} ms to start, import and ask on the Unix socket, {py_near:.0} \
             ms over TLS on loopback, {py:.0} ms over TLS + 5 ms (≈ {:.1} round trips for its \
             connect, handshake and commands); ÷ {warm:.1} ms is {:.1}×: no warm ask that \
             crosses a {rtt:.0} ms link once can be 30× faster than a client whose start is \
             {py_local:.0} ms (why that target was dropped).",
            (py - py_near) / rtt,
            py / warm
        ));
    }
    if let (Some(cold), Some(cold_near)) = (
        p50(r, Route::TlsDelayed, false, Client::ColdRust),
        p50(r, Route::Tls, false, Client::ColdRust),
    ) {
        text.push_str(&format!(
            " Cold Rust: {cold:.1} ms, ≈ {:.1} round trips more than over TLS on loopback \
             (TLS handshake, connection setup, then the script).",
            (cold - cold_near) / rtt
        ));
    }
    Some(text)
}

fn loaded(r: &Results) -> Option<String> {
    let phase = r.phase(Route::Unix, true)?;
    let row = |c: Client| phase.row(c).map(|row| row.summary);
    let (t, echo, warm) = (row(Client::True)?, row(Client::Echo)?, row(Client::Warm)?);
    Some(format!(
        "The scheduler: with {} busy processes at normal priority, every hand-off between \
         processes waits its turn. /bin/true alone, one process start: p50 {:.1} ms, p99 {:.1} \
         ms. The echo floor (a std-only client doing one round trip with a server thread of \
         the same priority): p50 {:.1} ms, p99 {:.1} ms. The warm ask (start, helper thread, \
         daemon, Redis, back): p50 {:.1} ms, p99 {:.1} ms, {:.2}× its floor's p99. The busy \
         processes share the bench's session, so autogroup (when on) does not shield the \
         asker, the daemon or Redis from them.",
        phase.busy,
        t.p50_ms,
        t.p99_ms,
        echo.p50_ms,
        echo.p99_ms,
        warm.p50_ms,
        warm.p99_ms,
        warm.p99_ms / echo.p99_ms.max(f64::MIN_POSITIVE)
    ))
}

fn throughput(r: &Results) -> Option<String> {
    let t = r.throughput.as_ref()?;
    if t.allowed == 0 {
        return None;
    }
    let per = |s: f64| s * 1e6 / t.allowed as f64;
    let (d, redis, c) = (per(t.cpu_s.0), per(t.cpu_s.1), per(t.cpu_s.2));
    let cores = r.machine.cores as f64;
    let used = t.cpu_s.0 + t.cpu_s.1 + t.cpu_s.2;
    Some(format!(
        "CPU: each ask cost the daemon {d:.1} µs, redis-server {redis:.1} µs and its client \
         {c:.1} µs, all on the same {cores:.0} cores: at 100 % that is at most {:.0} asks/s. \
         The three used {used:.1} of {:.1} core-seconds; the rest went to waiting and to \
         other processes on the machine (load average {} → {}). The profile below says \
         where the daemon's share goes.",
        cores * 1e6 / (d + redis + c),
        cores * t.seconds,
        r.load.0,
        r.load.1
    ))
}

fn bytes(r: &Results) -> Option<String> {
    let f = r.records.as_ref()?;
    let sized: Vec<_> = f
        .bytes
        .iter()
        .filter(|b| b.layout == crate::records::RECORDS)
        .collect();
    let (first, last) = (sized.first()?, sized.last()?);
    let per_record = (last.received as f64 - first.received as f64)
        / (last.board_records as f64 - first.board_records as f64).max(1.0);
    Some(format!(
        "What one single-record change receives grows with the board: {} B at {} records, {} B \
         at {} records, ≈ {per_record:.0} B per record on the board. The change reads the \
         sections it names whole (`fencing::write` → `sections`); keyed reads (`record(s)` by \
         key) would receive the touched records only.",
        first.received, first.board_records, last.received, last.board_records
    ))
}

fn file_store(r: &Results) -> Option<String> {
    let f = r.file_store.as_ref()?;
    let (small, large) = (f.boards.first()?, f.boards.last()?);
    let per_row = (large.latency.p50_ms - small.latency.p50_ms) * 1e3
        / (large.rows as f64 - small.rows as f64).max(1.0);
    Some(format!(
        "The file store's ask grows with the board: p50 {:.3} ms at {} rows, {:.3} ms at {} \
         rows, ≈ {per_row:.2} µs per row: each ask reads and parses the whole board document. \
         Keeping the parsed document while the file's inode, size and mtime are unchanged \
         would make it flat.",
        small.latency.p50_ms, small.rows, large.latency.p50_ms, large.rows
    ))
}

fn cpu_per_ask(r: &Results) -> Option<String> {
    let one = r.single.as_ref().filter(|s| s.allowed > 0)?;
    let per = |t: &crate::throughput::Throughput, s: f64| s * 1e6 / t.allowed.max(1) as f64;
    let mut text = format!(
        "With one client asking back to back, each ask cost the daemon {:.1} µs and \
         redis-server {:.1} µs of CPU ({} asks in {:.1} s).",
        per(one, one.cpu_s.0),
        per(one, one.cpu_s.1),
        one.allowed,
        one.seconds
    );
    if let Some(many) = r.throughput.as_ref().filter(|t| t.allowed > 0) {
        text.push_str(&format!(
            " With {} clients the same ask cost {:.1} µs and {:.1} µs: with one client every \
             ask finds both asleep, so each pays its wake-ups and context switches alone.",
            many.clients,
            per(many, many.cpu_s.0),
            per(many, many.cpu_s.1)
        ));
    }
    if let Some(profile) = &r.profile {
        let shares: Vec<String> = profile
            .groups
            .iter()
            .take(4)
            .map(|(g, share)| format!("{} {share:.0} %", g.label()))
            .collect();
        text.push_str(&format!(
            " The daemon's profile (below): {}.",
            shares.join(", ")
        ));
    }
    Some(text)
}
