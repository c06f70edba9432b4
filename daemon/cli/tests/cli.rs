//! The CLI answers `--help` and `--version`, and a bad flag is a usage error (exit 2).

use std::process::Command;

#[test]
fn the_cli_answers_help_and_version() {
    {
        let exe = env!("CARGO_BIN_EXE_row-fence");
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
