//! What a simple command does to the shell, as the caller ([`crate::walk::Programs`])
//! says it, and what the caller is told about the point the command runs at ([`At`]).
//! `N` is the caller's own note (a finding, a place to ask about): the walk keeps notes
//! in order, marks those that run after the call returns, and never reads them.

use crate::dir::Dir;
use crate::words::{Value, Vars};
use std::collections::{BTreeMap, BTreeSet};

/// What a simple command does, in the shell's terms, with the caller's notes among it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect<N> {
    /// The caller's note, kept in the plan in order.
    Note(N),
    /// Code the text does not show ran in the walk's own shell (eval, source, a dynamic
    /// command word): it may have moved it, so the walk no longer knows where it is.
    LoseTrack,
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
    /// What `effects` does happens after the call returns (`nohup`, `setsid`, `at`,
    /// `systemd-run`, `watch`…): `why` says how. The notes in it are marked so.
    Deferred {
        why: String,
        effects: Vec<Effect<N>>,
    },
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

/// The point of the command a simple command (or an assignment) runs at, as the walk
/// knows it.
pub struct At<'a> {
    /// Where the command may run.
    pub dirs: &'a [Dir],
    /// Shell variables, with the command's own prefix assignments on top.
    pub vars: &'a Vars,
    /// Functions and aliases defined earlier in the command.
    pub functions: &'a BTreeSet<String>,
    /// `$HOME`: the value assigned in the command, else the hook's.
    pub home: Option<&'a str>,
    /// Names bound to programs earlier in the command (`hash -p`, `BASH_CMDS`).
    pub rebound: &'a BTreeMap<String, Option<String>>,
    /// The hook's `$PATH` (`None`: the reader's own).
    pub path: Option<&'a str>,
}
