//! Which program a command word runs, the way the shell finds it: a name that is not one
//! of the shell's own commands is looked up on `PATH`; a path is followed through its
//! symlinks. A program counts as git, gh or row-fence when it is one of them under another
//! name: a symlink to it, a hard link to it, or a copy of its bytes (ARCHITECTURE.md, "The
//! agent guard's policy": a program is known by what it runs, not its name).
//!
//! A name that is on no `PATH` directory is not a program the text shows: in the agent's
//! shell it is an alias or a function of the user's shell setup (`gp` for `git push`), a
//! zsh builtin (`emulate`, `sched`), or a program made earlier in the same command. The
//! caller treats it as opaque.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Names the shell runs itself (bash's builtins and keywords, and zsh's that only print
/// or set options): never looked up on `PATH`. zsh builtins that run other code
/// (`emulate`, `sched`, `zmodload`, `autoload`…) are left out on purpose, so they are
/// looked up, not found, and opaque.
pub const SHELL_BUILTINS: &[&str] = &[
    ":",
    ".",
    "[",
    "[[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
    "coproc",
    "time",
    "!",
    "print",
    "setopt",
    "unsetopt",
    "whence",
    "where",
    "rehash",
    "unhash",
    "limit",
    "unlimit",
    "integer",
    "float",
    "zparseopts",
    "noglob",
    "nocorrect",
    "-",
    "repeat",
    "sched",
    "emulate",
    "r",
];

/// True when the shell runs `name` itself.
pub fn is_shell_builtin(name: &str) -> bool {
    SHELL_BUILTINS.contains(&name)
}

thread_local! {
    static FOUND: RefCell<HashMap<String, Option<PathBuf>>> = RefCell::new(HashMap::new());
}

/// The file `name` (no `/`) runs from `PATH`, symlinks followed; `None` when no `PATH`
/// directory holds an executable of that name. `path`: the `PATH` the command itself
/// set, when it set a literal one; else the guard's own, which the agent's shell inherits.
pub fn on_path(name: &str, path: Option<&str>) -> Option<PathBuf> {
    if let Some(path) = path {
        return search_in(name, std::ffi::OsStr::new(path));
    }
    if let Some(found) = FOUND.with(|f| f.borrow().get(name).cloned()) {
        return found;
    }
    let found = search(name);
    FOUND.with(|f| f.borrow_mut().insert(name.to_string(), found.clone()));
    found
}

fn search(name: &str) -> Option<PathBuf> {
    search_in(name, &std::env::var_os("PATH")?)
}

fn search_in(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    for dir in std::env::split_paths(path) {
        // An empty or relative entry is relative to the current directory: where that is
        // depends on the command.
        if !dir.is_absolute() {
            continue;
        }
        let candidate = dir.join(name);
        if let Ok(meta) = std::fs::metadata(&candidate)
            && meta.is_file()
            && meta.permissions().mode() & 0o111 != 0
        {
            return std::fs::canonicalize(&candidate).ok();
        }
    }
    None
}

/// What git, gh and row-fence are on this machine: (name, device, inode, length).
fn references() -> &'static [(&'static str, u64, u64, u64)] {
    static REFS: OnceLock<Vec<(&'static str, u64, u64, u64)>> = OnceLock::new();
    REFS.get_or_init(|| {
        ["git", "gh", "row-fence"]
            .into_iter()
            .filter_map(|name| {
                let path = search(name)?;
                let meta = std::fs::metadata(path).ok()?;
                Some((name, meta.dev(), meta.ino(), meta.len()))
            })
            .collect()
    })
}

/// The fenced program (`git`, `gh`, `row-fence`) the file at `path` is under another
/// name: the same file (a hard link) or the same bytes (a copy). `None` for anything else.
pub fn same_program(path: &Path) -> Option<&'static str> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    for (name, dev, ino, len) in references() {
        if meta.dev() == *dev && meta.ino() == *ino {
            return Some(name);
        }
        // Only a file of exactly the same length is read: a copy is rare, reading is not.
        if meta.len() == *len
            && let (Some(reference), Ok(bytes)) = (search(name), std::fs::read(path))
            && std::fs::read(reference).is_ok_and(|r| r == bytes)
        {
            return Some(name);
        }
    }
    None
}
