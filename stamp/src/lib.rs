//! The build half of the code stamp (ARCHITECTURE.md, "Code stamp"): SHA-256 over the
//! workspace sources, computed by `build.rs`, so every binary built from one tree carries
//! the same value and a daemon on other code can tell.
//!
//! Only binaries depend on this crate: libraries take the digest as a value
//! (`row_fence_contract::stamp::code_stamp(home, BUILD_DIGEST)`), so an edit to one crate
//! reruns this build script and relinks the binaries, never the libraries below the edit.

/// SHA-256 (64 hex characters) over the workspace sources, set by `build.rs`.
pub const BUILD_DIGEST: &str = env!("ROW_FENCE_BUILD_DIGEST");

/// `--version` of every row-fence program: the package version and the first 12 hex
/// digits of the build digest, e.g. `0.1.0 (build 3f2a…)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (build ",
    env!("ROW_FENCE_BUILD_DIGEST_SHORT"),
    ")"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_names_the_first_twelve_digits_of_the_build_digest() {
        assert_eq!(BUILD_DIGEST.len(), 64);
        assert_eq!(
            VERSION,
            format!(
                "{} (build {})",
                env!("CARGO_PKG_VERSION"),
                &BUILD_DIGEST[..12]
            )
        );
    }
}
