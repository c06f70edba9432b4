//! The quarantine's Bash allowlist (ARCHITECTURE.md, "Quarantine"): a command runs in
//! quarantine only when every part of it is positively known to be read-only. The command
//! is parsed with the same bash parser as the walk; only simple commands joined by `;`,
//! `&&`, `||` and `|` are read, each a program on the table below with only the options
//! the table names (exact long names: an abbreviation is not on the list), words whose
//! value the text decides, and redirections that read or write `/dev/null` or duplicate a
//! descriptor. Anything else — a variable, a substitution, an assignment, a loop, a
//! function, a here-document, a program or option not on the list — is denied. Nothing
//! here decides what writes: only what is known not to.

use crate::parse;
use crate::words::{self, Read, Scope, Value};
use brush_parser::ast;
use std::path::{Path, PathBuf};

/// What a simple command needs after the syntax is accepted: the directories git runs
/// in, whose configuration is read before the command may run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// Each directory an allowlisted git command runs in.
    pub git_dirs: Vec<PathBuf>,
}

/// Why a command is not on the allowlist: one sentence naming the part that is not.
pub type Denied = String;

/// Which positional arguments a program takes.
#[derive(Clone, Copy)]
enum Pos {
    /// Any (files read, patterns, text printed).
    Any,
    /// None.
    Nothing,
    /// Only a `+FORMAT` (date: any other positional sets the clock).
    Format,
}

/// One program on the allowlist: the short option letters and long option names known to
/// be harmless for it (an option's value may follow as a separate word: it is read as a
/// positional, which for these programs is only read).
struct Spec {
    name: &'static str,
    short: &'static str,
    long: &'static [&'static str],
    pos: Pos,
}

