//! The store's verdicts through the real asker and daemon, on both stores: generations,
//! holders, expiry, a deleted lease.

use crate::util::{Home, Redis};
use std::path::PathBuf;

on_both_stores!(
    only_the_stored_generation_is_allowed,
    another_holder_is_refused_different_holder,
    an_expired_lease_is_refused_lease_expired,
    a_row_never_granted_is_refused_not_held,
    the_json_verdict_names_what_was_judged,
);

/// Writes a descriptor for `lane` at `generation` and returns its path, with the lease
/// token of the lane's last grant (`<lane>.json`), so only the generation is judged.
fn descriptor(home: &Home, lane: &str, generation: u64) -> PathBuf {
    let path = home.path(&format!("{lane}-{generation}.json"));
    let mut body =
        serde_json::json!({"board": "b", "row": "r", "lane": lane, "generation": generation});
    if let Ok(text) = std::fs::read_to_string(home.path(&format!("{lane}.json"))) {
        let granted: serde_json::Value = serde_json::from_str(&text).unwrap();
        body["token"] = granted["token"].clone();
    }
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

/// Grants `b/r` to lane-a until the store's generation is 10.
fn at_generation_10(home: &Home) {
    for expected in 1..=10 {
        let (generation, _) = home.acquire("b", "r", "lane-a", &[]);
        assert_eq!(generation, expected, "each grant commits the next revision");
    }
}

fn only_the_stored_generation_is_allowed(redis: Option<&Redis>) {
    let home = Home::on(redis);
    at_generation_10(&home);
    let _daemon = home.daemon();
    home.ask_with(&descriptor(&home, "lane-a", 9), &[])
        .expect(3, "row-fence: REFUSED (stale_generation)");
    home.ask_with(&descriptor(&home, "lane-a", 10), &[])
        .expect(0, "row-fence: ALLOWED");
    // A generation the store never reached: it lost the grant (store_regressed, naming
    // both numbers), never a plain refusal.
    let ahead = home.ask_with(&descriptor(&home, "lane-a", 11), &[]);
    ahead.expect(1, "row-fence: COULD NOT READ (store_regressed)");
    assert!(
        ahead.verdict_line().contains("generation 11")
            && ahead.verdict_line().contains("revision 10"),
        "{}",
        ahead.stderr
    );
    if let Some(redis) = redis {
        // The lease field deleted behind row-fence's back: nobody holds the row.
        assert_eq!(
            redis
                .cli(&["HDEL", "rowfence:board:{b}:fence:claims", "r"])
                .trim(),
            "1"
        );
        home.ask_with(&descriptor(&home, "lane-a", 10), &[])
            .expect(3, "row-fence: REFUSED (not_held)");
    }
}

fn another_holder_is_refused_different_holder(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let (_, a) = home.acquire("b", "r", "lane-a", &[]);
    home.acquire("b", "r", "lane-b", &["--takeover"]);
    let _daemon = home.daemon();
    let ran = home.ask_with(&a, &[]);
    ran.expect(3, "row-fence: REFUSED (different_holder)");
    assert!(
        ran.verdict_line().contains("held by lane-b"),
        "{}",
        ran.stderr
    );
}

fn an_expired_lease_is_refused_lease_expired(redis: Option<&Redis>) {
    let home = Home::on(redis);
    // The daemon first, so the lease's 2 s are not spent waiting for it to start; no
    // margin, so the lease is ALLOWED until it expires (tests/e2e/margin.rs tests one).
    let _daemon = home.daemon_with(&[], &[("ROW_FENCE_MARGIN", "0s")]);
    let (_, a) = home.acquire("b", "r", "lane-a", &["--ttl", "2s"]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    // Then ask until the store's clock passes the expiry (bounded), whatever the load.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let mut ran = home.ask_with(&a, &[]);
    while ran.code == 0 && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
        ran = home.ask_with(&a, &[]);
    }
    ran.expect(3, "row-fence: REFUSED (lease_expired)");
}

fn a_row_never_granted_is_refused_not_held(redis: Option<&Redis>) {
    let home = Home::on(redis);
    home.acquire("b", "other-row", "lane-b", &[]);
    let _daemon = home.daemon();
    home.ask_with(&descriptor(&home, "lane-a", 1), &[])
        .expect(3, "row-fence: REFUSED (not_held)");
}

fn the_json_verdict_names_what_was_judged(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let (generation, a) = home.acquire("b", "r", "lane-a", &[]);
    let _daemon = home.daemon();
    let ran = home.ask_with(&a, &["--json", "--action", "git push origin"]);
    ran.expect(0, "row-fence: ALLOWED");
    let v = ran.json();
    assert_eq!(v["verdict"], "allowed");
    assert_eq!(v["reason"], serde_json::Value::Null);
    assert_eq!(
        (v["board"].as_str(), v["row"].as_str(), v["lane"].as_str()),
        (Some("b"), Some("r"), Some("lane-a"))
    );
    assert_eq!(v["generation"].as_u64(), Some(generation));
    assert!(v["elapsed_ms"].is_u64());
}

/// The top-level keys of a one-line JSON object, in the order the text has them.
fn key_order(line: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(line).expect("a JSON object");
    let mut keys: Vec<(usize, String)> = v
        .as_object()
        .expect("an object")
        .keys()
        .map(|k| (line.find(&format!("\"{k}\":")).expect("the key"), k.clone()))
        .collect();
    keys.sort();
    keys.into_iter().map(|(_, k)| k).collect()
}

#[test]
fn the_readmes_json_verdict_is_the_askers_line_as_printed() {
    let example = crate::util::doc_blocks("json")
        .into_iter()
        .find(|b| b.contains("\"different_holder\"") && b.contains("\"elapsed_ms\""))
        .expect("README.md's --json example");
    let home = Home::file();
    let (_, a) = home.acquire("board-1", "row-1", "lane-a", &[]);
    home.acquire("board-1", "row-1", "lane-b", &["--takeover"]);
    let _daemon = home.daemon();
    let ran = home.ask_with(&a, &["--json"]);
    ran.expect(3, "row-fence: REFUSED (different_holder)");
    assert_eq!(key_order(ran.stdout.trim()), key_order(example.trim()));
}
