//! The command as a syntax tree, from brush-parser, within bounds: a command over
//! [`MAX_COMMAND_BYTES`] or nested deeper than [`MAX_NESTING`] is not parsed (it is
//! unreadable, which the judge denies), so a hostile input can neither exhaust the stack
//! nor take the hook past Claude Code's timeout. The caller runs this on a thread with
//! [`PARSE_STACK_BYTES`] of stack.

use brush_parser::{ParserOptions, ast};

/// The longest command the guard reads (1 MiB). Claude Code's commands are far shorter;
/// a longer one is denied as unreadable.
pub const MAX_COMMAND_BYTES: usize = 1024 * 1024;

/// The deepest nesting of `(`, `{`, `$(`, `if`, `case` and loops the guard parses. Real
/// commands nest a handful of levels; the parser recurses per level.
pub const MAX_NESTING: usize = 500;

/// The stack the parse and the walk run on (256 MiB of address space, committed only as
/// used): several times what [`MAX_NESTING`] levels take.
pub const PARSE_STACK_BYTES: usize = 256 * 1024 * 1024;

/// Why a command is not read as a syntax tree (the judge denies it as unreadable). Each
/// message is a sentence for the denial.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// Over [`MAX_COMMAND_BYTES`].
    #[error("the command is {bytes} bytes, over the guard's {MAX_COMMAND_BYTES}-byte limit")]
    TooLong {
        /// The command's length in bytes.
        bytes: usize,
    },
    /// Nested deeper than [`MAX_NESTING`] (or [`MAX_NESTING_ANYWHERE`]).
    #[error("the command nests {depth} levels deep, over the guard's limit of {MAX_NESTING}")]
    TooDeep {
        /// The nesting [`nesting`] counted.
        depth: usize,
    },
    /// Not bash, as brush-parser reads it.
    #[error("the command does not parse as bash: {0}")]
    NotBash(#[source] brush_parser::ParseError),
}

/// Parses a whole command.
pub fn program(text: &str) -> Result<ast::Program, ParseError> {
    if text.len() > MAX_COMMAND_BYTES {
        return Err(ParseError::TooLong { bytes: text.len() });
    }
    let depth = nesting(text);
    if depth > MAX_NESTING || nesting_any(text) > MAX_NESTING_ANYWHERE {
        return Err(ParseError::TooDeep { depth });
    }
    let options = ParserOptions::default();
    let mut parser = brush_parser::Parser::new(std::io::Cursor::new(text.as_bytes()), &options);
    parser.parse_program().map_err(ParseError::NotBash)
}

/// A second bound, on [`nesting_any`]: keywords counted even in here-document bodies,
/// single quotes and comments (where [`nesting`] skips them, so a here-document that
/// writes a Python file full of `if`s is not "deep"). Far under what the parser's stack
/// holds ([`PARSE_STACK_BYTES`]; about 8 KiB a level), so a misread here-document cannot
/// hide deep nesting from both bounds.
pub const MAX_NESTING_ANYWHERE: usize = 4000;