/// The allowlist. Options left out on purpose: `sort -o/-T/--compress-program` (write,
/// run a program), `rg --pre/-z/--hostname-bin` (run programs), `tree -o` and `file -C`
/// (write), `tail -f` (never ends), `hostname NAME` and `date MMDD…` (set the system).
const SPECS: &[Spec] = &[
    Spec {
        name: "ls",
        short: "aAbBcCdfFghHiklLmnNopqQrRsStuUvwxXZ1",
        long: &[
            "all",
            "almost-all",
            "author",
            "escape",
            "block-size",
            "ignore-backups",
            "color",
            "classify",
            "directory",
            "file-type",
            "format",
            "full-time",
            "group-directories-first",
            "no-group",
            "human-readable",
            "si",
            "dereference",
            "dereference-command-line",
            "hide",
            "indicator-style",
            "inode",
            "ignore",
            "kibibytes",
            "literal",
            "numeric-uid-gid",
            "quote-name",
            "quoting-style",
            "reverse",
            "recursive",
            "size",
            "sort",
            "time",
            "time-style",
            "tabsize",
            "width",
            "context",
            "zero",
            "help",
            "version",
        ],
        pos: Pos::Any,
    },
    Spec {
        name: "cat",
        short: "AbeEnstTuv",
        long: &[
            "show-all",
            "number-nonblank",
            "number",
            "squeeze-blank",
            "show-ends",
            "show-tabs",
            "show-nonprinting",
        ],
        pos: Pos::Any,
    },
    Spec {
        name: "head",
        short: "cnqvz0123456789",
        long: &[
            "bytes",
            "lines",
            "quiet",
            "silent",
            "verbose",
            "zero-terminated",
        ],
        pos: Pos::Any,
    },
    Spec {
        name: "tail",
        short: "cnqvz0123456789",
        long: &[
            "bytes",
            "lines",
            "quiet",
            "silent",
            "verbose",
            "zero-terminated",
        ],
        pos: Pos::Any,
    },
    Spec {
        name: "wc",
        short: "clmwL",
        long: &["bytes", "chars", "lines", "words", "max-line-length"],
        pos: Pos::Any,
    },
    Spec {
        name: "grep",
        short: "EFGPiIvwxyclLoqsbHhnTZzrRaUABCDdefm0123456789",
        long: GREP_LONG,
        pos: Pos::Any,
    },
    Spec {
        name: "egrep",
        short: "EFGPiIvwxyclLoqsbHhnTZzrRaUABCDdefm0123456789",
        long: GREP_LONG,
        pos: Pos::Any,
    },
    Spec {
        name: "fgrep",
        short: "EFGPiIvwxyclLoqsbHhnTZzrRaUABCDdefm0123456789",
        long: GREP_LONG,
        pos: Pos::Any,
    },
    Spec {
        name: "rg",
        short: "iSsFwxvclnNHqoUPeABCgtTjuM.0123456789",
        long: &[
            "ignore-case",
            "smart-case",
            "case-sensitive",
            "fixed-strings",
            "word-regexp",
            "line-regexp",
            "invert-match",
            "count",
            "count-matches",
            "files-with-matches",
            "files-without-match",
            "files",
            "line-number",
            "no-line-number",
            "with-filename",
            "no-filename",
            "heading",
            "no-heading",
            "quiet",
            "only-matching",
            "multiline",
            "hidden",
            "no-ignore",
            "follow",
            "glob",
            "iglob",
            "type",
            "type-not",
            "max-count",
            "max-depth",
            "max-filesize",
            "after-context",
            "before-context",
            "context",
            "color",
            "json",
            "column",
            "vimgrep",
            "sort",
            "sortr",
            "trim",
            "stats",
            "regexp",
            "threads",
            "unrestricted",
            "pcre2",
            "type-list",
            "no-messages",
        ],
        pos: Pos::Any,
    },
    Spec {
        name: "pwd",
        short: "LP",
        long: &[],
        pos: Pos::Nothing,
    },
    Spec {
        name: "true",
        short: "",
        long: &[],
        pos: Pos::Any,
    },
    Spec {
        name: "false",
        short: "",
        long: &[],
        pos: Pos::Any,
    },
    Spec {
        name: ":",
        short: "",
        long: &[],
        pos: Pos::Any,
    },
    Spec {
        name: "basename",
        short: "asz",
        long: &["multiple", "suffix", "zero"],
        pos: Pos::Any,
    },
    Spec {
        name: "dirname",
        short: "z",
        long: &["zero"],
        pos: Pos::Any,
    },
    Spec {
        name: "realpath",
        short: "eEmLPqsz",
        long: &[
            "relative-to",
            "relative-base",
            "canonicalize-existing",
            "quiet",
        ],
        pos: Pos::Any,
    },
    Spec {
        name: "readlink",
        short: "efmnqsvz",
        long: &["canonicalize", "canonicalize-existing", "no-newline"],
        pos: Pos::Any,
    },
    Spec {
        name: "stat",
        short: "LfcZt",
        long: &["format", "printf", "terse", "dereference", "file-system"],
        pos: Pos::Any,
    },
    Spec {
        name: "du",
        short: "achsSbkmxLPd0",
        long: &[
            "summarize",
            "human-readable",
            "max-depth",
            "apparent-size",
            "total",
        ],
        pos: Pos::Any,
    },
    Spec {
        name: "df",
        short: "hHTlaiPk",
        long: &["human-readable", "print-type", "local", "all", "inodes"],
        pos: Pos::Any,
    },
    Spec {
        name: "tree",
        short: "adfiLlpughsDCnJ",
        long: &["dirsfirst", "noreport", "charset"],
        pos: Pos::Any,
    },
    Spec {
        name: "file",
        short: "bLhikz",
        long: &["brief", "mime", "mime-type", "dereference"],
        pos: Pos::Any,
    },
    Spec {
        name: "cut",
        short: "bcdfsz",
        long: &[
            "bytes",
            "characters",
            "delimiter",
            "fields",
            "only-delimited",
        ],
        pos: Pos::Any,
    },
    Spec {
        name: "tr",
        short: "cdst",
        long: &[],
        pos: Pos::Any,
    },
    Spec {
        name: "sort",
        short: "bdfghiMnRrVckmsuz",
        long: &[
            "ignore-leading-blanks",
            "dictionary-order",
            "ignore-case",
            "general-numeric-sort",
            "human-numeric-sort",
            "numeric-sort",
            "reverse",
            "version-sort",
            "key",
            "field-separator",
            "unique",
            "stable",
            "check",
        ],
        pos: Pos::Any,
    },
    Spec {
        name: "diff",
        short: "uUqNrcsiwbBaEpy0123456789",
        long: &[
            "unified",
            "brief",
            "recursive",
            "new-file",
            "ignore-case",
            "ignore-all-space",
            "ignore-space-change",
            "color",
            "side-by-side",
            "text",
            "context",
        ],
        pos: Pos::Any,
    },
    Spec {
        name: "cmp",
        short: "bls",
        long: &["quiet", "silent", "verbose"],
        pos: Pos::Any,
    },
    Spec {
        name: "which",
        short: "a",
        long: &[],
        pos: Pos::Any,
    },
    Spec {
        name: "type",
        short: "aftpP",
        long: &[],
        pos: Pos::Any,
    },
    Spec {
        name: "date",
        short: "uR",
        long: &["utc", "iso-8601", "rfc-3339", "rfc-email"],
        pos: Pos::Format,
    },
    Spec {
        name: "whoami",
        short: "",
        long: &[],
        pos: Pos::Nothing,
    },
    Spec {
        name: "id",
        short: "gGnruz",
        long: &[],
        pos: Pos::Any,
    },
    Spec {
        name: "uname",
        short: "asnrvmpio",
        long: &["all"],
        pos: Pos::Nothing,
    },
    Spec {
        name: "jq",
        short: "rjacnsSeCMt",
        long: &[
            "raw-output",
            "compact-output",
            "slurp",
            "null-input",
            "sort-keys",
            "exit-status",
            "tab",
            "indent",
            "arg",
            "argjson",
            "raw-input",
            "join-output",
            "ascii-output",
            "color-output",
            "monochrome-output",
        ],
        pos: Pos::Any,
    },
];

