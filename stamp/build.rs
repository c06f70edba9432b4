//! Computes the build half of the code stamp (ARCHITECTURE.md, "Code stamp"): one digest
//! over the workspace sources, so `row-fence-ask` and `row-fence-resident` built from one
//! tree carry the same value and a daemon on other code can tell.

use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

/// What the stamp covers, relative to the workspace root. Directories are walked
/// recursively; a path that does not exist (a crate published alone) is skipped.
const STAMPED: &[&str] = &[
    "Cargo.lock",
    "contract/Cargo.toml",
    "contract/src",
    "stamp/Cargo.toml",
    "stamp/build.rs",
    "stamp/src",
    "asker/Cargo.toml",
    "asker/src",
    "daemon/store/Cargo.toml",
    "daemon/store/src",
    "daemon/resident/Cargo.toml",
    "daemon/resident/src",
    "daemon/resident-bin/Cargo.toml",
    "daemon/resident-bin/src",
    "daemon/install/Cargo.toml",
    "daemon/install/src",
    "daemon/cli/Cargo.toml",
    "daemon/cli/src",
    "guard/Cargo.toml",
    "guard/src",
];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest
        .parent()
        .expect("stamp/ lives in the workspace")
        .to_path_buf();
    let mut files = Vec::new();
    for rel in STAMPED {
        let path = root.join(rel);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect(&path, &mut files);
        }
    }
    files.sort();
    let mut hasher = Sha256::new();
    for file in &files {
        let rel = file.strip_prefix(&root).unwrap_or(file);
        let bytes = fs::read(file).unwrap_or_default();
        hasher.update(rel.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    let digest: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("cargo:rustc-env=ROW_FENCE_BUILD_DIGEST={digest}");
    println!(
        "cargo:rustc-env=ROW_FENCE_BUILD_DIGEST_SHORT={}",
        &digest[..12]
    );
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        if let Ok(entries) = fs::read_dir(path) {
            for entry in entries.flatten() {
                collect(&entry.path(), out);
            }
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}
