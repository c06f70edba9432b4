//! One simple command, its words already read: what it does, as far as the fence cares
//! (DESIGN.md, the agent guard's policy). Dispatches on the command word to the shell's
//! own builtins (here), git ([`crate::git`]), gh ([`crate::gh`]), row-fence, and the
//! wrappers and interpreters ([`crate::programs`]).

use crate::finding::{Dir, Place};
use crate::state::resolve;
use crate::words::{Value, Vars};
use std::collections::BTreeSet;
use std::path::Path;

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
    /// A call of a function defined earlier in the command.
    Call(String),
    /// `export`/`declare`/`local`/`readonly` assignments.
    Assign(Vec<(String, Value)>),
    /// `unset NAME…`.
    Unset(Vec<String>),
}

/// A change of directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Move {
    /// `cd TARGET` (`None`: `cd` alone, to `$HOME`; `Some("-")`: to `OLDPWD`).
    Cd(Option<Value>),
    /// `pushd TARGET` (`None`: swap the top two).
    Pushd(Option<Value>),
    /// `popd`.
    Popd,
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
}

impl Ctx<'_> {
    /// A context like this one in other directories (a wrapper's `-C`, `env -C`).
    pub fn at(&self, dirs: Vec<Dir>) -> Ctx<'_> {
        Ctx {
            dirs,
            vars: self.vars,
            functions: self.functions,
            home: self.home,
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
        return vec![Effect::Call(name.to_string())];
    }
    let args = &argv[1..];
    let program = match identity(name, ctx) {
        Ok(program) => program,
        Err(why) => return vec![ctx.opaque(why)],
    };
    // A case-insensitive file system (macOS) runs `GIT` as git.
    let lower = program.to_ascii_lowercase();
    let program = if is_fenced_program(&lower) {
        lower
    } else {
        program
    };
    match program.as_str() {
        "cd" | "pushd" | "popd" => vec![Effect::Move(moves(&program, args))],
        "eval" | "source" | "." | "fc" => vec![Effect::Opaque {
            why: format!("`{program}` runs code the text does not show"),
            places: ctx.places(),
            in_shell: true,
        }],
        "trap" => trap(args, ctx),
        "alias" if args.iter().any(|a| a.text().contains('=')) => {
            vec![ctx.opaque("an alias body is code the text does not run yet")]
        }
        "hash" | "enable" | "mapfile" | "readarray" | "bind" | "complete"
            if args.iter().any(|a| {
                matches!(a.literal(), Some(w) if w.starts_with('-') && w.contains(['p', 'f', 'C', 'x', 'F']))
                    || a.literal().is_none()
            }) =>
        {
            vec![Effect::Opaque {
                why: format!("`{program}` with these options binds names to other code"),
                places: ctx.places(),
                in_shell: true,
            }]
        }
        "export" | "declare" | "typeset" | "local" | "readonly" => declaration(&program, args, ctx),
        "read" | "printf" | "mapfile" | "readarray" | "getopts" => read_into(&program, args),
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
                return Vec::new();
            }
            let rest: Vec<Value> = args
                .iter()
                .skip_while(|a| matches!(a.literal(), Some("-p")))
                .skip_while(|a| matches!(a.literal(), Some("--")))
                .cloned()
                .collect();
            classify(&rest, ctx, false, depth + 1)
        }
        "builtin" => classify(args, ctx, false, depth + 1),
        "git" => crate::git::classify(args, ctx, depth),
        "gh" => crate::gh::classify(args, ctx),
        "row-fence" => row_fence(args, ctx),
        _ if program.starts_with("git-") && program.len() > 4 => {
            let mut inner = vec![Value::Literal(program[4..].to_string())];
            inner.extend_from_slice(args);
            crate::git::classify(&inner, ctx, depth)
        }
        _ => crate::programs::classify(&program, args, ctx, depth),
    }
}

