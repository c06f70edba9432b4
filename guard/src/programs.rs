//! Programs that run other programs or code: wrappers (`env`, `timeout`, `sudo`,
//! `xargs`, `find -exec`…), whose inner command is classified in turn; shells, whose
//! literal `-c` code is read as a command of its own; and interpreters, whose inline code
//! (`python -c`, `node -e`, code on stdin) is opaque (ARCHITECTURE.md, "The agent guard's policy").
//! A wrapper option the guard does not know makes the command opaque: it cannot tell
//! where the inner command starts.

use crate::builtins::is_name;
use crate::effect::{Ctx, Effect, script_file};
use crate::finding::Dir;
use row_fence_shell::state::resolve_physical;
use row_fence_shell::words::{Value, Vars};

/// How to find a wrapper's inner command.
struct Wrapper {
    /// Its names.
    names: &'static [&'static str],
    /// Options without a value.
    flags: &'static [&'static str],
    /// Options whose value is the next word (or `--opt=value`).
    valued: &'static [&'static str],
    /// Operands before the inner command (timeout's duration, taskset's mask).
    operands: usize,
    /// Options whose value is shell code.
    code: &'static [&'static str],
    /// Options whose value is the inner command's directory.
    chdir: &'static [&'static str],
}

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        names: &["env"],
        flags: &[
            "-i",
            "--ignore-environment",
            "-0",
            "--null",
            "-v",
            "--debug",
            "-",
        ],
        valued: &["-u", "--unset"],
        operands: 0,
        code: &[],
        chdir: &["-C", "--chdir"],
    },
    Wrapper {
        names: &["timeout"],
        flags: &[
            "--preserve-status",
            "--foreground",
            "-v",
            "--verbose",
            "-f",
            "-p",
        ],
        valued: &["-s", "--signal", "-k", "--kill-after"],
        operands: 1,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &["nice"],
        flags: &[],
        valued: &["-n", "--adjustment"],
        operands: 0,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &["nohup"],
        flags: &[],
        valued: &[],
        operands: 0,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &["setsid"],
        flags: &["-c", "--ctty", "-f", "--fork", "-w", "--wait"],
        valued: &[],
        operands: 0,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &["stdbuf"],
        flags: &[],
        valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
        operands: 0,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &["ionice"],
        flags: &["-t", "--ignore"],
        valued: &["-c", "--class", "-n", "--classdata"],
        operands: 0,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &["taskset"],
        flags: &["-c", "--cpu-list", "-a", "--all-tasks"],
        valued: &[],
        operands: 1,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &["chrt"],
        flags: &[
            "-a",
            "--all-tasks",
            "-b",
            "--batch",
            "-d",
            "--deadline",
            "-f",
            "--fifo",
            "-i",
            "--idle",
            "-o",
            "--other",
            "-r",
            "--rr",
            "-R",
            "--reset-on-fork",
            "-v",
            "--verbose",
            "-m",
            "--max",
        ],
        valued: &[
            "-T",
            "--sched-runtime",
            "-P",
            "--sched-period",
            "-D",
            "--sched-deadline",
        ],
        operands: 1,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &["flock"],
        flags: &[
            "-s",
            "--shared",
            "-x",
            "-e",
            "--exclusive",
            "-u",
            "--unlock",
            "-n",
            "--nb",
            "--nonblock",
            "-o",
            "--close",
            "-F",
            "--no-fork",
            "--verbose",
        ],
        valued: &["-w", "--wait", "--timeout", "-E", "--conflict-exit-code"],
        operands: 1,
        code: &["-c", "--command"],
        chdir: &[],
    },
    Wrapper {
        names: &["sudo", "doas"],
        flags: &[
            "-A",
            "--askpass",
            "-b",
            "--background",
            "-E",
            "--preserve-env",
            "-H",
            "--set-home",
            "-k",
            "--reset-timestamp",
            "-K",
            "-n",
            "--non-interactive",
            "-P",
            "--preserve-groups",
            "-S",
            "--stdin",
            "-N",
            "--no-update",
            "-B",
            "--bell",
            "--",
        ],
        valued: &[
            "-u",
            "--user",
            "-g",
            "--group",
            "-C",
            "--close-from",
            "-h",
            "--host",
            "-p",
            "--prompt",
            "-r",
            "--role",
            "-t",
            "--type",
            "-T",
            "--command-timeout",
            "-U",
            "--other-user",
        ],
        operands: 0,
        code: &[],
        chdir: &["-D", "--chdir"],
    },
    Wrapper {
        names: &["runuser"],
        flags: &[
            "-l",
            "--login",
            "-m",
            "-p",
            "--preserve-environment",
            "-",
            "-P",
            "--pty",
        ],
        valued: &[
            "-u",
            "--user",
            "-g",
            "--group",
            "-G",
            "--supp-group",
            "-s",
            "--shell",
            "-w",
            "--whitelist-environment",
        ],
        operands: 0,
        code: &["-c", "--command"],
        chdir: &[],
    },
    Wrapper {
        names: &["exec"],
        flags: &["-c", "-l"],
        valued: &["-a"],
        operands: 0,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &["time"],
        flags: &[
            "-p",
            "--portability",
            "-a",
            "--append",
            "-v",
            "--verbose",
            "-q",
            "--quiet",
        ],
        valued: &["-f", "--format", "-o", "--output"],
        operands: 0,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &["busybox"],
        flags: &[],
        valued: &[],
        operands: 0,
        code: &[],
        chdir: &[],
    },
    Wrapper {
        names: &[
            "catchsegv",
            "unbuffer",
            "caffeinate",
            "dbus-run-session",
            "fakeroot",
            "torsocks",
            "proxychains",
            "proxychains4",
            "xvfb-run",
            "nocache",
            "eatmydata",
            "rlwrap",
        ],
        flags: &[],
        valued: &[],
        operands: 0,
        code: &[],
        chdir: &[],
    },
];

