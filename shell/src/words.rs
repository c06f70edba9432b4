//! A shell word as the guard reads it: its value when the text alone decides it, or
//! "dynamic" when an expansion (a variable, a substitution, a glob, a brace expansion)
//! decides it at run time; and the code the word itself runs (command substitutions,
//! also inside parameter and arithmetic expansions). Pieces come from brush-parser's word
//! parser; nothing here matches text with patterns.

use brush_parser::ParserOptions;
use brush_parser::word::{
    self, ParameterExpr, ParameterTransformOp, TildeExpr, WordPiece, WordPieceWithSource,
};
use std::collections::BTreeMap;

/// A word's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// The text decides it: quotes removed, escapes applied.
    Literal(String),
    /// An expansion decides it; holds the raw text, for messages.
    Dynamic(String),
}

impl Value {
    /// The literal, if the text decides it.
    pub fn literal(&self) -> Option<&str> {
        match self {
            Value::Literal(s) => Some(s),
            Value::Dynamic(_) => None,
        }
    }

    /// The word as written (the literal, or the raw text of a dynamic word).
    pub fn text(&self) -> &str {
        match self {
            Value::Literal(s) | Value::Dynamic(s) => s,
        }
    }
}

/// What reading one word found.
#[derive(Clone, Debug, Default)]
pub struct Read {
    /// Command substitutions (and code in nested expansions) the word runs, as source.
    pub code: Vec<String>,
    /// True when the word evaluates data as code (`${x@P}`): opaque.
    pub evaluates_data: bool,
    /// Arithmetic expansions' text (`$((x + 1))`): bash evaluates the variables they name.
    pub arithmetic: Vec<String>,
    /// True when zsh would run code the word holds: a glob qualifier `(e:…:)`/`(+f)`, or
    /// a parameter flag `${(e)…}` that evaluates a value.
    pub zsh_code: bool,
}

/// Variables the walk knows the value of: `Some(literal)`, or `None` when assigned a
/// value the text does not decide.
pub type Vars = BTreeMap<String, Option<String>>;

/// The context a word is read in.
pub struct Scope<'a> {
    /// Shell variables assigned earlier in the command.
    pub vars: &'a Vars,
    /// `$HOME` from the hook's environment (the agent's shell inherits it).
    pub home: Option<&'a str>,
    /// `$PWD`, when the walk knows exactly one working directory.
    pub pwd: Option<&'a str>,
}

fn options() -> ParserOptions {
    ParserOptions::default()
}

/// Reads the raw word `raw` (quotes and all): its value, and what it runs.
pub fn read(raw: &str, scope: &Scope, found: &mut Read) -> Value {
    let pieces = match word::parse(raw, &options()) {
        Ok(pieces) => pieces,
        // A word the parser cannot split is not known; it may still run code, so the
        // whole word is kept as code to be read (and found unparseable there).
        Err(_) => {
            found.code.push(raw.to_string());
            return Value::Dynamic(raw.to_string());
        }
    };
    let mut out = String::new();
    let mut literal = true;
    for piece in &pieces {
        literal &= piece_value(piece, raw, false, scope, found, &mut out);
    }
    if literal {
        Value::Literal(out)
    } else {
        Value::Dynamic(raw.to_string())
    }
}

/// Reads a here-document body that undergoes expansion: only what it runs matters.
pub fn read_heredoc(body: &str, scope: &Scope, found: &mut Read) {
    match word::parse_heredoc(body, &options()) {
        Ok(pieces) => {
            let mut sink = String::new();
            for piece in &pieces {
                piece_value(piece, body, true, scope, found, &mut sink);
            }
        }
        Err(_) => found.code.push(body.to_string()),
    }
}

/// Appends one piece's value to `out`; false when the piece is not a literal. `raw` is
/// the whole word the piece's indices point into.
fn piece_value(
    with_source: &WordPieceWithSource,
    raw: &str,
    quoted: bool,
    scope: &Scope,
    found: &mut Read,
    out: &mut String,
) -> bool {
    let source = raw
        .get(with_source.start_index..with_source.end_index)
        .unwrap_or_default();
    match &with_source.piece {
        WordPiece::Text(text) => {
            if quoted {
                // Inside double quotes a backslash-newline is a line continuation.
                out.push_str(&text.replace("\\\n", ""));
                true
            } else {
                found.zsh_code |= zsh_qualifier(text);
                out.push_str(text);
                !expands(text)
            }
        }
        WordPiece::SingleQuotedText(text) => {
            out.push_str(text);
            true
        }
        WordPiece::AnsiCQuotedText(text) => {
            // Escapes are decoded at run time; a literal without any is plain.
            out.push_str(text);
            !text.contains('\\')
        }
        WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
            let mut literal = true;
            for p in inner {
                literal &= piece_value(p, raw, true, scope, found, out);
            }
            literal
        }
        WordPiece::EscapeSequence(seq) => {
            let c = seq.strip_prefix('\\').unwrap_or(seq);
            if c == "\n" {
                return true;
            }
            if quoted && !matches!(c, "$" | "`" | "\"" | "\\") {
                out.push('\\');
            }
            out.push_str(c);
            true
        }
        WordPiece::TildeExpansion(TildeExpr::Home) => match scope.home {
            Some(home) => {
                out.push_str(home);
                true
            }
            None => false,
        },
        WordPiece::TildeExpansion(_) => false,
        WordPiece::ParameterExpansion(expr) => {
            found.zsh_code |= zsh_flags(source);
            parameter(expr, source, scope, found, out)
        }
        WordPiece::CommandSubstitution(code) | WordPiece::BackquotedCommandSubstitution(code) => {
            found.code.push(code.clone());
            false
        }
        WordPiece::ArithmeticExpression(expr) => {
            found.arithmetic.push(expr.value.clone());
            nested(&expr.value, scope, found);
            false
        }
    }
}

