//! The margin (ARCHITECTURE.md, "Margin"): a lease with less than the margin left is
//! REFUSED `lease_expiring`, since the write an ALLOWED lets through happens after the
//! verdict; the margin is set per install (`--margin`, `ROW_FENCE_MARGIN`) and shown in
//! the ALLOWED line.

use crate::util::{Home, Redis};

on_both_stores!(a_lease_with_less_than_the_margin_left_is_refused);

fn a_lease_with_less_than_the_margin_left_is_refused(redis: Option<&Redis>) {
    let home = Home::on(redis);
    {
        // The default margin (5 s) is more than a 3 s lease has.
        let _daemon = home.daemon();
        let (_, a) = home.acquire("b", "r", "lane-a", &["--ttl", "3s"]);
        let refused = home.ask_with(&a, &[]);
        refused.expect(3, "row-fence: REFUSED (lease_expiring)");
        assert!(
            refused.verdict_line().contains("margin"),
            "{}",
            refused.stderr
        );
        let (_, a) = home.acquire("b", "r", "lane-a", &["--ttl", "1h"]);
        let allowed = home.ask_with(&a, &[]);
        allowed.expect(0, "row-fence: ALLOWED");
        assert!(
            allowed.verdict_line().contains("margin 5000 ms"),
            "{}",
            allowed.stderr
        );
    }
    // A margin of 1 s: the 3 s lease is ALLOWED; a margin that is not a duration is an
    // error at start, never a daemon without a margin.
    let _daemon = home.daemon_with(&[], &[("ROW_FENCE_MARGIN", "1s")]);
    let (_, a) = home.acquire("b", "r", "lane-a", &["--ttl", "3s"]);
    home.ask_with(&a, &[]).expect(0, "row-fence: ALLOWED");
    let bad = home.cli(&["--margin", "soon", "show", "b"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("margin"), "{}", bad.stderr);
}

/// A board's own `margin` in the registry replaces the install's for that board, in the
/// daemon and the cold `row-fence check` alike, and the verdict line shows the one in force.
#[test]
fn a_boards_margin_in_the_registry_is_the_one_in_force() {
    let home = Home::file();
    let registry = home.home.join("registry");
    std::fs::create_dir_all(&registry).unwrap();
    std::fs::write(
        registry.join("boards.toml"),
        "[boards.quick]\nmargin = \"1s\"\n\n[boards.slow]\nmargin = \"30s\"\n",
    )
    .unwrap();
    let _daemon = home.daemon();
    // The install's 5 s would refuse a 3 s lease; the board's 1 s allows it.
    let (_, quick) = home.acquire("quick", "r", "lane-a", &["--ttl", "3s"]);
    let allowed = home.ask_with(&quick, &[]);
    allowed.expect(0, "row-fence: ALLOWED");
    assert!(
        allowed.verdict_line().contains("margin 1000 ms"),
        "{}",
        allowed.stderr
    );
    // The install's 5 s would allow a 20 s lease; the board's 30 s refuses it.
    let (_, slow) = home.acquire("slow", "r", "lane-a", &["--ttl", "20s"]);
    let refused = home.ask_with(&slow, &[]);
    refused.expect(3, "row-fence: REFUSED (lease_expiring)");
    assert!(
        refused.verdict_line().contains("30000 ms"),
        "{}",
        refused.stderr
    );
    let cold = home.cli(&["check", "--descriptor", slow.to_str().unwrap()]);
    assert_eq!(cold.code, 3, "{}", cold.stderr);
    assert!(cold.stderr.contains("lease_expiring"), "{}", cold.stderr);
    // A board without one keeps the install's.
    let (_, other) = home.acquire("other", "r", "lane-a", &["--ttl", "1h"]);
    let allowed = home.ask_with(&other, &[]);
    assert!(
        allowed.verdict_line().contains("margin 5000 ms"),
        "{}",
        allowed.stderr
    );
}