/// Programs that run a command string through a shell, or elsewhere, in a way the guard
/// does not follow: opaque as soon as they are given a command.
const OPAQUE_RUNNERS: &[&str] = &[
    "ssh",
    "strace",
    "ltrace",
    "valgrind",
    "gdb",
    "perf",
    "systemd-run",
    "firejail",
    "bwrap",
    "unshare",
    "nsenter",
    "setpriv",
    "chroot",
    "faketime",
    "tmux",
    "screen",
    "parallel",
    "hyperfine",
    "entr",
    "at",
    "batch",
    "crontab",
    "docker",
    "podman",
    "kubectl",
    "su",
    "sg",
    "newgrp",
    "script",
    "numactl",
    "prlimit",
    "cpulimit",
    "expect",
    "nohup-run",
    "pkexec",
    "zsh",
    "ksh",
    "mksh",
    "fish",
    "csh",
    "tcsh",
    "yash",
    "posh",
    "osascript",
    "pwsh",
    "powershell",
    "watchexec",
    "nodemon",
    "daemonize",
    "start-stop-daemon",
    "pueue",
    "tsp",
    "nq",
    "dtach",
    "abduco",
    "sem",
    "zellij",
    "byobu",
    "launchctl",
];

/// Runners that start their command later or apart from the call (a queue, a service
/// manager, a detached terminal): what they run is deferred.
const DEFERRING_RUNNERS: &[&str] = &[
    "at",
    "batch",
    "crontab",
    "systemd-run",
    "tmux",
    "screen",
    "daemonize",
    "start-stop-daemon",
    "nohup-run",
    // Queues and detached sessions: task spooler, pueue, nq, GNU parallel's `sem`,
    // dtach, abduco, zellij, byobu, launchd.
    "pueue",
    "tsp",
    "nq",
    "dtach",
    "abduco",
    "sem",
    "zellij",
    "byobu",
    "launchctl",
];

/// `effects`, as run after the call returns (`why` says how). Nothing to defer is nothing.
fn deferred(why: &str, effects: Vec<Effect>) -> Vec<Effect> {
    if effects.is_empty() {
        return effects;
    }
    vec![Effect::Deferred {
        why: why.to_string(),
        effects,
    }]
}

/// Shells whose `-c` code the guard reads with the same parser.
const SHELLS: &[&str] = &["sh", "bash", "dash", "ash", "rbash"];

/// Interpreters: the options whose value (or presence in a cluster) is inline code, and
/// the options that take a value. Without a script operand they read code from stdin.
struct Interpreter {
    names: &'static [&'static str],
    code: &'static [&'static str],
    valued: &'static [&'static str],
}

