//! One simple command, its words already read: what it does, as far as the fence cares
//! (ARCHITECTURE.md, "The agent guard's policy"). Finds the program the command word runs
//! ([`row_fence_shell::lookup`], [`crate::fenced`]), then dispatches to the shell's own
//! commands ([`crate::builtins`]) or to the program's record ([`crate::programs`],
//! [`crate::specs`]).

use crate::effect::{Ctx, Effect, MAX_WRAPPER_DEPTH, Move};
use crate::fenced::is_fenced_program;
use crate::finding::Dir;
use crate::known_as::{Known, known};
use crate::specs::Runs;
use row_fence_shell::words::Value;
use std::path::Path;

/// Classifies `argv` (the command word first) run from `ctx`; `functions`: whether a
/// function of that name is called (false under `command`, `builtin`, and wrappers,
/// which run programs).
pub fn classify(argv: &[Value], ctx: &Ctx, functions: bool, depth: usize) -> Vec<Effect> {
    let Some(first) = argv.first() else {
        return Vec::new();
    };
    if depth > MAX_WRAPPER_DEPTH {
        return vec![ctx.opaque("wrappers nested too deep to read")];
    }
    let name = match first {
        Value::Literal(name) => name.as_str(),
        Value::Dynamic(raw) => {
            return ctx
                .opaque_in_shell(format!(
                    "the command word `{raw}` is only known when it runs"
                ))
                .into();
        }
    };
    if functions && ctx.functions.contains(name) {
        return vec![Effect::Call(name.to_string(), argv[1..].to_vec())];
    }
    let args = &argv[1..];
    if functions && names_a_directory(name, ctx) {
        return vec![Effect::Move(Move::AutoCd(Value::Literal(name.to_string())))];
    }
    // A name bound to a program earlier in the command runs that program.
    if let Some(target) = ctx.rebound.get(name) {
        let mut inner = vec![match target {
            Some(path) => Value::Literal(path.clone()),
            None => Value::Dynamic(format!(
                "(`{name}` bound to a program the text does not show)"
            )),
        }];
        inner.extend_from_slice(args);
        return classify(&inner, ctx, false, depth + 1);
    }
    // A name the text cannot pin to a program is opaque; it is still read as the program
    // of that name (a wrapper installed by this command runs its inner command).
    let (known, unknown) = match identity(name, ctx) {
        Ok(known) => (known, None),
        Err(why) => (
            Known::one(
                Path::new(name)
                    .file_name()
                    .map_or(name.to_string(), |n| n.to_string_lossy().into_owned()),
            ),
            Some(ctx.opaque(why.to_string())),
        ),
    };
    let mut effects: Vec<Effect> = unknown.into_iter().collect();
    if let Some(why) = known.planted {
        effects.push(ctx.opaque(why));
    }
    // Every name the program is read as adds what it finds (ARCHITECTURE.md, "The agent
    // guard's policy": a program is known by what it runs, not its name).
    for program in known.names {
        for effect in dispatch(program, args, ctx, functions, depth) {
            if !effects.contains(&effect) {
                effects.push(effect);
            }
        }
    }
    effects
}

/// What `program ARGS` does, the program found.
fn dispatch(
    program: String,
    args: &[Value],
    ctx: &Ctx,
    functions: bool,
    depth: usize,
) -> Vec<Effect> {
    // A case-insensitive file system (macOS) runs `GIT` as git.
    let lower = program.to_ascii_lowercase();
    let program = if is_fenced_program(&lower) {
        lower
    } else {
        program
    };
    if let Some(effects) = crate::builtins::classify_builtin(&program, args, ctx, functions, depth)
    {
        return effects;
    }
    // `git-push` is git's own spelling of `git push`: its record reads it so.
    if let Some((spec, sub)) = crate::specs::dashed(&program).filter(|(_, sub)| !sub.is_empty())
        && let Runs::Fenced(read) | Runs::Reader { read, .. } = spec.runs
    {
        let mut inner = vec![Value::Literal(sub.to_string())];
        inner.extend_from_slice(args);
        let name = spec.names.first().copied().unwrap_or_default();
        return read(name, &inner, ctx, depth);
    }
    crate::programs::classify(&program, args, ctx, depth)
}

