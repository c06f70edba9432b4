//! The shell's own commands, as far as the fence cares: moves (`cd`, `pushd`, `popd`),
//! assignments (`export`, `declare`, `read`…), commands that bind a name to other code
//! (`alias`, `hash`, `trap`), arithmetic (`let`), and zsh's (`repeat`, `sched`,
//! `emulate`, `print -P`, precommand modifiers). Claude Code runs the Bash tool in the
//! user's shell, which is zsh on macOS: a zsh spelling the text shows is read as zsh runs
//! it, and one the guard cannot follow is opaque.

use crate::builtin_readers::{is_name, read_into};
use crate::effect::{Ctx, Effect, Move};
use row_fence_shell::words::Value;

/// How the guard reads one of the shell's own commands: `(program, args, ctx, functions,
/// depth)` → what it does, or `None` when these words do nothing the guard reads here
/// (it goes on as the program of that name: its record, or none).
type Read = fn(&str, &[Value], &Ctx, bool, usize) -> Option<Vec<Effect>>;

/// The shell's own commands this module reads, each name in one entry. Those that run
/// their words (`eval`, `command`…) and those that print (`printf`, `print`) are read by
/// their records ([`crate::specs`], [`crate::builtin_readers`]); the rest of the shell's own commands
/// ([`row_fence_shell::lookup::SHELL_BUILTINS`]) are in [`READ_AS_PROGRAMS`]. A test
/// checks that each of them has one treatment.
const READ: &[(&[&str], Read)] = &[
    (&["cd", "pushd", "popd"], |program, args, _, _, _| {
        Some(vec![Effect::Move(moves(program, args))])
    }),
    (&["fc", "r"], |program, _, ctx, _, _| {
        Some(
            ctx.opaque_in_shell(format!("`{program}` runs code the text does not show"))
                .into(),
        )
    }),
    (&["trap"], |_, args, ctx, _, _| Some(trap(args, ctx))),
    (&["alias"], |_, args, ctx, _, _| Some(alias(args, ctx))),
    (&["hash"], |_, args, ctx, _, _| Some(hash(args, ctx))),
    (
        &["enable", "bind", "complete"],
        |program, args, ctx, _, _| binds_names(args).then(|| binds(program, ctx)),
    ),
    (&["mapfile", "readarray"], |program, args, ctx, _, _| {
        Some(if binds_names(args) {
            binds(program, ctx)
        } else {
            read_into(program, args)
        })
    }),
    (
        &[
            "export", "declare", "typeset", "local", "readonly", "integer", "float",
        ],
        |program, args, ctx, _, _| Some(declaration(program, args, ctx)),
    ),
    (&["read", "getopts"], |program, args, _, _, _| {
        Some(read_into(program, args))
    }),
    (&["let"], |_, args, _, _, _| {
        Some(vec![Effect::Arithmetic(args.to_vec())])
    }),
    (&["set"], |_, args, _, _, _| Some(set(args))),
    (&["unset"], |_, args, _, _, _| {
        Some(vec![Effect::Unset(
            args.iter()
                .filter_map(|a| a.literal())
                .filter(|a| !a.starts_with('-'))
                .map(str::to_string)
                .collect(),
        )])
    }),
    // zsh's precommand modifiers run the rest as a command.
    (
        &["noglob", "nocorrect", "-"],
        |_, args, ctx, functions, depth| Some(ctx.classify(args, functions, depth + 1)),
    ),
    // zsh: `repeat N cmd`, `sched [-o] TIME cmd`.
    (&["repeat"], |_, args, ctx, functions, depth| {
        Some(ctx.classify(args.get(1..).unwrap_or_default(), functions, depth + 1))
    }),
    (&["sched"], |_, args, ctx, functions, depth| {
        let rest: Vec<Value> = args
            .iter()
            .skip_while(|a| a.literal().is_some_and(|w| w.starts_with('-')))
            .skip(1)
            .cloned()
            .collect();
        Some(ctx.classify(&rest, functions, depth + 1))
    }),
    (&["emulate"], |_, args, ctx, _, _| Some(emulate(args, ctx))),
];

/// The shell's own commands the guard reads as the programs of those names (their
/// records, or none): nothing they do touches the fence beyond what a program of that
/// name does. A new one of the shell's own commands goes here, in [`READ`], or in a
/// record ([`crate::specs`]).
pub const READ_AS_PROGRAMS: &[&str] = &[
    ":",
    "[[",
    "bg",
    "break",
    "caller",
    "compgen",
    "compopt",
    "continue",
    "dirs",
    "disown",
    "exit",
    "fg",
    "help",
    "history",
    "jobs",
    "kill",
    "logout",
    "pwd",
    "return",
    "shift",
    "shopt",
    "suspend",
    "times",
    "ulimit",
    "umask",
    "unalias",
    "coproc",
    "!",
    "setopt",
    "unsetopt",
    "whence",
    "where",
    "rehash",
    "unhash",
    "limit",
    "unlimit",
    "zparseopts",
];

