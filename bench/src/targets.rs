//! The targets, each judged against the figures of one run. Ratios compare two
//! figures from the same phase, where the cases were interleaved sample by sample.

use crate::clients::{Client, Route};
use crate::rss::kib_to_mb;
use crate::run::{BUDGET, Results};

/// The fence costs less than one extra process start.
pub const WARM_VS_TRUE: &str = "warm ask p50 ≤ 2.0× `/bin/true` p50 (Unix socket)";
/// Against a store 5 ms away over TLS, the warm ask beats connecting per process.
pub const WARM_VS_COLD_DISTANT: &str = "warm ≥ 3× faster than cold Rust at p50, over TLS + 5 ms";
/// The warm ask against the kind of cold client it replaces.
pub const WARM_VS_PYTHON: &str =
    "warm ≥ 30× faster than the Python cold client at p50 (Unix socket)";
/// The same over TLS + 5 ms (the issue does not say which route; both are judged).
pub const WARM_VS_PYTHON_DISTANT: &str =
    "warm ≥ 30× faster than the Python cold client at p50, over TLS + 5 ms";
/// A warm ask under 16 busy processes per core.
pub const LOADED_P99: &str = "oversubscribed (16 busy processes per core): warm p99 ≤ 250 ms";
/// No sample over the seed's 5.5 s hook budget, none refused.
pub const LOADED_MISSES: &str = "oversubscribed: zero misses of 5.5 s (floor, warm, cold Rust)";
/// Asks per second with 64 concurrent in-process clients.
pub const THROUGHPUT: &str = "daemon ≥ 20,000 asks/s with 64 clients";
/// The daemon's memory at rest.
pub const IDLE_RSS: &str = "daemon RSS ≤ 20 MB idle";
/// The daemon's peak memory with 1,000 connections in flight.
pub const CONNECTIONS_RSS: &str = "daemon RSS ≤ 64 MB with 1,000 connections";
/// The asker's peak memory for one ask.
pub const ASKER_RSS: &str = "asker max RSS ≤ 4 MB";
/// The agent guard on a command it lets through without asking.
pub const GUARD_HARMLESS: &str = "agent guard, harmless command: p50 ≤ 1.5× `sh -c true` p50";
/// The agent guard on a push it asks about and the fence allows.
pub const GUARD_PUSH: &str = "agent guard, fenced ALLOWED push: p50 ≤ 2.5× `sh -c true` p50";

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

/// One target beside its measured figure.
#[derive(Clone, Debug)]
pub struct Judgement {
    /// The target as the issue words it.
    pub target: String,
    /// The measured figure, with what it was computed from.
    pub measured: String,
    /// Met, missed, or not judged.
    pub outcome: Outcome,
}

/// Judges every target against `results`. A smoke run's figures are shown but not
/// judged: a handful of samples says nothing about a p99.
pub fn judge(results: &Results) -> Vec<Judgement> {
    let mut out = vec![
        ratio(
            results,
            WARM_VS_TRUE,
            Route::Unix,
            (Client::Warm, Client::True),
            |r| r <= 2.0,
        ),
        ratio(
            results,
            WARM_VS_COLD_DISTANT,
            Route::TlsDelayed,
            (Client::ColdRust, Client::Warm),
            |r| r >= 3.0,
        ),
        ratio(
            results,
            WARM_VS_PYTHON,
            Route::Unix,
            (Client::Python, Client::Warm),
            |r| r >= 30.0,
        ),
        ratio(
            results,
            WARM_VS_PYTHON_DISTANT,
            Route::TlsDelayed,
            (Client::Python, Client::Warm),
            |r| r >= 30.0,
        ),
    ];
    out.push(ratio(
        results,
        GUARD_HARMLESS,
        Route::Unix,
        (Client::GuardHarmless, Client::HookTrue),
        |r| r <= 1.5,
    ));
    out.push(ratio(
        results,
        GUARD_PUSH,
        Route::Unix,
        (Client::GuardPush, Client::HookTrue),
        |r| r <= 2.5,
    ));
    out.extend(oversubscribed(results));
    out.extend(daemon(results));
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
    target: &str,
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
                target: target.into(),
                measured: format!(
                    "{r:.2}× ({} {:.3} ms ÷ {} {:.3} ms)",
                    short(a),
                    ra.summary.p50_ms,
                    short(b),
                    rb.summary.p50_ms
                ),
                outcome: if ok(r) { Outcome::Met } else { Outcome::Missed },
            }
        }
        _ => unjudged(target, "not measured (see the notes)"),
    }
}

