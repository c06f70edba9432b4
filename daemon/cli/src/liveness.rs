//! `row-fence status` (asks the daemon), `row-fence health` (reads the heartbeat file:
//! the liveness signal for monitoring, fresh only while the daemon's store calls succeed)
//! and `row-fence stop` (stops a daemon no service manager runs).

use crate::flags::parse_duration;
use row_fence_contract::client;
use row_fence_contract::exit::{Failure, Outcome};
use row_fence_contract::protocol::{Op, PROTOCOL_VERSION, Request};
use row_fence_contract::report::out;
use row_fence_contract::status::{LocationStatus, Status};
use row_fence_contract::{exit, ledger, paths, quarantine, say};
use row_fence_resident::config::Settings;
use row_fence_resident::heartbeat;
use row_fence_store::judge::{rfc3339, span};
use serde_json::json;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// Print the daemon's status object as JSON
    #[arg(long)]
    json: bool,
    /// How long to wait for the daemon, in ms
    #[arg(long, default_value_t = 3000, value_name = "N")]
    timeout_ms: u64,
}

#[derive(clap::Args, Debug)]
pub struct HealthArgs {
    /// The oldest heartbeat that counts as healthy, e.g. 90s
    #[arg(long, default_value = "90s", value_parser = parse_duration)]
    max_age: Duration,
    /// Print the result as JSON
    #[arg(long)]
    json: bool,
    /// Print Prometheus textfile-collector lines
    #[arg(long, conflicts_with = "json")]
    prometheus: bool,
}

#[derive(clap::Args, Debug)]
pub struct StopArgs {}

/// `row-fence stop`: stops the daemon of this home that no service manager runs (one
/// started by hand or with `row-fence-resident --detach`): asks it for its pid, sends it
/// SIGTERM (it finishes in-flight asks, flushes the ledger and removes its socket) and
/// waits until its socket is silent, within `timeout`. No daemon answering is done
/// already (exit 0). A daemon of another home on the socket, or one a service manager
/// would start again (`--supervised`), is left alone (exit 1, saying what to run).
pub fn stop(_args: StopArgs, settings: &Settings, timeout: Duration) -> Outcome {
    let asked = Instant::now() + Duration::from_millis(PING_MS);
    let status = match client::status(&settings.socket, asked) {
        Ok(status) => status,
        Err(_) => {
            say!(
                "row-fence: no daemon answers on {}; nothing to stop",
                settings.socket.display()
            );
            return Ok(exit::ALLOWED);
        }
    };
    if !status.serves(&settings.home) {
        return Err(Failure::could_not(format!(
            "the daemon on {} (pid {}) serves another home ({}); not stopping it (give --home {} to stop that one)",
            settings.socket.display(),
            status.pid,
            status.home,
            status.home
        )));
    }
    if status.supervised {
        return Err(Failure::could_not(format!(
            "the daemon (pid {}) runs under a service manager, which would start it again: stop it there (systemctl --user disable --now row-fence-resident.service, or launchctl bootout gui/{}/row-fence-resident: the rollback line install printed)",
            status.pid,
            paths::euid()
        )));
    }
    let pid = nix::unistd::Pid::from_raw(status.pid as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).map_err(|e| {
        Failure::could_not(format!("cannot stop the daemon (pid {}): {e}", status.pid))
    })?;
    let until = Instant::now() + timeout;
    while Instant::now() < until {
        let ping = Instant::now() + Duration::from_millis(PING_MS);
        let answered = client::status(&settings.socket, ping);
        // A status that timed out is a daemon still shutting down (or a loaded machine),
        // not a stopped one: stopped is its process gone or its socket removed, which it
        // does last.
        let still_there = match &answered {
            Ok(s) => s.pid == status.pid,
            Err(_) => nix::sys::signal::kill(pid, None).is_ok() && settings.socket.exists(),
        };
        match still_there {
            true => std::thread::sleep(Duration::from_millis(50)),
            false => {
                say!(
                    "row-fence: stopped the daemon (pid {}) of {}",
                    status.pid,
                    settings.home.display()
                );
                return Ok(exit::ALLOWED);
            }
        }
    }
    Err(Failure::could_not(format!(
        "the daemon (pid {}) still answers on {} after {}; it was sent SIGTERM",
        status.pid,
        settings.socket.display(),
        humantime::format_duration(timeout)
    )))
}

