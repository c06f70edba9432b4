//! `git …`: where it runs (`-C` chains, each relative to the last; `--git-dir`), and
//! whether it is a fenced write (push and its plumbing), opaque (an alias, a config
//! override that runs code or disables a hook, `rebase --exec`, a subcommand git does not
//! ship), or ordinary (ARCHITECTURE.md, "The agent guard's policy").

use crate::effect::{Ctx, Effect, Note};
use crate::finding::Dir;
use row_fence_shell::state::resolve_physical;
use row_fence_shell::words::Value;

/// Subcommands that write to a remote repository.
const FENCED: &[&str] = &[
    "push",
    "send-pack",
    "http-push",
    "receive-pack",
    "send-email",
];

/// git's own commands that write nothing remote and run no code given on the command
/// line (the project's hooks are the project's code: ordinary work).
const ORDINARY: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "backfill",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "citool",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "count-objects",
    "credential",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-pairs",
    "diff-tree",
    "fast-export",
    "fast-import",
    "fetch",
    "fetch-pack",
    "fmt-merge-msg",
    "for-each-ref",
    "format-patch",
    "fsck",
    "gc",
    "get-tar-commit-id",
    "grep",
    "gui",
    "hash-object",
    "help",
    "hook",
    "index-pack",
    "init",
    "instaweb",
    "interpret-trailers",
    "last-modified",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-tree",
    "mergetool",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-redundant",
    "pack-refs",
    "patch-id",
    "prune",
    "prune-packed",
    "pull",
    "range-diff",
    "read-tree",
    "reflog",
    "refs",
    "remote",
    "repack",
    "replace",
    "replay",
    "repo",
    "request-pull",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stage",
    "stash",
    "status",
    "stripspace",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "upload-archive",
    "upload-pack",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
    "bisect",
    "config",
    "difftool",
    "rebase",
    "submodule",
    "subtree",
    "lfs",
    "p4",
    "svn",
];

/// Config keys a `-c` or `git config` may set without changing what git runs or where it
/// sends things; every other key is opaque (`alias.*`, `core.hooksPath`,
/// `core.sshCommand`, `credential.*`, `core.editor`, `core.pager`, `include.path`…). A
/// trailing `.` matches a whole section.
const HARMLESS_KEYS: &[&str] = &[
    "advice.",
    "color.",
    "column.",
    "i18n.",
    "user.",
    "log.",
    "status.",
    "core.quotepath",
    "core.autocrlf",
    "core.safecrlf",
    "core.filemode",
    "core.ignorecase",
    "core.longpaths",
    "core.abbrev",
    "diff.renames",
    "diff.algorithm",
    "diff.noprefix",
    "merge.conflictstyle",
    "pull.rebase",
    "pull.ff",
    "init.defaultbranch",
    "safe.directory",
    "commit.gpgsign",
    "tag.gpgsign",
    "gc.auto",
    "maintenance.auto",
    "fetch.prune",
    "rebase.autosquash",
    "rebase.autostash",
    "rerere.enabled",
    "protocol.version",
    "versionsort.suffix",
];

/// Global options that take a value as the next word.
const VALUED: &[&str] = &[
    "--work-tree",
    "--namespace",
    "--super-prefix",
    "--attr-source",
];

/// Global options without a value.
const FLAGS: &[&str] = &[
    "-p",
    "--paginate",
    "-P",
    "--no-pager",
    "--bare",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-advice",
    "--no-lazy-fetch",
    "--exec-path",
    "--html-path",
    "--man-path",
    "--info-path",
    "-v",
    "--version",
    "-h",
    "--help",
];

/// True when `-c KEY=…` or `git config KEY …` leaves what git runs alone.
pub fn harmless_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    HARMLESS_KEYS.iter().any(|k| {
        if k.ends_with('.') {
            key.starts_with(k)
        } else {
            key == *k
        }
    })
}