fn oversubscribed(results: &Results) -> Vec<Judgement> {
    let p99 = LOADED_P99;
    let misses = LOADED_MISSES;
    let Some(phase) = results.phase(Route::Unix, true) else {
        return vec![
            unjudged(p99, "not measured"),
            unjudged(misses, "not measured"),
        ];
    };
    let warm = phase.row(Client::Warm);
    let p99_judgement = match warm {
        Some(w) if w.summary.count > 0 => Judgement {
            target: p99.into(),
            measured: format!(
                "{:.1} ms (p50 {:.1} ms, {} samples, {} busy processes)",
                w.summary.p99_ms, w.summary.p50_ms, w.summary.count, phase.busy
            ),
            outcome: if w.summary.p99_ms <= 250.0 {
                Outcome::Met
            } else {
                Outcome::Missed
            },
        },
        _ => unjudged(p99, "not measured"),
    };
    let (over, failed, total) = phase.rows.iter().fold((0, 0, 0), |(o, f, t), r| {
        (o + r.over_budget, f + r.failed, t + r.summary.count)
    });
    let warm_text = warm.map_or(String::new(), |w| {
        format!("; warm: {} over, {} not ALLOWED", w.over_budget, w.failed)
    });
    let misses_judgement = Judgement {
        target: misses.into(),
        measured: format!(
            "{over} of {total} over {:.1} s, {failed} not ALLOWED{warm_text}",
            BUDGET.as_secs_f64()
        ),
        outcome: if over == 0 && failed == 0 && total > 0 {
            Outcome::Met
        } else {
            Outcome::Missed
        },
    };
    vec![p99_judgement, misses_judgement]
}

fn daemon(results: &Results) -> Vec<Judgement> {
    let mut out = Vec::new();
    let target = THROUGHPUT;
    out.push(match &results.throughput {
        Some(t) => Judgement {
            target: target.into(),
            measured: format!(
                "{:.0} asks/s ({} clients, {:.1} s, {} failed)",
                t.per_second, t.clients, t.seconds, t.failed
            ),
            outcome: if t.per_second >= 20_000.0 && t.failed == 0 {
                Outcome::Met
            } else {
                Outcome::Missed
            },
        },
        None => unjudged(target, "not measured"),
    });
    out.push(memory(
        IDLE_RSS,
        results.idle_rss_kib,
        20.0,
        "idle after the Unix-socket phase",
    ));
    let target = CONNECTIONS_RSS;
    out.push(match &results.connections {
        Some(c) => {
            let mut j = memory(
                target,
                Some(c.peak_kib),
                64.0,
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
        None => unjudged(target, "not measured"),
    });
    out.push(memory(
        ASKER_RSS,
        results.peak_rss(Client::Warm),
        4.0,
        &format!(
            "largest of {} warm asks (`ru_maxrss`)",
            results.plan.rss_runs
        ),
    ));
    out
}

fn memory(target: &str, kib: Option<u64>, limit_mb: f64, how: &str) -> Judgement {
    match kib {
        Some(kib) => {
            let mb = kib_to_mb(kib);
            Judgement {
                target: target.into(),
                measured: format!("{mb:.1} MB ({how})"),
                outcome: if mb <= limit_mb {
                    Outcome::Met
                } else {
                    Outcome::Missed
                },
            }
        }
        None => unjudged(target, "not measured"),
    }
}

fn unjudged(target: &str, why: &str) -> Judgement {
    Judgement {
        target: target.into(),
        measured: "—".into(),
        outcome: Outcome::Unjudged(why.into()),
    }
}

fn short(client: Client) -> &'static str {
    match client {
        Client::True => "/bin/true",
        Client::Echo => "echo",
        Client::AskerStart => "asker start",
        Client::Warm => "warm",
        Client::ColdRust => "cold Rust",
        Client::RedisCli => "redis-cli",
        Client::Python => "Python",
        Client::HookTrue => "sh -c true",
        Client::HookExecTrue => "sh -c /bin/true",
        Client::GuardHarmless => "guard harmless",
        Client::GuardPush => "guard push",
    }
}
