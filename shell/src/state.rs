//! What the walk knows about the shell while it reads a command: the directories the next
//! command may run in (more than one when a `cd` may or may not have happened), `OLDPWD`
//! and the `pushd` stack, and the variables assigned earlier in the command.

use crate::dir::Dir;
use crate::words::{Value, Vars};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The most directories one point of a command may run in before the walk stops telling
/// them apart (a command that branches that much is unknown, not guessed at).
pub const MAX_CANDIDATES: usize = 16;

/// The shell's state at one point of the command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// Where the next command may run.
    pub dirs: Vec<Dir>,
    /// Where `cd -` goes.
    pub oldpwd: Vec<Dir>,
    /// The `pushd` stack, top last; `None` once the walk lost track of it.
    pub stack: Option<Vec<Vec<Dir>>>,
    /// Variables assigned so far.
    pub vars: Vars,
    /// Variables holding data the text does not show (a substitution, `read`): bash
    /// evaluates such a value as code when arithmetic names the variable.
    pub tainted: BTreeSet<String>,
    /// `set -P` is on: `cd` resolves physically.
    pub physical: bool,
    /// Names bound to programs (`hash -p`, `BASH_CMDS`): `None` when the program is not
    /// known.
    pub rebound: BTreeMap<String, Option<String>>,
}

impl State {
    /// The state a command starts in: the hook's working directory.
    pub fn at(cwd: Dir) -> State {
        State {
            dirs: vec![cwd],
            oldpwd: vec![Dir::Unknown(
                "`cd -` names the previous directory of the agent's shell".into(),
            )],
            stack: Some(Vec::new()),
            vars: Vars::new(),
            tainted: BTreeSet::new(),
            physical: false,
            rebound: BTreeMap::new(),
        }
    }

    /// The state after either of two paths was taken.
    pub fn union(mut self, other: State) -> State {
        self.dirs = merge(self.dirs, other.dirs);
        self.oldpwd = merge(self.oldpwd, other.oldpwd);
        if self.stack != other.stack {
            self.stack = None;
        }
        let mut vars = Vars::new();
        for (name, value) in &self.vars {
            let same = other.vars.get(name) == Some(value);
            vars.insert(name.clone(), if same { value.clone() } else { None });
        }
        for name in other.vars.keys() {
            vars.entry(name.clone()).or_insert(None);
        }
        self.vars = vars;
        self.tainted.extend(other.tainted);
        self.physical |= other.physical;
        for (name, target) in other.rebound {
            let mine = self.rebound.entry(name).or_insert(target.clone());
            if *mine != target {
                *mine = None;
            }
        }
        self
    }

    /// Records an assignment: a literal is known; anything else is data the text does
    /// not show.
    pub fn assign(&mut self, name: String, value: &Value) {
        match value.literal() {
            Some(v) => {
                self.tainted.remove(&name);
                self.vars.insert(name, Some(v.to_string()));
            }
            None => {
                self.tainted.insert(name.clone());
                self.vars.insert(name, None);
            }
        }
    }

    /// `$PWD` when exactly one directory is known.
    pub fn pwd(&self) -> Option<String> {
        match self.dirs.as_slice() {
            [Dir::Known(path)] => Some(path.display().to_string()),
            _ => None,
        }
    }

    /// Moves to `to` (a `cd` that succeeded), remembering where it came from.
    pub fn move_to(&mut self, to: Vec<Dir>) {
        self.oldpwd = std::mem::replace(&mut self.dirs, to);
    }

    /// Something the walk cannot read ran in this shell and may have moved it.
    pub fn lose_track(&mut self, why: &str) {
        self.dirs = merge(self.dirs.clone(), vec![Dir::Unknown(why.to_string())]);
        self.stack = None;
    }
}

/// The union of two candidate lists, in order, without repeats, capped.
pub fn merge(mut a: Vec<Dir>, b: Vec<Dir>) -> Vec<Dir> {
    for d in b {
        if !a.contains(&d) {
            a.push(d);
        }
    }
    if a.len() > MAX_CANDIDATES {
        a.truncate(MAX_CANDIDATES - 1);
        a.push(Dir::Unknown(
            "the command branches into too many directories".into(),
        ));
    }
    a
}

/// Where `target` leads from each of `from`: a literal resolves against each directory
/// (`..` folded lexically, as the shell's logical `cd` does); anything else is unknown.
pub fn resolve(from: &[Dir], target: &Value) -> Vec<Dir> {
    match target {
        // An absolute path is known from anywhere.
        Value::Literal(path) if path.starts_with('/') => vec![Dir::Known(fold(Path::new(path)))],
        Value::Literal(path) => from
            .iter()
            .map(|dir| match dir {
                Dir::Known(base) => Dir::Known(fold(&base.join(path))),
                unknown => unknown.clone(),
            })
            .collect(),
        Value::Dynamic(raw) => vec![Dir::Unknown(format!("`{raw}` is only known when it runs"))],
    }
}

/// Where `target` leads from each of `from` the way the kernel's `chdir` goes (`git -C`,
/// `env -C`, `cd -P`): through symlinks, so `link/..` is the parent of where the link
/// points. A path that does not exist yet is folded lexically (the judge finds it does
/// not exist); anything not literal is unknown.
pub fn resolve_physical(from: &[Dir], target: &Value) -> Vec<Dir> {
    match target {
        // An absolute path is known from anywhere.
        Value::Literal(path) if path.starts_with('/') => vec![physical(Path::new(path))],
        Value::Literal(path) => from
            .iter()
            .map(|dir| match dir {
                Dir::Known(base) => physical(&base.join(path)),
                unknown => unknown.clone(),
            })
            .collect(),
        Value::Dynamic(_) => resolve(from, target),
    }
}

fn physical(joined: &Path) -> Dir {
    match std::fs::canonicalize(joined) {
        Ok(physical) => Dir::Known(physical),
        Err(_) => Dir::Known(fold(joined)),
    }
}

/// Folds `.` and `..` without touching the file system.
pub fn fold(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_fold_like_a_logical_cd() {
        assert_eq!(fold(Path::new("/a/b/../c/./d")), PathBuf::from("/a/c/d"));
        assert_eq!(fold(Path::new("/../..")), PathBuf::from("/"));
        let from = [Dir::Known("/w".into())];
        assert_eq!(
            resolve(&from, &Value::Literal("my repo".into())),
            vec![Dir::Known("/w/my repo".into())]
        );
        assert_eq!(
            resolve(&from, &Value::Literal("/abs".into())),
            vec![Dir::Known("/abs".into())]
        );
    }

    #[test]
    fn a_union_keeps_both_paths() {
        let a = State::at(Dir::Known("/a".into()));
        let mut b = a.clone();
        b.move_to(vec![Dir::Known("/b".into())]);
        let u = a.union(b);
        assert_eq!(u.dirs.len(), 2);
    }
}