const INTERPRETERS: &[Interpreter] = &[
    Interpreter {
        names: &["python", "python2", "python3", "pypy", "pypy3"],
        code: &["-c"],
        valued: &["-W", "-X", "-Q"],
    },
    Interpreter {
        names: &["node", "nodejs"],
        code: &["-e", "--eval", "-p", "--print"],
        valued: &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            "--input-type",
            "-C",
            "--conditions",
        ],
    },
    Interpreter {
        names: &["bun", "deno"],
        code: &["-e", "--eval", "-p", "--print", "eval"],
        valued: &[],
    },
    Interpreter {
        names: &["perl"],
        code: &["-e", "-E"],
        valued: &["-I", "-M", "-m", "-x", "-0", "-l", "-i", "-C"],
    },
    Interpreter {
        names: &["ruby", "irb"],
        code: &["-e"],
        valued: &["-I", "-r", "-C", "-E", "-x"],
    },
    Interpreter {
        names: &["php"],
        code: &["-r", "-R", "-B", "-E"],
        valued: &["-c", "-d", "-z"],
    },
    Interpreter {
        names: &["lua", "luajit"],
        code: &["-e"],
        valued: &["-l"],
    },
    Interpreter {
        names: &["Rscript", "R"],
        code: &["-e"],
        valued: &[],
    },
    Interpreter {
        names: &["ipython", "ipython3"],
        code: &["-c"],
        valued: &[],
    },
    Interpreter {
        names: &["julia"],
        code: &["-e", "--eval", "-E", "--print"],
        valued: &[],
    },
    Interpreter {
        names: &[
            "tclsh", "wish", "jshell", "guile", "racket", "sbcl", "ghci", "scala", "groovy",
        ],
        code: &["-e", "-c", "--eval", "-eval"],
        valued: &[],
    },
];

/// Awk's program is code: it runs commands through `system()` and `|`.
const AWKS: &[&str] = &["awk", "gawk", "mawk", "nawk"];

/// Editors that run commands given on their command line.
const EDITORS: &[(&str, &[&str])] = &[
    ("vim", &["-c", "-S", "--cmd"]),
    ("vi", &["-c", "-S", "--cmd"]),
    ("nvim", &["-c", "-S", "--cmd", "-l"]),
    ("view", &["-c", "-S", "--cmd"]),
    ("ex", &["-c", "-S", "--cmd"]),
    (
        "emacs",
        &[
            "--eval",
            "-l",
            "--load",
            "--batch",
            "-batch",
            "--script",
            "-f",
            "--funcall",
        ],
    ),
];

/// Classifies a program that is not the shell's own, git, gh or row-fence.
pub fn classify(program: &str, args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    if let Some(w) = WRAPPERS.iter().find(|w| w.names.contains(&program)) {
        let effects = wrapper(program, w, args, ctx, depth);
        return match program {
            // Past the harness's end of the call: no hangup (`nohup`), a session of its
            // own that the harness's kill of the call's process group does not reach
            // (`setsid`, which also forks when it must).
            "nohup" | "setsid" => deferred(
                &format!("under `{program}`, which outlives the call"),
                effects,
            ),
            _ => effects,
        };
    }
    match program {
        "xargs" | "gxargs" => return xargs(args, ctx, depth),
        "find" | "gfind" => return find(args, ctx, depth),
        "watch" => {
            return deferred(
                "`watch` runs it again and again, after this call's check",
                watch(args, ctx, depth),
            );
        }
        "sed" | "gsed" => return crate::sed::classify(args, ctx),
        _ => {}
    }
    if SHELLS.contains(&program) {
        return shell(program, args, ctx);
    }
    if OPAQUE_RUNNERS.contains(&program) {
        return runner(program, args, ctx);
    }
    if let Some(i) = interpreter_of(program) {
        return interpreter(program, i, args, ctx);
    }
    if AWKS.contains(&program) {
        return crate::awk::classify(program, args, ctx);
    }
    if let Some(effects) = crate::handed::classify(program, args, ctx)
        && !effects.is_empty()
    {
        return effects;
    }
    if let Some(effects) = network_and_make(program, args, ctx, depth) {
        return effects;
    }
    if let Some((_, flags)) = EDITORS.iter().find(|(name, _)| *name == program)
        && args.iter().any(|a| {
            a.literal().is_none_or(|w| {
                flags.contains(&w)
                    || (w.starts_with('+') && program != "emacs")
                    || flags.iter().any(|f| w.starts_with(&format!("{f}=")))
                    || (program != "emacs"
                        && w.starts_with('-')
                        && !w.starts_with("--")
                        && w[1..].contains(['e', 'E', 's']))
            })
        })
    {
        return vec![ctx.opaque(format!("`{program}` is given commands to run"))];
    }
    embedded(program, args, ctx, depth)
}

