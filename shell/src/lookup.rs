//! Which file a command word runs, the way the shell finds it: a name that is not one of
//! the shell's own commands (bash's and zsh's builtins and keywords) is looked up on
//! `PATH`, symlinks followed. Which program that file is, is the caller's to say.
//!
//! A name that is on no `PATH` directory is not a program the text shows: in the agent's
//! shell it is an alias or a function of the user's shell setup (`gp` for `git push`), a
//! zsh builtin (`emulate`, `sched`), or a program made earlier in the same command. The
//! caller treats it as opaque.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;

/// Names the shell runs itself (bash's builtins and keywords, and zsh's that print, set
/// options, or run a command their words show: `repeat`, `sched`, `emulate`): never
/// looked up on `PATH`. zsh builtins that run code their words do not show (`zmodload`,
/// `autoload`…) are left out on purpose, so they are looked up, not found, and opaque.
/// The one list of them: the guard gives each one treatment (a test there checks it).
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

/// The shell's own tables that bind a name to a program: bash's `BASH_CMDS` (what `hash`
/// fills) and zsh's `commands`. What a command word runs after an assignment into one is
/// the assigned program, not the one `PATH` holds.
pub const PROGRAM_TABLES: &[&str] = &["BASH_CMDS", "commands"];

/// The shell's own tables that bind a name to code: bash's `BASH_ALIASES`, zsh's aliases
/// and functions (enabled and disabled).
pub const CODE_TABLES: &[&str] = &[
    "BASH_ALIASES",
    "aliases",
    "galiases",
    "saliases",
    "functions",
    "dis_aliases",
    "dis_galiases",
    "dis_saliases",
    "dis_functions",
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

/// The file `name` (no `/`) runs from the reader's own `PATH` (which the agent's shell
/// inherits), symlinks followed, looked up afresh; `None` when no `PATH` directory holds
/// an executable of that name.
pub fn search(name: &str) -> Option<PathBuf> {
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
