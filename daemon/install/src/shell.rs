//! Words for a POSIX shell: what `install` writes into units, hooks and settings, and the
//! git layer into its gate commands, must read back through `sh -c` exactly.

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
}
