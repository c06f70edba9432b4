//! `ARCHITECTURE.md` is the design of record and the second hop of every "why is it like
//! this?": it names every crate of the workspace, and every `ARCHITECTURE.md, "Section"`
//! a comment, a script or the README cites is a heading it has.

use crate::util::repo_root;
use std::collections::BTreeSet;
use std::process::Command;

fn architecture() -> String {
    std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).unwrap()
}

/// The headings' texts, `## Code map` → `Code map`.
fn headings(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim().to_string())
        .collect()
}

/// A file's text with comment leaders dropped and lines joined, so a citation broken over
/// two comment lines reads whole.
fn joined(text: &str) -> String {
    text.lines()
        .map(|l| {
            let l = l.trim_start();
            ["//!", "///", "//", "--", "#"]
                .iter()
                .find_map(|p| l.strip_prefix(p))
                .unwrap_or(l)
                .trim()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn every_section_the_tree_cites_is_a_heading_of_architecture_md() {
    let headings = headings(&architecture());
    let listed = Command::new("git")
        .args(["ls-files"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(listed.status.success());
    let mut cited = 0;
    for file in String::from_utf8_lossy(&listed.stdout).lines() {
        // These two show the form of a citation rather than cite.
        if matches!(file, "ARCHITECTURE.md" | "tests/e2e/architecture.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(repo_root().join(file)) else {
            continue;
        };
        let text = joined(&text);
        for (_, rest) in text.match_indices("ARCHITECTURE.md, \"").map(|(i, m)| {
            let start = i + m.len();
            (i, &text[start..])
        }) {
            let section = rest.split('"').next().unwrap_or("");
            assert!(
                headings.contains(section),
                "{file} cites ARCHITECTURE.md, {section:?}, which is no heading of it"
            );
            cited += 1;
        }
    }
    assert!(
        cited > 30,
        "only {cited} citations found: is the scan broken?"
    );
}

#[test]
fn architecture_md_names_every_crate_of_the_workspace() {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--offline",
            "--no-deps",
            "--format-version",
            "1",
        ])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = architecture();
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        if name == "row-fence-e2e" {
            continue;
        }
        assert!(
            text.contains(name),
            "ARCHITECTURE.md does not name the crate {name}"
        );
    }
}
