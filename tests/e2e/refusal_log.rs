//! The daemon's log is bounded however a lane varies its refusals (ARCHITECTURE.md,
//! "Observability and cost"): one line a minute per (board, action, reason), of those at
//! most 20 a minute per lane and 200 in all, and one summary line for what was suppressed.

use crate::util::{Home, bin, run};
use row_fence_contract::Descriptor;
use row_fence_contract::client;
use row_fence_contract::protocol::{Ask, Caller, Op, PROTOCOL_VERSION, Request};
use std::time::{Duration, Instant};

/// One lane asking 1,000 times, each with another action (a distinct refusal for the
/// per-kind limit), leaves 20 refusal lines and a summary of the 980 others.
#[test]
fn one_lanes_thousand_distinct_refusals_leave_a_bounded_log_and_a_summary() {
    let home = Home::file();
    // A board at revision 1, so the lane's generation is not from a newer history.
    home.acquire("board-1", "row-1", "lane-a", &[]);
    let mut daemon = home.daemon();
    let stamp = run(home.command(bin("row-fence-ask")).arg("--print-stamp"))
        .stdout
        .trim()
        .to_string();
    let descriptor: Descriptor =
        serde_json::from_str(r#"{"board":"board-1","row":"row-9","lane":"lane-x","generation":1}"#)
            .unwrap();
    let total = 1000;
    for i in 0..total {
        let request = Request {
            v: PROTOCOL_VERSION,
            op: Op::Ask(Box::new(Ask {
                stamp: stamp.clone(),
                deadline_ms: 5000,
                descriptor: descriptor.clone(),
                action: format!("git push origin branch-{i}"),
                caller: Caller::default(),
                updates: Vec::new(),
            })),
        };
        let answer = client::exchange(
            &daemon.socket,
            &request,
            Instant::now() + Duration::from_secs(6),
        )
        .expect("an answer");
        assert_eq!(answer.reason.as_deref(), Some("not_held"), "ask {i}");
    }
    assert_eq!(daemon.stop(), Some(0));
    let log = daemon.log_text();
    let refusals = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("not_held"))
        .count();
    assert_eq!(refusals, 20, "{log}");
    assert!(
        log.contains("980 refusal log lines suppressed"),
        "the summary: {log}"
    );
    let lines = log.lines().count();
    assert!(lines < 40, "{lines} lines:\n{log}");
    // The ledger keeps every one.
    let ledger = std::fs::read_to_string(home.home.join("refusals.jsonl")).unwrap();
    assert_eq!(ledger.lines().count(), total);
}
