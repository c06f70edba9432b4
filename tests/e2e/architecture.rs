//! `ARCHITECTURE.md` is the design of record and the second hop of every "why is it like
//! this?": it names every crate of the workspace, and every `ARCHITECTURE.md, "Section"`
//! a comment, a script, the README or a `docs/` chapter cites is a heading it has.

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
    let metadata = metadata();
    let text = architecture();
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        assert!(
            text.contains(name),
            "ARCHITECTURE.md does not name the crate {name}"
        );
    }
}

/// `cargo metadata` for the workspace, without its dependencies' packages.
fn metadata() -> serde_json::Value {
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
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The text of the section under `## {heading}`, up to the next `## ` heading.
fn section(text: &str, heading: &str) -> String {
    text.split(&format!("\n## {heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has a section {heading:?}"))
        .split("\n## ")
        .next()
        .unwrap()
        .to_string()
}

/// The code map's table (the first fenced block of "Code map"): package → (directory,
/// the workspace packages it depends on).
fn code_map(text: &str) -> std::collections::BTreeMap<String, (String, BTreeSet<String>)> {
    let map = section(text, "Code map");
    let block = map
        .split("```text\n")
        .nth(1)
        .and_then(|rest| rest.split_once("\n```"))
        .map(|(block, _)| block)
        .expect("the code map is a ```text block");
    block
        .lines()
        .skip(1)
        .map(|line| {
            let mut words = line.split_whitespace();
            let package = words.next().expect("a package").to_string();
            let dir = words.next().expect("a directory").to_string();
            let deps = words
                .collect::<Vec<_>>()
                .join(" ")
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty() && *d != "-")
                .map(str::to_string)
                .collect();
            (package, (dir, deps))
        })
        .collect()
}

/// The code map is what `cargo metadata` says: every workspace package with its
/// directory, every edge it lists is a normal dependency between workspace packages, and
/// every such dependency is listed. A package added, moved or wired anew fails here until
/// the map says so.
#[test]
fn the_code_map_is_the_workspace_cargo_metadata_describes() {
    let metadata = metadata();
    let packages = metadata["packages"].as_array().unwrap();
    let names: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    let root = repo_root();
    let mut actual = std::collections::BTreeMap::new();
    for package in packages {
        let name = package["name"].as_str().unwrap().to_string();
        let manifest = std::path::PathBuf::from(package["manifest_path"].as_str().unwrap());
        let dir = manifest.parent().unwrap().strip_prefix(&root).unwrap();
        let dir = match dir.as_os_str().is_empty() {
            true => "./".to_string(),
            false => format!("{}/", dir.display()),
        };
        let deps: BTreeSet<String> = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap())
            .filter(|d| names.contains(d))
            .map(str::to_string)
            .collect();
        actual.insert(name, (dir, deps));
    }
    let drawn = code_map(&architecture());
    assert_eq!(
        drawn.keys().collect::<Vec<_>>(),
        actual.keys().collect::<Vec<_>>(),
        "the code map's packages"
    );
    for (name, (dir, deps)) in &actual {
        let (drawn_dir, drawn_deps) = &drawn[name];
        assert_eq!(drawn_dir, dir, "{name}'s directory");
        let missing: Vec<_> = deps.difference(drawn_deps).collect();
        let extra: Vec<_> = drawn_deps.difference(deps).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{name}: edges cargo metadata has but the map lacks: {missing:?}; edges the map draws that do not exist: {extra:?}"
        );
    }
}

/// Every library package that depends on the stamp is named where the code map says the
/// stamp rebuilds libraries: an edit anywhere recompiles it, and the design of record
/// does not promise otherwise.
#[test]
fn every_library_the_stamp_rebuilds_is_named_in_the_code_map() {
    let metadata = metadata();
    let text = section(&architecture(), "Code map");
    let caveat = text
        .split("\n- ")
        .find(|item| item.starts_with("**The stamp rebuilds"))
        .unwrap_or("");
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        let has_lib = package["targets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "lib"));
        let on_stamp = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kind"].is_null() && d["name"] == "row-fence-stamp");
        if has_lib && on_stamp {
            assert!(
                caveat.contains(&format!("`{name}`")),
                "{name} is a library depending on row-fence-stamp, and the code map does not say so"
            );
        }
    }
}

/// ARCHITECTURE.md stays one a newcomer reads in about fifteen minutes.
#[test]
fn architecture_md_is_at_most_3500_words() {
    let words = architecture().split_whitespace().count();
    assert!(words <= 3500, "ARCHITECTURE.md has {words} words");
}

/// Every test an invariant names (`name` (`path`), after "Pinned by") is a function of
/// that file: an invariant is pinned by a test that exists.
#[test]
fn every_test_an_invariant_names_exists() {
    let text = architecture();
    let invariants = section(&text, "Invariants");
    let mut named = 0;
    for pinned in invariants.split("Pinned by").skip(1) {
        let pinned = pinned.split("\n###").next().unwrap().replace('\n', " ");
        let spans: Vec<&str> = pinned.split('`').skip(1).step_by(2).collect();
        let mut tests = Vec::new();
        for span in spans {
            if span.ends_with(".rs") {
                let source = std::fs::read_to_string(repo_root().join(span))
                    .unwrap_or_else(|e| panic!("{span}: {e}"));
                for test in tests.drain(..) {
                    assert!(
                        source.contains(&format!("fn {test}(")),
                        "ARCHITECTURE.md's invariants name {test}, which {span} does not have"
                    );
                    named += 1;
                }
            } else {
                tests.push(span);
            }
        }
        assert!(tests.is_empty(), "{tests:?} name no file");
    }
    assert!(named >= 6, "only {named} tests named: is the scan broken?");
}