/// Classifies `git ARGS` (the words after `git`).
pub fn classify(args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    let mut dirs = ctx.dirs.clone();
    let mut git_dir: Option<Value> = None;
    let mut opaque: Option<String> = None;
    let mut code: Vec<String> = Vec::new();
    let mut i = 0;
    let word = |i: usize| args.get(i).cloned();
    while i < args.len() {
        let arg = match &args[i] {
            Value::Literal(w) => w.clone(),
            Value::Dynamic(raw) => {
                opaque.get_or_insert(format!("git's word `{raw}` is only known when it runs"));
                break;
            }
        };
        if !arg.starts_with('-') {
            break;
        }
        i += 1;
        match arg.as_str() {
            "-C" => match word(i) {
                Some(Value::Literal(empty)) if empty.is_empty() => i += 1,
                Some(target) => {
                    dirs = resolve_physical(&dirs, &target);
                    i += 1;
                }
                None => {}
            },
            "-c" => {
                if let Some(setting) = word(i) {
                    match code_setting(&setting) {
                        Some(text) => code.push(text),
                        None => check_setting(&setting, &mut opaque),
                    }
                    i += 1;
                }
            }
            "--git-dir" => {
                git_dir = word(i);
                i += 1;
            }
            "--config-env" => {
                if let Some(setting) = word(i) {
                    check_setting(&setting, &mut opaque);
                    i += 1;
                }
            }
            _ if arg.starts_with("--git-dir=") => {
                git_dir = Some(Value::Literal(arg["--git-dir=".len()..].to_string()));
            }
            _ if arg.starts_with("--config-env=") => {
                check_setting(
                    &Value::Literal(arg["--config-env=".len()..].to_string()),
                    &mut opaque,
                );
            }
            _ if arg.starts_with("--exec-path=") => {
                opaque.get_or_insert("`--exec-path` swaps the programs git runs".into());
            }
            _ if VALUED.contains(&arg.as_str()) => i += 1,
            _ if VALUED.iter().any(|v| arg.starts_with(&format!("{v}="))) => {}
            _ if FLAGS.contains(&arg.as_str()) => {}
            _ => {
                opaque.get_or_insert(format!("git's option `{arg}` is not one the guard reads"));
            }
        }
    }
    let here = ctx.at(dirs);
    let effect_ctx = Here {
        ctx: &here,
        git_dir,
    };
    let at = Effect::Note(Note::GitAt(effect_ctx.places()));
    if let Some(why) = opaque {
        return vec![at, effect_ctx.opaque(why)];
    }
    // A pager or editor given as a literal is a command git runs: read it as one.
    let mut effects: Vec<Effect> = std::iter::once(at)
        .chain(code.into_iter().map(|text| Effect::Code {
            text,
            dirs: here.dirs.clone(),
        }))
        .collect();
    effects.extend(subcommand(args, i, &effect_ctx, depth));
    effects
}

