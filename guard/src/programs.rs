//! Programs other than the shell's own, each read as its record says
//! ([`crate::specs`]): wrappers (`env`, `timeout`, `sudo`…), whose inner command is
//! classified in turn; shells, whose literal `-c` code is read as a command of its own;
//! interpreters, whose inline code (`python -c`, `node -e`, code on stdin) is opaque;
//! runners the guard does not follow; editors and database shells given commands; and a
//! program the guard has no record for, among whose words a command may be handed
//! ([`embedded`]) (ARCHITECTURE.md, "The agent guard's policy"). A wrapper option its
//! record does not list makes the command opaque: the guard cannot tell where the inner
//! command starts.

use crate::builtin_readers::is_name;
use crate::effect::{Ctx, Effect, deferred, script_file};
use crate::specs::{self, DbShell, Editor, Interpreter, Runner, Runs, ShellCode, Spec, Wrapper};
use row_fence_shell::state::resolve_physical;
use row_fence_shell::words::{Value, Vars};

/// Classifies a program that is not the shell's own, as its record says.
pub fn classify(program: &str, args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    let Some(spec) = specs::find(program) else {
        return embedded(program, args, ctx, depth);
    };
    if !spec.handed.is_empty() {
        let effects = crate::handed::options(program, spec.handed, args, ctx);
        if !effects.is_empty() {
            return effects;
        }
    }
    let effects = match &spec.runs {
        Runs::Fenced(read) | Runs::Reader { read, .. } | Runs::Builtin { read, .. } => {
            return read(program, args, ctx, depth);
        }
        Runs::Wrapper(w) => {
            let effects = wrapper(program, w, args, ctx, depth);
            if w.outlives {
                return deferred(
                    &format!("under `{program}`, which outlives the call"),
                    effects,
                );
            }
            return effects;
        }
        Runs::Shell(ShellCode::Read) => return shell(program, args, ctx),
        Runs::Shell(ShellCode::ToolOnly) => {
            return vec![ctx.opaque(format!(
                "`{program}` runs a command the guard does not follow"
            ))];
        }
        Runs::Runner(r) => return runner(program, r, args, ctx),
        Runs::Interpreter(i) => return interpreter(program, i, args, ctx),
        Runs::Data => return Vec::new(),
        Runs::Unknown | Runs::Waits => Vec::new(),
        Runs::Handed(read) => read(program, args, ctx),
        Runs::DbShell(db) => db_shell(program, db, args, ctx),
        Runs::Editor(e) => editor(program, e, args, ctx),
    };
    if !effects.is_empty() {
        return effects;
    }
    embedded(program, args, ctx, depth)
}

/// A database shell (its reader is [`crate::handed::db_shell`]).
fn db_shell(program: &str, db: &DbShell, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    crate::handed::db_shell(
        program,
        db.escapes,
        db.inline,
        db.commands_after_database,
        args,
        ctx,
    )
}

/// An editor given commands to run, on its command line or (with no `--version`) stdin.
fn editor(program: &str, e: &Editor, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    if e.from_stdin && !args.iter().any(|a| a.text() == "--version") {
        return vec![ctx.opaque(format!(
            "`{program}` reads its commands, which may run shell commands, from stdin"
        ))];
    }
    let Some(flags) = e.commands else {
        return Vec::new();
    };
    let given = args.iter().any(|a| {
        a.literal().is_none_or(|w| {
            flags.contains(&w)
                || (w.starts_with('+') && e.vi_style)
                || flags.iter().any(|f| w.starts_with(&format!("{f}=")))
                || (e.vi_style
                    && w.starts_with('-')
                    && !w.starts_with("--")
                    && w[1..].contains(['e', 'E', 's']))
        })
    });
    if given {
        return vec![ctx.opaque(format!("`{program}` is given commands to run"))];
    }
    Vec::new()
}

