//! One spelling per name (ARCHITECTURE.md, "One spelling"): a row or lane spelled with
//! anything but ASCII letters, digits, `-`, `_`, `.` (and `/` in a lane) is refused where
//! it enters, with the character named as `\u{…}`; a look-alike of a name already on the
//! board (case, 0/o, 1/l) is refused as a second lease; neither yields an ALLOWED.

use crate::util::{Home, Redis, bin, run};

on_both_stores!(look_alike_names_never_make_a_second_lease_or_an_allowed);

fn look_alike_names_never_make_a_second_lease_or_an_allowed(redis: Option<&Redis>) {
    let home = Home::on(redis);
    let _daemon = home.daemon();
    let (_, a) = home.acquire("b", "row-1", "lane-a", &[]);

    // Names outside the allowlist: refused before anything opens (exit 2), the character
    // named, the refusal itself free of raw controls.
    for (lane, named) in [
        ("l\u{430}ne-a", "\\u{430}"),    // Cyrillic a
        ("lane\u{200d}-a", "\\u{200d}"), // zero-width joiner
        ("lane-\u{202e}a", "\\u{202e}"), // right-to-left override
        ("lane-a ", "\\u{20}"),          // trailing space
        ("lane-\u{e9}", "\\u{e9}"),      // NFC é
        ("lane-e\u{301}", "\\u{301}"),   // NFD é
        ("lane-a\u{2028}", "\\u{2028}"), // line separator
    ] {
        for (row, lane) in [("row-1", lane), ("row-2", lane)] {
            let ran = home.cli(&["acquire", "b", row, "--lane", lane, "--takeover"]);
            assert_eq!(ran.code, 2, "{lane:?}: {}", ran.stderr);
            assert!(ran.stderr.contains(named), "{lane:?}: {}", ran.stderr);
            assert!(
                ran.stderr
                    .chars()
                    .all(|c| c == '\n' || c.is_ascii_graphic() || c == ' '),
                "{:?}",
                ran.stderr
            );
        }
    }

    for row in [
        "row-1\u{200b}",
        "r\u{43e}w-1",
        "ro\u{302}w-1",
        "row-1 ",
        "row\u{2010}1",
    ] {
        let ran = home.cli(&["acquire", "b", row, "--lane", "lane-a"]);
        assert_eq!(ran.code, 2, "{row:?}: {}", ran.stderr);
        assert!(ran.stderr.contains("\\u{"), "{row:?}: {}", ran.stderr);
    }

    // Look-alike rows and lanes: refused as a second lease (exit 3), naming the spelling
    // there is.
    for row in ["Row-1", "ROW-1", "row-l", "row-I"] {
        let ran = home.cli(&["acquire", "b", row, "--lane", "lane-b", "--takeover"]);
        assert_eq!(ran.code, 3, "{row}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("looks like row row-1"),
            "{}",
            ran.stderr
        );
    }
    for lane in ["Lane-a", "LANE-A", "lane-A"] {
        let ran = home.cli(&["acquire", "b", "row-2", "--lane", lane]);
        assert_eq!(ran.code, 3, "{lane}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("looks like lane lane-a"),
            "{}",
            ran.stderr
        );
    }
    let shown = home.cli(&["show", "b"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(!shown.stdout.contains("row-2"), "{}", shown.stdout);

    // The holder's own descriptor, edited to a look-alike lane or a disallowed spelling,
    // keeps its token yet is never ALLOWED.
    let mut d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    for lane in ["Lane-a", "lane-\u{430}", "lane-a\u{200b}"] {
        d["lane"] = lane.into();
        let forged = home.path("forged.json");
        std::fs::write(&forged, d.to_string()).unwrap();
        let ran = home.ask_with(&forged, &[]);
        assert_ne!(ran.code, 0, "{lane:?}: {}", ran.stderr);
        assert!(!ran.verdict_line().contains("ALLOWED"), "{}", ran.stderr);
    }
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
}

/// Spellings stored before the allowlist (here written under it, straight into the file
/// store) are found and reported by `store check --board`, never merged.
#[test]
fn store_check_reports_spellings_stored_before_the_allowlist() {
    use row_fence_store::LeaseStore;
    use row_fence_store::fencing;
    let home = Home::file();
    home.acquire("b", "row-1", "lane-a", &[]);
    let clean = home.cli(&["store", "check", "--board", "b"]);
    assert!(!clean.stdout.contains("look alike"), "{}", clean.stdout);
    crate::contract::runtime().block_on(async {
        let store = row_fence_store::file::FileStore::new(home.home.join("store"));
        let store: &dyn LeaseStore = &store;
        let held = store
            .record("b", "claims", "row-1")
            .await
            .unwrap()
            .unwrap()
            .value;
        let mut other = held.clone();
        other["holder"] = "l\u{430}ne-a".into();
        let zero_width = held.clone();
        fencing::write(
            store,
            "b",
            &["claims"],
            |view| {
                view.section("claims").insert("Row-1", held.clone());
                view.section("claims").insert("row-2", other.clone());
                view.section("claims")
                    .insert("row-3\u{200b}", zero_width.clone());
                Ok::<_, ()>(())
            },
            None,
        )
        .await
        .unwrap();
    });
    let found = home.cli(&["store", "check", "--board", "b"]);
    assert!(
        found
            .stdout
            .contains("rows \"Row-1\" and \"row-1\" look alike"),
        "{}",
        found.stdout
    );
    assert!(found.stdout.contains("l\\u{430}ne-a"), "{}", found.stdout);
    assert!(found.stdout.is_ascii(), "{}", found.stdout);
    // Nothing was merged: both spellings are still there.
    let shown = home.cli(&["show", "b"]);
    assert!(shown.stdout.contains("Row-1") && shown.stdout.contains("row-1"));

    // A lease under a pre-rule name: no descriptor can name it, so its holder cannot renew
    // or release it; `store check` prints the escaped name and the command that releases it.
    let generation = shown
        .stdout
        .lines()
        .find(|l| l.starts_with("row-1 "))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap()
        .to_string();
    let release = format!(
        "release it with: row-fence release b 'row-3\\u{{200b}}' --lane lane-a --generation {generation} --stored-name"
    );
    assert!(found.stdout.contains(&release), "{}", found.stdout);
    let by_rule = home.cli(&[
        "release",
        "b",
        "row-3\u{200b}",
        "--lane",
        "lane-a",
        "--generation",
        &generation,
    ]);
    assert_eq!(by_rule.code, 2, "{}", by_rule.stderr);
    // A wrong generation or holder is refused, a name the rule allows is not a stored name.
    let wrong = home.cli(&[
        "release",
        "b",
        "row-3\\u{200b}",
        "--lane",
        "lane-a",
        "--generation",
        "999",
        "--stored-name",
    ]);
    assert_eq!(wrong.code, 3, "{}", wrong.stderr);
    let clean = home.cli(&[
        "release",
        "b",
        "row-1",
        "--lane",
        "lane-a",
        "--generation",
        &generation,
        "--stored-name",
    ]);
    assert_eq!(clean.code, 2, "{}", clean.stderr);
    let released = home.cli(&[
        "release",
        "b",
        "row-3\\u{200b}",
        "--lane",
        "lane-a",
        "--generation",
        &generation,
        "--stored-name",
    ]);
    assert_eq!(released.code, 0, "{}", released.stderr);
    assert!(
        released.stderr.contains("released b/row-3\\u{200b}"),
        "{}",
        released.stderr
    );
    let shown = home.cli(&["show", "b", "--json"]);
    assert!(!shown.stdout.contains("row-3"), "{}", shown.stdout);
    assert!(
        shown.stdout.contains("row-1"),
        "the others stay: {}",
        shown.stdout
    );
}

/// A tenant has the rows' one spelling wherever it enters: `acquire --tenant`, a
/// descriptor, the registry (the daemon does not start on it), a batch's claim.
#[test]
fn a_tenant_has_one_spelling_wherever_it_enters() {
    let home = Home::file();
    for (tenant, named) in [
        ("acme\u{200b}", "\\u{200b}"),
        ("ac\u{202e}me", "\\u{202e}"),
        ("\u{430}cme", "\\u{430}"),
        ("acme\u{2028}", "\\u{2028}"),
        ("caf\u{e9}", "\\u{e9}"),
    ] {
        let ran = home.cli(&[
            "acquire", "b", "row-1", "--lane", "lane-a", "--tenant", tenant,
        ]);
        assert_eq!(ran.code, 2, "{tenant:?}: {}", ran.stderr);
        assert!(ran.stderr.contains(named), "{tenant:?}: {}", ran.stderr);
    }
    let (_, descriptor) = home.acquire("b", "row-1", "lane-a", &["--tenant", "acme"]);
    let mut d: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&descriptor).unwrap()).unwrap();
    d["tenant"] = "acme\u{200b}".into();
    std::fs::write(&descriptor, d.to_string()).unwrap();
    let _daemon = home.daemon();
    let asked = home.ask_with(&descriptor, &[]);
    assert_eq!(asked.code, 1, "{}", asked.stderr);
    assert!(asked.stderr.contains("\\u{200b}"), "{}", asked.stderr);
    drop(_daemon);
    let registry = home.home.join("registry");
    std::fs::create_dir_all(&registry).unwrap();
    std::fs::write(
        registry.join("boards.toml"),
        "[boards.b]\ntenant = \"ac\u{202e}me\"\n",
    )
    .unwrap();
    let started = crate::util::run(&mut home.command(crate::util::bin("row-fence-resident")));
    assert_ne!(started.code, 0, "{}", started.stderr);
    assert!(started.stderr.contains("tenant"), "{}", started.stderr);
}