const GREP_LONG: &[&str] = &[
    "extended-regexp",
    "fixed-strings",
    "basic-regexp",
    "perl-regexp",
    "regexp",
    "file",
    "ignore-case",
    "no-ignore-case",
    "word-regexp",
    "line-regexp",
    "count",
    "color",
    "colour",
    "files-with-matches",
    "files-without-match",
    "only-matching",
    "quiet",
    "silent",
    "no-messages",
    "byte-offset",
    "with-filename",
    "no-filename",
    "label",
    "line-number",
    "initial-tab",
    "null-data",
    "null",
    "text",
    "recursive",
    "dereference-recursive",
    "include",
    "exclude",
    "exclude-dir",
    "after-context",
    "before-context",
    "context",
    "max-count",
    "binary-files",
    "invert-match",
];

/// `find`'s tests and options known to be read-only (no `-exec`, `-ok`, `-delete`,
/// `-fprint`, `-fls`).
const FIND_WORDS: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-type",
    "-xtype",
    "-maxdepth",
    "-mindepth",
    "-print",
    "-print0",
    "-newer",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-size",
    "-empty",
    "-not",
    "!",
    "(",
    ")",
    "-o",
    "-a",
    "-and",
    "-or",
    "-regex",
    "-iregex",
    "-perm",
    "-user",
    "-group",
    "-L",
    "-H",
    "-P",
    "-prune",
    "-readable",
    "-executable",
    "-links",
    "-samefile",
    "-follow",
    "-depth",
    "-xdev",
    "-mount",
    "-true",
    "-false",
    "-nouser",
    "-nogroup",
    "-lname",
    "-ilname",
    "-uid",
    "-gid",
];

/// Git's subcommands on the allowlist, each with the options known to be read-only
/// (`--output`, `--ext-diff`, `--textconv`, `--show-signature`, `--exec`… are not).
struct GitSpec {
    name: &'static str,
    short: &'static str,
    long: &'static [&'static str],
    /// Which positionals: revisions and paths (Any), none, or `git remote`'s `get-url`.
    pos: GitPos,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum GitPos {
    Any,
    Nothing,
    /// `git remote [-v]` and `git remote get-url NAME`.
    GetUrl,
}

const LOG_LONG: &[&str] = &[
    "oneline",
    "graph",
    "decorate",
    "no-decorate",
    "all",
    "stat",
    "shortstat",
    "numstat",
    "name-only",
    "name-status",
    "patch",
    "no-patch",
    "max-count",
    "skip",
    "since",
    "until",
    "after",
    "before",
    "author",
    "committer",
    "grep",
    "format",
    "pretty",
    "abbrev-commit",
    "no-merges",
    "merges",
    "first-parent",
    "reverse",
    "date",
    "follow",
    "color",
    "no-color",
    "topo-order",
    "date-order",
    "left-right",
    "cherry-pick",
    "boundary",
    "branches",
    "tags",
    "remotes",
    "source",
    "all-match",
    "invert-grep",
    "regexp-ignore-case",
    "relative-date",
    "parents",
    "children",
    "summary",
    "raw",
    "abbrev",
    "full-history",
    "simplify-merges",
    "ancestry-path",
    "no-walk",
    "walk-reflogs",
    "no-ext-diff",
    "no-textconv",
    "minimal",
    "patience",
    "histogram",
    "find-renames",
    "diff-filter",
    "unified",
    "word-diff",
    "ignore-all-space",
    "ignore-space-change",
    "quiet",
];

