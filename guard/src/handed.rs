//! Ordinary programs that are handed a command in one of their options and run it:
//! `tar --to-command`/`--checkpoint-action=exec=`/`-I`, `zip -TT`, `man -P`, `rsync -e`,
//! `npx -c`, `nix-shell --run`; and database shells whose inline commands escape to the
//! shell (`sqlite3 '.shell …'`, `psql -c '\! …'`). Which programs, and which options,
//! their records say ([`crate::specs`]). The command is read
//! as shell code where it is a literal (so `tar -I 'zstd -19'` stays ordinary); otherwise
//! the program is opaque: a wrapper whose inner command the text does not show
//! (ARCHITECTURE.md, "The agent guard's policy").

use crate::effect::{Ctx, Effect};
use row_fence_shell::words::Value;

/// The commands handed to `program` in its `options` (each with the text before the
/// command in the value, `--checkpoint-action=exec=`): a literal is read as code, anything
/// else is opaque.
pub fn options(program: &str, options: &[(&str, &str)], args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut effects = Vec::new();
    let mut k = 0;
    while k < args.len() {
        let word = &args[k];
        k += 1;
        let Some(w) = word.literal() else {
            continue;
        };
        for (option, prefix) in options {
            let value = if w == *option {
                k += 1;
                args.get(k - 1).cloned()
            } else if let Some(v) = w
                .strip_prefix(option)
                .and_then(|v| {
                    if option.starts_with("--") {
                        v.strip_prefix('=')
                    } else {
                        Some(v)
                    }
                })
                .filter(|v| !v.is_empty())
            {
                Some(Value::Literal(v.to_string()))
            } else {
                continue;
            };
            match value {
                // A literal command is read as code: `tar -I 'zstd -19'` stays ordinary.
                Some(Value::Literal(v)) => {
                    if let Some(code) = v.strip_prefix(prefix) {
                        effects.push(Effect::Code {
                            text: code.to_string(),
                            dirs: ctx.dirs.clone(),
                        });
                    }
                }
                _ => effects.push(ctx.opaque(format!(
                    "`{program} {option}` runs a command only known when it runs"
                ))),
            }
            break;
        }
    }
    effects
}

/// A database shell: opaque when an inline command escapes to the shell, or when it
/// reads its commands from stdin (no inline command and no file).
/// `escapes`: inline texts that escape to the shell; `inline`: options whose value is an
/// inline command; `commands_after_database`: its operands are a database, then commands.
pub fn db_shell(
    program: &str,
    escapes: &[&str],
    inline: &[&str],
    commands_after_database: bool,
    args: &[Value],
    ctx: &Ctx,
) -> Vec<Effect> {
    let escaping = |text: &str| {
        let lower = text.to_ascii_lowercase();
        escapes.iter().any(|e| lower.contains(e))
    };
    // The command an escape runs, read as code too: `.shell git -C /r push` writes from /r.
    let escaped = |text: &str| -> Vec<Effect> {
        let mut effects = vec![ctx.opaque(format!(
            "`{program}` is given a command that runs a shell command"
        ))];
        for line in text.lines() {
            let line = line.trim_start();
            for escape in [".shell ", ".system ", "\\! ", "\\!"] {
                if let Some(code) = line.strip_prefix(escape) {
                    effects.push(Effect::Code {
                        text: code.to_string(),
                        dirs: ctx.dirs.clone(),
                    });
                    break;
                }
            }
        }
        effects
    };
    if args
        .iter()
        .any(|a| matches!(a.literal(), Some("--version" | "--help" | "-V")))
    {
        return Vec::new();
    }
    let mut commands = 0;
    let mut k = 0;
    while k < args.len() {
        let word = &args[k];
        k += 1;
        let Some(w) = word.literal() else {
            return vec![ctx.opaque(format!(
                "`{program} {}` is only known when it runs",
                word.text()
            ))];
        };
        if inline.contains(&w) || matches!(w, "-f" | "--file") {
            let value = args.get(k);
            k += 1;
            match value.and_then(Value::literal) {
                Some(text) if inline.contains(&w) && escaping(text) => return escaped(text),
                Some(_) => commands += 1,
                None => {
                    return vec![ctx.opaque(format!("`{program} {w}` is only known when it runs"))];
                }
            }
            continue;
        }
        if w.starts_with('-') {
            continue;
        }
        // sqlite3/duckdb: DATABASE [SQL…]; psql/mysql: a database name.
        if commands_after_database
            && k > 1
            && args[..k - 1].iter().any(|a| !a.text().starts_with('-'))
        {
            if escaping(w) {
                return escaped(w);
            }
            commands += 1;
        }
    }
    if commands == 0 {
        return vec![ctx.opaque(format!(
            "`{program}` reads its commands, which may run shell commands, from stdin"
        ))];
    }
    Vec::new()
}
