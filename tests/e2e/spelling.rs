//! One spelling per name (ARCHITECTURE.md, "One spelling"): a row or lane spelled with
//! anything but ASCII letters, digits, `-`, `_`, `.` (and `/` in a lane) is refused where
//! it enters, with the character named as `\u{…}`; a look-alike of a name already on the
//! board (case, 0/o, 1/l) is refused as a second lease; neither yields an ALLOWED.

use crate::util::{Home, Redis};

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
        fencing::write(
            store,
            "b",
            &["claims"],
            |view| {
                view.section("claims").insert("Row-1", held.clone());
                view.section("claims").insert("row-2", other.clone());
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
    let ran = home.ask_with(&a, &["--action", action]);
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
}
