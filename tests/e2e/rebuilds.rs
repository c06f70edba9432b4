//! Which crates an edit compiles, read from `cargo metadata` (ARCHITECTURE.md, "Code map").
//!
//! `row-fence-stamp`'s build script reruns on every source change, and cargo rebuilds
//! whatever depends on it. So only bin-only packages may depend on it: a library that did
//! would be rebuilt, with every crate above it, by an edit anywhere. An edit to the store
//! then compiles the store, the crates above it, and the stamp with the binaries that
//! link it; no library that does not build on the store.

use crate::util::repo_root;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// The end-to-end package (this suite), which links the stamp as a dev-dependency only.
const E2E: &str = "row-fence-e2e";

/// The workspace's packages, as `cargo metadata --no-deps` describes them.
pub(crate) fn workspace_metadata() -> Value {
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

/// One workspace package: its normal dependencies on other workspace packages, and
/// whether it has a library target.
struct Package {
    deps: BTreeSet<String>,
    has_lib: bool,
}

/// The workspace's packages by name, the end-to-end package left out.
fn packages() -> BTreeMap<String, Package> {
    let metadata = workspace_metadata();
    let all = metadata["packages"].as_array().unwrap();
    let names: BTreeSet<&str> = all.iter().map(|p| p["name"].as_str().unwrap()).collect();
    all.iter()
        .filter(|p| p["name"] != E2E)
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap())
                .filter(|d| names.contains(d))
                .map(str::to_string)
                .collect();
            let has_lib = p["targets"].as_array().unwrap().iter().any(|t| {
                t["kind"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k == "lib" || k == "rlib")
            });
            let name = p["name"].as_str().unwrap().to_string();
            (name, Package { deps, has_lib })
        })
        .collect()
}

/// `start` and every package that depends on it, directly or through others.
fn dependents(packages: &BTreeMap<String, Package>, start: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::from([start.to_string()]);
    loop {
        let more: Vec<String> = packages
            .iter()
            .filter(|(name, p)| !found.contains(*name) && p.deps.iter().any(|d| found.contains(d)))
            .map(|(name, _)| name.clone())
            .collect();
        if more.is_empty() {
            return found;
        }
        found.extend(more);
    }
}

#[test]
fn only_bin_only_packages_depend_on_the_stamp() {
    let packages = packages();
    let linking: Vec<&String> = dependents(&packages, "row-fence-stamp")
        .iter()
        .filter(|name| *name != "row-fence-stamp")
        .map(|name| packages.get_key_value(name).unwrap().0)
        .collect();
    let libraries: Vec<&&String> = linking.iter().filter(|n| packages[**n].has_lib).collect();
    assert!(
        libraries.is_empty(),
        "libraries rebuilt by every edit: {libraries:?}"
    );
    assert_eq!(
        linking,
        [
            "row-fence",
            "row-fence-ask",
            "row-fence-bench-bin",
            "row-fence-guard-bin",
            "row-fence-resident-bin",
        ]
    );
}

#[test]
fn an_edit_to_the_store_compiles_the_crates_above_it_and_the_binaries_alone() {
    let packages = packages();
    let mut compiled = dependents(&packages, "row-fence-store");
    // Every edit reruns the stamp's build script, and relinks what links it.
    compiled.extend(dependents(&packages, "row-fence-stamp"));
    let libraries: BTreeSet<&str> = compiled
        .iter()
        .filter(|n| packages[*n].has_lib)
        .map(String::as_str)
        .collect();
    assert_eq!(
        libraries,
        BTreeSet::from([
            "row-fence-bench",
            "row-fence-install",
            "row-fence-resident",
            "row-fence-stamp",
            "row-fence-store",
        ]),
        "the libraries an edit to the store compiles"
    );
    for untouched in ["row-fence-contract", "row-fence-guard"] {
        assert!(!compiled.contains(untouched), "{untouched} in {compiled:?}");
    }
}
