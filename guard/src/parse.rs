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

/// Parses a whole command. The error is a sentence for the denial.
pub fn program(text: &str) -> Result<ast::Program, String> {
    if text.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "the command is {} bytes, over the guard's {MAX_COMMAND_BYTES}-byte limit",
            text.len()
        ));
    }
    let depth = nesting(text);
    if depth > MAX_NESTING {
        return Err(format!(
            "the command nests {depth} levels deep, over the guard's limit of {MAX_NESTING}"
        ));
    }
    let options = ParserOptions::default();
    let mut parser = brush_parser::Parser::new(std::io::Cursor::new(text.as_bytes()), &options);
    parser
        .parse_program()
        .map_err(|e| format!("the command does not parse as bash: {e}"))
}

/// An upper bound on how deep the command nests: brackets and the words that open and
/// close compound commands, counted wherever they appear (also inside quotes, which only
/// makes the bound larger).
pub fn nesting(text: &str) -> usize {
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
        word_start = matches!(
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
        );
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
        assert!(program(&deep).unwrap_err().contains("nests"));
        let long = "a".repeat(MAX_COMMAND_BYTES + 1);
        assert!(program(&long).unwrap_err().contains("limit"));
    }
}