const DIFF_LONG: &[&str] = &[
    "stat",
    "shortstat",
    "numstat",
    "name-only",
    "name-status",
    "summary",
    "patch",
    "no-patch",
    "cached",
    "staged",
    "unified",
    "word-diff",
    "color",
    "no-color",
    "ignore-all-space",
    "ignore-space-change",
    "ignore-blank-lines",
    "check",
    "exit-code",
    "quiet",
    "no-ext-diff",
    "no-textconv",
    "minimal",
    "patience",
    "histogram",
    "find-renames",
    "find-copies",
    "diff-filter",
    "relative",
    "merge-base",
    "raw",
    "abbrev",
    "dirstat",
    "color-words",
    "ignore-cr-at-eol",
    "full-index",
    "binary",
    "src-prefix",
    "dst-prefix",
    "no-prefix",
    "no-renames",
];

const GIT_SPECS: &[GitSpec] = &[
    GitSpec {
        name: "status",
        short: "sbuvz",
        long: &[
            "short",
            "branch",
            "porcelain",
            "untracked-files",
            "ignored",
            "verbose",
            "long",
            "show-stash",
            "ahead-behind",
            "no-ahead-behind",
            "null",
            "no-renames",
            "renames",
        ],
        pos: GitPos::Any,
    },
    GitSpec {
        name: "log",
        short: "pnsuwbMi0123456789",
        long: LOG_LONG,
        pos: GitPos::Any,
    },
    GitSpec {
        name: "show",
        short: "pnsuwbMq0123456789",
        long: LOG_LONG,
        pos: GitPos::Any,
    },
    GitSpec {
        name: "diff",
        short: "pRuwbMC0123456789",
        long: DIFF_LONG,
        pos: GitPos::Any,
    },
    GitSpec {
        name: "branch",
        short: "arv",
        long: &[
            "all",
            "remotes",
            "verbose",
            "show-current",
            "contains",
            "no-contains",
            "merged",
            "no-merged",
            "sort",
            "format",
            "color",
            "no-color",
            "points-at",
        ],
        pos: GitPos::Nothing,
    },
    GitSpec {
        name: "rev-parse",
        short: "q",
        long: &[
            "show-toplevel",
            "git-dir",
            "abbrev-ref",
            "short",
            "verify",
            "quiet",
            "is-inside-work-tree",
            "show-prefix",
            "absolute-git-dir",
            "git-common-dir",
            "symbolic-full-name",
            "is-bare-repository",
            "show-cdup",
        ],
        pos: GitPos::Any,
    },
    GitSpec {
        name: "ls-files",
        short: "smcdoizt",
        long: &[
            "stage",
            "modified",
            "cached",
            "deleted",
            "others",
            "ignored",
            "exclude-standard",
            "error-unmatch",
            "full-name",
        ],
        pos: GitPos::Any,
    },
    GitSpec {
        name: "remote",
        short: "v",
        long: &["verbose"],
        pos: GitPos::GetUrl,
    },
    GitSpec {
        name: "blame",
        short: "LwsleftMC",
        long: &["porcelain", "line-porcelain", "show-email", "date", "root"],
        pos: GitPos::Any,
    },
    GitSpec {
        name: "describe",
        short: "",
        long: &[
            "tags",
            "all",
            "always",
            "long",
            "abbrev",
            "contains",
            "exact-match",
        ],
        pos: GitPos::Any,
    },
];

/// Checks `command`, run from `cwd`, against the allowlist: `Ok` with the directories
/// whose git configuration must still be read, or why it is denied.
pub fn check(command: &str, cwd: &Path, home: Option<&str>) -> Result<Needs, Denied> {
    let program =
        parse::program(command).map_err(|e| format!("the guard cannot read the command ({e})"))?;
    check_parsed(&program, cwd, home)
}

