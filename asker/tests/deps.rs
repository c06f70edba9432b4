//! The asker must start in about a millisecond: its normal dependency tree is the
//! contract (std, serde/serde_json, sha2, nix), the build digest and lexopt, and it never
//! links an async runtime or a Redis client.

use std::process::Command;

#[test]
fn the_asker_links_no_tokio_and_no_redis() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "row-fence-ask",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for banned in ["tokio", "redis", "mio", "async-trait", "futures"] {
        assert!(
            !crates.iter().any(|c| c.starts_with(banned)),
            "row-fence-ask links {banned}:\n{tree}"
        );
    }
    for expected in [
        "row-fence-ask",
        "row-fence-contract",
        "row-fence-stamp",
        "serde",
        "serde_json",
        "sha2",
        "lexopt",
    ] {
        assert!(
            crates.contains(&expected),
            "{expected} missing from:\n{tree}"
        );
    }
}

#[test]
fn the_asker_prints_its_version_and_help() {
    let exe = env!("CARGO_BIN_EXE_row-fence-ask");
    let out = Command::new(exe).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("row-fence-ask "));
    let out = Command::new(exe).arg("--help").output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("Exit: 0 ALLOWED or UNFENCED, 3 REFUSED, 1 COULD NOT READ")
    );
    let out = Command::new(exe).arg("--no-such-flag").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