/// The program a command word names: its own name, or for a path, the name of the
/// program the path (or the symlink it is) leads to, so `/usr/bin/git`, `./g` → git and
/// `/usr/lib/git-core/git-push` count as git. A path that does not exist yet is opaque:
/// it may be anything by the time it runs.
fn identity(word: &str, ctx: &Ctx) -> Result<String, String> {
    let base = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    if !word.contains('/') {
        return Ok(word.to_string());
    }
    let own = base(Path::new(word));
    if is_fenced_program(&own.to_ascii_lowercase()) {
        return Ok(own);
    }
    let mut seen = None;
    for dir in &ctx.dirs {
        let Dir::Known(dir) = dir else {
            return Err(format!(
                "`{word}` is run from a directory the text does not name"
            ));
        };
        let path = dir.join(word);
        match std::fs::canonicalize(&path) {
            Ok(target) => {
                let name = base(&target);
                if is_fenced_program(&name.to_ascii_lowercase()) {
                    return Ok(name);
                }
                seen = Some(own.clone());
            }
            Err(_) => {
                return Err(format!(
                    "`{word}` does not exist yet, so what it runs is only known when it runs"
                ));
            }
        }
    }
    Ok(seen.unwrap_or(own))
}

/// Programs whose name alone makes a fenced write possible.
fn is_fenced_program(name: &str) -> bool {
    name == "git" || name == "gh" || name == "row-fence" || name.starts_with("git-")
}

fn moves(program: &str, args: &[Value]) -> Move {
    // Options: cd -L/-P/-e/-@, pushd/popd -n; `--` ends them.
    let is_option = |a: &Value| matches!(a.literal(), Some(w) if w.len() > 1 && w.starts_with('-') && w[1..].chars().all(|c| "LPe@n".contains(c)));
    let mut rest = args.iter().skip_while(|a| is_option(a));
    let mut operand = rest.next().cloned();
    if operand.as_ref().and_then(Value::literal) == Some("--") {
        operand = rest.next().cloned();
    }
    match program {
        "cd" => Move::Cd(operand),
        "pushd" => match operand {
            // +N / -N rotate the stack: where that leads is the agent shell's stack.
            Some(Value::Literal(w)) if w.starts_with(['+', '-']) && w.len() > 1 => {
                Move::Pushd(Some(Value::Dynamic(w)))
            }
            other => Move::Pushd(other),
        },
        _ => Move::Popd,
    }
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

/// `export A=1`, `declare -x B=$x`, `local C`: assignments the walk tracks. A nameref
/// (`-n`) or a name the text does not show is opaque: it may set anything.
fn declaration(program: &str, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut assigned = Vec::new();
    let mut exports = program == "export";
    for arg in args {
        match arg {
            Value::Literal(w) if w.starts_with(['-', '+']) => {
                if w.contains('n') {
                    return vec![ctx.opaque("a nameref (`-n`) assigns through another name")];
                }
                exports |= w.starts_with('-') && w.contains('x');
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
    vec![Effect::Assign(assigned)]
}

/// True for a shell variable name.
pub fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// `row-fence` lease writes are fenced (DESIGN.md: acquire, renew, release, batch,
/// controller, migrate); `install` changes the fence itself and is opaque.
fn row_fence(args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    const VALUED: &[&str] = &["--home", "--socket", "--store"];
    let mut i = 0;
    while i < args.len() {
        match &args[i] {
            Value::Literal(w) if VALUED.contains(&w.as_str()) => i += 2,
            Value::Literal(w) if w.starts_with('-') => i += 1,
            Value::Literal(w) => {
                return match w.as_str() {
                    "acquire" | "renew" | "release" | "batch" | "controller" | "migrate" => {
                        vec![ctx.fenced(format!("row-fence {w}"))]
                    }
                    "install" => vec![ctx.opaque("`row-fence install` changes the fence")],
                    _ => Vec::new(),
                };
            }
            Value::Dynamic(raw) => {
                return vec![ctx.fenced(format!("row-fence {raw}"))];
            }
        }
    }
    Vec::new()
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
