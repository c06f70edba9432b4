//! The daemon binary answers `--help` and `--version` without starting (and building this
//! test builds it for the end-to-end suite).

use std::process::Command;

#[test]
fn the_daemon_answers_help_and_version() {
    let exe = env!("CARGO_BIN_EXE_row-fence-resident");
    let out = Command::new(exe).arg("--version").output().unwrap();
    assert!(out.status.success(), "{exe}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
    let out = Command::new(exe).arg("--help").output().unwrap();
    assert!(out.status.success(), "{exe}");
}
