//! The contract is the ground floor every program stands on, the asker and the guard
//! among them, which start once per fenced write or agent call: its normal dependency
//! tree is std, serde/serde_json, sha2 and nix, and it never links an async runtime, a
//! Redis client, a command-line parser or another row-fence crate.

use std::process::Command;

#[test]
fn the_contract_links_no_tokio_no_redis_no_clap_and_no_other_row_fence_crate() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "row-fence-contract",
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
    for banned in ["tokio", "redis", "clap", "mio", "async-trait", "futures"] {
        assert!(
            !crates.iter().any(|c| c.starts_with(banned)),
            "row-fence-contract links {banned}:\n{tree}"
        );
    }
    for other in crates.iter().filter(|c| c.starts_with("row-fence")) {
        assert_eq!(
            *other, "row-fence-contract",
            "the contract links {other}:\n{tree}"
        );
    }
    for expected in ["row-fence-contract", "serde", "serde_json", "sha2", "nix"] {
        assert!(
            crates.contains(&expected),
            "{expected} missing from:\n{tree}"
        );
    }
}
