//! The benchmark's targets (docs/performance.md), each judged against the figures
//! of one run.
//! Ratios compare two figures from the same phase, where the cases were interleaved
//! sample by sample. Each target is a [`Target`] variant (never its display text) and
//! each threshold is written once, as a constant below.

use crate::clients::{Client, Route};
use crate::rss::kib_to_mb;
use crate::run::{BUDGET, Results};

/// Warm ask p50 ÷ `/bin/true` p50, idle, Unix socket, on the durable store (first set
/// at ≤ 2.0×).
pub const WARM_VS_TRUE_MAX: f64 = 1.35;
/// Cold Rust ÷ warm at p50 over TLS + 5 ms.
pub const WARM_VS_COLD_DISTANT_MIN: f64 = 3.0;
/// Python cold client ÷ warm at p50 on the Unix socket.
pub const WARM_VS_PYTHON_MIN: f64 = 30.0;
/// Warm over TLS + 5 ms ÷ (one link round trip + the local warm ask) (the
/// physical bound that replaced "≥ 30× Python over TLS + 5 ms").
pub const DISTANT_BOUND_MAX: f64 = 1.15;
/// Warm p99 under 16 busy processes per core, in ms.
pub const LOADED_P99_MAX_MS: f64 = 250.0;
/// The daemon's CPU per ask with one client, in µs.
pub const DAEMON_CPU_MAX_US: f64 = 50.0;
/// redis-server's CPU per ask with one client, in µs.
pub const REDIS_CPU_MAX_US: f64 = 40.0;
/// Asks per second with 64 in-process clients on 2 cores (first set at 20,000).
pub const THROUGHPUT_MIN: f64 = 40_000.0;
/// Bytes received from Redis for one single-record fenced change, at every board size
/// ("≤ 4 KB"; KB = 1,000 bytes, as MB is 10^6 in this report).
pub const BYTES_RECEIVED_MAX: u64 = 4_000;
/// File store ask p50 on the largest board ÷ on the smallest.
pub const FILE_STORE_GROWTH_MAX: f64 = 1.5;
/// The daemon's RSS at rest, in MB.
pub const IDLE_RSS_MAX_MB: f64 = 20.0;
/// The daemon's peak RSS with 1,000 connections, in MB.
pub const CONNECTIONS_RSS_MAX_MB: f64 = 64.0;
/// The asker's max RSS, in MB.
pub const ASKER_RSS_MAX_MB: f64 = 4.0;
/// The agent guard on a harmless command ÷ `sh -c true` at p50.
pub const GUARD_HARMLESS_MAX: f64 = 1.5;
/// The agent guard on a fenced ALLOWED push ÷ `sh -c true` at p50.
pub const GUARD_PUSH_MAX: f64 = 2.5;

/// A harness's hook for an unbound call ÷ `sh -c /bin/true` at p50 (the same phase).
pub const AGENT_UNBOUND_MAX: f64 = 1.1;
/// A harness's hook for a row-bound ALLOWED call (with its ask) ÷ `sh -c /bin/true`.
pub const AGENT_ALLOWED_MAX: f64 = 1.5;

/// One target of the report's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// The fence costs little more than one extra process start, on the durable store.
    WarmVsTrue,
    /// Against a store 5 ms away over TLS, the warm ask beats connecting per process.
    WarmVsColdDistant,
    /// The warm ask against the kind of cold client it replaces.
    WarmVsPython,
    /// Over TLS + 5 ms the warm ask costs one link round trip plus a local ask.
    DistantBound,
    /// A warm ask under 16 busy processes per core.
    LoadedP99,
    /// No sample over the seed's 5.5 s hook budget, none refused.
    LoadedMisses,
    /// The daemon's CPU per ask, one in-process client.
    DaemonCpu,
    /// redis-server's CPU per ask, one in-process client.
    RedisCpu,
    /// Asks per second with 64 concurrent in-process clients.
    Throughput,
    /// Bytes received for one single-record fenced change, at every board size.
    BytesPerChange,
    /// The file store's ask stays flat as the board grows.
    FileStoreFlat,
    /// The daemon's memory at rest.
    IdleRss,
    /// The daemon's peak memory with 1,000 connections in flight.
    ConnectionsRss,
    /// The asker's peak memory for one ask.
    AskerRss,
    /// The agent guard on a command it lets through without asking.
    GuardHarmless,
    /// The agent guard on a push it asks about and the fence allows.
    GuardPush,
    /// A harness's hook where no lane is bound, against the one-program floor.
    AgentUnbound(crate::agent_hooks::Harness),
    /// A harness's hook in a row-bound worktree, ALLOWED, against the same floor.
    AgentAllowed(crate::agent_hooks::Harness),
}

