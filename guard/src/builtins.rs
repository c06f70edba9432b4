//! The shell's own commands, as far as the fence cares: moves (`cd`, `pushd`, `popd`),
//! assignments (`export`, `declare`, `read`…), commands that bind a name to other code
//! (`alias`, `hash`, `trap`), arithmetic (`let`), and zsh's (`repeat`, `sched`,
//! `emulate`, `print -P`, precommand modifiers). Claude Code runs the Bash tool in the
//! user's shell, which is zsh on macOS: a zsh spelling the text shows is read as zsh runs
//! it, and one the guard cannot follow is opaque.

use crate::effect::{Ctx, Effect, Move};
use row_fence_shell::words::Value;

/// Classifies one of the shell's own commands; `None` when `program` is not one this
/// module reads (the caller goes on with programs).
pub fn classify_builtin(
    program: &str,
    args: &[Value],
    ctx: &Ctx,
    functions: bool,
    depth: usize,
) -> Option<Vec<Effect>> {
    let effects = match program {
        "cd" | "pushd" | "popd" => vec![Effect::Move(moves(program, args))],
        "eval" | "source" | "." | "fc" | "r" => ctx
            .opaque_in_shell(format!("`{program}` runs code the text does not show"))
            .into(),
        "trap" => trap(args, ctx),
        "alias" => alias(args, ctx),
        "hash" => hash(args, ctx),
        "enable" | "mapfile" | "readarray" | "bind" | "complete"
            if args.iter().any(|a| {
                matches!(a.literal(), Some(w) if w.starts_with('-') && w.contains(['p', 'f', 'C', 'x', 'F']))
                    || a.literal().is_none()
            }) =>
        {
            ctx.opaque_in_shell(format!(
                "`{program}` with these options binds names to other code"
            ))
            .into()
        }
        "export" | "declare" | "typeset" | "local" | "readonly" | "integer" | "float" => {
            declaration(program, args, ctx)
        }
        "read" | "printf" | "mapfile" | "readarray" | "getopts" => read_into(program, args),
        "let" => vec![Effect::Arithmetic(args.to_vec())],
        "set" => set(args),
        "print" if args.iter().any(|a| {
            a.literal()
                .is_none_or(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('P'))
        }) =>
        {
            vec![ctx.opaque("zsh's `print -P` expands its words as a prompt, which may run them")]
        }
        "unset" => vec![Effect::Unset(
            args.iter()
                .filter_map(|a| a.literal())
                .filter(|a| !a.starts_with('-'))
                .map(str::to_string)
                .collect(),
        )],
        "command" => {
            if args
                .iter()
                .take_while(|a| a.text().starts_with('-'))
                .any(|a| a.text().contains(['v', 'V']))
            {
                return Some(Vec::new());
            }
            let rest: Vec<Value> = args
                .iter()
                .skip_while(|a| matches!(a.literal(), Some("-p")))
                .skip_while(|a| matches!(a.literal(), Some("--")))
                .cloned()
                .collect();
            ctx.classify(&rest, false, depth + 1)
        }
        "builtin" => ctx.classify(args, false, depth + 1),
        // zsh's precommand modifiers run the rest as a command.
        "noglob" | "nocorrect" | "-" => ctx.classify(args, functions, depth + 1),
        // zsh: `repeat N cmd`, `sched [-o] TIME cmd`.
        "repeat" => ctx.classify(args.get(1..).unwrap_or_default(), functions, depth + 1),
        "sched" => {
            let rest: Vec<Value> = args
                .iter()
                .skip_while(|a| a.literal().is_some_and(|w| w.starts_with('-')))
                .skip(1)
                .cloned()
                .collect();
            ctx.classify(&rest, functions, depth + 1)
        }
        "emulate" => emulate(args, ctx),
        _ => return None,
    };
    Some(effects)
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

/// True for a shell variable name.
pub fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// `read NAME`, `printf -v NAME`, `mapfile NAME`, `getopts OPTS NAME`: assign variables
/// from data the text does not show.
fn read_into(program: &str, args: &[Value]) -> Vec<Effect> {
    let names: Vec<(String, Value)> = match program {
        "printf" => args
            .windows(2)
            .filter(|w| w[0].literal() == Some("-v"))
            .filter_map(|w| w[1].literal())
            .map(|n| (n.to_string(), Value::Dynamic(format!("${n}"))))
            .collect(),
        _ => args
            .iter()
            .filter_map(Value::literal)
            .filter(|w| is_name(w))
            .map(|n| (n.to_string(), Value::Dynamic(format!("${n}"))))
            .collect(),
    };
    if names.is_empty() {
        Vec::new()
    } else {
        vec![Effect::Assign(names)]
    }
}