pub fn status(args: StatusArgs, settings: &Settings) -> Outcome {
    // The guard runs as a process per tool call: its quarantines and their denials are
    // counted in the home this daemon serves, read here beside the daemon's answer.
    let quarantine = quarantine::counts(&settings.home);
    match ask_status(&args, settings) {
        Ok(status) if args.json => {
            let mut v = serde_json::to_value(&status).unwrap_or_default();
            v["quarantine"] = match &quarantine {
                Ok(c) => json!(c),
                Err(e) => {
                    json!({"error": format!("{}: {e}", quarantine::dir(&settings.home).display())})
                }
            };
            out(&v.to_string())
        }
        Ok(status) => {
            print_status(&status);
            out(&match &quarantine {
                Ok(c) => format!(
                    "quarantine {} sessions quarantined now; {} calls denied in quarantine",
                    c.sessions, c.denials
                ),
                Err(e) => format!(
                    "quarantine cannot be read ({}: {e})",
                    quarantine::dir(&settings.home).display()
                ),
            });
        }
        Err(failure) => {
            if args.json {
                // A monitor reading stdout gets an object either way.
                out(&json!({
                    "error": failure.message,
                    "socket": settings.socket.display().to_string(),
                })
                .to_string());
            }
            return Err(failure);
        }
    }
    Ok(exit::ALLOWED)
}

fn ask_status(args: &StatusArgs, settings: &Settings) -> Result<Status, Failure> {
    let deadline = Instant::now() + Duration::from_millis(args.timeout_ms);
    client::status(&settings.socket, deadline).map_err(Failure::could_not)
}

fn print_status(s: &Status) {
    let age = s
        .heartbeat_age_ms
        .map_or("never written".to_string(), |ms| {
            format!("{} ago", span(ms))
        });
    let c = &s.counts;
    out(&format!(
        "daemon     pid {} (version {}), up {}",
        s.pid,
        s.version,
        span(s.uptime_ms)
    ));
    out(&format!("stamp      {}", s.stamp));
    out(&format!("socket     {}", s.socket));
    out(&format!(
        "store      {} (key prefix {}, reconnects: {})",
        s.store, s.key_prefix, s.store_reconnects
    ));
    if let Some(check) = &s.store_check {
        let verdict = if check.durable {
            "durable"
        } else {
            "NOT durable: grants and controller writes are refused"
        };
        out(&format!(
            "           {}, {} replicas, writes wait for {}; {verdict}",
            check.role, check.replicas, check.min_replicas
        ));
        if let Some(identity) = &check.identity {
            out(&format!("           identity {identity}"));
        }
        for problem in &check.problems {
            out(&format!("           problem: {problem}"));
        }
        for note in &check.notes {
            out(&format!("           note: {note}"));
        }
    }
    out(&format!("heartbeat  {age}"));
    out(&format!(
        "asks       {} answered: {} allowed, {} refused, {} could not read; {} in flight ({} store calls running)",
        c.asks, c.allowed, c.refused, c.could_not_read, s.asks_in_flight, s.store_calls_in_flight
    ));
    if !c.by_reason.is_empty() {
        let reasons: Vec<String> = c
            .by_reason
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out(&format!("denials    {}", reasons.join(", ")));
    }
    if s.ledger_dropped > 0 {
        out(&format!(
            "ledger     {} refusals not recorded: the ledger writer fell behind a flood",
            s.ledger_dropped
        ));
    }
    if let Some(fence) = &s.location_fence {
        print_location(fence);
    }
    if let Some(b) = &s.broker {
        out(&format!(
            "broker     {} ({} push keys, {} read keys, {} lanes): {} signed, {} sign requests refused, {} connections",
            b.socket, b.keys, b.read_keys, b.lanes, b.signed, b.sign_refused, b.connections
        ));
    }
    if let Some(f) = &s.forge_api {
        out(&format!(
            "forge api  {} for {} (token {}): {} API requests passed, {} refused",
            f.socket,
            f.host,
            if f.token { "loaded" } else { "not loaded" },
            f.passed,
            f.refused
        ));
    }
    if !s.recent_refusals.is_empty() {
        out(&format!(
            "recent refusals (newest last, {} shown; the refusal ledger has every one whole):",
            s.recent_refusals.len().min(10)
        ));
        for r in s.recent_refusals.iter().rev().take(10).rev() {
            out(&format!(
                "  {}  {}  {}/{} lane {}  action {:?}  session {}",
                rfc3339(r.ts_ms),
                r.verdict.headline(),
                r.board.as_deref().unwrap_or("?"),
                r.row.as_deref().unwrap_or("?"),
                r.lane.as_deref().unwrap_or("?"),
                r.action,
                r.session.as_deref().unwrap_or("-"),
            ));
        }
    }
}

