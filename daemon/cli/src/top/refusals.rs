//! A refusal ledger line as the console reads it, and the one place its route is told
//! (ARCHITECTURE.md, "The operator's console"). Every field is optional and unknown ones
//! are ignored, so a line written by an older or a newer writer still shows.

use super::model::{Refusal, Route};
use serde::Deserialize;

/// A ledger line, read leniently (`contract::ledger::LedgerRecord` is what writers write).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LedgerLine {
    ts_ms: u64,
    decided_by: Option<String>,
    verdict: Option<String>,
    reason: Option<String>,
    detail: String,
    board: Option<String>,
    row: Option<String>,
    lane: Option<String>,
    session: Option<String>,
    action: String,
    /// The route, when the writer names it (a forge API write through the daemon does).
    route: Option<String>,
}

/// The route a record came through: the record's own `route` when it names one, else
/// what its writer and its action tell. The actions are the writers' own
/// (`hooks/pre-push`: `git push REMOTE`; the transport gate: `git push over …`; the
/// broker: `ssh sign …`, `ssh list identities…`, `renew@row-fence …`; the guard: the
/// command, with the harness's session).
pub fn route_of(line: &LedgerLine) -> Route {
    if let Some(route) = line.route.as_deref().and_then(named_route) {
        return route;
    }
    let action = line.action.as_str();
    let decided_by = line.decided_by.as_deref();
    if decided_by == Some("guard") || action.starts_with("(every call)") {
        Route::Guard
    } else if ["ssh sign", "ssh list identities", "renew@", "release@"]
        .iter()
        .any(|p| action.starts_with(p))
    {
        Route::Broker
    } else if action.starts_with("git push over ") || action.starts_with("git push or fetch over ")
    {
        Route::TransportGate
    } else if decided_by == Some("check") {
        Route::Check
    } else if line.session.is_some() {
        // Only a harness's hook names a session (the asker forwards ROW_FENCE_SESSION,
        // which git's hooks do not set).
        Route::Guard
    } else if action.starts_with("git push") {
        Route::PrePush
    } else {
        Route::Ask
    }
}

/// A route named in a record, in either spelling (`forge_api`, `forge API`).
fn named_route(name: &str) -> Option<Route> {
    let folded: String = name
        .chars()
        .map(|c| match c {
            ' ' | '-' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    Some(match folded.as_str() {
        "pre_push" => Route::PrePush,
        "transport_gate" | "transport" => Route::TransportGate,
        "guard" => Route::Guard,
        "broker" => Route::Broker,
        "forge_api" | "forge" | "api" => Route::ForgeApi,
        "check" => Route::Check,
        _ => return None,
    })
}

impl From<LedgerLine> for Refusal {
    fn from(line: LedgerLine) -> Refusal {
        let route = route_of(&line);
        Refusal {
            ts_ms: line.ts_ms,
            verdict: line.verdict.unwrap_or_default(),
            reason: line.reason.unwrap_or_default(),
            route,
            lane: line.lane,
            board: line.board,
            row: line.row,
            action: line.action,
            session: line.session,
            detail: line.detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(json: &str) -> LedgerLine {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn each_writers_action_tells_its_route_and_a_named_route_wins() {
        let cases = [
            (
                r#"{"decided_by":"daemon","action":"git push origin"}"#,
                Route::PrePush,
            ),
            (
                r#"{"decided_by":"daemon","action":"git push over ssh: git-receive-pack 'r'"}"#,
                Route::TransportGate,
            ),
            (
                r#"{"decided_by":"asker","action":"git push or fetch over https://h/r"}"#,
                Route::TransportGate,
            ),
            (
                r#"{"decided_by":"daemon","action":"ssh sign with SHA256:x, host unknown (uid 1001)"}"#,
                Route::Broker,
            ),
            (
                r#"{"decided_by":"daemon","action":"renew@row-fence (uid 1001)"}"#,
                Route::Broker,
            ),
            (
                r#"{"decided_by":"daemon","action":"git push origin main","session":"s-1"}"#,
                Route::Guard,
            ),
            (
                r#"{"decided_by":"guard","action":"git push"}"#,
                Route::Guard,
            ),
            (r#"{"decided_by":"check","action":""}"#, Route::Check),
            (r#"{"decided_by":"daemon","action":""}"#, Route::Ask),
            (
                r#"{"decided_by":"daemon","action":"POST /repos/o/r/pulls","route":"forge_api"}"#,
                Route::ForgeApi,
            ),
            (
                r#"{"action":"git push origin","route":"forge API"}"#,
                Route::ForgeApi,
            ),
            // A route this build does not know: told from the action instead.
            (
                r#"{"action":"git push origin","route":"carrier pigeon"}"#,
                Route::PrePush,
            ),
        ];
        for (json, route) in cases {
            assert_eq!(route_of(&line(json)), route, "{json}");
        }
    }

    #[test]
    fn a_line_with_unknown_fields_or_none_of_the_known_ones_still_reads() {
        let r: Refusal = line(
            r#"{"ts_ms":5,"verdict":"refused","reason":"not_held","new_field":[1,2],"board":"b"}"#,
        )
        .into();
        assert_eq!((r.ts_ms, r.reason.as_str()), (5, "not_held"));
        assert_eq!(r.board.as_deref(), Some("b"));
        let r: Refusal = line("{}").into();
        assert_eq!(r.route, Route::Ask);
    }
}
