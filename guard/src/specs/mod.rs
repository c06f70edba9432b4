//! One record per program the guard knows ([`Spec`]): how it runs other code (a wrapper
//! and its options, a shell, an interpreter and its code options, a runner the guard does
//! not follow, an editor with shell escapes, a database shell, a reader of its own for
//! git, gh, row-fence, curl, xargs…), which options hand it a command, or that it takes
//! its words as data, or that it waits. The dispatcher ([`crate::command`]) finds the
//! record by name ([`find`]) and the readers in [`crate::programs`] and [`crate::handed`]
//! read it; the walk asks it which programs wait (ARCHITECTURE.md, "The agent guard's
//! policy"). Which names are the shell's own commands is the shell crate's
//! ([`row_fence_shell::lookup::SHELL_BUILTINS`]); each has one treatment here: a record,
//! or [`crate::builtins`] (a test checks it).
//!
//! A new program is one record in the family file it belongs to; a program that needs
//! more than a record says (its own subcommands, its own syntax) gets a [`Reader`] beside
//! the others. A name appears in one record only (a test checks it).

mod builtins;
mod data;
mod editors;
mod interpreters;
mod readers;
mod runners;
mod wrappers;

use crate::effect::{Ctx, Effect};
use row_fence_shell::words::Value;

/// One program (or several that run alike) and how it runs other code.
pub struct Spec {
    /// The names it runs under. An interpreter's record matches versioned names too
    /// (`python3.12`, `lua5.4`).
    pub names: &'static [&'static str],
    /// How it runs other code.
    pub runs: Runs,
    /// Options whose value is a command it runs, each with the text that comes before
    /// the command in the value (`--checkpoint-action=exec=CMD`): a literal command is
    /// read as shell code (so `tar -I 'zstd -19'` stays ordinary), anything else is opaque.
    pub handed: &'static [(&'static str, &'static str)],
    /// `NAME-SUB` is its own spelling of `NAME SUB`, read by its reader as that (git's
    /// commands installed as programs of their own: `git-push`, `git-receive-pack`).
    pub dashed: bool,
    /// Environment variables that make it run code ([`EnvVars`]).
    pub env: EnvVars,
}

/// A program's environment variables that make it run code, whatever it is given
/// ([`crate::env_vars`] reads them; variables of the shell or the loader are its own).
pub struct EnvVars {
    /// Setting one alone is opaque, whatever its value (`GIT_SSH_COMMAND`).
    pub opaque: &'static [&'static str],
    /// Prefixes of such variables (`GIT_CONFIG_KEY_`).
    pub opaque_prefixes: &'static [&'static str],
    /// Variables holding shell code it runs (`GIT_PAGER`): a literal value is read as a
    /// command.
    pub code: &'static [&'static str],
}

impl EnvVars {
    /// None.
    pub const NONE: EnvVars = EnvVars {
        opaque: &[],
        opaque_prefixes: &[],
        code: &[],
    };
}

impl Spec {
    /// A record with no options that hand it a command.
    pub const fn new(names: &'static [&'static str], runs: Runs) -> Spec {
        Spec {
            names,
            runs,
            handed: &[],
            dashed: false,
            env: EnvVars::NONE,
        }
    }

    /// This record with environment variables that make it run code ([`Spec::env`]).
    pub const fn with_env(self, env: EnvVars) -> Spec {
        Spec { env, ..self }
    }

    /// This record with options that hand it a command ([`Spec::handed`]).
    pub const fn handing(self, handed: &'static [(&'static str, &'static str)]) -> Spec {
        Spec { handed, ..self }
    }

    /// This record, its `NAME-SUB` spellings its own ([`Spec::dashed`]).
    pub const fn dashed(self) -> Spec {
        Spec {
            dashed: true,
            ..self
        }
    }

    /// True when a word naming this program among another program's words is read as a
    /// command handed over (`ssh-agent git push`, `uv run bash -c …`).
    pub fn takes_commands(&self) -> bool {
        match &self.runs {
            Runs::Fenced(_)
            | Runs::Wrapper(_)
            | Runs::Shell(_)
            | Runs::Runner(_)
            | Runs::Interpreter(_) => true,
            Runs::Reader { takes_commands, .. } | Runs::Builtin { takes_commands, .. } => {
                *takes_commands
            }
            Runs::Data
            | Runs::Unknown
            | Runs::Waits
            | Runs::Handed(_)
            | Runs::Editor(_)
            | Runs::DbShell(_) => false,
        }
    }
}