/// True when `name` is not a program the shell would run but a directory in one of the
/// places the command runs (zsh's `AUTO_CD` then changes to it).
fn names_a_directory(name: &str, ctx: &Ctx) -> bool {
    if row_fence_shell::lookup::is_shell_builtin(name)
        || is_fenced_program(&name.to_ascii_lowercase())
    {
        return false;
    }
    if !name.contains('/') && row_fence_shell::lookup::on_path(name, ctx.path).is_some() {
        return false;
    }
    ctx.dirs
        .iter()
        .any(|d| matches!(d, Dir::Known(d) if d.join(name).is_dir()))
}

/// The program a command word names, as the names it is read by ([`Known`]): for a
/// name, the program `PATH` runs (the shell's own commands are not looked up); for a
/// path, the program the path (or the symlink it is) leads to. A program that is git, gh
/// or row-fence under another name (a symlink, a hard link, a copy:
/// [`crate::fenced::same_program`]) counts as that program, so `/usr/bin/git`, `./g` →
/// git and `/usr/lib/git-core/git-push` count as git. A name on no `PATH` directory, or
/// a path that does not exist yet, is opaque: an alias or function of the agent's shell,
/// a zsh builtin, or a program made in this command runs what the text does not show.
fn identity(word: &str, ctx: &Ctx) -> Result<Known, Unpinned> {
    if !word.contains('/') {
        if is_fenced_program(&word.to_ascii_lowercase())
            || row_fence_shell::lookup::is_shell_builtin(word)
        {
            return Ok(Known::one(word));
        }
        let path = match ctx.vars.get("PATH") {
            Some(Some(path)) => Some(path.as_str()),
            _ => ctx.path,
        };
        return match row_fence_shell::lookup::on_path(word, path) {
            // Found on the hook's own `PATH`: an installed program, not one the lane made.
            Some(target) if path == ctx.path => Ok(Known {
                planted: None,
                ..known(&target, word, None, ctx.path)
            }),
            Some(target) => Ok(known(&target, word, None, ctx.path)),
            None => Err(Unpinned::NotOnPath(word.to_string())),
        };
    }
    let own = Path::new(word)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if is_fenced_program(&own.to_ascii_lowercase()) {
        return Ok(Known::one(own));
    }
    let mut seen: Option<Known> = None;
    for dir in &ctx.dirs {
        let Dir::Known(dir) = dir else {
            return Err(Unpinned::UnnamedDirectory(word.to_string()));
        };
        let path = dir.join(word);
        let Ok(target) = std::fs::canonicalize(&path) else {
            return Err(Unpinned::NotYet(word.to_string()));
        };
        let program = known(&target, &own, Some(&path), ctx.path);
        if program.names.len() == 1 && is_fenced_program(&program.names[0]) {
            return Ok(program);
        }
        match &mut seen {
            Some(all) => all.join(program),
            None => seen = Some(program),
        }
    }
    Ok(seen.unwrap_or_else(|| Known::one(own)))
}

/// Why a command word cannot be pinned to a program from the text (the word is opaque).
#[derive(Debug, thiserror::Error)]
enum Unpinned {
    /// A name on no `PATH` directory.
    #[error(
        "`{0}` is not a program on PATH: an alias or function of the agent's shell, a zsh builtin, or a program made in this command runs what the text does not show"
    )]
    NotOnPath(String),
    /// A relative path run from a directory the text does not name.
    #[error("`{0}` is run from a directory the text does not name")]
    UnnamedDirectory(String),
    /// A path that does not exist yet.
    #[error("`{0}` does not exist yet, so what it runs is only known when it runs")]
    NotYet(String),
}