/// An upper bound on how deep the command nests: brackets (counted everywhere, also inside
/// quotes, which only makes the bound larger) and the words that open and close compound
/// commands, counted where they can be words of the shell: not inside single quotes,
/// comments or here-document bodies.
pub fn nesting(text: &str) -> usize {
    let bytes = text.as_bytes();
    let mut depth: usize = 0;
    let mut deepest = 0;
    let mut word_start = true;
    // Here-documents opened on the current line: (delimiter, strip leading tabs).
    let mut pending: Vec<(String, bool)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'(' | b'{' => depth += 1,
            b')' | b'}' => depth = depth.saturating_sub(1),
            b'\'' => {
                // Brackets inside still count; words do not.
                let end = bytes[i + 1..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map_or(bytes.len(), |n| i + 1 + n);
                for &c in &bytes[i + 1..end] {
                    match c {
                        b'(' | b'{' => depth += 1,
                        b')' | b'}' => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                    deepest = deepest.max(depth);
                }
                i = end + 1;
                word_start = false;
                continue;
            }
            b'#' if word_start => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'<' if bytes.get(i + 1) == Some(&b'<') && bytes.get(i + 2) != Some(&b'<') => {
                let (delimiter, strip, next) = heredoc_delimiter(text, i + 2);
                if !delimiter.is_empty() {
                    pending.push((delimiter, strip));
                }
                i = next;
                word_start = true;
                continue;
            }
            b'\n' if !pending.is_empty() => {
                i = skip_bodies(text, i + 1, std::mem::take(&mut pending));
                word_start = true;
                continue;
            }
            _ if word_start && b.is_ascii_alphabetic() => {
                let end = bytes[i..]
                    .iter()
                    .position(|c| !c.is_ascii_alphabetic())
                    .map_or(bytes.len(), |n| i + n);
                match &text[i..end] {
                    "if" | "case" | "do" => depth += 1,
                    "fi" | "esac" | "done" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                deepest = deepest.max(depth);
                i = end;
                word_start = false;
                continue;
            }
            _ => {}
        }
        word_start = is_separator(b);
        deepest = deepest.max(depth);
        i += 1;
    }
    deepest
}

/// The delimiter of a here-document whose `<<` ends before `from` (quotes removed), whether
/// it strips tabs (`<<-`), and where the delimiter word ends.
fn heredoc_delimiter(text: &str, from: usize) -> (String, bool, usize) {
    let bytes = text.as_bytes();
    let mut i = from;
    let strip = bytes.get(i) == Some(&b'-');
    if strip {
        i += 1;
    }
    while i < bytes.len() && matches!(bytes[i], b' ' | b'\t') {
        i += 1;
    }
    let mut delimiter = String::new();
    while i < bytes.len()
        && !matches!(
            bytes[i],
            b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')'
        )
    {
        if !matches!(bytes[i], b'\'' | b'"' | b'\\') {
            delimiter.push(bytes[i] as char);
        }
        i += 1;
    }
    (delimiter, strip, i)
}

/// The index after the here-document bodies that start at `from`, one per delimiter in
/// order; the end of the text when one never ends.
fn skip_bodies(text: &str, from: usize, delimiters: Vec<(String, bool)>) -> usize {
    let mut at = from;
    for (delimiter, strip) in delimiters {
        loop {
            if at >= text.len() {
                return text.len();
            }
            let end = text[at..].find('\n').map_or(text.len(), |n| at + n);
            let line = &text[at..end];
            let line = if strip {
                line.trim_start_matches('\t')
            } else {
                line
            };
            at = (end + 1).min(text.len());
            if line == delimiter {
                break;
            }
        }
    }
    at
}

fn is_separator(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t'
            | b'\n'
            | b';'
            | b'&'
            | b'|'
            | b'('
            | b')'
            | b'{'
            | b'}'
            | b'`'
            | b'"'
            | b'\''
            | b'$'
    )
}

/// [`nesting`] without exceptions: brackets and keywords counted wherever they appear.
pub fn nesting_any(text: &str) -> usize {
    let mut depth: usize = 0;
    let mut deepest = 0;
    let bytes = text.as_bytes();
    let mut word_start = true;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'(' | b'{' => depth += 1,
            b')' | b'}' => depth = depth.saturating_sub(1),
            _ if word_start && b.is_ascii_alphabetic() => {
                let end = bytes[i..]
                    .iter()
                    .position(|c| !c.is_ascii_alphabetic())
                    .map_or(bytes.len(), |n| i + n);
                match &text[i..end] {
                    "if" | "case" | "do" => depth += 1,
                    "fi" | "esac" | "done" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                i = end;
                word_start = false;
                continue;
            }
            _ => {}
        }
        word_start = is_separator(b);
        deepest = deepest.max(depth);
        i += 1;
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_bounded_before_the_parser_recurses() {
        assert_eq!(nesting("git push"), 0);
        assert_eq!(nesting("(cd x; (git push))"), 2);
        assert_eq!(nesting("if a; then if b; then c; fi; fi"), 2);
        let deep = format!(
            "{}true{}",
            "(".repeat(MAX_NESTING + 1),
            ")".repeat(MAX_NESTING + 1)
        );
        let too_deep = program(&deep).unwrap_err();
        assert!(matches!(too_deep, ParseError::TooDeep { .. }));
        assert!(too_deep.to_string().contains("nests"));
        let long = "a".repeat(MAX_COMMAND_BYTES + 1);
        let too_long = program(&long).unwrap_err();
        assert!(matches!(too_long, ParseError::TooLong { bytes } if bytes == long.len()));
        assert!(too_long.to_string().contains("limit"));
    }
}
