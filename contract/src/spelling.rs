//! One spelling per name (ARCHITECTURE.md, "One spelling"): the allowlist every row and
//! lane name passes wherever it enters (CLI arguments, descriptors, batch files, hook
//! input, store records), the look-alike skeleton two names of one board must not share,
//! and the escape every human-readable line applies to what it quotes.
//!
//! An allowlist is right by construction: a name made only of ASCII letters, digits and
//! `-`, `_`, `.` (and `/` in a lane) cannot hold a control, bidi, zero-width or separator
//! character, has one Unicode normal form, and cannot mix scripts, so Cyrillic `а`, NFD
//! `é`, U+200B and U+202E are refused instead of normalized — no table to keep current.

/// At most this many characters in a row or lane name.
pub const MAX_NAME_CHARS: usize = 128;

/// Checks `value`, a `what` (row, lane, tenant), against the allowlist: ASCII letters,
/// digits, `-`, `_`, `.` (and `/` when `allow_slash`), 1 to [`MAX_NAME_CHARS`] of them.
///
/// # Errors
///
/// [`NameRefused`], whose sentence names the offending character as `\u{…}`.
pub fn check_name(what: &str, value: &str, allow_slash: bool) -> Result<(), NameRefused> {
    let count = value.chars().count();
    if count == 0 || count > MAX_NAME_CHARS {
        return Err(NameRefused::Length {
            what: what.to_string(),
            count,
        });
    }
    if let Some((at, c)) = value
        .chars()
        .enumerate()
        .find(|&(_, c)| !name_char(c, allow_slash))
    {
        return Err(NameRefused::Character {
            what: what.to_string(),
            value: value.to_string(),
            character: c,
            at: at + 1,
            allow_slash,
        });
    }
    Ok(())
}

/// Why a name is not spelled as the allowlist allows ([`check_name`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameRefused {
    /// Empty, or over [`MAX_NAME_CHARS`] characters.
    Length {
        /// What the name names (row, lane, tenant).
        what: String,
        /// Its length in characters.
        count: usize,
    },
    /// A character outside the allowlist.
    Character {
        /// What the name names.
        what: String,
        /// The name as given.
        value: String,
        /// The first character refused.
        character: char,
        /// Its position, counting from 1.
        at: usize,
        /// Whether `/` was allowed (a lane).
        allow_slash: bool,
    },
}

impl std::fmt::Display for NameRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameRefused::Length { what, count } => write!(
                f,
                "{what} must be 1-{MAX_NAME_CHARS} characters, got {count}"
            ),
            NameRefused::Character {
                what,
                value,
                character,
                at,
                allow_slash,
            } => {
                let allowed = if *allow_slash {
                    "ASCII letters, digits, '-', '_', '.' and '/'"
                } else {
                    "ASCII letters, digits, '-', '_' and '.'"
                };
                write!(
                    f,
                    "{what} \"{}\" holds {} at character {at}: a {what} is spelled only with {allowed}, so no two names can look alike",
                    escape(value),
                    describe(*character),
                )
            }
        }
    }
}

impl std::error::Error for NameRefused {}

fn name_char(c: char, allow_slash: bool) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') || (allow_slash && c == '/')
}

fn describe(c: char) -> String {
    match c {
        ' ' => "a space (\\u{20})".into(),
        '/' => "'/' (\\u{2f})".into(),
        c if c.is_ascii_graphic() => format!("'{c}' (\\u{{{:x}}})", c as u32),
        c => format!("\\u{{{:x}}}", c as u32),
    }
}

/// The look-alike skeleton of an allowlisted name: two names of one board with the same
/// skeleton but different spellings are refused as a second lease (ARCHITECTURE.md, "One
/// spelling"). ASCII's part of Unicode TS #39's confusables, folded conservatively: case
/// (`Row-A` is `row-a`), `0`/`o`, `1`/`l`/`i`, `rn`/`m`, `vv`/`w`, `cl`/`d`. Conservative
/// on purpose: merging two names that do not look alike only refuses a grant, never allows
/// one.
pub fn skeleton(name: &str) -> String {
    let folded: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            '0' => 'o',
            '1' | 'i' | '|' => 'l',
            c => c,
        })
        .collect();
    folded
        .replace("rn", "m")
        .replace("vv", "w")
        .replace("cl", "d")
}