/// How a program runs other code.
pub enum Runs {
    /// Its words are data, never a command: a word `git` among them is a file name or a
    /// pattern.
    Data,
    /// Nothing known: a command handed to it as separate words is looked for
    /// ([`crate::programs::embedded`]).
    Unknown,
    /// It waits before the next command runs (`sleep`, `wait`): a write after it in the
    /// same call lands later than the fence's answer. Otherwise as [`Runs::Unknown`].
    Waits,
    /// A program that writes to the outside world, read by its own reader (git, gh,
    /// row-fence).
    Fenced(Reader),
    /// A reader of its own (xargs, find, sed, curl, make…). `takes_commands`: see
    /// [`Spec::takes_commands`].
    Reader {
        /// The reader.
        read: Reader,
        /// Whether a word naming it among another program's words is read as a command.
        takes_commands: bool,
    },
    /// Handed a command in some of its words (socat's `EXEC:` address), which its reader
    /// finds; when it finds none, a command handed as separate words is looked for.
    Handed(HandedReader),
    /// Runs its operands as a command after its options ([`Wrapper`]).
    Wrapper(Wrapper),
    /// A shell taking `-c` code ([`ShellCode`]): a harness's argv-form tool command in it
    /// (`["bash", "-lc", TEXT]`) is its TEXT ([`shell_names`]).
    Shell(ShellCode),
    /// One of the shell's own commands read by its record: those that run their words as
    /// a command (`eval`, `command`) and those that print (`printf`, `print`). The rest
    /// are [`crate::builtins`]'s. `takes_commands`: see [`Spec::takes_commands`].
    Builtin {
        /// The reader ([`crate::builtin_readers`]).
        read: Reader,
        /// Whether a word naming it among another program's words is read as a command.
        takes_commands: bool,
    },
    /// Runs a command in a way the guard does not follow ([`Runner`]): opaque once given one.
    Runner(Runner),
    /// Runs inline code or code from stdin ([`Interpreter`]).
    Interpreter(Interpreter),
    /// An editor that runs commands given on its command line or stdin ([`Editor`]).
    Editor(Editor),
    /// A database shell whose inline commands escape to the shell ([`DbShell`]).
    DbShell(DbShell),
}

/// How the guard reads a shell's `-c` code.
pub enum ShellCode {
    /// With the same parser wherever it is given (sh, bash, dash): a script operand is
    /// running a file, neither is code from stdin (opaque).
    Read,
    /// Only as a harness's tool command (zsh, the user's shell on macOS, whose spellings
    /// the walk reads as zsh runs them: [`crate::builtins`]); run within a command, it
    /// runs what the guard does not follow (opaque).
    ToolOnly,
}

/// A program's own reader: `(program, args, ctx, depth)` → what it does. `depth` counts
/// the wrappers around it ([`crate::effect::MAX_WRAPPER_DEPTH`]).
pub type Reader = fn(&str, &[Value], &Ctx<'_>, usize) -> Vec<Effect>;

/// A reader of the words that may hand a program a command: `(program, args, ctx)`.
pub type HandedReader = fn(&str, &[Value], &Ctx<'_>) -> Vec<Effect>;

/// How to find a wrapper's inner command. An option the record does not list makes the
/// command opaque: the guard cannot tell where the inner command starts.
pub struct Wrapper {
    /// Options without a value.
    pub flags: &'static [&'static str],
    /// Options whose value is the next word (or `--opt=value`).
    pub valued: &'static [&'static str],
    /// Operands before the inner command (timeout's duration, taskset's mask).
    pub operands: usize,
    /// Options whose value is shell code.
    pub code: &'static [&'static str],
    /// Options whose value is the inner command's directory.
    pub chdir: &'static [&'static str],
    /// `NAME=VALUE` operands set the inner command's environment (`env`).
    pub assigns: bool,
    /// `-N` (a number) is an option (`nice -5`).
    pub numeric_option: bool,
    /// The inner command outlives the call (`nohup`: no hangup; `setsid`: a session the
    /// harness's kill of the call's process group does not reach).
    pub outlives: bool,
}

impl Wrapper {
    /// A wrapper with no options, operands or special words.
    pub const PLAIN: Wrapper = Wrapper {
        flags: &[],
        valued: &[],
        operands: 0,
        code: &[],
        chdir: &[],
        assigns: false,
        numeric_option: false,
        outlives: false,
    };
}

/// A program that runs a command the guard does not follow (ssh, docker, tmux, zsh…).
pub struct Runner {
    /// Operands (words not starting with `-`) it needs before it runs a command (`ssh
    /// HOST` alone is a login: 2).
    pub operands: usize,
    /// Opaque whatever it is given (a shell the guard does not read, `at` and `crontab`
    /// reading stdin).
    pub always: bool,
    /// It starts the command apart from the call (a queue, a service manager, a detached
    /// terminal): what it runs is deferred.
    pub deferred: bool,
}