impl Target {
    /// The target as the report states it, with its threshold.
    pub fn text(self) -> String {
        match self {
            Target::WarmVsTrue => format!(
                "warm ask p50 ≤ {WARM_VS_TRUE_MAX}× `/bin/true` p50 (idle, Unix socket, Redis with `appendfsync always`)"
            ),
            Target::WarmVsColdDistant => format!(
                "warm ≥ {WARM_VS_COLD_DISTANT_MIN}× faster than cold Rust at p50, over TLS + 5 ms"
            ),
            Target::WarmVsPython => format!(
                "warm ≥ {WARM_VS_PYTHON_MIN}× faster than the Python cold client at p50 (Unix socket)"
            ),
            Target::DistantBound => format!(
                "warm ask over TLS + 5 ms p50 ≤ {DISTANT_BOUND_MAX} × (one link round trip, the echo client over the same link, + the local warm ask)"
            ),
            Target::LoadedP99 => format!(
                "oversubscribed (16 busy processes per core): warm p99 ≤ {LOADED_P99_MAX_MS} ms"
            ),
            Target::LoadedMisses => format!(
                "oversubscribed: zero misses of {:.1} s (floor, warm, cold Rust)",
                BUDGET.as_secs_f64()
            ),
            Target::DaemonCpu => {
                format!("daemon CPU per ask, one client ≤ {DAEMON_CPU_MAX_US} µs")
            }
            Target::RedisCpu => {
                format!("redis-server CPU per ask, one client ≤ {REDIS_CPU_MAX_US} µs")
            }
            Target::Throughput => format!(
                "≥ {} asks/s with 64 in-process clients on 2 cores, 0 failed",
                thousands(THROUGHPUT_MIN as u64)
            ),
            Target::BytesPerChange => format!(
                "bytes received for one single-record fenced change ≤ {} KB at every board size",
                BYTES_RECEIVED_MAX / 1000
            ),
            Target::FileStoreFlat => format!(
                "file store ask p50 on the largest board ≤ {FILE_STORE_GROWTH_MAX}× on the smallest"
            ),
            Target::IdleRss => format!("daemon RSS ≤ {IDLE_RSS_MAX_MB} MB idle"),
            Target::ConnectionsRss => {
                format!("daemon RSS ≤ {CONNECTIONS_RSS_MAX_MB} MB with 1,000 connections")
            }
            Target::AskerRss => format!("asker max RSS ≤ {ASKER_RSS_MAX_MB} MB"),
            Target::GuardHarmless => format!(
                "agent guard, harmless command: p50 ≤ {GUARD_HARMLESS_MAX}× `sh -c true` p50"
            ),
            Target::GuardPush => format!(
                "agent guard, fenced ALLOWED push: p50 ≤ {GUARD_PUSH_MAX}× `sh -c true` p50"
            ),
            Target::AgentUnbound(h) => format!(
                "agent hook {}, unbound call: p50 ≤ {AGENT_UNBOUND_MAX}× `sh -c /bin/true` p50",
                h.name()
            ),
            Target::AgentAllowed(h) => format!(
                "agent hook {}, row-bound ALLOWED call (with its ask): p50 ≤ {AGENT_ALLOWED_MAX}× `sh -c /bin/true` p50",
                h.name()
            ),
        }
    }
}

/// How a target fared.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The measured figure meets it.
    Met,
    /// The measured figure misses it.
    Missed,
    /// Not judged, with why (a smoke run, a skipped case).
    Unjudged(String),
}

impl Outcome {
    fn of(met: bool) -> Outcome {
        if met { Outcome::Met } else { Outcome::Missed }
    }
}

/// One target beside its measured figure.
#[derive(Clone, Debug)]
pub struct Judgement {
    /// Which target.
    pub target: Target,
    /// The measured figure, with what it was computed from.
    pub measured: String,
    /// Met, missed, or not judged.
    pub outcome: Outcome,
}