/// Programs that take their words as data and never run one as a command: a word
/// `git` among their arguments is a file name or a pattern.
const DATA_ONLY: &[&str] = &[
    "echo",
    "printf",
    "print",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "ack",
    "cat",
    "bat",
    "less",
    "more",
    "head",
    "tail",
    "wc",
    "ls",
    "file",
    "stat",
    "which",
    "whereis",
    "whatis",
    "apropos",
    "info",
    "tldr",
    "type",
    "test",
    "[",
    "true",
    "false",
    "sort",
    "uniq",
    "cut",
    "tr",
    "diff",
    "cmp",
    "comm",
    "jq",
    "yq",
    "logger",
    "notify-send",
    "say",
    "touch",
    "mkdir",
    "rmdir",
    "rm",
    "cp",
    "mv",
    "ln",
    "chmod",
    "chown",
    "chgrp",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "tee",
    "date",
    "seq",
    "column",
    "fmt",
    "fold",
    "nl",
    "paste",
    "join",
    "od",
    "xxd",
    "hexdump",
    "base64",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "shasum",
    "du",
    "df",
    "tree",
    "locate",
    "gzip",
    "gunzip",
    "bzip2",
    "xz",
    "zstd",
    "unzip",
    "install",
    "shred",
    "wall",
    "write",
    "pbcopy",
    "xclip",
    "wl-copy",
    "open",
    "xdg-open",
    "code",
    "cursor",
    "subl",
    "nano",
    "pico",
    "mcedit",
    "curl",
    "wget",
    "http",
    "https",
    "xh",
    // Their command-running options are read in `handed`; operands are files and pages.
    "man",
    "info",
    "tar",
    "gtar",
    "bsdtar",
    "zip",
    "rsync",
    // Package managers: `brew install git gh` names packages.
    "brew",
    "apt",
    "apt-get",
    "apt-cache",
    "dnf",
    "yum",
    "pacman",
    "apk",
    "port",
    "pip",
    "pip3",
    "gem",
    "snap",
    "flatpak",
];

/// An ordinary program that is handed a command as separate words (`ssh-agent git
/// push`, `uv run git push`, `npm exec -- git push`, `dbus-launch sh -c …`): a wrapper
/// the guard has no table for. The inner command is read from the first word that names
/// git, gh, row-fence, a shell, an interpreter or a wrapper; if it writes or cannot be
/// read, the program is opaque too (it may run it elsewhere, or more than once).
pub fn embedded(program: &str, args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    const MAX_TRIES: usize = 8;
    if DATA_ONLY.contains(&program) || depth > crate::effect::MAX_WRAPPER_DEPTH {
        return Vec::new();
    }
    let mut tries = 0;
    for (k, arg) in args.iter().enumerate() {
        let Some(word) = arg.literal() else { continue };
        if !names_a_runner(word) {
            continue;
        }
        tries += 1;
        if tries > MAX_TRIES {
            return vec![ctx.opaque(format!(
                "`{program}` is handed more commands than the guard reads"
            ))];
        }
        let inner = ctx.classify(&args[k..], false, depth + 1);
        if !inner.is_empty() {
            let mut effects = vec![ctx.opaque(format!(
                "`{program}` is handed the command `{}` and may run it",
                crate::finding::short(
                    &args[k..]
                        .iter()
                        .map(Value::text)
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            ))];
            effects.extend(inner);
            return effects;
        }
    }
    Vec::new()
}

/// True when `word`, as a command, is one the guard reads for writes: git, gh,
/// row-fence (by name or path), a shell, an interpreter, a wrapper, a runner.
fn names_a_runner(word: &str) -> bool {
    if word.starts_with('-') || word.contains('=') {
        return false;
    }
    let name = word.rsplit('/').next().unwrap_or(word);
    let name = if word.contains('/') {
        match std::fs::canonicalize(word) {
            Ok(target) => {
                let real = target
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if crate::fenced::same_program(&target).is_some() {
                    return true;
                }
                real
            }
            Err(_) => name.to_string(),
        }
    } else {
        name.to_string()
    };
    let name = name.as_str();
    crate::fenced::is_fenced_program(&name.to_ascii_lowercase())
        || SHELLS.contains(&name)
        || OPAQUE_RUNNERS.contains(&name)
        || AWKS.contains(&name)
        || interpreter_of(name).is_some()
        || WRAPPERS.iter().any(|w| w.names.contains(&name))
        || matches!(
            name,
            "xargs"
                | "find"
                | "watch"
                | "sed"
                | "eval"
                | "exec"
                | "command"
                | "builtin"
                | "source"
                | "."
                | "hub"
        )
}

/// The interpreter `program` is (`python3.12`, `lua5.4` and `php8.2` too).
fn interpreter_of(program: &str) -> Option<&'static Interpreter> {
    INTERPRETERS
        .iter()
        .find(|i| i.names.contains(&program) || i.names.iter().any(|n| is_versioned(program, n)))
}

