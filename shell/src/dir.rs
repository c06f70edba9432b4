//! A directory a command would run in: named by the text, or not knowable from it.

use std::path::PathBuf;

/// A directory a command would run in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// Named by the text (absolute, `.` and `..` folded the way the shell's `cd` does).
    Known(PathBuf),
    /// Not readable from the text (a variable, a substitution, `cd -`, a `find -execdir`):
    /// the sentence says why. Never "ask the parent": a fenced write or an opaque command
    /// here is denied (fail closed).
    Unknown(String),
}

impl Dir {
    /// The directory itself, when known.
    pub fn known(&self) -> Option<&PathBuf> {
        match self {
            Dir::Known(path) => Some(path),
            Dir::Unknown(_) => None,
        }
    }
}

impl std::fmt::Display for Dir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dir::Known(path) => write!(f, "{}", path.display()),
            Dir::Unknown(why) => write!(f, "an unknown directory ({why})"),
        }
    }
}