/// [`check`] for a command already parsed (by the walk). The check does not recurse into
/// compound commands (they are denied), so any tree is read on any stack.
pub fn check_parsed(
    program: &ast::Program,
    cwd: &Path,
    home: Option<&str>,
) -> Result<Needs, Denied> {
    let mut checker = Checker {
        dir: cwd.to_path_buf(),
        needs: Needs::default(),
    };
    // `home` is not used to read words: `$HOME` and `~` are not known in quarantine.
    let _ = home;
    for complete in &program.complete_commands {
        for item in &complete.0 {
            if matches!(item.1, ast::SeparatorOperator::Async) {
                return Err(
                    "a command run in the background (`&`) is not on the quarantine's allowlist"
                        .into(),
                );
            }
            checker.pipeline(&item.0.first)?;
            for next in &item.0.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => checker.pipeline(p)?,
                }
            }
        }
    }
    Ok(checker.needs)
}

struct Checker {
    /// Where the next command runs (`cd` moves it).
    dir: PathBuf,
    needs: Needs,
}

impl Checker {
    fn pipeline(&mut self, pipeline: &ast::Pipeline) -> Result<(), Denied> {
        for command in &pipeline.seq {
            match command {
                ast::Command::Simple(simple) => self.simple(simple)?,
                _ => {
                    return Err(
                        "only simple commands joined by `;`, `&&`, `||` and `|` are on the quarantine's allowlist (no loops, conditionals, subshells, groups or functions)".into(),
                    );
                }
            }
        }
        Ok(())
    }

