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