/// `python3.12`, `lua5.4`, `php8.2`, `pypy3.10` for `python3`, `lua`, `php`, `pypy3`.
fn is_versioned(program: &str, name: &str) -> bool {
    program.strip_prefix(name).is_some_and(|v| {
        !v.is_empty()
            && v.starts_with(|c: char| c == '.' || c.is_ascii_digit())
            && v.chars().all(|c| c.is_ascii_digit() || c == '.')
    })
}

fn wrapper(program: &str, w: &Wrapper, args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    let mut dirs = ctx.dirs.clone();
    let mut env: Vars = ctx.vars.clone();
    let mut effects = Vec::new();
    let mut i = 0;
    let mut operands = w.operands;
    while i < args.len() {
        let Some(arg) = args[i].literal() else {
            return vec![ctx.opaque(format!(
                "`{program} {}` is only known when it runs",
                args[i].text()
            ))];
        };
        if arg == "--" {
            i += 1;
            break;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (arg, None),
        };
        if program == "env" && !arg.starts_with('-') && arg.contains('=') {
            let (var, value) = arg.split_once('=').unwrap_or_default();
            if is_name(var) {
                env.insert(var.to_string(), Some(value.to_string()));
            }
            effects.extend(crate::env_vars::assigned(
                var,
                &Value::Literal(value.to_string()),
                ctx,
            ));
            i += 1;
            continue;
        }
        if !arg.starts_with('-') || arg == "-" && !w.flags.contains(&"-") {
            if operands == 0 {
                break;
            }
            operands -= 1;
            i += 1;
            continue;
        }
        i += 1;
        let value = |i: &mut usize| -> Option<Value> {
            match inline {
                Some(v) => Some(Value::Literal(v.to_string())),
                None => {
                    *i += 1;
                    args.get(*i - 1).cloned()
                }
            }
        };
        if w.code.contains(&name) {
            return match value(&mut i) {
                Some(Value::Literal(code)) => vec![Effect::Code { text: code, dirs }],
                _ => vec![ctx.opaque(format!(
                    "`{program} {name}` runs code only known when it runs"
                ))],
            };
        }
        if w.chdir.contains(&name) {
            match value(&mut i) {
                Some(target) => dirs = resolve_physical(&dirs, &target),
                None => return vec![ctx.opaque(format!("`{program} {name}` without a directory"))],
            }
            continue;
        }
        if w.valued.contains(&name) {
            value(&mut i);
            continue;
        }
        if w.flags.contains(&name)
            || (program == "nice" && name[1..].chars().all(|c| c.is_ascii_digit()))
        {
            continue;
        }
        return vec![ctx.opaque(format!(
            "`{program}`'s option `{name}` is not one the guard reads, so it cannot tell which command runs"
        ))];
    }
    if program == "busybox"
        && matches!(args.get(i).and_then(Value::literal), Some(sub) if SHELLS.contains(&sub) || *sub == *"sh")
    {
        // busybox sh -c …
    }
    let inner = &args[i..];
    if inner.is_empty() {
        return effects;
    }
    let vars = env;
    let inner_ctx = ctx.with_vars(dirs, &vars);
    effects.extend(inner_ctx.classify(inner, false, depth + 1));
    effects
}

