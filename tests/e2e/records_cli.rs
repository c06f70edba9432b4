//! The controller lease and raw fenced batches through the real `row-fence` CLI, on both
//! stores.

use crate::util::{Home, Redis};
use serde_json::Value;

on_both_stores!(
    the_controller_lease_moves_its_epoch_on_takeover_and_expiry,
    a_row_lease_write_fenced_on_a_stale_controller_is_refused,
    a_raw_batch_commits_or_names_what_refused_it,
);

fn json(ran: &crate::util::Ran) -> Value {
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    serde_json::from_str(ran.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {:?}", ran.stdout))
}

fn the_controller_lease_moves_its_epoch_on_takeover_and_expiry(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let none = json(&home.cli(&["controller", "show", "b", "--json"]));
    assert_eq!(
        (none["owner"].clone(), none["live"].clone()),
        (Value::Null, Value::Bool(false))
    );
    let a = json(&home.cli(&["controller", "acquire", "b", "--owner", "c1", "--json"]));
    assert_eq!(a["epoch"], 1);
    // The same owner again: a renewal, same epoch.
    assert_eq!(
        json(&home.cli(&["controller", "acquire", "b", "--owner", "c1", "--json"]))["epoch"],
        1
    );
    let refused = home.cli(&["controller", "acquire", "b", "--owner", "c2"]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("held by c1 at epoch 1"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        json(&home.cli(&[
            "controller",
            "acquire",
            "b",
            "--owner",
            "c2",
            "--takeover",
            "--json"
        ]))["epoch"],
        2
    );
    assert_eq!(
        home.cli(&["controller", "renew", "b", "--owner", "c1"])
            .code,
        3
    );
    let shown = json(&home.cli(&["controller", "show", "b", "--json"]));
    assert_eq!(
        (
            shown["owner"].as_str(),
            shown["epoch"].as_u64(),
            shown["live"].as_bool()
        ),
        (Some("c2"), Some(2), Some(true))
    );
    assert!(shown["expires_at_ms"].as_u64().unwrap() > 1_700_000_000_000);
    // Expired: the next owner gets the next epoch without --takeover.
    assert_eq!(
        home.cli(&["controller", "renew", "b", "--owner", "c2", "--ttl", "1s"])
            .code,
        0
    );
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(
        json(&home.cli(&["controller", "show", "b", "--json"]))["live"],
        false
    );
    assert_eq!(
        json(&home.cli(&["controller", "acquire", "b", "--owner", "c3", "--json"]))["epoch"],
        3
    );
    // Released: the counter stays, so the next grant is still a new epoch.
    assert_eq!(
        home.cli(&["controller", "release", "b", "--owner", "c3"])
            .code,
        0
    );
    let none = json(&home.cli(&["controller", "show", "b", "--json"]));
    assert_eq!(
        (none["owner"].clone(), none["live"].clone()),
        (Value::Null, Value::Bool(false))
    );
    assert_eq!(
        json(&home.cli(&["controller", "acquire", "b", "--owner", "c1", "--json"]))["epoch"],
        4
    );
}

fn a_row_lease_write_fenced_on_a_stale_controller_is_refused(redis: Option<&Redis>) {
    let home = Home::on(redis);
    json(&home.cli(&["controller", "acquire", "b", "--owner", "c1", "--json"]));
    let ok = home.cli(&[
        "acquire", "b", "r", "--lane", "l1", "--owner", "c1", "--epoch", "1",
    ]);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    // Without --write-descriptor the descriptor, token included, is on stdout only.
    let held = home.path("l1.json");
    std::fs::write(&held, &ok.stdout).unwrap();
    json(&home.cli(&[
        "controller",
        "acquire",
        "b",
        "--owner",
        "c2",
        "--takeover",
        "--json",
    ]));
    for args in [
        vec![
            "acquire", "b", "r2", "--lane", "l1", "--owner", "c1", "--epoch", "1",
        ],
        vec![
            "renew",
            "b",
            "r",
            "--lane",
            "l1",
            "--generation",
            "2",
            "--owner",
            "c1",
            "--epoch",
            "1",
        ],
        vec![
            "release",
            "b",
            "r",
            "--lane",
            "l1",
            "--generation",
            "2",
            "--owner",
            "",
            "--epoch",
            "1",
        ],
    ] {
        let ran = home.cli(&args);
        assert_eq!(ran.code, 3, "{args:?}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("the controller lease is stale"),
            "{}",
            ran.stderr
        );
    }
    let shown: Vec<Value> =
        serde_json::from_str(home.cli(&["show", "b", "--json"]).stdout.trim()).unwrap();
    assert_eq!(
        shown.len(),
        1,
        "only the row written under the live controller"
    );
    assert_eq!(
        home.cli(&[
            "renew",
            "b",
            "r",
            "--lane",
            "l1",
            "--generation",
            "2",
            "--descriptor",
            held.to_str().unwrap(),
            "--owner",
            "c2",
            "--epoch",
            "2"
        ])
        .code,
        0
    );
}

fn a_raw_batch_commits_or_names_what_refused_it(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let file = home.path("batch.json");
    let write = |body: &str| std::fs::write(&file, body).unwrap();
    let path = file.to_str().unwrap();
    write(
        r#"[{"kind":"put","section":"s","key":"a","expected":0,"value":{"x":1}},{"kind":"put","section":"s","key":"b","expected":-1,"value":"y"}]"#,
    );
    let ran = home.cli(&["batch", "b", "--file", path]);
    assert_eq!((ran.code, ran.stdout.trim()), (0, "1"), "{}", ran.stderr);
    write(
        r#"[{"kind":"check","section":"s","key":"a","expected":1},{"kind":"delete","section":"s","key":"b","expected":7}]"#,
    );
    let ran = home.cli(&["batch", "b", "--file", path]);
    assert_eq!(ran.code, 3);
    assert!(ran.stderr.contains("s/b"), "{}", ran.stderr);
    write(r#"[{"kind":"put","section":"s","key":"c","expected":0,"value":1}]"#);
    let ran = home.cli(&[
        "batch", "b", "--file", path, "--owner", "c1", "--epoch", "1",
    ]);
    assert_eq!(ran.code, 3);
    assert!(
        ran.stderr.contains("the controller lease is stale"),
        "{}",
        ran.stderr
    );
    write("not json");
    assert_eq!(home.cli(&["batch", "b", "--file", path]).code, 2);
    let records = json(&home.cli(&["records", "b", "--json"]));
    assert_eq!(records["revision"], 1);
    assert_eq!(
        records["sections"]["s"]["a"],
        serde_json::json!({"r": 1, "v": {"x": 1}})
    );
    assert_eq!(records["sections"]["s"]["b"]["v"], "y");
    let log: Vec<Value> =
        serde_json::from_str(home.cli(&["log", "b", "--json"]).stdout.trim()).unwrap();
    assert_eq!(
        log,
        vec![serde_json::json!({"revision": 1, "owner": "", "records": 2})]
    );
    let text = home.cli(&["log", "b"]);
    assert!(text.stdout.contains("(unfenced)"), "{}", text.stdout);
}

#[test]
fn a_raw_batch_cannot_rewrite_the_controller_lease_or_write_nothing() {
    let home = Home::file();
    assert_eq!(
        home.cli(&["controller", "acquire", "b", "--owner", "c1"])
            .code,
        0
    );
    let file = home.path("batch.json");
    let path = file.to_str().unwrap();
    for (body, says) in [
        (
            r#"[{"kind":"delete","section":"meta","key":"lease","expected":-1}]"#,
            "meta/lease",
        ),
        (
            r#"[{"kind":"put","section":"meta","key":"epoch","expected":-1,"value":0}]"#,
            "meta/epoch",
        ),
        (
            r#"[{"kind":"put","section":"s","key":"k","expected":0}]"#,
            "a put needs a \"value\"",
        ),
        ("[]", "empty batch"),
        (
            r#"[{"kind":"put","section":"s","key":"k","expected":0,"value":1,"extra":2}]"#,
            "not a batch",
        ),
    ] {
        std::fs::write(&file, body).unwrap();
        let ran = home.cli(&["batch", "b", "--file", path]);
        assert_eq!(ran.code, 2, "{body}: {}", ran.stderr);
        assert!(ran.stderr.contains(says), "{body}: {}", ran.stderr);
    }
    // Checking them is fine.
    std::fs::write(&file, r#"[{"kind":"check","section":"meta","key":"lease","expected":1},{"kind":"put","section":"s","key":"k","expected":0,"value":1}]"#).unwrap();
    assert_eq!(home.cli(&["batch", "b", "--file", path]).code, 0);
    assert_eq!(
        home.cli(&["controller", "acquire", "b", "--owner", ""])
            .code,
        2
    );
    assert_eq!(
        home.cli(&["controller", "acquire", "b", "--owner", "  "])
            .code,
        2
    );
}
