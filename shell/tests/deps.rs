//! The shell reader runs once per agent tool call, inside the guard, and holds no policy:
//! its normal dependency tree is the bash parser (brush-parser) and what that needs, with
//! no other row-fence crate (the contract, the store: policy and verdicts live above it)
//! and no async runtime, store client or command-line parser.

use std::process::Command;

#[test]
fn the_shell_reader_links_the_bash_parser_and_no_row_fence_crate_or_runtime() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "row-fence-shell",
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
    for banned in [
        "tokio",
        "redis",
        "clap",
        "mio",
        "async-trait",
        "futures",
        "serde_json",
    ] {
        assert!(
            !crates.iter().any(|c| c.starts_with(banned)),
            "row-fence-shell links {banned}:\n{tree}"
        );
    }
    for other in crates.iter().filter(|c| c.starts_with("row-fence")) {
        assert_eq!(
            *other, "row-fence-shell",
            "the shell reader links {other}:\n{tree}"
        );
    }
    assert!(
        crates.contains(&"brush-parser"),
        "brush-parser missing from:\n{tree}"
    );
}