/// `xargs [options] [command [initial-arguments]]`: the command gets more arguments from
/// stdin, and with `-I R` each `R` is replaced by them: those words are unknown.
fn xargs(args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    const FLAGS: &[&str] = &[
        "-0",
        "--null",
        "-o",
        "--open-tty",
        "-p",
        "--interactive",
        "-r",
        "--no-run-if-empty",
        "-t",
        "--verbose",
        "-x",
        "--exit",
        "--show-limits",
    ];
    const VALUED: &[&str] = &[
        "-a",
        "--arg-file",
        "-d",
        "--delimiter",
        "-E",
        "-I",
        "-L",
        "-n",
        "--max-args",
        "-P",
        "--max-procs",
        "-s",
        "--max-chars",
        "--process-slot-var",
        "--max-lines",
        "--replace",
        "--eof",
    ];
    let mut replace: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let Some(arg) = args[i].literal() else {
            return vec![ctx.opaque(format!(
                "`xargs {}` is only known when it runs",
                args[i].text()
            ))];
        };
        if !arg.starts_with('-') {
            break;
        }
        i += 1;
        if arg == "--" {
            break;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg, None),
        };
        if FLAGS.contains(&name) {
            continue;
        }
        if VALUED.contains(&name) {
            let v = inline.or_else(|| {
                i += 1;
                args.get(i - 1).and_then(Value::literal).map(str::to_string)
            });
            if name == "-I" || name == "--replace" {
                replace = v.or(Some("{}".into()));
            }
            continue;
        }
        if let Some(r) = name.strip_prefix("-I").filter(|r| !r.is_empty()) {
            replace = Some(r.to_string());
            continue;
        }
        if name == "-i" || name.starts_with("-i") {
            replace = Some(
                name.get(2..)
                    .filter(|r| !r.is_empty())
                    .unwrap_or("{}")
                    .to_string(),
            );
            continue;
        }
        if name.starts_with("-n")
            || name.starts_with("-L")
            || name.starts_with("-P")
            || name.starts_with("-d")
            || name.starts_with("-s")
            || name.starts_with("-l")
            || name.starts_with("-e")
            || name.starts_with("-a")
        {
            continue;
        }
        return vec![ctx.opaque(format!(
            "`xargs`'s option `{name}` is not one the guard reads"
        ))];
    }
    let mut inner: Vec<Value> = args[i..]
        .iter()
        .map(|a| match (&replace, a) {
            (Some(r), Value::Literal(w)) if w.contains(r.as_str()) => Value::Dynamic(w.clone()),
            _ => a.clone(),
        })
        .collect();
    if inner.is_empty() {
        return Vec::new();
    }
    if replace.is_none() {
        inner.push(Value::Dynamic("(arguments read from stdin)".into()));
    }
    ctx.classify(&inner, false, depth + 1)
}

/// `find … -exec CMD {} ;` (and `-execdir`, `-ok`, `-okdir`): each inner command runs
/// with the found paths as arguments; `-execdir` runs it in each file's directory.
fn find(args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    let mut effects = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let word = args[i].text();
        i += 1;
        let in_file_dir = matches!(word, "-execdir" | "-okdir");
        if !matches!(word, "-exec" | "-execdir" | "-ok" | "-okdir") {
            continue;
        }
        let start = i;
        while i < args.len() && !matches!(args[i].text(), ";" | "+") {
            i += 1;
        }
        let inner: Vec<Value> = args[start..i]
            .iter()
            .map(|a| match a {
                Value::Literal(w) if w.contains("{}") => Value::Dynamic(w.clone()),
                other => other.clone(),
            })
            .collect();
        i += 1;
        let dirs = if in_file_dir {
            vec![Dir::Unknown(
                "`find -execdir` runs in each found file's directory".into(),
            )]
        } else {
            ctx.dirs.clone()
        };
        effects.extend(ctx.at(dirs).classify(&inner, false, depth + 1));
    }
    effects
}

/// `watch [options] command…`: the words are joined and run by `sh -c` (with `-x`, run
/// as they are).
fn watch(args: &[Value], ctx: &Ctx, depth: usize) -> Vec<Effect> {
    const VALUED: &[&str] = &["-n", "--interval", "-q", "--equexit", "--differences"];
    let mut exec = false;
    let mut i = 0;
    while i < args.len() {
        let Some(arg) = args[i].literal() else { break };
        if !arg.starts_with('-') {
            break;
        }
        i += 1;
        if arg == "-x" || arg == "--exec" {
            exec = true;
        } else if VALUED.contains(&arg) {
            i += 1;
        }
    }
    let inner = &args[i..];
    if inner.is_empty() {
        return Vec::new();
    }
    if exec {
        return ctx.classify(inner, false, depth + 1);
    }
    match inner.iter().map(Value::literal).collect::<Option<Vec<_>>>() {
        Some(words) => vec![Effect::Code {
            text: words.join(" "),
            dirs: ctx.dirs.clone(),
        }],
        None => vec![ctx.opaque("`watch` runs a command only known when it runs")],
    }
}