/// `value` with every character that is not printable ASCII (C0 and C1 controls, DEL,
/// bidi controls, zero-width and separator characters, and all other non-ASCII) and `\`
/// written as `\u{…}`, so a quoted name or detail cannot change how the line around it
/// looks (ARCHITECTURE.md, "One spelling").
pub fn escape(value: &str) -> String {
    if value
        .chars()
        .all(|c| c == ' ' || (c.is_ascii_graphic() && c != '\\'))
    {
        return value.to_string();
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        if c == ' ' || (c.is_ascii_graphic() && c != '\\') {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    out
}

/// The name [`escape`] printed, back: each `\u{HEX}` is that character, every other
/// character itself. How an operator names a spelling stored before the allowlist
/// (`row-fence release … --stored-name`) with only printable ASCII on the command line.
/// A `\` not starting a well-formed `\u{…}` of a Unicode scalar value is an error.
pub fn unescape(text: &str) -> Result<String, BadEscape> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let scalar = tail
            .strip_prefix("\\u{")
            .and_then(|t| t.split_once('}'))
            .and_then(|(hex, after)| {
                let c = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)?;
                (!hex.is_empty() && hex.len() <= 6).then_some((c, after))
            });
        let Some((c, after)) = scalar else {
            return Err(BadEscape {
                text: text.to_string(),
            });
        };
        out.push(c);
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// A `\` in [`unescape`]'s text that does not start a well-formed `\u{HEX}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadEscape {
    /// The text given.
    pub text: String,
}

impl std::fmt::Display for BadEscape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\"{}\" has a '\\' that does not start \\u{{HEX}}",
            escape(&self.text)
        )
    }
}

impl std::error::Error for BadEscape {}

/// True for a character that can change how a line looks without being seen as itself:
/// C0 and C1 controls, DEL, bidi controls, zero-width characters, line and paragraph
/// separators.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{61c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// `text` with every [`is_unsafe`] character written as `\u{…}` (`\n` and `\t` kept when
/// `keep_newlines`): what every human-readable line and log line passes through, so a
/// lane's action text, session id or a stored name cannot forge a line or clear a screen.
/// Printable non-ASCII (a path's `é`) is kept.
pub fn escape_unsafe(text: &str, keep_newlines: bool) -> String {
    if !text.chars().any(is_unsafe) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) && !(keep_newlines && matches!(c, '\n' | '\t')) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// One argument of a `row-fence` command printed for an operator to run.