    fn simple(&mut self, simple: &ast::SimpleCommand) -> Result<(), Denied> {
        let mut argv = Vec::new();
        for item in simple.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => self.redirect(r)?,
                ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                    return Err(format!(
                        "`{}`: setting a variable is not on the quarantine's allowlist",
                        w.value
                    ));
                }
                ast::CommandPrefixOrSuffixItem::Word(w) => argv.push(self.word(&w.value)?),
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                    return Err(
                        "a process substitution is not on the quarantine's allowlist".into(),
                    );
                }
            }
        }
        if let Some(name) = &simple.word_or_name {
            argv.push(self.word(&name.value)?);
        }
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => self.redirect(r)?,
                ast::CommandPrefixOrSuffixItem::Word(w)
                | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                    argv.push(self.word(&w.value)?)
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                    return Err(
                        "a process substitution is not on the quarantine's allowlist".into(),
                    );
                }
            }
        }
        let Some((name, args)) = argv.split_first() else {
            return Ok(());
        };
        let Word::Literal(name) = name else {
            return Err(format!(
                "the command word `{}` is not spelled out",
                name.text()
            ));
        };
        self.program(name, args)
    }

    /// A word's value: a literal, or a plain glob that cannot expand to an option.
    fn word(&self, raw: &str) -> Result<Word, Denied> {
        // No variable is known here, `$HOME` included: the agent's shell may have set
        // any of them in an earlier call.
        let scope = Scope {
            vars: &Default::default(),
            home: None,
            pwd: None,
        };
        let mut found = Read::default();
        let value = words::read(raw, &scope, &mut found);
        let runs = !found.code.is_empty()
            || found.evaluates_data
            || !found.arithmetic.is_empty()
            || found.zsh_code;
        match value {
            Value::Literal(s) if !runs => Ok(Word::Literal(s)),
            Value::Dynamic(_) if !runs && plain_glob(raw) => Ok(Word::Glob(raw.to_string())),
            _ => Err(format!(
                "`{raw}`: a word whose value the text does not decide is not on the quarantine's allowlist"
            )),
        }
    }

    fn redirect(&self, redirect: &ast::IoRedirect) -> Result<(), Denied> {
        use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect as R};
        let ok = match redirect {
            R::File(_, kind, target) => match (kind, target) {
                (K::DuplicateOutput | K::DuplicateInput, T::Fd(_)) => true,
                (K::DuplicateOutput | K::DuplicateInput, T::Duplicate(w)) => {
                    w.value.bytes().all(|b| b.is_ascii_digit() || b == b'-')
                }
                // Bash opens `/dev/tcp/HOST/PORT` and `/dev/udp/…` as network connections
                // in a redirection (by the name, not the file): of `/dev`, only
                // `/dev/null` is read.
                (K::Read, T::Filename(w)) => match self.word(&w.value) {
                    Ok(Word::Literal(path)) => !path.starts_with("/dev/") || path == "/dev/null",
                    _ => false,
                },
                (K::Write | K::Append | K::Clobber, T::Filename(w)) => w.value == "/dev/null",
                _ => false,
            },
            R::OutputAndError(w, _) => w.value == "/dev/null",
            R::HereString(_, w) => matches!(self.word(&w.value), Ok(Word::Literal(_))),
            R::HereDocument(..) => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "the redirection `{redirect}` is not on the quarantine's allowlist (only reading a file, writing /dev/null, or duplicating a descriptor)"
            ))
        }
    }

    fn program(&mut self, name: &str, args: &[Word]) -> Result<(), Denied> {
        if name.contains('/') {
            return Err(format!(
                "`{name}`: a program named by its path is not on the quarantine's allowlist; name it"
            ));
        }
        match name {
            "cd" => return self.cd(args),
            "echo" => return Ok(()),
            "printf" => {
                return match args.first() {
                    Some(Word::Literal(first)) if !first.starts_with('-') => Ok(()),
                    _ => Err(
                        "`printf`: only `printf FORMAT ARGS` is on the quarantine's allowlist"
                            .into(),
                    ),
                };
            }
            "test" | "[" => return test(args),
            "command" => {
                return match args {
                    [Word::Literal(flag), rest @ ..]
                        if (flag == "-v" || flag == "-V") && !rest.is_empty() =>
                    {
                        Ok(())
                    }
                    _ => Err(
                        "`command`: only `command -v NAME` is on the quarantine's allowlist".into(),
                    ),
                };
            }
            "find" => return find(args),
            "git" => return self.git(args),
            "row-fence" => {
                // Only the daemon the session's own home names: `--home`, `--socket`
                // and `--store` would point it at another socket or store.
                return match args {
                    [Word::Literal(s), rest @ ..]
                        if s == "status"
                            && rest
                                .iter()
                                .all(|w| matches!(w, Word::Literal(f) if f == "--json")) =>
                    {
                        Ok(())
                    }
                    _ => Err(
                        "`row-fence`: only `row-fence status [--json]` is on the quarantine's allowlist"
                            .into(),
                    ),
                };
            }
            _ => {}
        }
        let Some(spec) = SPECS.iter().find(|s| s.name == name) else {
            return Err(format!("`{name}` is not on the quarantine's allowlist"));
        };
        let positionals = options(name, spec.short, spec.long, args)?;
        match spec.pos {
            Pos::Any => Ok(()),
            Pos::Nothing if positionals.is_empty() => Ok(()),
            Pos::Format if positionals.iter().all(|p| p.starts_with('+')) => Ok(()),
            _ => Err(format!(
                "`{name}` with those arguments is not on the quarantine's allowlist"
            )),
        }
    }

    fn cd(&mut self, args: &[Word]) -> Result<(), Denied> {
        let to = match args {
            [] => None,
            [Word::Literal(dir)] if !dir.starts_with('-') => Some(self.dir.join(dir)),
            _ => None,
        };
        match to {
            Some(to) if std::env::var_os("CDPATH").is_none_or(|v| v.is_empty()) => {
                self.dir = crate::state::fold(&to);
                Ok(())
            }
            _ => Err(
                "`cd` is on the quarantine's allowlist only with one spelled-out directory".into(),
            ),
        }
    }

    fn git(&mut self, args: &[Word]) -> Result<(), Denied> {
        let mut rest = args;
        // Global options: only the pager switch (every other one changes where git
        // reads its repository or configuration, or what it runs).
        while let [Word::Literal(flag), tail @ ..] = rest {
            if flag == "--no-pager" || flag == "-P" {
                rest = tail;
            } else {
                break;
            }
        }
        let Some((Word::Literal(sub), sub_args)) = rest.split_first() else {
            return Err(
                "`git` is on the quarantine's allowlist only with a spelled-out subcommand".into(),
            );
        };
        if sub == "config" {
            config_read(sub_args)?;
        } else {
            let Some(spec) = GIT_SPECS.iter().find(|s| s.name == sub) else {
                return Err(format!(
                    "`git {sub}` is not on the quarantine's allowlist (status, log, show, diff, branch, rev-parse, ls-files, remote, blame, describe, config --get/--list)"
                ));
            };
            let positionals = options(&format!("git {sub}"), spec.short, spec.long, sub_args)?;
            let fine = match spec.pos {
                GitPos::Any => true,
                GitPos::Nothing => positionals.is_empty(),
                GitPos::GetUrl => {
                    positionals.is_empty()
                        || (positionals.len() == 2 && positionals[0] == "get-url")
                }
            };
            if !fine {
                return Err(format!(
                    "`git {sub}` with those arguments is not on the quarantine's allowlist"
                ));
            }
        }
        self.needs.git_dirs.push(self.dir.clone());
        Ok(())
    }
}

