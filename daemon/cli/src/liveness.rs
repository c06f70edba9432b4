//! `row-fence status` (asks the daemon) and `row-fence health` (reads the heartbeat file:
//! the liveness signal for monitoring, fresh only while the daemon's store calls succeed).

use super::{Failure, Outcome, out, parse_duration};
use row_fence_ask::client;
use row_fence_ask::protocol::{Op, PROTOCOL_VERSION, Request};
use row_fence_ask::{exit, ledger, paths};
use row_fence_resident::config::Settings;
use row_fence_resident::heartbeat;
use serde_json::{Value, json};
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

pub fn status(args: StatusArgs, settings: &Settings) -> Outcome {
    let request = Request {
        v: PROTOCOL_VERSION,
        op: Op::Status,
    };
    paths::check_socket_length(&settings.socket).map_err(Failure::could_not)?;
    let deadline = Instant::now() + Duration::from_millis(args.timeout_ms);
    let answer = client::exchange(&settings.socket, &request, deadline).map_err(|e| {
        Failure::could_not(format!(
            "no daemon status from {}: {e}",
            settings.socket.display()
        ))
    })?;
    let status = answer.status.ok_or_else(|| {
        Failure::could_not(format!(
            "{} answered without a status",
            settings.socket.display()
        ))
    })?;
    if args.json {
        out(&status.to_string());
    } else {
        print_status(&status);
    }
    Ok(exit::ALLOWED)
}