#[derive(Clone, Copy, Debug)]
pub enum Word<'a> {
    /// A positional value (a board, a row).
    Positional(&'a str),
    /// `--name value`.
    Option(&'a str, &'a str),
    /// `--name` alone.
    Flag(&'a str),
}

/// A `row-fence SUBCOMMAND …` line that runs as printed, whatever the names: a row or
/// lane may start with `-` (the allowlist lets it), which a command-line parser reads as a
/// flag. So a value that starts with `-` is joined to its option (`--lane=-x`), and when
/// a positional does, every positional follows `--`. A word with characters a shell
/// reads (a stored name's `\u{…}` escapes) is single-quoted.
pub fn command_line(subcommand: &str, words: &[Word<'_>]) -> String {
    let quote = |v: &str| {
        let plain = !v.is_empty()
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./:@+,".contains(&b));
        if plain {
            v.to_string()
        } else {
            format!("'{}'", v.replace('\'', "'\\''"))
        }
    };
    let dashed = words
        .iter()
        .any(|w| matches!(w, Word::Positional(v) if v.starts_with('-')));
    let mut line = vec!["row-fence".to_string(), subcommand.to_string()];
    let mut positionals = Vec::new();
    for word in words {
        match *word {
            Word::Positional(v) if dashed => positionals.push(quote(v)),
            Word::Positional(v) => line.push(quote(v)),
            Word::Option(name, v) if v.starts_with('-') => {
                line.push(format!("{name}={}", quote(v)));
            }
            Word::Option(name, v) => line.extend([name.to_string(), quote(v)]),
            Word::Flag(name) => line.push(name.to_string()),
        }
    }
    if dashed {
        line.push("--".to_string());
        line.extend(positionals);
    }
    line.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_command_keeps_names_that_start_with_a_dash_as_values() {
        use Word::*;
        let plain = [
            Positional("board-1"),
            Positional("row-1"),
            Option("--lane", "lane-a"),
            Flag("--reissue"),
        ];
        assert_eq!(
            command_line("acquire", &plain),
            "row-fence acquire board-1 row-1 --lane lane-a --reissue"
        );
        let dashed = [
            Positional("board-1"),
            Positional("-r1"),
            Option("--lane", "-x"),
            Flag("--write-descriptor"),
        ];
        assert_eq!(
            command_line("acquire", &dashed),
            "row-fence acquire --lane=-x --write-descriptor -- board-1 -r1"
        );
        assert_eq!(
            command_line(
                "release",
                &[Positional("b"), Positional("it's"), Option("--lane", "l")]
            ),
            "row-fence release b 'it'\\''s' --lane l"
        );
    }

    #[test]
    fn only_the_allowlist_passes_and_the_error_names_the_character() {
        assert!(check_name("row", "row-1.a_B", false).is_ok());
        assert!(check_name("lane", "team/lane-a", true).is_ok());
        for (bad, named) in [
            ("l\u{430}ne-a", "\\u{430}"),
            ("lane\u{200d}a", "\\u{200d}"),
            ("lane-\u{202e}a", "\\u{202e}"),
            ("lane-a ", "\\u{20}"),
            ("re\u{301}sume", "\\u{301}"),
            ("r\u{e9}sum\u{e9}", "\\u{e9}"),
            ("a\u{2028}b", "\\u{2028}"),
            ("a\nb", "\\u{a}"),
            ("a/b", "\\u{2f}"),
        ] {
            let refused = check_name("row", bad, false).unwrap_err();
            assert!(
                matches!(&refused, NameRefused::Character { value, .. } if value == bad),
                "{refused:?}"
            );
            let e = refused.to_string();
            assert!(e.contains(named), "{bad:?}: {e}");
            assert!(!e.chars().any(|c| c.is_control() || !c.is_ascii()), "{e:?}");
        }
        assert_eq!(
            check_name("row", "", false).unwrap_err().to_string(),
            "row must be 1-128 characters, got 0"
        );
        assert!(matches!(
            check_name("row", &"a".repeat(129), false),
            Err(NameRefused::Length { count: 129, .. })
        ));
    }

    #[test]
    fn unescape_reads_back_what_escape_wrote() {
        for name in [
            "row-1\u{200b}",
            "r\u{e9}sum\u{e9}",
            "a\\b",
            "lane-\u{202e}a",
            "row-1",
        ] {
            assert_eq!(unescape(&escape(name)).unwrap(), name, "{name:?}");
        }
        for bad in [
            "row\\",
            "row\\x",
            "row\\u{}",
            "row\\u{d800}",
            "row\\u{110000}",
            "r\\u{41",
        ] {
            assert!(unescape(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn look_alikes_share_a_skeleton_and_different_names_do_not() {
        assert_eq!(skeleton("Row-A"), skeleton("row-a"));
        assert_eq!(skeleton("row-0"), skeleton("row-o"));
        assert_eq!(skeleton("row-1"), skeleton("row-l"));
        assert_eq!(skeleton("row-I"), skeleton("row-l"));
        assert_eq!(skeleton("modern"), skeleton("rnodem"));
        assert_ne!(skeleton("row-1"), skeleton("row-2"));
        assert_ne!(skeleton("row_1"), skeleton("row-1"));
    }

    #[test]
    fn escape_unsafe_writes_controls_bidi_and_invisibles_and_keeps_the_rest() {
        assert_eq!(
            escape_unsafe(
                "caf\u{e9} a\x1b[2J\u{7}\r\u{85}\u{7f}\u{202e}\u{200b}\u{2028}\nb",
                true
            ),
            "caf\u{e9} a\\u{1b}[2J\\u{7}\\u{d}\\u{85}\\u{7f}\\u{202e}\\u{200b}\\u{2028}\nb"
        );
        assert_eq!(escape_unsafe("a\nb", false), "a\\u{a}b");
    }

    #[test]
    fn escape_leaves_printable_ascii_and_writes_the_rest_as_code_points() {
        assert_eq!(escape("lane-a held"), "lane-a held");
        assert_eq!(escape("a\x1b[2Jb\r\u{7}"), "a\\u{1b}[2Jb\\u{d}\\u{7}");
        assert_eq!(
            escape("x\u{202e}y\u{85}\u{7f}"),
            "x\\u{202e}y\\u{85}\\u{7f}"
        );
        assert_eq!(escape("a\\u{41}"), "a\\u{5c}u{41}");
    }
}