/// A word after reading.
#[derive(Clone, Debug)]
enum Word {
    Literal(String),
    /// A glob of plain characters that does not start with one, so none of its
    /// expansions can be read as an option.
    Glob(String),
}

impl Word {
    fn text(&self) -> &str {
        match self {
            Word::Literal(s) | Word::Glob(s) => s,
        }
    }
}

fn plain_glob(raw: &str) -> bool {
    let first_ok = raw
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/'));
    first_ok
        && raw.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-' | b'*' | b'?')
        })
}

/// Reads `args` as options of `name` (short letters in `short`, long names in `long`,
/// `--NAME=VALUE` allowed for any listed name) and returns the positionals. `--` ends the
/// options; a lone `-` is a positional (stdin).
fn options(name: &str, short: &str, long: &[&str], args: &[Word]) -> Result<Vec<String>, Denied> {
    let mut positionals = Vec::new();
    let mut ended = false;
    for arg in args {
        let text = match arg {
            Word::Literal(s) => s.as_str(),
            Word::Glob(g) => {
                positionals.push(g.clone());
                continue;
            }
        };
        if ended || text == "-" || !text.starts_with('-') {
            positionals.push(text.to_string());
        } else if text == "--" {
            ended = true;
        } else if let Some(option) = text.strip_prefix("--") {
            let option_name = option.split('=').next().unwrap_or_default();
            if !long.contains(&option_name) {
                return Err(format!(
                    "`{name} --{option_name}` is not on the quarantine's allowlist (options are matched by their whole name)"
                ));
            }
        } else if let Some(bad) = text[1..].chars().find(|c| !short.contains(*c)) {
            return Err(format!(
                "`{name} -{bad}` is not on the quarantine's allowlist"
            ));
        }
    }
    Ok(positionals)
}

/// `test`'s operators known to read only. `-v NAME` and `-R NAME` are not: bash evaluates
/// an array subscript in NAME as arithmetic, which runs any `$(…)` in it.
const TEST_OPERATORS: &[&str] = &[
    "-a", "-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-p", "-r", "-s", "-t", "-u", "-w", "-x",
    "-G", "-L", "-N", "-O", "-S", "-z", "-n", "-o", "=", "==", "!=", "<", ">", "-eq", "-ne", "-lt",
    "-le", "-gt", "-ge", "-nt", "-ot", "-ef", "!", "(", ")", "]",
];

/// `test`/`[`: only operators on [`TEST_OPERATORS`]; any other word starting with `-` denies.
fn test(args: &[Word]) -> Result<(), Denied> {
    for arg in args {
        let text = arg.text();
        if text.starts_with('-') && !TEST_OPERATORS.contains(&text) {
            return Err(format!(
                "`test {text}` is not on the quarantine's allowlist"
            ));
        }
    }
    Ok(())
}

fn find(args: &[Word]) -> Result<(), Denied> {
    for arg in args {
        let Word::Literal(text) = arg else { continue };
        let number = text
            .trim_start_matches(['-', '+'])
            .trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let is_value = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
        let is_test = text.starts_with('-') || text == "!" || text == "(" || text == ")";
        if is_test && !is_value && !FIND_WORDS.contains(&text.as_str()) {
            return Err(format!(
                "`find {text}` is not on the quarantine's allowlist"
            ));
        }
    }
    Ok(())
}