/// `sh -c CODE`: the code is read as a command of its own; a script operand is running
/// a file (ordinary); neither means code from stdin (opaque).
fn shell(program: &str, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let mut code_flag = false;
    let mut stdin = false;
    let mut i = 0;
    while i < args.len() {
        let Some(arg) = args[i].literal() else {
            return vec![ctx.opaque(format!(
                "`{program} {}` is only known when it runs",
                args[i].text()
            ))];
        };
        if arg == "--" || arg == "-" {
            i += 1;
            break;
        }
        if !arg.starts_with(['-', '+']) {
            break;
        }
        i += 1;
        if matches!(arg, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 1;
            continue;
        }
        if arg.starts_with("--") {
            continue;
        }
        code_flag |= arg.contains('c');
        stdin |= arg.contains('s') || arg.contains('i');
    }
    match args.get(i) {
        Some(Value::Literal(code)) if code_flag => vec![Effect::Code {
            text: code.clone(),
            dirs: ctx.dirs.clone(),
        }],
        Some(Value::Dynamic(raw)) if code_flag => vec![ctx.opaque(format!(
            "`{program} -c {raw}` runs code only known when it runs"
        ))],
        None if code_flag => Vec::new(),
        Some(script) if !stdin => script_file(program, script, ctx),
        _ => vec![ctx.opaque(format!("`{program}` reads its code from stdin"))],
    }
}

fn runner(program: &str, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    let operands = args.iter().filter(|a| !a.text().starts_with('-')).count();
    let needed = match program {
        // ssh HOST with nothing after it is a login, not a command.
        "ssh" | "docker" | "podman" | "kubectl" | "chroot" | "sg" => 2,
        _ => 1,
    };
    if operands >= needed
        || (program == "su" && !args.is_empty())
        || matches!(
            program,
            "at" | "batch"
                | "crontab"
                | "expect"
                | "zsh"
                | "ksh"
                | "mksh"
                | "fish"
                | "csh"
                | "tcsh"
                | "yash"
                | "posh"
                | "pwsh"
                | "powershell"
                | "su"
                | "script"
        )
    {
        let opaque = vec![ctx.opaque(format!(
            "`{program}` runs a command the guard does not follow"
        ))];
        if DEFERRING_RUNNERS.contains(&program) {
            return deferred(
                &format!("by `{program}`, which starts it apart from the call"),
                opaque,
            );
        }
        opaque
    } else {
        Vec::new()
    }
}

fn interpreter(program: &str, i: &Interpreter, args: &[Value], ctx: &Ctx) -> Vec<Effect> {
    // Asking for the version or the help runs no code.
    if matches!(
        args.first().and_then(Value::literal),
        Some("--version" | "-V" | "--help" | "-h")
    ) {
        return Vec::new();
    }
    let mut k = 0;
    while k < args.len() {
        let Some(arg) = args[k].literal() else {
            return vec![ctx.opaque(format!(
                "`{program} {}` is only known when it runs",
                args[k].text()
            ))];
        };
        if i.code.contains(&arg)
            || (arg.starts_with('-')
                && !arg.starts_with("--")
                && i.code
                    .iter()
                    .any(|c| c.len() == 2 && arg[1..].contains(&c[1..])))
        {
            return vec![ctx.opaque(format!("`{program} {arg}` runs inline code"))];
        }
        if i.code
            .iter()
            .any(|c| c.starts_with("--") && arg.starts_with(&format!("{c}=")))
        {
            return vec![ctx.opaque(format!("`{program} {arg}` runs inline code"))];
        }
        if arg == "-" {
            break;
        }
        if arg == "-m" {
            // Modules that read or take code to run.
            return match args.get(k + 1).and_then(Value::literal) {
                Some(
                    "code" | "pdb" | "timeit" | "IPython" | "runpy" | "trace" | "cProfile"
                    | "profile" | "asyncio" | "pickle" | "ipdb" | "pudb" | "bpdb" | "ptpython"
                    | "bpython" | "_pyrepl" | "idlelib" | "idle" | "doctest" | "IPython.terminal",
                )
                | None => {
                    vec![ctx.opaque(format!("`{program} -m` runs code it is handed"))]
                }
                Some(_) => Vec::new(),
            };
        }
        if !arg.starts_with('-') {
            return script_file(program, &args[k], ctx);
        }
        k += 1;
        if i.valued.contains(&arg) {
            k += 1;
        }
    }
    vec![ctx.opaque(format!("`{program}` reads its code from stdin"))]
}