/// What `git … SUB REST` does, `i` the index of SUB in `args`.
fn subcommand(args: &[Value], i: usize, effect_ctx: &Here, depth: usize) -> Vec<Effect> {
    let Some(sub) = args.get(i) else {
        return Vec::new();
    };
    let rest = &args[i + 1..];
    let sub = match sub {
        Value::Literal(sub) => sub.as_str(),
        Value::Dynamic(raw) => {
            return vec![effect_ctx.opaque(format!(
                "the git subcommand `{raw}` is only known when it runs"
            ))];
        }
    };
    if FENCED.contains(&sub) || (sub.starts_with("remote-") && sub.len() > 7) {
        return vec![effect_ctx.fenced(format!("git {sub}{}", operand(rest)))];
    }
    match (sub, rest.first().and_then(Value::literal)) {
        ("subtree" | "lfs", Some("push"))
        | ("p4", Some("submit"))
        | ("svn", Some("dcommit" | "set-tree")) => {
            return vec![effect_ctx.fenced(format!("git {sub} {}", rest[0].text()))];
        }
        ("bisect", Some("run")) => {
            return here_with(effect_ctx).classify(&rest[1..], false, depth + 1);
        }
        ("submodule", Some("foreach")) => {
            return vec![effect_ctx.opaque("`git submodule foreach` runs code in every submodule")];
        }
        _ => {}
    }
    if let Some(option) = runs_a_command(sub, rest) {
        return vec![effect_ctx.opaque(format!(
            "`git {sub} {option}` runs a command given on its command line"
        ))];
    }
    if sub == "clone"
        && let Some(why) = clone_settings(rest)
    {
        return vec![effect_ctx.opaque(why)];
    }
    // A template directory installs hooks that run on checkout (as `GIT_TEMPLATE_DIR`).
    if matches!(sub, "clone" | "init")
        && rest
            .iter()
            .any(|a| a.literal().is_none_or(|w| w.starts_with("--template")))
    {
        return vec![effect_ctx.opaque(format!(
            "`git {sub} --template` installs hooks that run on checkout"
        ))];
    }
    match sub {
        "filter-branch" | "for-each-repo" | "merge-index" | "merge-one-file" => {
            vec![effect_ctx.opaque(format!("`git {sub}` runs code given on its command line"))]
        }
        "rebase"
            if rest.iter().any(|a| {
                a.literal().is_none_or(|w| {
                    w == "-x"
                        || w == "--exec"
                        || w.starts_with("--exec=")
                        || (w.starts_with("-x") && !w.starts_with("--"))
                })
            }) =>
        {
            vec![effect_ctx.opaque("`git rebase --exec` runs a command")]
        }
        "difftool"
            if rest.iter().any(|a| {
                a.literal().is_none_or(|w| {
                    w == "-x"
                        || w == "--extcmd"
                        || w.starts_with("--extcmd=")
                        || (w.starts_with("-x") && !w.starts_with("--"))
                })
            }) =>
        {
            vec![effect_ctx.opaque("`git difftool --extcmd` runs a command")]
        }
        "config" => config(rest, effect_ctx),
        _ if ORDINARY.contains(&sub) => Vec::new(),
        _ => vec![effect_ctx.opaque(format!(
            "`git {sub}` is not a command git ships: an alias or a program the text does not show"
        ))],
    }
}

/// git's directories and git dir for one command.
struct Here<'a> {
    ctx: &'a Ctx<'a>,
    git_dir: Option<Value>,
}

impl Here<'_> {
    fn places(&self) -> Vec<crate::finding::Place> {
        match &self.git_dir {
            Some(dir) => self.ctx.places_with(Some(dir.clone())),
            None => self.ctx.places(),
        }
    }

    fn opaque(&self, why: impl Into<String>) -> Effect {
        Effect::Note(Note::Opaque {
            why: why.into(),
            places: self.places(),
        })
    }

    fn fenced(&self, action: impl Into<String>) -> Effect {
        Effect::Note(Note::Fenced {
            action: action.into(),
            places: self.places(),
        })
    }
}

fn here_with<'a>(here: &'a Here<'a>) -> Ctx<'a> {
    here.ctx.at(here.ctx.dirs.clone())
}

/// Keys whose value is a command git runs through the shell (`core.pager`,
/// `core.editor`, `sequence.editor`, `pager.<cmd>`): a literal one is read as code.
fn code_setting(setting: &Value) -> Option<String> {
    let (key, value) = setting.literal()?.split_once('=')?;
    let key = key.to_ascii_lowercase();
    let code_key = matches!(
        key.as_str(),
        "core.pager" | "core.editor" | "sequence.editor"
    ) || key
        .strip_prefix("pager.")
        .is_some_and(|cmd| !cmd.contains('.'));
    // `pager.log=false` turns the pager off; `true` uses core.pager: no command.
    code_key.then(|| match value {
        "true" | "false" => String::new(),
        command => command.to_string(),
    })
}

/// `-c KEY=VALUE` / `--config-env KEY=ENV`: opaque unless the key is harmless.
fn check_setting(setting: &Value, opaque: &mut Option<String>) {
    match setting {
        Value::Literal(text) => {
            let key = text.split_once('=').map_or(text.as_str(), |(k, _)| k);
            if !harmless_key(key) {
                opaque.get_or_insert(format!(
                    "`-c {key}` changes what git runs or where it sends"
                ));
            }
        }
        Value::Dynamic(raw) => {
            opaque.get_or_insert(format!("`-c {raw}` is only known when it runs"));
        }
    }
}