/// True when unquoted text holds a zsh glob qualifier that runs code: `*(e:cmd:)`,
/// `*(.e'cmd')`, `*(+func)`. Any parenthesised group with an `e` or a `+` in it counts
/// (an extglob naming such a file is read as code too: rare, and never "yes").
fn zsh_qualifier(text: &str) -> bool {
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let group = &rest[open + 1..];
        let inside = group.find(')').map_or(group, |close| &group[..close]);
        if inside.contains(['e', '+']) {
            return true;
        }
        rest = group;
    }
    false
}

/// True for zsh parameter flags that evaluate a value: `${(e)x}` runs the `$(…)` in it,
/// `${(%)x}` expands it as a prompt.
fn zsh_flags(source: &str) -> bool {
    source
        .strip_prefix("${(")
        .and_then(|rest| rest.split_once(')'))
        .is_some_and(|(flags, _)| flags.contains(['e', '%']))
}

/// True when unquoted text undergoes pathname or brace expansion.
fn expands(text: &str) -> bool {
    if text.contains(['*', '?']) {
        return true;
    }
    // A bracket expression needs its closing bracket (`[` alone is the test command).
    if text
        .find('[')
        .is_some_and(|open| text[open + 1..].contains(']'))
    {
        return true;
    }
    if text.contains('(') && text.contains(['@', '!', '+']) {
        return true; // extglob
    }
    if text.contains('{') {
        return matches!(
            word::parse_brace_expansions(text, &options()),
            Ok(Some(ref parts)) if parts.iter().any(|p| matches!(p, word::BraceExpressionOrText::Expr(_)))
        ) || word::parse_brace_expansions(text, &options()).is_err();
    }
    false
}

/// A parameter expansion: the value of a variable the walk knows, else dynamic; code in
/// its operands (`${x:-$(cmd)}`, `${a[$(cmd)]}`) is found by reading its inside as a word.
fn parameter(
    expr: &ParameterExpr,
    source: &str,
    scope: &Scope,
    found: &mut Read,
    out: &mut String,
) -> bool {
    if let ParameterExpr::Transform {
        op: ParameterTransformOp::PromptExpand,
        ..
    } = expr
    {
        found.evaluates_data = true;
        return false;
    }
    if let ParameterExpr::Parameter {
        parameter: word::Parameter::Named(name),
        indirect: false,
    } = expr
    {
        let known = match name.as_str() {
            "HOME" if !scope.vars.contains_key("HOME") => scope.home.map(str::to_string),
            "PWD" if !scope.vars.contains_key("PWD") => scope.pwd.map(str::to_string),
            _ => scope.vars.get(name).cloned().flatten(),
        };
        if let Some(value) = known {
            out.push_str(&value);
            return true;
        }
        return false;
    }
    let inside = source
        .strip_prefix("${")
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or_default();
    if !inside.is_empty() {
        nested(inside, scope, found);
    }
    false
}

/// Finds the code a piece of expansion text runs, by reading it as a word.
fn nested(text: &str, scope: &Scope, found: &mut Read) {
    if !text.contains(['$', '`']) {
        return;
    }
    let _ = read(text, scope, found);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(raw: &str) -> (Value, Read) {
        let vars = Vars::new();
        let scope = Scope {
            vars: &vars,
            home: Some("/home/u"),
            pwd: Some("/w"),
        };
        let mut found = Read::default();
        (read(raw, &scope, &mut found), found)
    }

    #[test]
    fn quotes_and_escapes_are_removed_from_literals() {
        for (raw, want) in [
            ("git", "git"),
            ("'git'", "git"),
            ("\"git\"", "git"),
            ("g''it", "git"),
            ("\\git", "git"),
            ("g\\\nit", "git"),
            ("\"a\\$b\"", "a$b"),
            ("\"a\\qb\"", "a\\qb"),
            ("~/x", "/home/u/x"),
            ("\"$PWD/sub\"", "/w/sub"),
            ("$'git'", "git"),
        ] {
            assert_eq!(value(raw).0, Value::Literal(want.into()), "{raw}");
        }
    }

    #[test]
    fn expansions_are_dynamic_and_their_code_is_found() {
        for raw in [
            "$(echo git)",
            "`echo git`",
            "$x",
            "g*t",
            "{git,x}",
            "$'\\x67it'",
            "~other",
        ] {
            assert!(matches!(value(raw).0, Value::Dynamic(_)), "{raw}");
        }
        assert_eq!(value("$(git push)").1.code, vec!["git push".to_string()]);
        assert_eq!(
            value("${x:-$(git push)}").1.code,
            vec!["git push".to_string()]
        );
        assert_eq!(
            value("$((1+$(git push)))").1.code,
            vec!["git push".to_string()]
        );
        assert_eq!(
            value("\"a $(git push) b\"").1.code,
            vec!["git push".to_string()]
        );
        assert!(value("${x@P}").1.evaluates_data);
    }
}
