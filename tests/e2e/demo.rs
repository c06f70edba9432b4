//! `scripts/demo` on each store, on the debug binaries (`ROW_FENCE_BIN_DIR`, so nothing is
//! built): every step as the tour says, exit 0, and nothing left behind — no temp dir, no
//! store process (the etcd tour's cleanup once stopped at its first member).

use crate::util::{Ran, bin_dir, repo_root};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs the tour on `store` (`[]`, `["--redis"]`, `["--etcd"]`) and checks it.
fn tour(args: &[&str], store: &str) {
    // Output to files, not pipes: a store process left running would hold a pipe open and
    // the test would wait for it instead of failing.
    let out = tempfile::tempdir().unwrap();
    let (stdout, stderr) = (out.path().join("stdout"), out.path().join("stderr"));
    let started = std::time::Instant::now();
    let status = Command::new(repo_root().join("scripts/demo"))
        .args(args)
        .env("ROW_FENCE_BIN_DIR", bin_dir())
        .env_remove("ROW_FENCE_HOME")
        .env_remove("ROW_FENCE_STORE")
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).unwrap())
        .stderr(File::create(&stderr).unwrap())
        .status()
        .unwrap();
    let ran = Ran {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read_to_string(&stdout).unwrap(),
        stderr: std::fs::read_to_string(&stderr).unwrap(),
        elapsed: started.elapsed(),
    };
    // Stop what the tour left before asserting, so a failure leaves nothing running.
    let home_line = ran.stdout.lines().find_map(|l| l.strip_prefix("== home:"));
    let work = home_line.and_then(|h| PathBuf::from(h.trim()).parent().map(PathBuf::from));
    let left = work.as_deref().map(left_running).unwrap_or_default();
    for (pid, _) in &left {
        let _ = Command::new("kill").arg(pid).status();
    }
    let left_behind = work.as_deref().is_some_and(Path::exists);
    if let Some(dir) = work.as_deref().filter(|_| left_behind) {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let _ = std::fs::remove_dir_all(dir);
    }
    assert_eq!(
        ran.code, 0,
        "scripts/demo {args:?}:\n{}\n{}",
        ran.stdout, ran.stderr
    );
    assert!(
        ran.stdout.contains(&format!(
            "all four verdicts as expected on the {store} store"
        )),
        "{}",
        ran.stdout
    );
    let work = work.unwrap_or_else(|| panic!("a home line in {}", ran.stdout));
    assert!(left.is_empty(), "processes left running: {left:?}");
    assert!(!left_behind, "{} was left behind", work.display());
}

/// The processes whose command line names `dir`: (pid, command line).
fn left_running(dir: &Path) -> Vec<(String, String)> {
    let dir = dir.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let line = std::fs::read(e.path().join("cmdline")).ok()?;
            Some((
                pid.to_string(),
                String::from_utf8_lossy(&line).replace('\0', " "),
            ))
        })
        .filter(|(_, line)| line.contains(&dir))
        .collect()
}

#[test]
fn the_tour_runs_on_the_file_store_and_leaves_nothing() {
    tour(&[], "file");
}

#[test]
fn the_tour_runs_on_redis_and_leaves_nothing() {
    tour(&["--redis"], "redis");
}

#[test]
fn the_tour_runs_on_a_three_member_etcd_and_leaves_nothing() {
    tour(&["--etcd"], "etcd");
}
