//! awk: its program is code. It runs commands through `system(…)`, through pipes
//! (`print | "cmd"`, `"cmd" | getline`, gawk's `|&`), and gawk's `@` forms (`@f(…)`
//! calls a function named by a string, so `system` need not be spelled; `@load`,
//! `@include`). A program that does any of these is opaque; one that does not only
//! reads and prints. The program comes from the first operand, `-e`/`--source` (gawk),
//! or a file (`-f`, `-E`, `-i`), read like any script file.

use crate::effect::{Ctx, Effect, script_file};
use row_fence_shell::words::Value;

/// Classifies `awk ARGS` (and gawk, mawk, nawk, busybox awk).
pub fn classify(program: &str, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut texts: Vec<&Value> = Vec::new();
    let mut files: Vec<&Value> = Vec::new();
    let mut k = 0;
    while k < args.len() {
        let Some(arg) = args[k].literal() else {
            if texts.is_empty() && files.is_empty() {
                return vec![
                    ctx.opaque(format!("`{program}`'s program is only known when it runs")),
                ];
            }
            k += 1;
            continue;
        };
        k += 1;
        if arg == "--" {
            break;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (arg, None),
        };
        let value = |k: &mut usize| -> Option<&Value> {
            match inline {
                Some(_) => None,
                None => {
                    *k += 1;
                    args.get(*k - 1)
                }
            }
        };
        match name {
            "-f" | "--file" | "-E" | "--exec" | "-i" | "--include" => match inline {
                Some(v) => return script_file_text(program, v, ctx),
                None => files.extend(value(&mut k)),
            },
            "-e" | "--source" => match inline {
                Some(v) => {
                    if let Some(why) = runs_commands(v) {
                        return vec![ctx.opaque(format!("`{program}`'s program {why}"))];
                    }
                }
                None => texts.extend(value(&mut k)),
            },
            "-l" | "--load" => {
                return vec![ctx.opaque(format!("`{program} {name}` loads a native extension"))];
            }
            "-v" | "--assign" | "-F" | "--field-separator" | "-W" => {
                if name == "-W"
                    && args
                        .get(k)
                        .and_then(Value::literal)
                        .is_some_and(|w| w.starts_with('e'))
                {
                    // mawk's `-W exec FILE`.
                    k += 1;
                    files.extend(args.get(k));
                    k += 1;
                    continue;
                }
                if inline.is_none() {
                    k += 1;
                }
            }
            _ if name.starts_with("-f") && name.len() > 2 => {
                return script_file_text(program, &name[2..], ctx);
            }
            _ if name.starts_with('-') && name != "-" => {}
            _ => {
                // The first operand is the program, unless one was given by option.
                if texts.is_empty() && files.is_empty() {
                    texts.push(&args[k - 1]);
                }
                break;
            }
        }
    }
    for file in files {
        let effects = script_file(program, file, ctx);
        if !effects.is_empty() {
            return effects;
        }
    }
    for text in texts {
        match text {
            Value::Literal(code) => {
                if let Some(why) = runs_commands(code) {
                    return vec![ctx.opaque(format!("`{program}`'s program {why}"))];
                }
            }
            Value::Dynamic(_) => {
                return vec![
                    ctx.opaque(format!("`{program}`'s program is only known when it runs")),
                ];
            }
        }
    }
    Vec::new()
}

fn script_file_text(program: &str, path: &str, ctx: &Ctx) -> Vec<Effect> {
    script_file(program, &Value::Literal(path.to_string()), ctx)
}

/// Why an awk program runs commands, if it does: `system`, a pipe, or an `@` form,
/// outside strings, regular expressions and comments.
pub fn runs_commands(code: &str) -> Option<&'static str> {
    // `system` anywhere (even in a string) is taken as a call: a string cannot hide
    // a call, but a misread regular expression could.
    if code.contains("system") {
        return Some("calls `system`");
    }
    let chars: Vec<char> = code.chars().collect();
    // True after a token that ends an operand: a `/` there divides; anywhere else it
    // opens a regular expression. When unsure, divide: the text is then read as code.
    let mut operand = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' => {
                i = skip_quoted(&chars, i + 1, '"');
                operand = true;
                continue;
            }
            '/' if !operand => {
                i = skip_quoted(&chars, i + 1, '/');
                operand = true;
                continue;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '|' => {
                if chars.get(i + 1) == Some(&'|') {
                    i += 2;
                    operand = false;
                    continue;
                }
                return Some("pipes to or from a command");
            }
            '@' => return Some("uses `@` (an indirect call, `@load` or `@include`)"),
            _ if c.is_alphanumeric() || c == '_' || c == '.' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '.'))
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                operand = !matches!(
                    word.as_str(),
                    "print" | "printf" | "return" | "in" | "case" | "do" | "else"
                );
                continue;
            }
            ')' | ']' | '$' => operand = true,
            '+' | '-' if chars.get(i + 1) == Some(&c) => {
                // `i++ / 2` divides.
                operand = true;
                i += 2;
                continue;
            }
            ' ' | '\t' | '\\' => {}
            _ => operand = false,
        }
        i += 1;
    }
    None
}

/// The index after the closing `end` of a quoted run starting at `from` (escapes
/// skipped; an unclosed run ends at the end of the line).
fn skip_quoted(chars: &[char], from: usize, end: char) -> usize {
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '\n' => return i,
            c if c == end => return i + 1,
            _ => i += 1,
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::runs_commands;

    #[test]
    fn awk_programs_that_run_commands_are_told_from_those_that_read() {
        for code in [
            "BEGIN{system(\"git push\")}",
            "{ print | \"sh\" }",
            "BEGIN { \"git push\" | getline x }",
            "BEGIN { print \"x\" |& \"sh\" }",
            "BEGIN{f=\"sys\" \"tem\"; @f(\"git push\")}",
            "BEGIN{f=\"x\"; @f(\"git push\")}",
            "{ x = $1 / 2 | \"sh\" }",
            "{ i++ / 2 | \"sh\" }",
            "@load \"filefuncs\"",
        ] {
            assert!(runs_commands(code).is_some(), "{code}");
        }
        for code in [
            "{print $1}",
            "/a|b/ {print}",
            "$1 ~ \"a|b\" {n++} END {print n}",
            "$1 || $2",
            "{ print $1/2, $2 }",
            "# a | comment\n{print}",
            "!/x|y/",
            "{ gsub(/[|]/, \"-\"); print }",
        ] {
            assert_eq!(runs_commands(code), None, "{code}");
        }
    }
}
