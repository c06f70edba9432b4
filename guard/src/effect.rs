//! What the guard says a simple command does ([`Effect`]), and what classifying one
//! needs from the walk ([`Ctx`]). The dispatcher ([`crate::command`]) and every handler
//! (builtins, git, gh, row-fence, programs) speak these types; none of them imports the
//! dispatcher.

use crate::finding::{Dir, Place};
pub use row_fence_shell::effect::Move;
use row_fence_shell::state::resolve;
use row_fence_shell::words::{Value, Vars};
use std::collections::{BTreeMap, BTreeSet};

/// What a simple command does: the shell reader's effects
/// ([`row_fence_shell::effect::Effect`]) with the guard's [`Note`]s among them.
pub type Effect = row_fence_shell::effect::Effect<Note>;

/// What the guard notes of a command, kept by the walk in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// A write to the outside world, at these places.
    Fenced { action: String, places: Vec<Place> },
    /// A command whose effect the text does not show, at these places.
    Opaque { why: String, places: Vec<Place> },
    /// git runs at these places and reads the configuration of the repository there,
    /// which the lane owning it may have planted: the judge asks that repository's row
    /// (a refused one is no place for git to run, whoever calls it).
    GitAt(Vec<Place>),
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
    /// What classifies an inner command (a wrapper's, a builtin's): the walk passes
    /// [`crate::command::classify`]. A pointer rather than a call keeps the handlers
    /// below the dispatcher that calls them.
    pub classifier: Classifier,
}

/// The signature of [`crate::command::classify`].
pub type Classifier = fn(&[Value], &Ctx<'_>, bool, usize) -> Vec<Effect>;

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
            classifier: self.classifier,
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
            classifier: self.classifier,
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
        Effect::Note(Note::Opaque {
            why: why.into(),
            places: self.places(),
        })
    }

    /// An opaque command here that runs in the walk's own shell (eval, source, a dynamic
    /// command word), so it may move it: the walk loses track of where it is.
    pub fn opaque_in_shell(&self, why: impl Into<String>) -> [Effect; 2] {
        [self.opaque(why), Effect::LoseTrack]
    }

    /// Classifies an inner command `argv` run from this context (see
    /// [`crate::command::classify`] for `functions` and `depth`).
    pub fn classify(&self, argv: &[Value], functions: bool, depth: usize) -> Vec<Effect> {
        (self.classifier)(argv, self, functions, depth)
    }

    /// A fenced write here.
    pub fn fenced(&self, action: impl Into<String>) -> Effect {
        Effect::Note(Note::Fenced {
            action: action.into(),
            places: self.places(),
        })
    }
}

/// How deep wrappers may nest (`env env … git push`) before the command is opaque.
pub const MAX_WRAPPER_DEPTH: usize = 16;

/// A script operand: running a file that exists is running the project's code
/// (ordinary); a file made in the same command, a substitution, or stdin in disguise
/// (`/dev/stdin`, `/dev/fd/N`) is code the text hands over unseen (opaque).
pub fn script_file(program: &str, script: &Value, ctx: &Ctx) -> Vec<Effect> {
    let Value::Literal(path) = script else {
        return vec![ctx.opaque(format!(
            "`{program} {}` runs code only known when it runs",
            script.text()
        ))];
    };
    if path.starts_with("/dev/") || path.starts_with("/proc/") {
        return vec![ctx.opaque(format!("`{program} {path}` reads its code from a stream"))];
    }
    for dir in &ctx.dirs {
        let exists = match dir {
            Dir::Known(d) => d.join(path).is_file(),
            Dir::Unknown(_) => false,
        };
        if !exists {
            return vec![ctx.opaque(format!(
                "`{program} {path}` runs a file that does not exist yet, so its code is only known when it runs"
            ))];
        }
    }
    Vec::new()
}

/// `effects`, as run after the call returns (`why` says how). Nothing to defer is nothing.
pub fn deferred(why: &str, effects: Vec<Effect>) -> Vec<Effect> {
    if effects.is_empty() {
        return effects;
    }
    vec![Effect::Deferred {
        why: why.to_string(),
        effects,
    }]
}
