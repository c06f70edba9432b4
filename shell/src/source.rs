//! A text the walk parsed, kept for the parser's source spans (character indices), and
//! what only the text tells: whether `((…))` is arithmetic or nested subshells.

use std::rc::Rc;

/// A text the walk parsed, for the parser's spans (character indices).
pub struct Source {
    text: String,
    ascii: bool,
    /// The byte offset of each character, computed once when a non-ASCII text needs it.
    offsets: std::cell::OnceCell<Vec<usize>>,
}

impl Source {
    /// The text, shared by the function bodies parsed from it.
    pub fn new(text: &str) -> Rc<Source> {
        Rc::new(Source {
            text: text.to_string(),
            ascii: text.is_ascii(),
            offsets: std::cell::OnceCell::new(),
        })
    }

    /// The text between two character indices.
    pub fn span(&self, start: usize, end: usize) -> Option<&str> {
        if self.ascii {
            return self.text.get(start..end);
        }
        let offsets = self.offsets.get_or_init(|| {
            let mut all: Vec<usize> = self.text.char_indices().map(|(b, _)| b).collect();
            all.push(self.text.len());
            all
        });
        self.text.get(*offsets.get(start)?..*offsets.get(end)?)
    }

    /// The text inside the outer parentheses when bash reads the span as nested subshells
    /// rather than `(( arithmetic ))`: bash's rule is that `((` opens arithmetic only when
    /// its matching `)` is followed at once by the closing `)` (`( (cmd) )` and
    /// `((cmd) )` are subshells). `None` for real arithmetic or a span it cannot find.
    pub fn nested_subshells(&self, loc: &brush_parser::SourceSpan) -> Option<String> {
        let text = self.span(loc.start.index, loc.end.index)?;
        let arithmetic = text.strip_prefix("((").is_some_and(|rest| {
            let mut depth = 1usize;
            for (k, c) in rest.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            return rest[k + 1..].trim_end() == ")";
                        }
                    }
                    _ => {}
                }
            }
            false
        });
        if arithmetic {
            return None;
        }
        Some(peel(text).to_string())
    }
}

/// `text` without every pair of parentheses that wraps all of it: `( ( (x) ) )` is `x`
/// (each layer a subshell, which changes nothing the guard tracks), so nested subshells
/// are read in one parse, not one per layer. Parentheses are matched once, in one pass.
fn peel(text: &str) -> &str {
    let bytes = text.as_bytes();
    // The index of the `)` matching each `(`.
    let mut matching = vec![usize::MAX; bytes.len()];
    let mut open = Vec::new();
    for (k, b) in bytes.iter().enumerate() {
        match b {
            b'(' => open.push(k),
            b')' => {
                if let Some(o) = open.pop() {
                    matching[o] = k;
                }
            }
            _ => {}
        }
    }
    let (mut start, mut end) = (0, bytes.len());
    loop {
        while start < end && bytes[start].is_ascii_whitespace() {
            start += 1;
        }
        while end > start && bytes[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        if start < end && bytes[start] == b'(' && matching[start] == end - 1 {
            start += 1;
            end -= 1;
        } else {
            return &text[start..end];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_parentheses_wrapping_the_whole_text_are_peeled() {
        assert_eq!(peel("( ( (git push) ) )"), "git push");
        assert_eq!(peel("(a) (b)"), "(a) (b)");
        assert_eq!(peel("((a) )"), "a");
        let source = Source::new("x ((y)) z é");
        assert_eq!(source.span(2, 7), Some("((y))"));
        assert_eq!(source.span(10, 11), Some("é"));
    }
}