/// HTTP clients that write (fenced, [`crate::http`]); copies to another host and `make`
/// given rules inline or in a makefile made in the same command (opaque); `hub`, which
/// is git with more verbs.
fn network_and_make(program: &str, args: &[Value], ctx: &Ctx, depth: usize) -> Option<Vec<Effect>> {
    let any = |f: &dyn Fn(&str) -> bool| args.iter().any(|a| a.literal().is_none_or(f));
    match program {
        "curl" | "wget" | "http" | "https" | "xh" | "xhs" => {
            Some(crate::http::classify(program, args, ctx))
        }
        "scp" | "sftp" if !args.is_empty() => {
            Some(vec![ctx.opaque(format!(
                "`{program}` copies to or from another host"
            ))])
        }
        "rsync"
            if any(&|w| {
                w.starts_with("rsync://")
                    || w.split('/').next().is_some_and(|head| head.contains(':'))
            }) =>
        {
            Some(vec![ctx.opaque("`rsync` copies to or from another host")])
        }
        "make" | "gmake" | "bmake" => make(program, args, ctx),
        "hub" => Some(crate::git::classify(args, ctx, depth)),
        _ => None,
    }
}

/// `make`: running the project's makefile is ordinary work; rules given on the command
/// line (`--eval`), on stdin (`-f -`), or in a makefile that does not exist yet (made in
/// the same command) are code the text hands over (opaque).
fn make(program: &str, args: &[Value], ctx: &Ctx) -> Option<Vec<Effect>> {
    let mut dirs = ctx.dirs.clone();
    let mut files = Vec::new();
    let mut k = 0;
    while k < args.len() {
        let Some(w) = args[k].literal() else {
            return Some(vec![ctx.opaque(format!(
                "`{program} {}` is only known when it runs",
                args[k].text()
            ))]);
        };
        k += 1;
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (w, None),
        };
        let mut value = || match inline {
            Some(v) => Some(Value::Literal(v.to_string())),
            None => {
                k += 1;
                args.get(k - 1).cloned()
            }
        };
        match name {
            "-E" | "--eval" => {
                return Some(vec![
                    ctx.opaque(format!("`{program}` is given rules on its command line")),
                ]);
            }
            "-f" | "--file" | "--makefile" => files.extend(value()),
            "-C" | "--directory" => match value() {
                Some(target) => dirs = resolve_physical(&dirs, &target),
                None => return Some(Vec::new()),
            },
            _ if name.starts_with("-f") && name.len() > 2 => {
                files.push(Value::Literal(name[2..].to_string()));
            }
            _ if name.starts_with("-C") && name.len() > 2 => {
                dirs = resolve_physical(&dirs, &Value::Literal(name[2..].to_string()));
            }
            _ => {}
        }
    }
    let here = ctx.at(dirs);
    if files.is_empty() {
        // No `-f`: the makefile in each directory, which must exist already.
        let found = here.dirs.iter().all(|d| match d {
            Dir::Known(d) => ["GNUmakefile", "makefile", "Makefile"]
                .iter()
                .any(|f| d.join(f).is_file()),
            Dir::Unknown(_) => false,
        });
        if !found
            && !args
                .iter()
                .any(|a| matches!(a.text(), "--version" | "--help" | "-v"))
        {
            return Some(vec![here.opaque(format!(
                "`{program}` runs a makefile that does not exist yet"
            ))]);
        }
        return Some(Vec::new());
    }
    for file in &files {
        let effects = match file.literal() {
            Some("-") => vec![here.opaque(format!("`{program}` reads its rules from stdin"))],
            _ => script_file(program, file, &here),
        };
        if !effects.is_empty() {
            return Some(effects);
        }
    }
    Some(Vec::new())
}
