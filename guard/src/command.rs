//! One simple command, its words already read: what it does, as far as the fence cares
//! (DESIGN.md, the agent guard's policy). Finds the program the command word runs
//! ([`crate::lookup`]), then dispatches to the shell's own commands
//! ([`crate::builtins`]), git ([`crate::git`]), gh ([`crate::gh`]), row-fence
//! ([`crate::row_fence`]), and the wrappers and interpreters ([`crate::programs`]).

use crate::finding::{Dir, Place};
use crate::state::resolve;
use crate::words::{Value, Vars};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub use crate::builtins::is_name;

/// What a simple command does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A write to the outside world, at these places.
    Fenced { action: String, places: Vec<Place> },
    /// A command whose effect the text does not show, at these places. `in_shell`: it
    /// runs in the walk's own shell (eval, source, a dynamic command word) and may move it.
    Opaque {
        why: String,
        places: Vec<Place>,
        in_shell: bool,
    },
    /// Shell code given as a literal (`bash -c '…'`, `flock f -c '…'`): read it too, as a
    /// new shell in these directories.
    Code { text: String, dirs: Vec<Dir> },
    /// `cd`, `pushd`, `popd`.
    Move(Move),
    /// A call of a function or an alias defined earlier in the command, with its
    /// arguments (an alias's are read as part of its expansion).
    Call(String, Vec<Value>),
    /// `export`/`declare`/`local`/`readonly` assignments.
    Assign(Vec<(String, Value)>),
    /// `unset NAME…`.
    Unset(Vec<String>),
    /// `alias NAME=BODY`, zsh's `functions[NAME]=BODY`: `NAME` runs BODY from now on.
    Alias(String, String),
    /// `hash -p PATH NAME`, `BASH_CMDS[NAME]=PATH`: `NAME` runs PATH (`None`: a program the
    /// text does not show) from now on.
    Rebind(Vec<(String, Option<String>)>),
    /// Words bash evaluates as arithmetic (`let`, `declare -i`): a `$(…)` in them runs, and
    /// a variable they name is evaluated in turn.
    Arithmetic(Vec<Value>),
    /// `set -P` (true) / `set +P`: later `cd`s resolve physically.
    Physical(bool),
}

/// A change of directory. `physical`: `cd -P`, resolved through symlinks as the kernel
/// does, not lexically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Move {
    /// `cd TARGET` (`None`: `cd` alone, to `$HOME`; `Some("-")`: to `OLDPWD`).
    Cd { to: Option<Value>, physical: bool },
    /// `pushd TARGET` (`None`: swap the top two).
    Pushd { to: Option<Value>, physical: bool },
    /// `popd`.
    Popd,
    /// A command word that names a directory: zsh with `AUTO_CD` (reading commands from
    /// stdin) changes to it; bash fails and stays. Either may be where the next command runs.
    AutoCd(Value),
}

/// What classifying a command needs from the walk.
pub struct Ctx<'a> {
    /// Where the command runs.
    pub dirs: Vec<Dir>,
    /// Shell variables, with the command's own prefix assignments on top.
    pub vars: &'a Vars,
    /// Functions defined earlier in the command.
    pub functions: &'a BTreeSet<String>,
    /// `$HOME`.
    pub home: Option<&'a str>,
    /// Names bound to programs earlier in the command (`hash -p`, `BASH_CMDS`).
    pub rebound: &'a BTreeMap<String, Option<String>>,
    /// The hook's `$PATH` (`None`: the guard's own).
    pub path: Option<&'a str>,
}

impl Ctx<'_> {
    /// A context like this one in other directories (a wrapper's `-C`, `env -C`).
    pub fn at(&self, dirs: Vec<Dir>) -> Ctx<'_> {
        Ctx {
            dirs,
            vars: self.vars,
            functions: self.functions,
            home: self.home,
            rebound: self.rebound,
            path: self.path,
        }
    }

    /// A context like this one with other variables (`env A=1 …`).
    pub fn with_vars<'b>(&'b self, dirs: Vec<Dir>, vars: &'b Vars) -> Ctx<'b> {
        Ctx {
            dirs,
            vars,
            functions: self.functions,
            home: self.home,
            rebound: self.rebound,
            path: self.path,
        }
    }

    /// Every place the command runs: its directories, each with the git dir `GIT_DIR`
    /// names (relative to that directory), if set.
    pub fn places(&self) -> Vec<Place> {
        self.places_with(self.vars.get("GIT_DIR").map(|v| match v {
            Some(text) if !text.is_empty() => Value::Literal(text.clone()),
            Some(_) => Value::Literal(String::new()),
            None => Value::Dynamic("$GIT_DIR".into()),
        }))
    }

    /// Every place, with `git_dir` (resolved against each directory) as the git dir.
    pub fn places_with(&self, git_dir: Option<Value>) -> Vec<Place> {
        self.dirs
            .iter()
            .map(|dir| Place {
                dir: dir.clone(),
                git_dir: match &git_dir {
                    Some(Value::Literal(empty)) if empty.is_empty() => None,
                    Some(value) => resolve(std::slice::from_ref(dir), value).pop(),
                    None => None,
                },
            })
            .collect()
    }

    /// An opaque effect here.
    pub fn opaque(&self, why: impl Into<String>) -> Effect {
        Effect::Opaque {
            why: why.into(),
            places: self.places(),
            in_shell: false,
        }
    }

    /// A fenced write here.
    pub fn fenced(&self, action: impl Into<String>) -> Effect {
        Effect::Fenced {
            action: action.into(),
            places: self.places(),
        }
    }
}