fn print_location(fence: &LocationStatus) {
    let age = fence.map_age_ms.map_or("never fetched".to_string(), |ms| {
        format!("{} old", span(ms))
    });
    out(&format!(
        "location   {} (map {age}, {} rows, {} fetches{})",
        fence.location,
        fence.rows.len(),
        fence.fetches,
        fence
            .last_fetch_error
            .as_deref()
            .map_or(String::new(), |e| format!("; last fetch failed: {e}"))
    ));
    for row in &fence.rows {
        out(&format!(
            "  tenant {} at {} (epoch {}, {})",
            row.id,
            row.location.as_deref().unwrap_or("-"),
            row.epoch,
            row.state.as_deref().unwrap_or("-")
        ));
    }
    if fence.rows_omitted > 0 {
        out(&format!(
            "  … and {} more tenants (the map holds them; status shows the first)",
            fence.rows_omitted
        ));
    }
    if !fence.recent_refusals.is_empty() {
        out(&format!(
            "  {} recent location refusals (row-fence status --json shows them)",
            fence.recent_refusals.len() as u64 + fence.recent_refusals_omitted
        ));
    }
}

/// A heartbeat this far in the future (ms) is still taken as written now (clock skew
/// between the daemon's writes and this read); further is a clock that stepped back.
const FUTURE_SLACK_MS: u64 = 5_000;

/// What is wrong with the daemon's liveness, if anything: no heartbeat, one too old or
/// from the future, or one whose writer is no longer running.
fn problem(
    beat: &std::io::Result<heartbeat::Heartbeat>,
    path: &std::path::Path,
    socket: &std::path::Path,
    now: u64,
    max: Duration,
) -> Option<String> {
    let how = client::wire::HOW_TO_START;
    let b = match beat {
        Err(e) => {
            return Some(format!(
                "no heartbeat at {}: {e}: no daemon has served this home yet; {how}",
                path.display()
            ));
        }
        Ok(b) => b,
    };
    if b.written_at_ms > now + FUTURE_SLACK_MS {
        return Some(format!(
            "the heartbeat is {} in the future (did the clock step back?)",
            span(b.written_at_ms - now)
        ));
    }
    let age = now.saturating_sub(b.written_at_ms);
    if age > max.as_millis() as u64 {
        return Some(format!(
            "heartbeat {} old, over {}",
            span(age),
            humantime::format_duration(max)
        ));
    }
    let pid = nix::unistd::Pid::from_raw(b.pid as i32);
    if nix::sys::signal::kill(pid, None) == Err(nix::errno::Errno::ESRCH) {
        return Some(format!(
            "the daemon that wrote it (pid {}) is not running; {how}",
            b.pid
        ));
    }
    // The file could have been written by another daemon on this home, or by one that
    // no longer answers: the daemon on the socket the asker uses must be its writer.
    if let Some(problem) = socket_problem(socket, b.pid) {
        return Some(problem);
    }
    if !b.store_problems.is_empty() {
        return Some(format!(
            "the store is not durable: {}",
            b.store_problems.join("; ")
        ));
    }
    None
}

/// How long `health` waits for the daemon's pong.
const PING_MS: u64 = 2_000;

/// What is wrong with the daemon on `socket`, if anything, given that the heartbeat was
/// written by `pid`: no answer, or another daemon than the heartbeat's writer.
fn socket_problem(socket: &std::path::Path, pid: u32) -> Option<String> {
    let request = Request {
        v: PROTOCOL_VERSION,
        op: Op::Ping,
    };
    let deadline = Instant::now() + Duration::from_millis(PING_MS);
    match client::exchange(socket, &request, deadline).map(|a| a.pong) {
        Ok(Some(pong)) if pong.pid == pid => None,
        Ok(Some(pong)) => Some(format!(
            "the daemon on {} is pid {}, not the heartbeat's writer (pid {pid}): is another daemon running on this home?",
            socket.display(),
            pong.pid
        )),
        Ok(None) => Some(format!(
            "{} answered a ping without a pong",
            socket.display()
        )),
        Err(why) => Some(format!(
            "the heartbeat is fresh but no daemon answers on {}: {why}",
            socket.display()
        )),
    }
}