/// Judges every target against `results`, in the report's order. A smoke run's figures
/// are shown but not judged: a handful of samples says nothing about a p99.
pub fn judge(results: &Results) -> Vec<Judgement> {
    let mut out = vec![
        ratio(
            results,
            Target::WarmVsTrue,
            Route::Unix,
            (Client::Warm, Client::True),
            |r| r <= WARM_VS_TRUE_MAX,
        ),
        ratio(
            results,
            Target::WarmVsColdDistant,
            Route::TlsDelayed,
            (Client::ColdRust, Client::Warm),
            |r| r >= WARM_VS_COLD_DISTANT_MIN,
        ),
        ratio(
            results,
            Target::WarmVsPython,
            Route::Unix,
            (Client::Python, Client::Warm),
            |r| r >= WARM_VS_PYTHON_MIN,
        ),
        distant_bound(results),
        ratio(
            results,
            Target::GuardHarmless,
            Route::Unix,
            (Client::GuardHarmless, Client::HookTrue),
            |r| r <= GUARD_HARMLESS_MAX,
        ),
        ratio(
            results,
            Target::GuardPush,
            Route::Unix,
            (Client::GuardPush, Client::HookTrue),
            |r| r <= GUARD_PUSH_MAX,
        ),
    ];
    out.extend(agents(results));
    out.extend(oversubscribed(results));
    out.extend(cpu(results));
    out.extend(daemon(results));
    out.push(bytes_per_change(results));
    out.push(file_store(results));
    if results.plan.name == "smoke" {
        for j in &mut out {
            if !matches!(j.outcome, Outcome::Unjudged(_)) {
                j.outcome = Outcome::Unjudged("smoke run: too few samples to judge".into());
            }
        }
    }
    out
}

/// `a` p50 ÷ `b` p50 on `route`, unloaded, judged by `ok`.
fn ratio(
    results: &Results,
    target: Target,
    route: Route,
    (a, b): (Client, Client),
    ok: fn(f64) -> bool,
) -> Judgement {
    let rows = results
        .phase(route, false)
        .and_then(|p| Some((p.row(a)?, p.row(b)?)));
    match rows {
        Some((ra, rb)) if rb.summary.p50_ms > 0.0 && ra.summary.count > 0 => {
            let r = ra.summary.p50_ms / rb.summary.p50_ms;
            Judgement {
                target,
                measured: format!(
                    "{r:.2}× ({} {:.3} ms ÷ {} {:.3} ms)",
                    a.short(),
                    ra.summary.p50_ms,
                    b.short(),
                    rb.summary.p50_ms
                ),
                outcome: Outcome::of(ok(r)),
            }
        }
        _ => unjudged(target, "not measured (see the notes)"),
    }
}

/// Every harness's hook against `sh -c /bin/true`, both from the agent phase.
fn agents(results: &Results) -> Vec<Judgement> {
    use crate::agent_hooks::{Call, Harness};
    let mut out = Vec::new();
    for h in Harness::ALL {
        for (target, call, max) in [
            (Target::AgentUnbound(h), Call::Unbound, AGENT_UNBOUND_MAX),
            (Target::AgentAllowed(h), Call::Allowed, AGENT_ALLOWED_MAX),
        ] {
            let client = Client::Agent(h, call);
            let rows = results
                .agent_phase()
                .and_then(|p| Some((p.row(client)?, p.row(Client::HookExecTrue)?)));
            out.push(match rows {
                Some((a, floor)) if floor.summary.p50_ms > 0.0 && a.summary.count > 0 => {
                    let r = a.summary.p50_ms / floor.summary.p50_ms;
                    Judgement {
                        target,
                        measured: format!(
                            "{r:.2}× ({:.3} ms ÷ {:.3} ms)",
                            a.summary.p50_ms, floor.summary.p50_ms
                        ),
                        outcome: Outcome::of(r <= max),
                    }
                }
                _ => unjudged(target, "not measured (see the notes)"),
            });
        }
    }
    out
}

