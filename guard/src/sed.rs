//! sed: GNU sed runs commands from its script: the `e` command runs its argument (or the
//! pattern space) through the shell, and the `s` command's `e` flag runs the result. A
//! script is read command by command (addresses, `s`/`y` with any delimiter, text and
//! file arguments); one that runs commands, or one the guard cannot read to the end, is
//! opaque. `--sandbox` turns `e` off. A script file (`-f`) is read like any script file.

use crate::effect::{Ctx, Effect, script_file};
use row_fence_shell::words::Value;

/// Classifies `sed ARGS`.
pub fn classify(args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut have_script = false;
    let mut operands: Vec<&Value> = Vec::new();
    let mut files: Vec<Value> = Vec::new();
    let mut sandbox = false;
    let mut k = 0;
    while k < args.len() {
        let Some(arg) = args[k].literal() else {
            operands.push(&args[k]);
            k += 1;
            continue;
        };
        k += 1;
        if arg == "--" {
            operands.extend(&args[k..]);
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            match name {
                "expression" | "file" => {
                    let value = match inline {
                        Some(v) => Value::Literal(v.to_string()),
                        None => {
                            k += 1;
                            args.get(k - 1)
                                .cloned()
                                .unwrap_or(Value::Dynamic("".into()))
                        }
                    };
                    if name == "file" {
                        files.push(value);
                    } else if let Some(effects) = check(&value, ctx) {
                        return effects;
                    } else {
                        have_script = true;
                    }
                }
                "line-length" if inline.is_none() => k += 1,
                "sandbox" => sandbox = true,
                _ => {}
            }
            continue;
        }
        if arg.starts_with('-') && arg.len() > 1 {
            // A cluster: `-ne SCRIPT`, `-i.bak`, `-Ef FILE`.
            let flags: Vec<char> = arg[1..].chars().collect();
            for (j, flag) in flags.iter().enumerate() {
                let rest: String = flags[j + 1..].iter().collect();
                match flag {
                    'e' | 'f' | 'l' => {
                        let value = if rest.is_empty() {
                            k += 1;
                            args.get(k - 1)
                                .cloned()
                                .unwrap_or(Value::Dynamic("".into()))
                        } else {
                            Value::Literal(rest)
                        };
                        match flag {
                            'e' => {
                                if let Some(effects) = check(&value, ctx) {
                                    return effects;
                                }
                                have_script = true;
                            }
                            'f' => files.push(value),
                            _ => {}
                        }
                        break;
                    }
                    'i' => break,
                    _ => {}
                }
            }
            continue;
        }
        // GNU sed takes options after operands too: the first operand is the script only
        // when no `-e`/`-f` gave one, which is known once every word is read.
        operands.push(&args[k - 1]);
    }
    if !have_script
        && files.is_empty()
        && let Some(script) = operands.first()
        && let Some(effects) = check(script, ctx)
    {
        return effects;
    }
    if sandbox {
        return Vec::new();
    }
    for file in &files {
        let effects = script_file("sed", file, ctx);
        if !effects.is_empty() {
            return effects;
        }
    }
    Vec::new()
}

/// Opaque effects when the script runs commands or cannot be read.
fn check(script: &Value, ctx: &Ctx) -> Option<Vec<Effect>> {
    match script {
        Value::Literal(text) => {
            runs_commands(text).map(|why| vec![ctx.opaque(format!("`sed`'s script {why}"))])
        }
        Value::Dynamic(raw) => {
            Some(vec![ctx.opaque(format!(
                "`sed`'s script `{raw}` is only known when it runs"
            ))])
        }
    }
}

/// Why a sed script runs commands (or cannot be read), if it does.
pub fn runs_commands(script: &str) -> Option<&'static str> {
    scan(script).err().map(Unsafe::sentence)
}

/// What in a sed script makes the guard treat it as running commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unsafe {
    Unreadable,
    AddressWithoutCommand,
    Executes,
    UnreadableSubstitution,
    SubstitutionExecutes,
    UnknownFlag,
    UnknownCommand,
}

impl Unsafe {
    /// The sentence the guard says after "the sed script".
    fn sentence(self) -> &'static str {
        match self {
            Unsafe::Unreadable => "cannot be read to its end",
            Unsafe::AddressWithoutCommand => "ends in an address without a command",
            Unsafe::Executes => "runs a command (`e`)",
            Unsafe::UnreadableSubstitution => "has an `s` command the guard cannot read",
            Unsafe::SubstitutionExecutes => "runs its substitution as a command (`s///e`)",
            Unsafe::UnknownFlag => "has an `s` flag the guard does not know",
            Unsafe::UnknownCommand => "has a command the guard does not know",
        }
    }
}