/// The key broker's counters as Prometheus counters, when the daemon answers and its
/// broker is on (a daemon that does not answer is already `row_fence_healthy 0`).
fn broker_counters(settings: &Settings) {
    let deadline = Instant::now() + Duration::from_millis(PING_MS);
    let Ok(status) = client::status(&settings.socket, deadline) else {
        return;
    };
    if let Some(forge) = &status.forge_api {
        for (name, help, value) in [
            (
                "row_fence_forge_api_passed_total",
                "API requests the forge API endpoint passed to the forge since the daemon started.",
                forge.passed,
            ),
            (
                "row_fence_forge_api_refused_total",
                "API requests the forge API endpoint refused since the daemon started.",
                forge.refused,
            ),
        ] {
            out(&format!("# HELP {name} {help}"));
            out(&format!("# TYPE {name} counter"));
            out(&format!("{name} {value}"));
        }
    }
    let Some(broker) = status.broker else {
        return;
    };
    for (name, help, value) in [
        (
            "row_fence_broker_signed_total",
            "Signatures the key broker made since the daemon started.",
            broker.signed,
        ),
        (
            "row_fence_broker_sign_refused_total",
            "Sign requests the key broker refused since the daemon started (not ALLOWED, no lane, or a key it does not hold).",
            broker.sign_refused,
        ),
    ] {
        out(&format!("# HELP {name} {help}"));
        out(&format!("# TYPE {name} counter"));
        out(&format!("{name} {value}"));
    }
}

pub fn health(args: HealthArgs, settings: &Settings) -> Outcome {
    let path = paths::heartbeat(&settings.home);
    let now = ledger::now_ms();
    let beat = heartbeat::read(&path);
    let age_ms = beat
        .as_ref()
        .ok()
        .map(|b| now.saturating_sub(b.written_at_ms));
    let problem = problem(&beat, &path, &settings.socket, now, args.max_age);
    let healthy = problem.is_none();
    if args.prometheus {
        // First, so row_fence_healthy stays the last line. Unreadable counts are NaN,
        // never 0: "could not find out" is not "none".
        let counts = quarantine::counts(&settings.home).ok();
        out(
            "# HELP row_fence_quarantined_sessions Agent sessions quarantined now (their row was refused; only read-only calls run).",
        );
        out("# TYPE row_fence_quarantined_sessions gauge");
        out(&format!(
            "row_fence_quarantined_sessions {}",
            counts.map_or("NaN".to_string(), |c| c.sessions.to_string())
        ));
        out(
            "# HELP row_fence_quarantine_denials_total Tool calls the agent guard denied in quarantine.",
        );
        out("# TYPE row_fence_quarantine_denials_total counter");
        out(&format!(
            "row_fence_quarantine_denials_total {}",
            counts.map_or("NaN".to_string(), |c| c.denials.to_string())
        ));
        out(
            "# HELP row_fence_heartbeat_age_seconds Age of the row-fence daemon's heartbeat (written only after a store call succeeded).",
        );
        out("# TYPE row_fence_heartbeat_age_seconds gauge");
        match age_ms {
            Some(age) => out(&format!(
                "row_fence_heartbeat_age_seconds {:.3}",
                age as f64 / 1000.0
            )),
            None => out("row_fence_heartbeat_age_seconds NaN"),
        }
        out(
            "# HELP row_fence_healthy 1 when the heartbeat is fresh, its daemon runs and its store is durable.",
        );
        out("# TYPE row_fence_healthy gauge");
        out(&format!("row_fence_healthy {}", u8::from(healthy)));
        broker_counters(settings);
    } else if args.json {
        out(&json!({
            "healthy": healthy,
            "problem": problem,
            "age_ms": age_ms,
            "max_age_ms": args.max_age.as_millis() as u64,
            "heartbeat": beat.as_ref().ok(),
            "path": path.display().to_string(),
        })
        .to_string());
    } else {
        let line = match (&beat, &problem) {
            (Ok(b), None) => {
                let notes = if b.store_notes.is_empty() {
                    String::new()
                } else {
                    format!("; {}", b.store_notes.join("; "))
                };
                format!(
                    "row-fence: healthy: heartbeat {} old (pid {}, store {}{notes})",
                    span(age_ms.unwrap_or(0)),
                    b.pid,
                    b.store
                )
            }
            (_, Some(problem)) => format!("row-fence: UNHEALTHY: {problem}"),
            (Err(_), None) => unreachable!("a missing heartbeat is a problem"),
        };
        say!("{line}");
    }
    Ok(if healthy {
        exit::ALLOWED
    } else {
        exit::COULD_NOT_READ
    })
}