/// A lane's action text with ESC, BEL, CR, a newline and a bidi override reaches the
/// daemon's log and the verdict line escaped as `\u{…}`: no forged line, no cleared screen.
#[test]
fn controls_in_a_refusal_are_escaped_in_the_log_and_the_verdict_line() {
    let home = Home::file();
    let daemon = home.daemon();
    home.acquire("b", "row-1", "lane-a", &[]);
    home.acquire("b", "row-1", "lane-b", &["--takeover"]);
    let a = home.path("lane-a.json");
    let action = "git push\u{1b}[2J\u{7}\r\nrow-fence: ALLOWED \u{202e}x";
    let ran = run(home
        .command(bin("row-fence-ask"))
        .env("ROW_FENCE_SESSION", "s\u{1b}]0;x\u{7}\u{85}")
        .args(["--descriptor", a.to_str().unwrap(), "--action", action]));
    assert_eq!(ran.code, 3, "{}", ran.stderr);
    assert!(!ran.stderr.contains(['\u{1b}', '\u{7}', '\r', '\u{202e}']));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut log = daemon.log_text();
    while !log.contains("2J") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        log = daemon.log_text();
    }
    assert!(log.contains("\\u{1b}[2J\\u{7}"), "{log}");
    assert!(
        !log.contains(['\u{1b}', '\u{7}', '\r', '\u{202e}']),
        "{log:?}"
    );
    assert!(
        !log.lines().any(|l| l.starts_with("row-fence: ALLOWED")),
        "{log}"
    );
    // `row-fence status` shows the refusal's action and session escaped too.
    let status = home.cli(&["status"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(status.stdout.contains("\\u{1b}[2J"), "{}", status.stdout);
    assert!(status.stdout.contains("s\\u{1b}]0;x"), "{}", status.stdout);
    assert!(
        !status
            .stdout
            .contains(['\u{1b}', '\u{7}', '\r', '\u{202e}', '\u{85}']),
        "{:?}",
        status.stdout
    );
}

/// The look-alike rule holds for the routes around `acquire`: a raw batch's claim beside a
/// look-alike row (`row-l` beside `row-1`) or under a look-alike holder (`Lane-a` beside
/// lane-a's live lease) is refused (exit 2, nothing written), and a lease already stored
/// beside a look-alike is not armed by `acquire --reissue` (exit 3, no descriptor), so the
/// two never both get an ALLOWED.
#[test]
fn a_raw_batch_or_a_reissue_never_arms_a_look_alike() {
    use row_fence_store::LeaseStore;
    use row_fence_store::fencing;
    let home = Home::file();
    let _daemon = home.daemon();
    let (_, a) = home.acquire("b", "row-1", "lane-a", &[]);
    let revision = || {
        home.cli(&["records", "b", "--json"]).json()["revision"]
            .as_u64()
            .unwrap()
    };
    let before = revision();
    let in_an_hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 3_600_000;
    for (row, holder, says) in [
        ("row-l", "lane-c", "looks like row row-1"),
        ("ROW-1", "lane-c", "looks like row row-1"),
        ("row-9", "Lane-a", "looks like lane lane-a"),
    ] {
        let batch = home.path("batch.json");
        let claim = serde_json::json!([{"kind": "put", "section": "claims", "key": row,
            "expected": -1, "value": {"holder": holder, "generation": 1,
            "expires_at_ms": in_an_hour}}]);
        std::fs::write(&batch, claim.to_string()).unwrap();
        let ran = home.cli(&["batch", "b", "--file", batch.to_str().unwrap()]);
        assert_eq!(ran.code, 2, "{row}/{holder}: {}", ran.stderr);
        assert!(ran.stderr.contains(says), "{row}/{holder}: {}", ran.stderr);
    }
    assert_eq!(revision(), before, "no batch was written");
    // A look-alike stored anyway (before the rule, or raced past the batch's read): the
    // reissue that would give it a token is refused in its own fenced write.
    crate::contract::runtime().block_on(async {
        let store = row_fence_store::file::FileStore::new(home.home.join("store"));
        let store: &dyn LeaseStore = &store;
        let mut held = store
            .record("b", "claims", "row-1")
            .await
            .unwrap()
            .unwrap()
            .value;
        held["holder"] = "lane-c".into();
        held.as_object_mut().unwrap().remove("token_sha256");
        fencing::write(
            store,
            "b",
            &["claims"],
            |view| {
                view.section("claims").insert("row-l", held.clone());
                Ok::<_, ()>(())
            },
            None,
        )
        .await
        .unwrap();
    });
    let descriptor = home.path("c.json");
    let reissued = home.cli(&[
        "acquire",
        "b",
        "row-l",
        "--lane",
        "lane-c",
        "--reissue",
        "--write-descriptor",
        descriptor.to_str().unwrap(),
    ]);
    assert_eq!(reissued.code, 3, "{}", reissued.stderr);
    assert!(
        reissued.stderr.contains("looks like row row-1"),
        "{}",
        reissued.stderr
    );
    assert!(!descriptor.exists(), "no token was handed out");
    assert_eq!(home.ask_with(&a, &[]).code, 0, "lane-a keeps its row");
}