/// `git config …`: reads are ordinary; a write is opaque unless its key is harmless.
fn config(args: &[Value], here: &Here) -> Vec<Effect> {
    const READS: &[&str] = &[
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--get-color",
        "--get-colorbool",
        "-l",
        "--list",
        "get",
        "list",
    ];
    const WRITES: &[&str] = &[
        "--add",
        "--unset",
        "--unset-all",
        "--replace-all",
        "--rename-section",
        "--remove-section",
        "set",
        "unset",
        "rename-section",
        "remove-section",
    ];
    const VALUED: &[&str] = &[
        "-f",
        "--file",
        "--blob",
        "--type",
        "--default",
        "--comment",
        "--value",
    ];
    let mut positionals = Vec::new();
    let mut write = false;
    let mut i = 0;
    while i < args.len() {
        let Some(w) = args[i].literal() else {
            return vec![here.opaque(format!(
                "`git config {}` is only known when it runs",
                args[i].text()
            ))];
        };
        i += 1;
        if READS.contains(&w) {
            return Vec::new();
        }
        if w == "-e" || w == "--edit" || w == "edit" {
            return vec![here.opaque("`git config --edit` opens an editor on the config")];
        }
        if WRITES.contains(&w) {
            write = true;
        } else if VALUED.contains(&w) {
            i += 1;
        } else if !w.starts_with('-') {
            positionals.push(w.to_string());
        }
    }
    if !write && positionals.len() <= 1 {
        return Vec::new();
    }
    match positionals.first() {
        Some(key) if harmless_key(key) => Vec::new(),
        Some(key) => vec![here.opaque(format!(
            "`git config {key}` changes what git runs or where it sends"
        ))],
        None => Vec::new(),
    }
}

/// The first operand after the subcommand (a remote, a path), for the action text.
fn operand(rest: &[Value]) -> String {
    const VALUED: &[&str] = &["-o", "--push-option", "--receive-pack", "--exec", "--repo"];
    let mut i = 0;
    while i < rest.len() {
        let w = rest[i].text();
        if VALUED.contains(&w) {
            i += 2;
            continue;
        }
        if !w.starts_with('-') {
            return format!(" {w}");
        }
        i += 1;
    }
    String::new()
}

/// True when a directory list holds one the text does not name.
pub fn any_unknown(dirs: &[Dir]) -> bool {
    dirs.iter().any(|d| matches!(d, Dir::Unknown(_)))
}

/// Options of git's ordinary commands that run a program given on the command line
/// (`fetch --upload-pack`, `clone -u`, `archive --exec`, `grep -O`): opaque.
fn runs_a_command<'a>(sub: &str, rest: &'a [Value]) -> Option<&'a str> {
    rest.iter().filter_map(Value::literal).find(|w| {
        let name = w.split_once('=').map_or(*w, |(n, _)| n);
        matches!(
            name,
            "--upload-pack" | "--receive-pack" | "--exec" | "--open-files-in-pager"
        ) || (sub == "clone" && name == "-u")
            || (sub == "grep" && name.starts_with("-O"))
    })
}

/// `git clone -c KEY=VALUE` / `--config KEY=VALUE` sets config before the checkout runs.
fn clone_settings(rest: &[Value]) -> Option<String> {
    let mut opaque = None;
    let mut k = 0;
    while k < rest.len() {
        match rest[k].literal() {
            Some("-c" | "--config") => {
                if let Some(setting) = rest.get(k + 1) {
                    check_setting(setting, &mut opaque);
                }
                k += 2;
            }
            Some(w) if w.starts_with("--config=") => {
                check_setting(
                    &Value::Literal(w["--config=".len()..].to_string()),
                    &mut opaque,
                );
                k += 1;
            }
            _ => k += 1,
        }
    }
    opaque
}