/// How deep wrappers may nest (`env env … git push`) before the command is opaque.
pub const MAX_WRAPPER_DEPTH: usize = 16;

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
            return vec![Effect::Opaque {
                why: format!("the command word `{raw}` is only known when it runs"),
                places: ctx.places(),
                in_shell: true,
            }];
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
    let (program, unknown) = match identity(name, ctx) {
        Ok(program) => (program, None),
        Err(why) => (
            Path::new(name)
                .file_name()
                .map_or(name.to_string(), |n| n.to_string_lossy().into_owned()),
            Some(ctx.opaque(why.to_string())),
        ),
    };
    let mut effects: Vec<Effect> = unknown.into_iter().collect();
    effects.extend(dispatch(program, args, ctx, functions, depth));
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
    match program.as_str() {
        "git" => crate::git::classify(args, ctx, depth),
        "gh" => crate::gh::classify(args, ctx),
        "row-fence" => crate::row_fence::classify(args, ctx),
        _ if program.starts_with("git-") && program.len() > 4 => {
            let mut inner = vec![Value::Literal(program[4..].to_string())];
            inner.extend_from_slice(args);
            crate::git::classify(&inner, ctx, depth)
        }
        _ => crate::programs::classify(&program, args, ctx, depth),
    }
}

/// True when `name` is not a program the shell would run but a directory in one of the
/// places the command runs (zsh's `AUTO_CD` then changes to it).
fn names_a_directory(name: &str, ctx: &Ctx) -> bool {
    if crate::lookup::is_shell_builtin(name) || is_fenced_program(&name.to_ascii_lowercase()) {
        return false;
    }
    if !name.contains('/') && crate::lookup::on_path(name, ctx.path).is_some() {
        return false;
    }
    ctx.dirs
        .iter()
        .any(|d| matches!(d, Dir::Known(d) if d.join(name).is_dir()))
}

/// The program a command word names: for a name, the program `PATH` runs (the shell's
/// own commands are not looked up); for a path, the program the path (or the symlink it
/// is) leads to. A program that is git, gh or row-fence under another name (a symlink, a
/// hard link, a copy: [`crate::lookup::same_program`]) counts as that program, so
/// `/usr/bin/git`, `./g` → git and `/usr/lib/git-core/git-push` count as git. A name on
/// no `PATH` directory, or a path that does not exist yet, is opaque: an alias or function
/// of the agent's shell, a zsh builtin, or a program made in this command runs what the
/// text does not show.
fn identity(word: &str, ctx: &Ctx) -> Result<String, Unpinned> {
    let base = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let as_program = |target: &Path, typed: &str| -> String {
        let name = base(target);
        if is_fenced_program(&name.to_ascii_lowercase()) {
            return name;
        }
        match crate::lookup::same_program(target) {
            Some(fenced) => fenced.to_string(),
            None => typed.to_string(),
        }
    };
    if !word.contains('/') {
        if is_fenced_program(&word.to_ascii_lowercase()) || crate::lookup::is_shell_builtin(word) {
            return Ok(word.to_string());
        }
        let path = match ctx.vars.get("PATH") {
            Some(Some(path)) => Some(path.as_str()),
            _ => ctx.path,
        };
        return match crate::lookup::on_path(word, path) {
            Some(target) => Ok(as_program(&target, word)),
            None => Err(Unpinned::NotOnPath(word.to_string())),
        };
    }
    let own = base(Path::new(word));
    if is_fenced_program(&own.to_ascii_lowercase()) {
        return Ok(own);
    }
    let mut seen = None;
    for dir in &ctx.dirs {
        let Dir::Known(dir) = dir else {
            return Err(Unpinned::UnnamedDirectory(word.to_string()));
        };
        let path = dir.join(word);
        match std::fs::canonicalize(&path) {
            Ok(target) => {
                let program = as_program(&target, &own);
                if is_fenced_program(&program) {
                    return Ok(program);
                }
                seen = Some(program);
            }
            Err(_) => {
                return Err(Unpinned::NotYet(word.to_string()));
            }
        }
    }
    Ok(seen.unwrap_or(own))
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

/// Programs whose name alone makes a fenced write possible.
pub fn is_fenced_program(name: &str) -> bool {
    name == "git" || name == "gh" || name == "row-fence" || name.starts_with("git-")
}
