//! The benchmark cannot rot: `row-fence-bench --quick --smoke` (what
//! `scripts/bench --quick --smoke` runs, here on the debug binaries) starts its private
//! redis-server, daemons and load, takes a handful of samples of every case, stops all of
//! it and writes its report. Nothing here is timed: a smoke run judges no target.

use crate::util::{bin_dir, run};
use std::fs;
use std::process::Command;

#[test]
fn a_smoke_run_of_the_bench_exits_0_and_writes_its_report() {
    let bins = bin_dir();
    for name in [
        "row-fence-bench",
        "row-fence-bench-echo",
        "row-fence-bench-maxrss",
    ] {
        assert!(
            bins.join(name).exists(),
            "{} is missing: run `cargo build --workspace --bins` first (scripts/test does)",
            bins.join(name).display()
        );
    }
    let dir = tempfile::Builder::new()
        .prefix("rfsmoke")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let report = dir.path().join("report.md");
    let ran = run(Command::new(bins.join("row-fence-bench"))
        .args(["--quick", "--smoke", "--bin-dir"])
        .arg(&bins)
        .arg("--out")
        .arg(&report));
    assert_eq!(
        ran.code, 0,
        "the bench failed:\n{}\n{}",
        ran.stderr, ran.stdout
    );
    let text = fs::read_to_string(&report).expect("the report was written");
    assert!(
        !text.contains("The run stopped early"),
        "the run stopped early:\n{text}"
    );
    for part in [
        "## Machine",
        "## Targets",
        "warm: row-fence-ask",
        "floor: /bin/true",
        "cold Rust: row-fence check",
        "oversubscribed",
        "asks/s",
        "## Fenced writes",
        "fenced batches/s",
        "## Agent guard",
        "guard: fenced ALLOWED push",
        "hook floor: sh -c true",
        "## Agent hooks",
        "agent hook codex: row-bound ALLOWED",
        "agent hook cursor: 100 KB command",
        "quarantined p50 ms",
        // The CPU, throughput, bytes-per-change and file-store rows and cases.
        "daemon CPU per ask, one client",
        "redis-server CPU per ask, one client",
        "bytes received for one single-record fenced change",
        "file store ask p50 on the largest board",
        "echo round trip over the link",
        "## The file store as boards grow",
        "## The read barrier of a replicated Redis",
        "## Where the daemon's CPU goes",
        "etcdctl",
    ] {
        assert!(text.contains(part), "the report lacks {part:?}:\n{text}");
    }
    // Every target row carries a figure, even in a smoke run; only the Python comparison may
    // be skipped (no venv, pip offline, or its one checked ask failed: the notes say why).
    let targets = text
        .split("## Targets")
        .nth(1)
        .and_then(|t| t.split("\n## ").next())
        .expect("a targets section");
    for row in targets
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| target"))
        .filter(|l| !l.contains("Python"))
    {
        assert!(
            !row.contains("| — |"),
            "a target without a figure: {row}\n{text}"
        );
    }
    // The pictures are drawn beside the report and embedded in it.
    for picture in [
        "latency-1-unix.svg",
        "cost-bytes-per-change.svg",
        "cost-file-store-ask.svg",
    ] {
        let svg = fs::read_to_string(dir.path().join(picture))
            .unwrap_or_else(|e| panic!("{picture}: {e}"));
        assert!(svg.starts_with("<svg"), "{picture} is not an SVG");
        assert!(
            text.contains(&format!("]({picture})")),
            "the report does not embed {picture}"
        );
    }
    assert!(
        ran.stdout.contains("# row-fence benchmark"),
        "the report is also printed"
    );
}

/// The in-process clients build their requests with the bench's own contract crate, so a
/// bench left over from other sources than the binaries it measures (one that reads a
/// descriptor without its lease token, say) would measure nothing but refusals while the
/// real asker is ALLOWED: it stops before starting anything, naming both builds.
#[test]
fn the_bench_refuses_binaries_of_another_build() {
    let bins = bin_dir();
    let dir = tempfile::Builder::new()
        .prefix("rfsmoke")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let other = dir.path().join("bin");
    fs::create_dir(&other).expect("bin dir");
    for name in [
        "row-fence-ask",
        "row-fence-guard",
        "row-fence",
        "row-fence-resident",
        "row-fence-bench-echo",
        "row-fence-bench-maxrss",
    ] {
        let path = other.join(name);
        fs::write(
            &path,
            format!("#!/bin/sh\necho '{name} 0.1.0 (build 000000000000)'\n"),
        )
        .expect("write a stand-in");
        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
    }
    let ran = run(Command::new(bins.join("row-fence-bench"))
        .args(["--quick", "--smoke", "--no-python", "--bin-dir"])
        .arg(&other)
        .arg("--out")
        .arg(dir.path().join("report.md")));
    assert_eq!(ran.code, 1, "{}\n{}", ran.stderr, ran.stdout);
    assert!(
        ran.stderr
            .contains("is not the build of the binaries it measures")
            && ran.stderr.contains("(build 000000000000)"),
        "{}",
        ran.stderr
    );
}

