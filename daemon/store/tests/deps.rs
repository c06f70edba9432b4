//! The store crate is the domain and its adapters: typed errors only, no command line,
//! templates, log subscriber or HTTP client (those belong to the resident and the CLI).

use std::process::Command;

#[test]
fn the_store_links_no_cli_template_subscriber_or_http_client() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "row-fence-store",
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
        "clap",
        "tera",
        "tracing-subscriber",
        "reqwest",
        "row-fence-resident",
        "row-fence",
    ] {
        assert!(
            !crates.contains(&banned),
            "row-fence-store links {banned}:\n{tree}"
        );
    }
}