/// Warm over TLS + 5 ms against the echo client's round trip over the same delayed link
/// plus the local warm ask, all p50.
fn distant_bound(results: &Results) -> Judgement {
    let target = Target::DistantBound;
    let p50 = |route, client| {
        let row = results.phase(route, false)?.row(client)?;
        (row.summary.count > 0).then_some(row.summary.p50_ms)
    };
    let (Some(warm), Some(link), Some(local)) = (
        p50(Route::TlsDelayed, Client::Warm),
        p50(Route::TlsDelayed, Client::EchoLink),
        p50(Route::Unix, Client::Warm),
    ) else {
        return unjudged(target, "not measured (see the notes)");
    };
    let bound = link + local;
    let r = warm / bound;
    Judgement {
        target,
        measured: format!(
            "{r:.2}× (warm {warm:.2} ms ÷ (echo over the link {link:.2} ms + local warm {local:.3} ms = {bound:.2} ms))"
        ),
        outcome: Outcome::of(r <= DISTANT_BOUND_MAX),
    }
}

fn oversubscribed(results: &Results) -> Vec<Judgement> {
    let Some(phase) = results.phase(Route::Unix, true) else {
        return vec![
            unjudged(Target::LoadedP99, "not measured"),
            unjudged(Target::LoadedMisses, "not measured"),
        ];
    };
    let warm = phase.row(Client::Warm);
    let p99_judgement = match warm {
        Some(w) if w.summary.count > 0 => Judgement {
            target: Target::LoadedP99,
            measured: format!(
                "{:.1} ms (p50 {:.1} ms, {} samples, {} busy processes)",
                w.summary.p99_ms, w.summary.p50_ms, w.summary.count, phase.busy
            ),
            outcome: Outcome::of(w.summary.p99_ms <= LOADED_P99_MAX_MS),
        },
        _ => unjudged(Target::LoadedP99, "not measured"),
    };
    let (over, failed, total) = phase.rows.iter().fold((0, 0, 0), |(o, f, t), r| {
        (o + r.over_budget, f + r.failed, t + r.summary.count)
    });
    let warm_text = warm.map_or(String::new(), |w| {
        format!("; warm: {} over, {} not ALLOWED", w.over_budget, w.failed)
    });
    let misses_judgement = Judgement {
        target: Target::LoadedMisses,
        measured: format!(
            "{over} of {total} over {:.1} s, {failed} not ALLOWED{warm_text}",
            BUDGET.as_secs_f64()
        ),
        outcome: Outcome::of(over == 0 && failed == 0 && total > 0),
    };
    vec![p99_judgement, misses_judgement]
}

/// CPU per ask of the daemon and of redis-server, from `/proc/<pid>/stat` (utime +
/// stime) over the one-client case's counted asks.
fn cpu(results: &Results) -> Vec<Judgement> {
    let Some(single) = results.single.as_ref().filter(|s| s.allowed > 0) else {
        return vec![
            unjudged(Target::DaemonCpu, "not measured"),
            unjudged(Target::RedisCpu, "not measured"),
        ];
    };
    let per = |s: f64| s * 1e6 / single.allowed as f64;
    let judged = |target, cpu_s: f64, max_us: f64, who: &str| {
        let us = per(cpu_s);
        Judgement {
            target,
            measured: format!(
                "{us:.1} µs ({who} {:.2} s of CPU over {} ALLOWED asks, {} failed)",
                cpu_s,
                thousands(single.allowed),
                single.failed
            ),
            outcome: Outcome::of(us <= max_us && single.failed == 0),
        }
    };
    vec![
        judged(
            Target::DaemonCpu,
            single.cpu_s.0,
            DAEMON_CPU_MAX_US,
            "daemon",
        ),
        judged(
            Target::RedisCpu,
            single.cpu_s.1,
            REDIS_CPU_MAX_US,
            "redis-server",
        ),
    ]
}

