//! What the guard found in a command: each *fenced write* and each *opaque* command, with
//! every place it could run (ARCHITECTURE.md, "The agent guard's policy"). The walk
//! ([`crate::walk`]) produces these; the judge ([`crate::judge`]) asks the fence about
//! them.

pub use row_fence_shell::dir::Dir;

/// Where one command would run: its working directory and, when the text names one
/// (`git --git-dir`, `GIT_DIR=`), its git dir, which decides the descriptor as it does for
/// the asker (ARCHITECTURE.md, "Descriptor resolution").
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place {
    /// The working directory.
    pub dir: Dir,
    /// The git dir the text names, if any.
    pub git_dir: Option<Dir>,
}

/// The two kinds of command the guard asks the fence about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A write to the outside world: `git push` and its plumbing, `gh` outside the
    /// read-only allowlist, `row-fence` lease writes. Asked about in every directory it
    /// would run in.
    Fenced,
    /// A command whose effect cannot be read from its text (a dynamic command word,
    /// inline interpreter code, a git alias or config override, a wrapper around one).
    /// Asked about when the session or a directory involved is row-bound.
    Opaque,
}

/// One fenced write or opaque command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Which kind.
    pub kind: Kind,
    /// What it is, for the verdict line and the ledger: `git push origin`,
    /// `gh pr merge 12`, `opaque: eval`.
    pub action: String,
    /// Every place it could run (more than one when a `cd` may or may not have happened).
    pub places: Vec<Place>,
    /// When it would run after the call returns, how (`in the background (&)`, `after
    /// sleep`, `under nohup`): the fence's answer now says nothing about the row then.
    pub deferred: Option<String>,
}

/// The longest action text kept, in bytes.
pub const MAX_ACTION_BYTES: usize = 300;

/// Cuts `text` to [`MAX_ACTION_BYTES`] on a character boundary, on one line.
pub fn short(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.len() <= MAX_ACTION_BYTES {
        return one_line;
    }
    let mut end = MAX_ACTION_BYTES;
    while !one_line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &one_line[..end])
}
