//! The daemon crate's binaries answer `--help` and `--version` (and building this test
//! builds them for the end-to-end suite).

use std::process::Command;

#[test]
fn both_binaries_answer_help_and_version() {
    for exe in [
        env!("CARGO_BIN_EXE_row-fence"),
        env!("CARGO_BIN_EXE_row-fence-resident"),
    ] {
        let out = Command::new(exe).arg("--version").output().unwrap();
        assert!(out.status.success(), "{exe}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
        let out = Command::new(exe).arg("--help").output().unwrap();
        assert!(out.status.success(), "{exe}");
    }
}

#[test]
fn a_bad_duration_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_row-fence"))
        .args(["acquire", "b", "r", "--lane", "l", "--ttl", "soon"])
        .env("ROW_FENCE_HOME", std::env::temp_dir().join("rf-cli-usage"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
