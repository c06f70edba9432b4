//! Words for a POSIX shell: what `install` writes into units, hooks and settings, and the
//! git layer into its gate commands, must read back through `sh -c` exactly.
//!
//! Those files are text (JSON, TOML, a unit, git config, a shell script), so a path goes
//! into them only as the UTF-8 it is: [`text`] refuses one that is not, naming it, and
//! nothing is written. A lossy copy would name another path, one that does not exist,
//! and every fenced write through it would fail (or ask another home).

use std::path::{Path, PathBuf};

/// A path that cannot be written into a text file as it is: not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is not UTF-8 (each byte that is not ASCII is shown as \\xNN): row-fence writes this path into hooks, git config and settings files as text, and will not write a changed one; move it (or give a home, --bin-dir or --settings) to a path whose name is UTF-8",
    escaped(path)
)]
pub struct NotUtf8 {
    /// The path.
    pub path: PathBuf,
}

/// `path` with every byte outside printable ASCII written `\xNN`.
pub fn escaped(path: &Path) -> String {
    path.as_os_str()
        .as_encoded_bytes()
        .escape_ascii()
        .to_string()
}

/// Paths in JSON output (`doctor --json`): as the text they are, or, for a path that is
/// not UTF-8, in [`escaped`]'s form, so a report never fails (or panics) on one.
pub mod json_path {
    use serde::Serializer;
    use std::path::{Path, PathBuf};

    fn shown(path: &Path) -> String {
        path.to_str()
            .map_or_else(|| super::escaped(path), str::to_string)
    }

    /// A path.
    pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&shown(path))
    }

    /// An optional path (`null` for none).
    pub fn option<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match path {
            Some(p) => s.serialize_str(&shown(p)),
            None => s.serialize_none(),
        }
    }

    /// A list of paths.
    pub fn list<S: Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(paths.iter().map(|p| shown(p)))
    }
}

/// `path` as text, or why it cannot be.
pub fn text(path: &Path) -> Result<&str, NotUtf8> {
    path.to_str().ok_or_else(|| NotUtf8 {
        path: path.to_path_buf(),
    })
}

/// `path` quoted for a POSIX shell ([`sh_quote`]), or why it cannot be written.
pub fn sh_quote_path(path: &Path) -> Result<String, NotUtf8> {
    text(path).map(sh_quote)
}

/// Quotes a word for a POSIX shell (shlex): as is when it needs no quoting, else quoted
/// so that `sh -c` reads back exactly `word`. A NUL, the one byte no shell word can hold
/// (and no path or environment value does), is dropped.
pub fn sh_quote(word: &str) -> String {
    let word = word.replace('\0', "");
    shlex::try_quote(&word)
        .map(|quoted| quoted.into_owned())
        .unwrap_or(word)
}

#[cfg(test)]
mod tests {
    use super::sh_quote;
    use std::path::Path;

    #[test]
    fn a_quoted_word_reads_back_through_sh() {
        for word in [
            "plain/path-1.2",
            "with space",
            "it's",
            "$HOME `x` \\ \"q\"",
            "new\nline",
            "",
        ] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {}", sh_quote(word)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), word, "{word:?}");
        }
        assert_eq!(sh_quote("plain/path"), "plain/path");
    }

    #[test]
    fn a_path_that_is_not_utf8_is_refused_by_name() {
        use std::os::unix::ffi::OsStrExt;
        let path = Path::new(std::ffi::OsStr::from_bytes(b"/tmp/caf\xe9/repo"));
        let e = super::sh_quote_path(path).unwrap_err();
        assert!(
            e.to_string().starts_with("/tmp/caf\\xe9/repo is not UTF-8"),
            "{e}"
        );
        assert_eq!(super::sh_quote_path(Path::new("/a b")).unwrap(), "'/a b'");
    }
}