/// `git config` reads only: `--get`/`--get-all`/`--get-regexp` with its names, `--list`
/// (`-l`), or `git config get NAME` / `git config list`, with the output options below.
/// A `get` or `list` word anywhere else (a value, a second name) does not make it a read.
fn config_read(args: &[Word]) -> Result<(), Denied> {
    const OUTPUT: &[&str] = &[
        "--show-origin",
        "--show-scope",
        "--name-only",
        "-z",
        "--null",
        "--global",
        "--local",
        "--system",
        "--worktree",
        "--includes",
        "--bool",
        "--int",
        "--path",
        "--type=bool",
        "--type=int",
        "--type=path",
    ];
    let literal: Option<Vec<&str>> = args
        .iter()
        .map(|a| match a {
            Word::Literal(s) => Some(s.as_str()),
            Word::Glob(_) => None,
        })
        .collect();
    let denied = || {
        Err("`git config` is on the quarantine's allowlist only as `--get NAME`, `--get-all NAME`, `--get-regexp RE`, `--list`, `get NAME` or `list`".to_string())
    };
    let Some(args) = literal else { return denied() };
    let (flags, positionals): (Vec<&str>, Vec<&str>) =
        args.iter().partition(|a| a.starts_with('-'));
    let modes: Vec<&str> = flags
        .iter()
        .copied()
        .filter(|f| !OUTPUT.contains(f))
        .collect();
    let fine = matches!(
        (modes.as_slice(), positionals.as_slice()),
        (["--get" | "--get-all"], [_])
            | (["--get-regexp"], [_] | [_, _])
            | (["--list" | "-l"], [])
            | ([], ["get", _])
            | ([], ["list"])
    );
    if fine { Ok(()) } else { denied() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(command: &str) -> bool {
        check(command, Path::new("/w"), Some("/home/u")).is_ok()
    }

    #[test]
    fn everyday_reads_are_on_the_list() {
        for command in [
            "ls",
            "ls -la src",
            "cat README.md | head -n 20",
            "grep -rn 'git push' src/ | wc -l",
            "rg -n foo --glob '*.rs'",
            "git status --short",
            "git log --oneline -n 5",
            "git --no-pager diff --stat HEAD~1",
            "git show HEAD:README.md",
            "git branch -a",
            "git config --get user.name",
            "git config list",
            "row-fence status",
            "row-fence status --json",
            "cd sub && ls src/*.rs",
            "find . -name '*.rs' -mtime -1",
            "ls 2>/dev/null || echo none",
            "pwd; whoami; date +%s",
            "command -v git",
            "sort -n file.txt",
            "test -f Cargo.toml && echo yes",
            "[ -d src ] || [ ! -e x ]",
            "[ a = b -o 1 -lt 2 ]",
        ] {
            assert!(
                ok(command),
                "{command}: {:?}",
                check(command, Path::new("/w"), None)
            );
        }
    }

    #[test]
    fn anything_not_known_read_only_is_denied() {
        for command in [
            "git push origin HEAD:main",
            "git config diff.external 'git push -q origin HEAD:main; :' list",
            "git config core.fsmonitor 'x'",
            "git -c core.pager=sh log",
            "git -C /elsewhere log",
            "git rebase --exe 'x'",
            "git log --output=/tmp/x",
            "git log --ext-diff",
            "git diff --textconv",
            "git branch newbranch",
            "git remote add x y",
            "git grep --open-files-in-pager=x foo",
            "c=push; git $c",
            "git $(echo push)",
            "printf -v x push",
            "x=1 ls",
            "ls > out.txt",
            "cat <<EOF\n$(git push)\nEOF",
            "ls &",
            "for f in *; do cat $f; done",
            "( ls )",
            "f() { ls; }; f",
            "sort -o out in",
            "sort --compress-program=sh in",
            "rg --pre ./x foo",
            "rg --pr=./x foo",
            "ls --col",
            "tar -cf x.tar .",
            "sed -n 1p f",
            "awk '{print}' f",
            "curl http://127.0.0.1/",
            "find . -exec sh -c x \\;",
            "find . -delete",
            "./ls",
            "/bin/sh -c ls",
            "* foo",
            "ls *.rs",
            "ls -- *",
            "date 010100002030",
            "tail -f log",
            "make",
            "npm test",
            "eval ls",
            "source x",
            "env ls",
            "ls `id`",
            "ls <(id)",
            "row-fence acquire x",
            "row-fence status --socket /other/sock",
            "row-fence status --store etcd://127.0.0.1:2379",
            "test -v 'a[$(git push)]'",
            "[ -v 'a[$(git push)]' ]",
            "[ -R 'a[$(git push)]' ]",
            // zsh (a harness may run the text in the user's zsh): glob qualifiers run code.
            "ls file.txt(e:'git push':)",
            "ls *(e:'git push':)",
            "ls file.txt(+x)",
            "ls 'file.txt'(e:x:)",
            "ls x(e:x:)y",
            "ls =(git push)",
            "ls ~[x]",
            "ls file.txt(#qe:x:)",
            "cat file.txt &|",
        ] {
            assert!(!ok(command), "{command} passed the allowlist");
        }
    }
}
