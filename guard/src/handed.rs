//! Ordinary programs that are handed a command in one of their options and run it:
//! `tar --to-command`/`--checkpoint-action=exec=`/`-I`, `zip -TT`, `man -P`, `rsync -e`,
//! `npx -c`, `nix-shell --run`, `socat EXEC:`/`SYSTEM:`; database shells whose inline
//! commands escape to the shell (`sqlite3 '.shell …'`, `psql -c '\! …'`); and line
//! editors that read their commands (`!cmd` among them) from stdin. The command is read
//! as shell code where it is a literal (so `tar -I 'zstd -19'` stays ordinary); otherwise
//! the program is opaque: a wrapper whose inner command the text does not show
//! (ARCHITECTURE.md, "The agent guard's policy").

use crate::effect::{Ctx, Effect};
use row_fence_shell::words::Value;

/// A program and its options whose value is a command. `prefix`: the command follows
/// this text in the value (`--checkpoint-action=exec=CMD`).
struct Handed {
    names: &'static [&'static str],
    options: &'static [(&'static str, &'static str)],
}

const HANDED: &[Handed] = &[
    Handed {
        names: &["tar", "gtar", "bsdtar"],
        options: &[
            ("--to-command", ""),
            ("--checkpoint-action", "exec="),
            ("-I", ""),
            ("--use-compress-program", ""),
            ("--rsh-command", ""),
            ("--rmt-command", ""),
            ("--info-script", ""),
            ("--new-volume-script", ""),
            ("-F", ""),
        ],
    },
    Handed {
        names: &["zip"],
        options: &[("-TT", ""), ("--unzip-command", "")],
    },
    Handed {
        names: &["man"],
        options: &[("-P", ""), ("--pager", "")],
    },
    Handed {
        names: &["rsync"],
        options: &[("-e", ""), ("--rsh", ""), ("--rsync-path", "")],
    },
    Handed {
        names: &["npx", "pnpx", "bunx", "npm", "pnpm", "yarn"],
        options: &[("-c", ""), ("--call", "")],
    },
    Handed {
        names: &["nix-shell"],
        options: &[("--run", ""), ("--command", "")],
    },
];

/// Database shells: the inline texts that escape to the shell, and the options whose
/// value is an inline command.
const DB_SHELLS: &[(&str, &[&str], &[&str])] = &[
    ("sqlite3", SQLITE_ESCAPES, &["-cmd", "--cmd"]),
    ("duckdb", SQLITE_ESCAPES, &["-c", "-cmd"]),
    (
        "psql",
        &["\\!", "\\o |", "\\o|", "\\g |", "\\g|", "program"],
        &["-c", "--command"],
    ),
    ("mysql", &["\\!", "system "], &["-e", "--execute"]),
    ("mariadb", &["\\!", "system "], &["-e", "--execute"]),
];

/// sqlite3's dot-commands that run a program (`.shell`, `.system`) or can pipe to one
/// (`.output |cmd`, `.import '|cmd'`…).
const SQLITE_ESCAPES: &[&str] = &[
    ".shell", ".system", ".sh ", ".once", ".output", ".import", ".read", ".excel",
];

/// Editors that read their commands from stdin, `!cmd` among them.
const LINE_EDITORS: &[&str] = &["ed", "red", "ex"];

/// Classifies `program ARGS` when it is one of these; `None` otherwise.
pub fn classify(program: &str, args: &[Value], ctx: &Ctx) -> Option<Vec<Effect>> {
    if let Some(h) = HANDED.iter().find(|h| h.names.contains(&program)) {
        return Some(options(program, h, args, ctx));
    }
    if program == "socat" {
        return Some(socat(args, ctx));
    }
    if let Some((_, escapes, inline)) = DB_SHELLS.iter().find(|(n, _, _)| *n == program) {
        return Some(db_shell(program, escapes, inline, args, ctx));
    }
    if LINE_EDITORS.contains(&program) && !args.iter().any(|a| a.text() == "--version") {
        return Some(vec![ctx.opaque(format!(
            "`{program}` reads its commands, which may run shell commands, from stdin"
        ))]);
    }
    None
}

fn options(program: &str, h: &Handed, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut effects = Vec::new();
    let mut k = 0;
    while k < args.len() {
        let word = &args[k];
        k += 1;
        let Some(w) = word.literal() else {
            continue;
        };
        for (option, prefix) in h.options {
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

/// socat's `EXEC:cmd` and `SYSTEM:cmd` addresses (options after the first comma).
fn socat(args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut effects = Vec::new();
    for arg in args {
        let Some(w) = arg.literal() else {
            effects.push(ctx.opaque("`socat`'s address is only known when it runs"));
            continue;
        };
        let Some((kind, rest)) = w.split_once(':') else {
            continue;
        };
        if matches!(kind.to_ascii_uppercase().as_str(), "EXEC" | "SYSTEM") {
            let code = rest.split(',').next().unwrap_or_default();
            effects.push(Effect::Code {
                text: code.to_string(),
                dirs: ctx.dirs.clone(),
            });
        }
    }
    effects
}

/// A database shell: opaque when an inline command escapes to the shell, or when it
/// reads its commands from stdin (no inline command and no file).
fn db_shell(
    program: &str,
    escapes: &[&str],
    inline: &[&str],
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
        if matches!(program, "sqlite3" | "duckdb")
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