/// `row-fence-bench --smoke --only CASE` on the debug binaries: asserts it succeeded and
/// wrote `report` (its own report) but not the main one; returns that report's text.
fn smoke_only(case: &str, report: &str) -> String {
    let bins = bin_dir();
    let dir = tempfile::Builder::new()
        .prefix("rfsmoke")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let ran = run(Command::new(bins.join("row-fence-bench"))
        .args(["--smoke", "--only", case, "--bin-dir"])
        .arg(&bins)
        .arg("--out")
        .arg(dir.path().join("report.md")));
    assert_eq!(
        ran.code, 0,
        "the {case} case failed:\n{}\n{}",
        ran.stderr, ran.stdout
    );
    assert!(
        !dir.path().join("report.md").exists(),
        "--only wrote the main report"
    );
    fs::read_to_string(dir.path().join(report)).unwrap_or_else(|e| panic!("{report}: {e}"))
}

/// The key broker's case alone (`scripts/bench --only broker`, as root: sshd and a daemon
/// under a uid of its own): a smoke run measures both arms and writes `broker.md`.
#[test]
fn a_smoke_run_of_the_broker_case_pushes_through_both_agents_and_writes_its_report() {
    assert_eq!(
        nix::unistd::geteuid().as_raw(),
        0,
        "the broker case runs sshd and a daemon under another uid: run it as root (CI does)"
    );
    let text = smoke_only("broker", "broker.md");
    for part in [
        "| broker (row-fence-resident) | 5 | 0 |",
        "| plain ssh-agent | 5 | 0 |",
        "broker ÷ plain p50",
    ] {
        assert!(text.contains(part), "the report lacks {part:?}:\n{text}");
    }
}

/// The operator's console alone (`scripts/bench --only top`): a smoke run watches the board
/// of 1,000 rows under tmux, sees every takeover on the screen and writes `top.md`.
#[test]
fn a_smoke_run_of_the_console_case_sees_each_takeover_and_writes_its_report() {
    let text = smoke_only("top", "top.md");
    for part in [
        "| idle CPU, % of one core",
        "| CPU per refresh",
        "(3 takeovers, 0 missed)",
    ] {
        assert!(text.contains(part), "the report lacks {part:?}:\n{text}");
    }
}

/// The forge API endpoint's case alone (`scripts/bench --only forge-api`): a smoke run
/// sends gh through the daemon and through a plain relay, and a judged create and merge,
/// and writes `forge-api.md`.
#[test]
fn a_smoke_run_of_the_forge_api_case_measures_every_arm_and_writes_its_report() {
    let text = smoke_only("forge-api", "forge-api.md");
    for part in [
        "| gh api, through the daemon | 5 |",
        "| gh api, through socat (no judgement) | 5 |",
        "| curl PUT merge, through the daemon (1 ask + 1 forge read) | 5 |",
        "failed samples: 0",
    ] {
        assert!(text.contains(part), "the report lacks {part:?}:\n{text}");
    }
}

/// `scripts/bench --help` (and `-h` among other flags) says what the bench does and runs
/// nothing: before, it installed packages and began the 13-CPU-minute release build, and
/// passed `--help` on only after it.
#[test]
fn scripts_bench_help_builds_and_installs_nothing() {
    let target = tempfile::tempdir().unwrap();
    for args in [vec!["--help"], vec!["--quick", "-h"]] {
        let ran = crate::util::run(
            std::process::Command::new(crate::util::repo_root().join("scripts/bench"))
                .args(&args)
                .env("CARGO_TARGET_DIR", target.path())
                .env("PATH", "/usr/bin:/bin")
                .stdin(std::process::Stdio::null()),
        );
        assert_eq!(ran.code, 0, "{args:?}: {}", ran.stderr);
        assert!(
            ran.stdout.contains("scripts/bench --quick") && ran.stdout.contains("Every flag"),
            "{args:?}: {}",
            ran.stdout
        );
        assert!(!ran.stderr.contains("building"), "{args:?}: {}", ran.stderr);
        assert_eq!(
            std::fs::read_dir(target.path()).unwrap().count(),
            0,
            "{args:?}: nothing is built"
        );
    }
}

/// The daemon's push case alone (`scripts/bench --only push`): a smoke run pushes through
/// the daemon and straight to the same server, over ssh (sshd) and over HTTPS (lighttpd in
/// front of `git http-backend`, which scripts/test installs), and a large commit each way,
/// and writes `push.md` with every arm's samples and no failed push.
#[test]
fn a_smoke_run_of_the_push_case_measures_both_arms_and_writes_its_report() {
    let text = smoke_only("push", "push.md");
    for part in [
        "| git push through the daemon | 5 |",
        "| git push straight to sshd (same key) | 5 |",
        "| git push through the daemon over HTTPS | 5 |",
        "| git push straight to lighttpd + git http-backend (same token) | 5 |",
        "5 MB push:",
    ] {
        assert!(text.contains(part), "the report lacks {part:?}:\n{text}");
    }
    assert_eq!(
        text.matches("failed pushes: 0").count(),
        2,
        "a failed push on either transport:\n{text}"
    );
    assert!(
        !text.contains("Absent:"),
        "the HTTPS pair is absent:\n{text}"
    );
}