/// An interpreter: the options whose value (or presence in a cluster) is inline code,
/// and the options that take a value. Without a script operand it reads code from stdin.
pub struct Interpreter {
    /// Options that give inline code.
    pub code: &'static [&'static str],
    /// Options that take a value.
    pub valued: &'static [&'static str],
    /// For an interpreter whose `-m MODULE` runs a module by name (python's family), the
    /// modules that run code they are handed or read from stdin: `-m` naming one, or
    /// none, is opaque; any other module is a program of its own. `None` for an
    /// interpreter with no such option, whose `-m` is an option like any other.
    pub modules: Option<&'static [&'static str]>,
}

/// An editor that runs commands it is given.
pub struct Editor {
    /// Options whose value runs commands (`vim -c`); `None` for an editor with none.
    pub commands: Option<&'static [&'static str]>,
    /// vi's spellings count too: `+CMD`, and a cluster holding `e`, `E` or `s`.
    pub vi_style: bool,
    /// It reads its commands, `!cmd` among them, from stdin (ed, ex).
    pub from_stdin: bool,
}

/// A database shell.
pub struct DbShell {
    /// Inline texts that escape to the shell (`.shell`, `\!`).
    pub escapes: &'static [&'static str],
    /// Options whose value is an inline command.
    pub inline: &'static [&'static str],
    /// Its operands are a database, then commands (sqlite3, duckdb); else a database name.
    pub commands_after_database: bool,
}

/// Every family of records, searched in this order.
const FAMILIES: &[&[Spec]] = &[
    builtins::SPECS,
    readers::SPECS,
    wrappers::SPECS,
    runners::SPECS,
    interpreters::SPECS,
    editors::SPECS,
    data::SPECS,
];

/// The record of `program` (its name as the command word runs it, without a directory).
pub fn find(program: &str) -> Option<&'static Spec> {
    let all = || FAMILIES.iter().flat_map(|family| family.iter());
    all()
        .find(|spec| spec.names.contains(&program))
        .or_else(|| {
            all().find(|spec| {
                matches!(spec.runs, Runs::Interpreter(_))
                    && spec.names.iter().any(|name| is_versioned(program, name))
            })
        })
}

/// The name whose record reads a program file called `file_name` (the real file a
/// command word leads to): its own, or, for a file carrying a distribution's flavour or
/// version (`vim.basic`, `vim.tiny`, `nc.openbsd`, `python3.11`, `perl5.36.0`), the
/// program's. `None` when no record knows it.
pub fn record_name(file_name: &str) -> Option<String> {
    if find(file_name).is_some() {
        return Some(file_name.to_string());
    }
    let (program, flavour) = file_name.split_once('.')?;
    let flavoured = !program.is_empty()
        && !flavour.is_empty()
        && flavour
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.');
    (flavoured && find(program).is_some()).then(|| program.to_string())
}

/// Programs that run as the name they are called by (a multi-call binary: `ls` →
/// busybox is `ls`), so a link to one is read by the name it was called by, never as the
/// file it leads to.
pub const BY_CALLED_NAME: &[&str] = &["busybox", "toybox"];

/// True when `program` waits before the next command runs ([`Runs::Waits`]).
pub fn waits(program: &str) -> bool {
    find(program).is_some_and(|spec| matches!(spec.runs, Runs::Waits))
}

/// Every name of a shell a harness may run a tool's command in, given as argv `[shell,
/// "-c", TEXT]` ([`Runs::Shell`]): the command is its TEXT.
pub fn shell_names() -> impl Iterator<Item = &'static str> {
    FAMILIES
        .iter()
        .flat_map(|family| family.iter())
        .filter(|spec| matches!(spec.runs, Runs::Shell(_)))
        .flat_map(|spec| spec.names.iter().copied())
}

/// `python3.12`, `lua5.4`, `php8.2`, `pypy3.10` for `python3`, `lua`, `php`, `pypy3`.
fn is_versioned(program: &str, name: &str) -> bool {
    program.strip_prefix(name).is_some_and(|v| {
        !v.is_empty()
            && v.starts_with(|c: char| c == '.' || c.is_ascii_digit())
            && v.chars().all(|c| c.is_ascii_digit() || c == '.')
    })
}

/// The record whose own spelling `program` is, and the subcommand it spells
/// (`git-push`: git's, `push`; the subcommand may be empty) ([`Spec::dashed`]).
pub fn dashed(program: &str) -> Option<(&'static Spec, &str)> {
    FAMILIES
        .iter()
        .flat_map(|family| family.iter())
        .filter(|spec| spec.dashed)
        .find_map(|spec| {
            spec.names.iter().find_map(|name| {
                let sub = program.strip_prefix(name)?.strip_prefix('-')?;
                Some((spec, sub))
            })
        })
}