fn daemon(results: &Results) -> Vec<Judgement> {
    let mut out = Vec::new();
    out.push(match &results.throughput {
        Some(t) => Judgement {
            target: Target::Throughput,
            measured: format!(
                "{} asks/s ({} clients, {} cores, {:.1} s, {} failed)",
                thousands(t.per_second.round() as u64),
                t.clients,
                results.machine.cores,
                t.seconds,
                t.failed
            ),
            outcome: Outcome::of(t.per_second >= THROUGHPUT_MIN && t.failed == 0),
        },
        None => unjudged(Target::Throughput, "not measured"),
    });
    out.push(memory(
        Target::IdleRss,
        results.idle_rss_kib,
        IDLE_RSS_MAX_MB,
        "idle after the Unix-socket phase",
    ));
    out.push(match &results.connections {
        Some(c) => {
            let mut j = memory(
                Target::ConnectionsRss,
                Some(c.peak_kib),
                CONNECTIONS_RSS_MAX_MB,
                &format!(
                    "peak with {} open, {} answered ALLOWED",
                    c.opened, c.allowed
                ),
            );
            if c.allowed != c.opened {
                j.outcome = Outcome::Missed;
            }
            j
        }
        None => unjudged(Target::ConnectionsRss, "not measured"),
    });
    out.push(memory(
        Target::AskerRss,
        results.peak_rss(Client::Warm),
        ASKER_RSS_MAX_MB,
        &format!(
            "largest of {} warm asks (`ru_maxrss`)",
            results.plan.rss_runs
        ),
    ));
    out
}

/// Bytes received on the records layout at each board size measured.
fn bytes_per_change(results: &Results) -> Judgement {
    let target = Target::BytesPerChange;
    let Some(figures) = &results.records else {
        return unjudged(target, "not measured");
    };
    let sized: Vec<_> = figures
        .bytes
        .iter()
        .filter(|b| b.layout == crate::records::RECORDS)
        .collect();
    if sized.is_empty() {
        return unjudged(target, "not measured");
    }
    let measured = sized
        .iter()
        .map(|b| {
            format!(
                "{} records: {} B",
                thousands(b.board_records as u64),
                thousands(b.received)
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Judgement {
        target,
        measured,
        outcome: Outcome::of(sized.iter().all(|b| b.received <= BYTES_RECEIVED_MAX)),
    }
}

/// The file store's ask p50 on its largest board over its smallest.
fn file_store(results: &Results) -> Judgement {
    let target = Target::FileStoreFlat;
    let Some(boards) = results.file_store.as_ref().map(|f| &f.boards) else {
        return unjudged(target, "not measured (see the notes)");
    };
    let (Some(small), Some(large)) = (boards.first(), boards.last()) else {
        return unjudged(target, "not measured");
    };
    if small.latency.p50_ms <= 0.0 || boards.iter().any(|b| b.failed > 0) {
        return Judgement {
            target,
            measured: format!(
                "{} asks failed",
                boards.iter().map(|b| b.failed).sum::<u64>()
            ),
            outcome: Outcome::Missed,
        };
    }
    let r = large.latency.p50_ms / small.latency.p50_ms;
    let each = boards
        .iter()
        .map(|b| {
            format!(
                "{} rows {:.3} ms",
                thousands(b.rows as u64),
                b.latency.p50_ms
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    Judgement {
        target,
        measured: format!("{r:.2}× ({each})"),
        outcome: Outcome::of(r <= FILE_STORE_GROWTH_MAX),
    }
}

fn memory(target: Target, kib: Option<u64>, limit_mb: f64, how: &str) -> Judgement {
    match kib {
        Some(kib) => {
            let mb = kib_to_mb(kib);
            Judgement {
                target,
                measured: format!("{mb:.1} MB ({how})"),
                outcome: Outcome::of(mb <= limit_mb),
            }
        }
        None => unjudged(target, "not measured"),
    }
}

fn unjudged(target: Target, why: &str) -> Judgement {
    Judgement {
        target,
        measured: "—".into(),
        outcome: Outcome::Unjudged(why.into()),
    }
}

/// `n` with a comma every three digits (`40,000`).
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits_by_three() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(40_000), "40,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn every_target_states_its_threshold() {
        assert!(Target::DaemonCpu.text().contains("50 µs"));
        assert!(Target::RedisCpu.text().contains("40 µs"));
        assert!(Target::Throughput.text().contains("40,000"));
        assert!(Target::WarmVsTrue.text().contains("1.35×"));
        assert!(Target::BytesPerChange.text().contains("4 KB"));
        assert!(Target::FileStoreFlat.text().contains("1.5×"));
        assert!(Target::DistantBound.text().contains("1.15 ×"));
    }
}