fn scan(script: &str) -> Result<(), Unsafe> {
    let c: Vec<char> = script.chars().collect();
    let mut i = 0;
    loop {
        // Between commands.
        while i < c.len() && (c[i].is_whitespace() || c[i] == ';') {
            i += 1;
        }
        if i >= c.len() {
            return Ok(());
        }
        if c[i] == '#' {
            i = line_end(&c, i);
            continue;
        }
        i = address(&c, i).ok_or(Unsafe::Unreadable)?;
        while i < c.len() && c[i].is_whitespace() {
            i += 1;
        }
        if i < c.len() && c[i] == ',' {
            i += 1;
            while i < c.len() && c[i].is_whitespace() {
                i += 1;
            }
            i = address(&c, i).ok_or(Unsafe::Unreadable)?;
        }
        while i < c.len() && (c[i].is_whitespace() || c[i] == '!') {
            i += 1;
        }
        let Some(&command) = c.get(i) else {
            return Err(Unsafe::AddressWithoutCommand);
        };
        i += 1;
        match command {
            'e' => return Err(Unsafe::Executes),
            '{' | '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x'
            | 'z' | 'F' => {}
            'q' | 'Q' | 'l' | 'L' => {
                while i < c.len() && (c[i].is_ascii_digit() || c[i] == ' ') {
                    i += 1;
                }
            }
            ':' | 'b' | 't' | 'T' | 'v' => {
                while i < c.len() && c[i] != '\n' && c[i] != ';' && c[i] != '}' {
                    i += 1;
                }
            }
            'a' | 'i' | 'c' => i = text_end(&c, i),
            'r' | 'R' | 'w' | 'W' => i = line_end(&c, i),
            's' => {
                let delimiter = *c.get(i).ok_or(Unsafe::Unreadable)?;
                if delimiter == '\n' || delimiter == '\\' {
                    return Err(Unsafe::UnreadableSubstitution);
                }
                i = delimited(&c, i + 1, delimiter).ok_or(Unsafe::Unreadable)?;
                i = delimited(&c, i, delimiter).ok_or(Unsafe::Unreadable)?;
                // Flags, up to the end of the command; `w FILE` takes the rest of the line.
                while i < c.len() && !matches!(c[i], ';' | '\n' | '}') {
                    match c[i] {
                        'e' => return Err(Unsafe::SubstitutionExecutes),
                        'w' => {
                            i = line_end(&c, i);
                            break;
                        }
                        'g' | 'p' | 'i' | 'I' | 'm' | 'M' | ' ' | '\t' => {}
                        d if d.is_ascii_digit() => {}
                        _ => return Err(Unsafe::UnknownFlag),
                    }
                    i += 1;
                }
            }
            'y' => {
                let delimiter = *c.get(i).ok_or(Unsafe::Unreadable)?;
                i = delimited(&c, i + 1, delimiter).ok_or(Unsafe::Unreadable)?;
                i = delimited(&c, i, delimiter).ok_or(Unsafe::Unreadable)?;
            }
            _ => return Err(Unsafe::UnknownCommand),
        }
    }
}

/// The index after an optional address at `i`: a line number (`first~step`), `$`,
/// `/regex/` or `\cREGEXc` with `I`/`M` flags, or GNU's `+N`/`~N` second addresses.
/// `None` when the address does not end.
fn address(c: &[char], mut i: usize) -> Option<usize> {
    match c.get(i) {
        Some(d) if d.is_ascii_digit() || *d == '+' || *d == '~' => {
            i += 1;
            while i < c.len() && (c[i].is_ascii_digit() || c[i] == '~') {
                i += 1;
            }
            Some(i)
        }
        Some('$') => Some(i + 1),
        Some('/') => after_flags(c, delimited(c, i + 1, '/')?),
        Some('\\') => {
            let delimiter = *c.get(i + 1)?;
            after_flags(c, delimited(c, i + 2, delimiter)?)
        }
        _ => Some(i),
    }
}

fn after_flags(c: &[char], mut i: usize) -> Option<usize> {
    while i < c.len() && matches!(c[i], 'I' | 'M') {
        i += 1;
    }
    Some(i)
}

/// The index after the next unescaped `delimiter` from `i`; `None` when there is none.
fn delimited(c: &[char], mut i: usize, delimiter: char) -> Option<usize> {
    while i < c.len() {
        if c[i] == '\\' {
            i += 2;
            continue;
        }
        if c[i] == delimiter {
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

fn line_end(c: &[char], mut i: usize) -> usize {
    while i < c.len() && c[i] != '\n' {
        i += 1;
    }
    i
}

/// The end of `a`/`i`/`c` text: the line, continued by a trailing backslash.
fn text_end(c: &[char], mut i: usize) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => i += 2,
            '\n' => return i,
            _ => i += 1,
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::runs_commands;

    #[test]
    fn sed_scripts_that_run_commands_are_told_from_those_that_edit() {
        for script in [
            "e git push",
            "1e git push",
            "s/.*/git push/e",
            "s|x|git push|ge",
            "/x/ { s/a/b/; e git push\n}",
            "$!e git push",
            "1,3 e git push",
            "s/a/b/q",
            "s/unterminated",
        ] {
            assert!(runs_commands(script).is_some(), "{script:?}");
        }
        for script in [
            "s/foo/bar/g",
            "s|a/b|c|2",
            "1,5d",
            "/^#/d",
            "10,20p",
            "$a\\\nlast line",
            "1i header e",
            "y/abc/xyz/",
            "/x/{s/a/b/;p}",
            "s/e/E/gI",
            "\\,x,d",
            "0~2d",
            "s/x/y/w out.txt",
            "/start/,/end/ { /e/d }",
            ":a;N;$!ba;s/\\n/ /g",
        ] {
            assert_eq!(runs_commands(script), None, "{script:?}");
        }
    }
}