/// Every record's environment variables that make its program run code.
pub fn env_vars() -> impl Iterator<Item = &'static EnvVars> {
    FAMILIES
        .iter()
        .flat_map(|family| family.iter())
        .map(|spec| &spec.env)
}

/// Every name of a program that writes to the outside world.
pub fn fenced_names() -> impl Iterator<Item = &'static str> {
    FAMILIES
        .iter()
        .flat_map(|family| family.iter())
        .filter(|spec| matches!(spec.runs, Runs::Fenced(_)))
        .flat_map(|spec| spec.names.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn every_program_is_described_in_one_record() {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for spec in FAMILIES.iter().flat_map(|family| family.iter()) {
            for name in spec.names {
                *seen.entry(name).or_default() += 1;
            }
        }
        let twice: Vec<&&str> = seen
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(k, _)| k)
            .collect();
        assert!(twice.is_empty(), "described twice: {twice:?}");
        assert!(seen.len() > 250, "{} names", seen.len());
    }

    #[test]
    fn the_shells_own_commands_records_are_the_shells_own() {
        let builtins = FAMILIES
            .iter()
            .flat_map(|family| family.iter())
            .filter(|spec| matches!(spec.runs, Runs::Builtin { .. }))
            .flat_map(|spec| spec.names.iter());
        for name in builtins {
            assert!(
                row_fence_shell::lookup::is_shell_builtin(name),
                "`{name}` is not the shell's own"
            );
        }
    }

    #[test]
    fn only_git_owns_its_dashed_spellings() {
        let dashed: Vec<&str> = FAMILIES
            .iter()
            .flat_map(|family| family.iter())
            .filter(|spec| spec.dashed)
            .flat_map(|spec| spec.names.iter().copied())
            .collect();
        assert_eq!(dashed, ["git"]);
        let sub = |name| dashed_sub(name);
        assert_eq!(sub("git-push"), Some("push"));
        assert_eq!(sub("git-receive-pack"), Some("receive-pack"));
        assert_eq!(sub("git-"), Some(""));
        for name in ["git", "gitk", "gh-push", "row-fence-x", "xgit-push"] {
            assert_eq!(sub(name), None, "{name}");
        }
    }

    fn dashed_sub(name: &str) -> Option<&str> {
        dashed(name).map(|(spec, sub)| {
            assert_eq!(spec.names, ["git"]);
            sub
        })
    }

    #[test]
    fn names_find_their_record_and_versions_find_their_interpreter() {
        assert!(matches!(
            find("git").map(|s| &s.runs),
            Some(Runs::Fenced(_))
        ));
        assert!(matches!(
            find("python3.12").map(|s| &s.runs),
            Some(Runs::Interpreter(_))
        ));
        assert!(matches!(
            find("env").map(|s| &s.runs),
            Some(Runs::Wrapper(_))
        ));
        assert!(matches!(find("cat").map(|s| &s.runs), Some(Runs::Data)));
        assert!(find("tar").is_some_and(|s| !s.handed.is_empty()));
        assert!(find("no-such-program").is_none());
        for (file, record) in [
            ("vim.basic", "vim"),
            ("vim.tiny", "vim"),
            ("python3.11", "python3.11"),
            ("perl5.36.0", "perl5.36.0"),
            ("dash", "dash"),
        ] {
            assert_eq!(record_name(file).as_deref(), Some(record), "{file}");
        }
        for file in ["no-such.basic", "vim.", ".vim", "vim.b-c"] {
            assert_eq!(record_name(file), None, "{file}");
        }
        assert!(find("xargs").is_some_and(Spec::takes_commands));
        assert!(!find("gxargs").is_some_and(Spec::takes_commands));
        assert_eq!(
            fenced_names().collect::<Vec<_>>(),
            ["git", "gh", "row-fence"]
        );
        assert_eq!(
            shell_names().collect::<Vec<_>>(),
            ["sh", "bash", "dash", "ash", "rbash", "zsh"]
        );
    }

    #[test]
    fn the_shells_own_commands_that_run_their_words_take_commands_and_only_pythons_run_modules() {
        for name in ["eval", "source", ".", "command", "builtin", "exec"] {
            assert!(find(name).is_some_and(Spec::takes_commands), "{name}");
        }
        let modules = |name: &str| match find(name).map(|s| &s.runs) {
            Some(Runs::Interpreter(i)) => i.modules,
            _ => panic!("{name} is no interpreter"),
        };
        for python in ["python3", "python3.12", "pypy3", "ipython"] {
            assert!(
                modules(python).is_some_and(|m| m.contains(&"pdb")),
                "{python}"
            );
        }
        for other in ["node", "perl", "ruby", "php", "lua", "julia", "tclsh"] {
            assert!(modules(other).is_none(), "{other}");
        }
    }
}