fn print_status(s: &Value) {
    let field = |k: &str| {
        s.get(k).map_or("?".to_string(), |v| {
            v.as_str().map_or(v.to_string(), str::to_string)
        })
    };
    let age = s
        .get("heartbeat_age_ms")
        .and_then(Value::as_u64)
        .map_or("never written".to_string(), |ms| {
            format!("{} ago", row_fence_store::judge::span(ms))
        });
    let counts = &s["counts"];
    out(&format!(
        "daemon     pid {} (version {}), up {}",
        field("pid"),
        field("version"),
        row_fence_store::judge::span(s["uptime_ms"].as_u64().unwrap_or(0))
    ));
    out(&format!("stamp      {}", field("stamp")));
    out(&format!("socket     {}", field("socket")));
    out(&format!(
        "store      {} (reconnects: {})",
        field("store"),
        field("store_reconnects")
    ));
    if let Some(check) = s.get("store_check").filter(|c| c.is_object()) {
        let role = check["role"].as_str().unwrap_or("?");
        let verdict = if check["durable"].as_bool() == Some(true) {
            "durable"
        } else {
            "NOT durable: grants and controller writes are refused"
        };
        out(&format!(
            "           {role}, {} replicas, writes wait for {}; {verdict}",
            check["replicas"], check["min_replicas"]
        ));
        for line in check["problems"].as_array().into_iter().flatten() {
            out(&format!(
                "           problem: {}",
                line.as_str().unwrap_or("?")
            ));
        }
        for line in check["notes"].as_array().into_iter().flatten() {
            out(&format!(
                "           note: {}",
                line.as_str().unwrap_or("?")
            ));
        }
    }
    out(&format!("heartbeat  {age}"));
    out(&format!(
        "asks       {} answered: {} allowed, {} refused, {} could not read; {} in flight",
        counts["asks"],
        counts["allowed"],
        counts["refused"],
        counts["could_not_read"],
        field("asks_in_flight")
    ));
    if let Some(by_reason) = counts["by_reason"].as_object().filter(|m| !m.is_empty()) {
        let reasons: Vec<String> = by_reason.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out(&format!("denials    {}", reasons.join(", ")));
    }
    if let Some(fence) = s.get("location_fence") {
        let age = fence["map_age_ms"]
            .as_u64()
            .map_or("never fetched".to_string(), |ms| {
                format!("{} old", row_fence_store::judge::span(ms))
            });
        out(&format!(
            "location   {} (map {age}, {} rows, {} fetches{})",
            fence["location"].as_str().unwrap_or("?"),
            fence["rows"].as_array().map_or(0, Vec::len),
            fence["fetches"],
            fence["last_fetch_error"]
                .as_str()
                .map_or(String::new(), |e| format!("; last fetch failed: {e}"))
        ));
        for row in fence["rows"].as_array().into_iter().flatten() {
            out(&format!(
                "  tenant {} at {} (epoch {}, {})",
                row["id"].as_str().unwrap_or("?"),
                row["location"].as_str().unwrap_or("-"),
                row["epoch"],
                row["state"].as_str().unwrap_or("-")
            ));
        }
        let fenced = fence["recent_refusals"].as_array().map_or(0, Vec::len);
        if fenced > 0 {
            out(&format!(
                "  {fenced} recent location refusals (row-fence status --json shows them)"
            ));
        }
    }
    let recent = s["recent_refusals"].as_array().cloned().unwrap_or_default();
    if !recent.is_empty() {
        out(&format!(
            "recent refusals (newest last, {} shown):",
            recent.len().min(10)
        ));
        for r in recent.iter().rev().take(10).rev() {
            out(&format!(
                "  {}  {} ({})  {}/{} lane {}  action {:?}  session {}",
                row_fence_store::judge::rfc3339(r["ts_ms"].as_u64().unwrap_or(0)),
                r["verdict"].as_str().unwrap_or("?"),
                r["reason"].as_str().unwrap_or("?"),
                r["board"].as_str().unwrap_or("?"),
                r["row"].as_str().unwrap_or("?"),
                r["lane"].as_str().unwrap_or("?"),
                r["action"].as_str().unwrap_or(""),
                r["session"].as_str().unwrap_or("-"),
            ));
        }
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
    now: u64,
    max: Duration,
) -> Option<String> {
    let b = match beat {
        Err(e) => return Some(format!("no heartbeat at {}: {e}", path.display())),
        Ok(b) => b,
    };
    if b.written_at_ms > now + FUTURE_SLACK_MS {
        return Some(format!(
            "the heartbeat is {} in the future (did the clock step back?)",
            row_fence_store::judge::span(b.written_at_ms - now)
        ));
    }
    let age = now.saturating_sub(b.written_at_ms);
    if age > max.as_millis() as u64 {
        return Some(format!(
            "heartbeat {} old, over {}",
            row_fence_store::judge::span(age),
            humantime::format_duration(max)
        ));
    }
    let pid = nix::unistd::Pid::from_raw(b.pid as i32);
    if nix::sys::signal::kill(pid, None) == Err(nix::errno::Errno::ESRCH) {
        return Some(format!(
            "the daemon that wrote it (pid {}) is not running",
            b.pid
        ));
    }
    if !b.store_problems.is_empty() {
        return Some(format!(
            "the store is not durable: {}",
            b.store_problems.join("; ")
        ));
    }
    None
}

pub fn health(args: HealthArgs, settings: &Settings) -> Outcome {
    let path = paths::heartbeat(&settings.home);
    let now = ledger::now_ms();
    let beat = heartbeat::read(&path);
    let age_ms = beat
        .as_ref()
        .ok()
        .map(|b| now.saturating_sub(b.written_at_ms));
    let problem = problem(&beat, &path, now, args.max_age);
    let healthy = problem.is_none();
    if args.prometheus {
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
                    row_fence_store::judge::span(age_ms.unwrap_or(0)),
                    b.pid,
                    b.store
                )
            }
            (_, Some(problem)) => format!("row-fence: UNHEALTHY: {problem}"),
            (Err(_), None) => unreachable!("a missing heartbeat is a problem"),
        };
        crate::say!("{line}");
    }
    Ok(if healthy {
        exit::ALLOWED
    } else {
        exit::COULD_NOT_READ
    })
}
