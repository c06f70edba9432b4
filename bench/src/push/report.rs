//! The push case's report, in Markdown: each transport's table of arms, its ratios
//! against the targets, and how it was measured.

use super::{Figures, Pair, TARGET_LARGE_RATIO, TARGET_RATIO, TARGET_RSS_MB};
use crate::stats::Summary;
use std::fmt::Write as _;

/// The case's report; `error` when the case failed as a whole.
pub fn report(figures: Option<&Figures>, error: Option<&str>, command: &str) -> String {
    let mut md = String::from("# row-fence bench: the daemon pushes for the lane\n\n");
    let _ = writeln!(md, "`{command}`\n");
    let _ = writeln!(
        md,
        "A `git push` through the daemon (`git-remote-row-fence` → judge → the pack streamed to the forge while spooled → judge → its last bytes) ÷ a direct `git push` to the same server with the same credential: p50 vs p50 of one small commit per push, target ≤ {TARGET_RATIO}×; one large push each way, target ≤ {TARGET_LARGE_RATIO}×, with the daemon's RSS growth under {TARGET_RSS_MB} MB. Over ssh (the daemon's key, on its own warm master) and over HTTPS (the daemon's token, basic auth).\n"
    );
    if let Some(f) = figures {
        md.push_str("## ssh\n\n");
        pair(
            &mut md,
            &f.ssh,
            f.large_mb,
            (
                "git push through the daemon",
                "git push straight to sshd (same key)",
            ),
        );
        md.push_str("## HTTPS\n\n");
        match &f.https {
            Ok(https) => {
                let _ = writeln!(md, "The server: {}.\n", f.https_server);
                pair(
                    &mut md,
                    https,
                    f.large_mb,
                    (
                        "git push through the daemon over HTTPS",
                        "git push straight to lighttpd + git http-backend (same token)",
                    ),
                );
            }
            Err(why) => {
                let _ = writeln!(md, "Absent: {why}\n");
            }
        }
    }
    if let Some(error) = error {
        let _ = writeln!(md, "Not measured: {error}\n");
    }
    let _ = writeln!(md, "## How it was measured\n\n{HOW}\n\n{HOW_HTTPS}");
    md
}

/// One transport's table, its small-push ratio and its large push.
fn pair(md: &mut String, p: &Pair, large_mb: f64, arms: (&str, &str)) {
    md.push_str(&Summary::table(
        "pushes",
        &[(arms.0, &p.daemon), (arms.1, &p.direct)],
    ));
    let met = |ok: bool| if ok { "met" } else { "MISSED" };
    let ratio = p.ratio();
    let _ = writeln!(
        md,
        "\ndaemon ÷ direct p50: **{ratio:.3}×** — {}; failed pushes: {}\n",
        met(ratio > 0.0 && ratio <= TARGET_RATIO && p.failed == 0),
        p.failed
    );
    let large = p.large_ratio();
    let _ = writeln!(
        md,
        "{large_mb:.0} MB push: {:.0} ms through the daemon, {:.0} ms direct: **{large:.3}×** — {}; the daemon's RSS grew **{:.1} MB** — {}\n",
        p.large_daemon_ms,
        p.large_direct_ms,
        met(large > 0.0 && large <= TARGET_LARGE_RATIO),
        p.large_rss_growth_mb,
        met(p.large_rss_growth_mb < TARGET_RSS_MB)
    );
}

const HOW: &str = "Everything is private to the run, on loopback, with one daemon under test on the file store: the key broker's flags (`--broker-key` with the run's key, `--broker-forge-host-key` with sshd's host key), `--push-socket`, and a `--push-forge` per transport; the lane's row ALLOWED, its descriptor in each daemon arm's clone (the same-uid mode). Each transport has two bare repositories, one per arm. Each sample is one `git push` of one new small commit, spawn to exit; every arm (four; two when the HTTPS pair is absent) takes its turn sample by sample, the first one rotating, so a neighbour's load slows all alike. The large commit is random bytes (no compression helps either arm), pushed direct first, then through the daemon; the RSS growth is the daemon's `VmHWM` after the push (reset before it) minus its `VmRSS` before.\n\nssh: a real sshd (a host key made for the run, this user, one authorized key). The daemon arm's remote is `row-fence::ssh://…` (what `install broker` wires with `pushInsteadOf`); the direct arm's ssh uses the same key file with the same options. The daemon keeps one ssh master per forge and key set (as shipped), so its samples after the first pay no handshake; the direct arm's git pays one per push, as git does.";

const HOW_HTTPS: &str = "HTTPS: a real lighttpd from the system's packages (`mod_openssl` with a P-256 certificate made for the run by a CA made for the run, an IP SAN of 127.0.0.1; `mod_auth` basic auth with one user whose password is the run's token; `git http-backend` as CGI with `GIT_PROJECT_ROOT` and `GIT_HTTP_EXPORT_ALL`, `REMOTE_USER` from the basic auth). The daemon arm's remote is `row-fence::https://127.0.0.1:PORT/git/daemon.git`; the daemon has `--push-forge https://pusher@127.0.0.1:PORT/git/` and `--push-ca` the run's CA, and the token loaded with `row-fence token add FILE`; per push it sends `GET …/info/refs?service=git-receive-pack` and `POST …/git-receive-pack` (the pack as the body, streamed), each with basic auth, each on a connection of its own (its client keeps none between requests). The direct arm is git (libcurl) as cheap as it allows: `http.sslCAInfo` the same CA and an empty `http.sslCAPath` (so it trusts that CA only, as the daemon does, and loads no system roots), `http.extraHeader` with the same basic auth on every request (no 401 round first, no credential helper to run); its GET and POST share one connection. Above git's `http.postBuffer` (1 MiB: the large push) git first sends a small probe POST and then the pack chunked.";