/// An ordinary program that is handed a command as separate words (`ssh-agent git
/// push`, `uv run git push`, `npm exec -- git push`, `dbus-launch sh -c …`): a wrapper
/// the guard has no table for. The inner command is read from the first word that names
/// git, gh, row-fence, a shell, an interpreter or a wrapper; if it writes or cannot be
/// read, the program is opaque too (it may run it elsewhere, or more than once).
pub fn embedded(program: &str, args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    const MAX_TRIES: usize = 8;
    if depth > crate::effect::MAX_WRAPPER_DEPTH {
        return Vec::new();
    }
    let mut tries = 0;
    for (k, arg) in args.iter().enumerate() {
        let Some(word) = arg.literal() else { continue };
        if !names_a_runner(word, ctx) {
            continue;
        }
        tries += 1;
        if tries > MAX_TRIES {
            return vec![ctx.opaque(format!(
                "`{program}` is handed more commands than the guard reads"
            ))];
        }
        let inner = ctx.classify(&args[k..], false, depth + 1);
        if !inner.is_empty() {
            let mut effects = vec![ctx.opaque(format!(
                "`{program}` is handed the command `{}` and may run it",
                crate::finding::short(
                    &args[k..]
                        .iter()
                        .map(Value::text)
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            ))];
            effects.extend(inner);
            return effects;
        }
    }
    Vec::new()
}

/// True when `word`, as a command run from `ctx`, is one the guard reads for writes: git,
/// gh, row-fence (by name or path), a program the lane may have made, or any program
/// whose record takes commands
/// ([`Spec::takes_commands`]: a shell, an interpreter, a wrapper, a runner, `eval`…).
fn names_a_runner(word: &str, ctx: &Ctx) -> bool {
    if word.starts_with('-') || word.contains('=') {
        return false;
    }
    let name = word.rsplit('/').next().unwrap_or(word);
    // A path is read as every name the file it leads to is known by
    // ([`crate::known_as`]): `./x` → vim, `./p` → python; one the lane may have made
    // runs what the guard cannot tell.
    let mut known = crate::known_as::Known::one(name);
    if word.contains('/') {
        for dir in &ctx.dirs {
            let crate::finding::Dir::Known(dir) = dir else {
                continue;
            };
            let located = dir.join(word);
            if let Ok(target) = std::fs::canonicalize(&located) {
                known.join(crate::known_as::known(
                    &target,
                    name,
                    Some(&located),
                    ctx.path,
                ));
            }
        }
    }
    known.planted.is_some()
        || known.names.iter().any(|name| {
            crate::fenced::is_fenced_program(&name.to_ascii_lowercase())
                || specs::find(name).is_some_and(Spec::takes_commands)
        })
}

/// A wrapper's inner command, read in the directory and with the variables its options
/// and operands set.
fn wrapper(program: &str, w: &Wrapper, args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    let mut dirs = ctx.dirs.clone();
    let mut env: Vars = ctx.vars.clone();
    let mut effects = Vec::new();
    let mut i = 0;
    let mut operands = w.operands;
    while i < args.len() {
        let Some(arg) = args[i].literal() else {
            return vec![ctx.opaque(format!(
                "`{program} {}` is only known when it runs",
                args[i].text()
            ))];
        };
        if arg == "--" {
            i += 1;
            break;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (arg, None),
        };
        if w.assigns && !arg.starts_with('-') && arg.contains('=') {
            let (var, value) = arg.split_once('=').unwrap_or_default();
            if is_name(var) {
                env.insert(var.to_string(), Some(value.to_string()));
            }
            effects.extend(crate::env_vars::assigned(
                var,
                &Value::Literal(value.to_string()),
                ctx,
            ));
            i += 1;
            continue;
        }
        if !arg.starts_with('-') || arg == "-" && !w.flags.contains(&"-") {
            if operands == 0 {
                break;
            }
            operands -= 1;
            i += 1;
            continue;
        }
        i += 1;
        let value = |i: &mut usize| -> Option<Value> {
            match inline {
                Some(v) => Some(Value::Literal(v.to_string())),
                None => {
                    *i += 1;
                    args.get(*i - 1).cloned()
                }
            }
        };
        if w.code.contains(&name) {
            return match value(&mut i) {
                Some(Value::Literal(code)) => vec![Effect::Code { text: code, dirs }],
                _ => vec![ctx.opaque(format!(
                    "`{program} {name}` runs code only known when it runs"
                ))],
            };
        }
        if w.chdir.contains(&name) {
            match value(&mut i) {
                Some(target) => dirs = resolve_physical(&dirs, &target),
                None => return vec![ctx.opaque(format!("`{program} {name}` without a directory"))],
            }
            continue;
        }
        if w.valued.contains(&name) {
            value(&mut i);
            continue;
        }
        if w.flags.contains(&name)
            || (w.numeric_option && name[1..].chars().all(|c| c.is_ascii_digit()))
        {
            continue;
        }
        return vec![ctx.opaque(format!(
            "`{program}`'s option `{name}` is not one the guard reads, so it cannot tell which command runs"
        ))];
    }
    // An option that takes a value, written last without one, leaves no inner command.
    let inner = args.get(i..).unwrap_or_default();
    if inner.is_empty() {
        return effects;
    }
    let vars = env;
    let inner_ctx = ctx.with_vars(dirs, &vars);
    effects.extend(inner_ctx.classify(inner, false, depth + 1));
    effects
}

/// `sh -c CODE`: the code is read as a command of its own; a script operand is running
/// a file (ordinary); neither means code from stdin (opaque).
fn shell(program: &str, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut code_flag = false;
    let mut stdin = false;
    let mut i = 0;
    while i < args.len() {
        let Some(arg) = args[i].literal() else {
            return vec![ctx.opaque(format!(
                "`{program} {}` is only known when it runs",
                args[i].text()
            ))];
        };
        if arg == "--" || arg == "-" {
            i += 1;
            break;
        }
        if !arg.starts_with(['-', '+']) {
            break;
        }
        i += 1;
        if matches!(arg, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 1;
            continue;
        }
        if arg.starts_with("--") {
            continue;
        }
        code_flag |= arg.contains('c');
        stdin |= arg.contains('s') || arg.contains('i');
    }
    match args.get(i) {
        Some(Value::Literal(code)) if code_flag => vec![Effect::Code {
            text: code.clone(),
            dirs: ctx.dirs.clone(),
        }],
        Some(Value::Dynamic(raw)) if code_flag => vec![ctx.opaque(format!(
            "`{program} -c {raw}` runs code only known when it runs"
        ))],
        None if code_flag => Vec::new(),
        Some(script) if !stdin => script_file(program, script, ctx),
        _ => vec![ctx.opaque(format!("`{program}` reads its code from stdin"))],
    }
}

/// A runner: opaque once given a command (enough operands, or anything for one that
/// always runs what it reads).
fn runner(program: &str, r: &Runner, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let operands = args.iter().filter(|a| !a.text().starts_with('-')).count();
    if operands < r.operands && !r.always {
        return Vec::new();
    }
    let opaque = vec![ctx.opaque(format!(
        "`{program}` runs a command the guard does not follow"
    ))];
    if r.deferred {
        return deferred(
            &format!("by `{program}`, which starts it apart from the call"),
            opaque,
        );
    }
    opaque
}

fn interpreter(program: &str, i: &Interpreter, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    // Asking for the version or the help runs no code.
    if matches!(
        args.first().and_then(Value::literal),
        Some("--version" | "-V" | "--help" | "-h")
    ) {
        return Vec::new();
    }
    let mut k = 0;
    while k < args.len() {
        let Some(arg) = args[k].literal() else {
            return vec![ctx.opaque(format!(
                "`{program} {}` is only known when it runs",
                args[k].text()
            ))];
        };
        if i.code.contains(&arg)
            || (arg.starts_with('-')
                && !arg.starts_with("--")
                && i.code
                    .iter()
                    .any(|c| c.len() == 2 && arg[1..].contains(&c[1..])))
        {
            return vec![ctx.opaque(format!("`{program} {arg}` runs inline code"))];
        }
        if i.code
            .iter()
            .any(|c| c.starts_with("--") && arg.starts_with(&format!("{c}=")))
        {
            return vec![ctx.opaque(format!("`{program} {arg}` runs inline code"))];
        }
        if arg == "-" {
            break;
        }
        if let Some(modules) = i.modules
            && arg == "-m"
        {
            return match args.get(k + 1).and_then(Value::literal) {
                Some(module) if !modules.contains(&module) => Vec::new(),
                _ => vec![ctx.opaque(format!("`{program} -m` runs code it is handed"))],
            };
        }
        if !arg.starts_with('-') {
            return script_file(program, &args[k], ctx);
        }
        k += 1;
        if i.valued.contains(&arg) {
            k += 1;
        }
    }
    vec![ctx.opaque(format!("`{program}` reads its code from stdin"))]
}