/// Classifies one of the shell's own commands this module reads ([`READ`]); `None` when
/// `program` is not one, or these words do nothing it reads (the caller goes on with
/// programs).
pub fn classify_builtin(
    program: &str,
    args: &[Value],
    ctx: &Ctx,
    functions: bool,
    depth: usize,
) -> Option<Vec<Effect>> {
    let (_, read) = READ.iter().find(|(names, _)| names.contains(&program))?;
    read(program, args, ctx, functions, depth)
}

/// The names this module reads ([`READ`]).
pub fn read_here() -> impl Iterator<Item = &'static str> {
    READ.iter().flat_map(|(names, _)| names.iter().copied())
}

/// True when `enable`, `mapfile`, `bind`, `complete`… are given options that bind names
/// to other code, or words the text does not show.
fn binds_names(args: &[Value]) -> bool {
    args.iter().any(|a| {
        matches!(a.literal(), Some(w) if w.starts_with('-') && w.contains(['p', 'f', 'C', 'x', 'F']))
            || a.literal().is_none()
    })
}

fn binds(program: &str, ctx: &Ctx) -> Vec<Effect> {
    ctx.opaque_in_shell(format!(
        "`{program}` with these options binds names to other code"
    ))
    .into()
}

/// `cd`/`pushd`/`popd` and where they go. `-P` resolves the target physically. zsh's
/// two-operand `cd OLD NEW` replaces OLD with NEW in `$PWD`: a place the text does not
/// name.
fn moves(program: &str, args: &[Value]) -> Move {
    // Options: cd -L/-P/-e/-@, pushd/popd -n; `--` ends them.
    let is_option = |a: &Value| matches!(a.literal(), Some(w) if w.len() > 1 && w.starts_with('-') && w[1..].chars().all(|c| "LPe@nqs".contains(c)));
    let physical = args
        .iter()
        .take_while(|a| is_option(a))
        .any(|a| a.text().contains('P'));
    let mut rest = args.iter().skip_while(|a| is_option(a)).peekable();
    if rest.peek().and_then(|a| a.literal()) == Some("--") {
        rest.next();
    }
    let operands: Vec<Value> = rest.cloned().collect();
    let operand = match operands.as_slice() {
        [] => None,
        [one] => Some(one.clone()),
        _ => Some(Value::Dynamic(format!(
            "{program} {}",
            operands
                .iter()
                .map(Value::text)
                .collect::<Vec<_>>()
                .join(" ")
        ))),
    };
    match program {
        "cd" => Move::Cd {
            to: operand,
            physical,
        },
        "pushd" => Move::Pushd {
            to: match operand {
                // +N / -N rotate the stack: where that leads is the agent shell's stack.
                Some(Value::Literal(w)) if w.starts_with(['+', '-']) && w.len() > 1 => {
                    Some(Value::Dynamic(w))
                }
                other => other,
            },
            physical,
        },
        _ => Move::Popd,
    }
}

/// `set -P` / `set -o physical` make every later `cd` physical.
fn set(args: &[Value]) -> Vec<Effect> {
    let mut physical = None;
    let mut k = 0;
    while k < args.len() {
        match args[k].literal() {
            Some("-o" | "+o") => {
                if args.get(k + 1).and_then(Value::literal) == Some("physical") {
                    physical = Some(args[k].text() == "-o");
                }
                k += 2;
                continue;
            }
            Some(w) if w.starts_with(['-', '+']) && w.len() > 1 && w[1..].contains('P') => {
                physical = Some(w.starts_with('-'));
            }
            _ => {}
        }
        k += 1;
    }
    physical.map(Effect::Physical).into_iter().collect()
}

fn trap(args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let listing = args.is_empty()
        || args
            .iter()
            .all(|a| matches!(a.literal(), Some("-p" | "-l" | "--")))
        || matches!(args.first().and_then(Value::literal), Some("-" | ""));
    if listing {
        Vec::new()
    } else {
        vec![ctx.opaque("a trap body is code that runs later")]
    }
}

/// `alias NAME=BODY`: the body is code that runs wherever `NAME` is used later (the agent's
/// shell expands aliases): it is read then, as code in that shell. A body the text does not
/// show is opaque.
fn alias(args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut effects = Vec::new();
    for arg in args {
        match arg {
            Value::Literal(w) if w.starts_with('-') => {}
            Value::Literal(w) => {
                if let Some((name, body)) = w.split_once('=') {
                    effects.push(Effect::Alias(name.to_string(), body.to_string()));
                }
            }
            Value::Dynamic(raw) => {
                effects.extend(
                    ctx.opaque_in_shell(format!("the alias `{raw}` is only known when it runs")),
                );
            }
        }
    }
    effects
}

/// `hash -p PATH NAME` (bash) and `hash NAME=PATH` (zsh) make `NAME` run `PATH`.
fn hash(args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut rebinds = Vec::new();
    let mut k = 0;
    while k < args.len() {
        match &args[k] {
            Value::Literal(w) if w == "-p" => {
                let path = args.get(k + 1).and_then(Value::literal).map(str::to_string);
                let names = args.get(k + 2..).unwrap_or_default();
                for name in names.iter().filter_map(Value::literal) {
                    rebinds.push((name.to_string(), path.clone()));
                }
                if names.is_empty() || args.get(k + 1).is_none() {
                    return vec![ctx.opaque("`hash -p` binds a name to a program")];
                }
                break;
            }
            Value::Literal(w) if w.starts_with('-') => {}
            Value::Literal(w) => {
                if let Some((name, path)) = w.split_once('=') {
                    rebinds.push((name.to_string(), Some(path.to_string())));
                }
            }
            Value::Dynamic(raw) => {
                return ctx
                    .opaque_in_shell(format!("`hash {raw}` may bind a name to any program"))
                    .into();
            }
        }
        k += 1;
    }
    if rebinds.is_empty() {
        Vec::new()
    } else {
        vec![Effect::Rebind(rebinds)]
    }
}

/// zsh's `emulate … -c CODE` runs CODE; without `-c` it only sets options.
fn emulate(args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    match args.iter().position(|a| a.literal() == Some("-c")) {
        None => Vec::new(),
        Some(k) => match args.get(k + 1) {
            Some(Value::Literal(code)) => vec![Effect::Code {
                text: code.clone(),
                dirs: ctx.dirs.clone(),
            }],
            _ => vec![ctx.opaque("`emulate -c` runs code only known when it runs")],
        },
    }
}

/// `export A=1`, `declare -x B=$x`, `local C`: assignments the walk tracks. A nameref
/// (`-n`) or a name the text does not show is opaque: it may set anything. An integer
/// variable (`declare -i`, zsh's `integer`) evaluates what it is given as arithmetic.
fn declaration(program: &str, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut assigned = Vec::new();
    let mut exports = program == "export";
    let mut integer = program == "integer" || program == "float";
    for arg in args {
        match arg {
            Value::Literal(w) if w.starts_with(['-', '+']) => {
                if w.contains('n') {
                    return vec![ctx.opaque("a nameref (`-n`) assigns through another name")];
                }
                exports |= w.starts_with('-') && w.contains('x');
                integer |= w.starts_with('-') && w.contains(['i', 'E', 'F']);
            }
            Value::Literal(w) => {
                if let Some((name, value)) = w.split_once('=') {
                    let name = name.trim_end_matches('+');
                    assigned.push((name.to_string(), Value::Literal(value.to_string())));
                } else if exports && crate::env_vars::changes_programs(w) {
                    // Exporting one whose value came from elsewhere (`read`, a prior call).
                    return vec![
                        ctx.opaque(format!("exporting `{w}` changes what a later program runs")),
                    ];
                }
            }
            Value::Dynamic(raw) => match raw.split_once('=') {
                Some((name, _)) if is_name(name.trim_end_matches('+')) => {
                    assigned.push((name.trim_end_matches('+').to_string(), arg.clone()));
                }
                _ => {
                    return vec![ctx.opaque(format!(
                        "`{raw}` may assign any variable, only known when it runs"
                    ))];
                }
            },
        }
    }
    let mut effects = Vec::new();
    if integer {
        effects.push(Effect::Arithmetic(
            assigned
                .iter()
                .map(|(_, v)| match v {
                    Value::Literal(text) => Value::Literal(text.clone()),
                    Value::Dynamic(raw) => Value::Dynamic(
                        raw.split_once('=')
                            .map_or(raw.as_str(), |(_, v)| v)
                            .to_string(),
                    ),
                })
                .collect(),
        ));
    }
    effects.push(Effect::Assign(assigned));
    effects
}

#[cfg(test)]
mod tests {
    use super::*;
    use row_fence_shell::lookup::{SHELL_BUILTINS, is_shell_builtin};

    #[test]
    fn every_one_of_the_shells_own_commands_has_one_treatment() {
        for name in SHELL_BUILTINS {
            let treatments = [
                read_here().any(|n| n == *name),
                READ_AS_PROGRAMS.contains(name),
                crate::specs::find(name).is_some(),
            ];
            assert_eq!(
                treatments.iter().filter(|t| **t).count(),
                1,
                "`{name}`: (read here, read as a program, a record) = {treatments:?}"
            );
        }
        for name in read_here().chain(READ_AS_PROGRAMS.iter().copied()) {
            assert!(is_shell_builtin(name), "`{name}` is not the shell's own");
        }
    }
}
